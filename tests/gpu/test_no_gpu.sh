#!/usr/bin/env bash
# device/cuda where there is no GPU: `gearbox plugins` lists it, and a training run with
# [device] plugin = cuda stops at the device's start with a message naming the plugin and
# saying there is no NVIDIA GPU, with a non-zero exit status (not a crash); `gearbox
# doctor` says the same. On a machine with a GPU there is nothing to test (exit 77).
# usage: test_no_gpu.sh GEARBOX FIXTURES_DIR SOURCE_ROOT GPU_PROBE
source "$(dirname "$0")/../cli/lib.sh"
probe=$4
if "$probe" > /dev/null; then
    echo "SKIP: this machine has a GPU; the no-GPU refusal is tested where there is none"
    exit 77
fi
listed=$("$GEARBOX" plugins)
if grep -Eq '^device +cuda +[0-9.]+ +cuda ' <<< "$listed"; then
    pass "gearbox plugins lists device/cuda"
else
    fail "gearbox plugins does not list device/cuda: $listed"
fi
"$GEARBOX" plugins show cuda > "$WORK/show" 2>&1 && grep -q "devices: cuda" "$WORK/show" &&
    pass "gearbox plugins show cuda" || fail "gearbox plugins show cuda: $(cat "$WORK/show")"

make_data
# attn = auto is chosen once the device has started; optim/stub (this folder's fixture)
# stands in for a CUDA optimizer, which this build may lack
write_config "$WORK/run.ini"
sed -i 's/^plugin = adamw$/plugin = stub/' "$WORK/run.ini"
printf '\n[device]\nplugin = cuda\n\n[attn]\nplugin = auto\n' >> "$WORK/run.ini"
rc=0
"$GEARBOX" train "$WORK/run.ini" --plugin-path "$FIXTURES" --set run.out_dir="$WORK/out" \
    > "$WORK/stdout" 2> "$WORK/stderr" || rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then
    fail "gearbox train on device/cuda without a GPU exited with $rc (want a failure, not a crash): $(cat "$WORK/stderr")"
elif grep -q "device/cuda" "$WORK/stderr" && grep -q "no NVIDIA GPU" "$WORK/stderr"; then
    pass "gearbox train refuses with status $rc: $(head -n 1 "$WORK/stderr" | cut -c1-220)"
else
    fail "gearbox train's message lacks device/cuda or 'no NVIDIA GPU': $(cat "$WORK/stderr")"
fi
printf '[device]\nplugin = cuda\n' > "$WORK/doctor.ini"
"$GEARBOX" doctor "$WORK/doctor.ini" > "$WORK/doctor" 2>&1
if grep -q "no NVIDIA GPU" "$WORK/doctor"; then
    pass "gearbox doctor says why there is no CUDA device"
else
    fail "gearbox doctor does not say there is no NVIDIA GPU: $(cat "$WORK/doctor")"
fi
finish
