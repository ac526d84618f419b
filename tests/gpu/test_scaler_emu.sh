#!/usr/bin/env bash
# The fp16 loss scaler on the device (ABI 1.4): the overflow check, the skip and the scale's
# update are queued with the step, so the host never waits for a step's gradient norm
# before the step's update is queued, and the run logs the losses, scales and skipped
# steps of the scaler on the host ([precision] device_update = false), bit for bit.
# A scale of 2^24 overflows f16 in the first steps (skipped, backed off), and a growth
# interval of 2 then grows it: both branches of the rule run.
# The host round trip is read from the CUDA emulator's operation trace
# (GEARBOX_CUDA_EMU_TRACE): with the scaler on the host, the squared gradient norm of every
# step (norm_total_kernel) runs before the step's closing event is queued (the host copied
# it back to decide the skip); on the device it runs only after.
# usage: test_scaler_emu.sh GEARBOX FIXTURES_DIR SOURCE_ROOT (suite gpu-emu)
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 0"

# train NAME DEVICE_UPDATE: 8 fp16 steps, log in $WORK/NAME.log, trace in $WORK/NAME.trace
train() {
    GEARBOX_CUDA_EMU_TRACE="$WORK/$1.trace" "$GEARBOX" train "$WORK/run.ini" \
        --set run.out_dir="$WORK/$1" --set run.steps=8 --set run.eval_every=0 \
        --set precision.plugin=fp16 --set optim.plugin=adamw_fused \
        --set precision.init_scale=16777216 --set precision.growth_interval=2 \
        --set precision.device_update="$2" \
        > "$WORK/$1.log" 2>&1 || { fail "$1: $(tail -n 5 "$WORK/$1.log")"; finish; }
    grep -o '"step": [0-9]*, "loss": [0-9.e+-]*\|"loss_scale": [0-9.e+]*, "skipped_steps": [0-9]*' \
        "$WORK/$1/metrics.jsonl" | paste - - > "$WORK/$1.steps"
}

# round_trips TRACE: "STEPS WAITED": the steps, and how many of them ran their gradient
# norm before the step's closing event (the figures' record) was queued
round_trips() {
    awk '$1 == "queue" && $6 == "norm_total_kernel" { n++; q[n] = NR; id[$3 " " $4] = n }
         $1 == "queue" && $5 == "cudaEventRecord" && n && !closed[n] { closed[n] = NR }
         $1 == "run" && ($4 " " $5) in id { ran[id[$4 " " $5]] = NR }
         END { for (k = 1; k <= n; k++) waited += ran[k] < closed[k]; print n, waited + 0 }' "$1"
}

train device true
train host false
grep -q "^loss scaler: on the device" "$WORK/device.log" &&
    grep -q "^loss scaler: on the host.*device_update = false" "$WORK/host.log" &&
    pass "device_update chooses where the scaler runs ($(grep '^loss scaler' "$WORK/device.log"))" ||
    fail "loss scaler lines: $(grep '^loss scaler' "$WORK/device.log" "$WORK/host.log")"

skipped=$(tail -n 1 "$WORK/device.steps" | sed -nE 's/.*"skipped_steps": ([0-9]+).*/\1/p')
grew=$(awk -F'"loss_scale": ' '{ split($2, a, ","); s = a[1] + 0; if (p && s > p) g++; p = s }
                               END { print g + 0 }' "$WORK/device.steps")
if [ "$(wc -l < "$WORK/device.steps")" -ne 8 ]; then
    fail "expected 8 logged steps: $(cat "$WORK/device.steps")"
elif [ "${skipped:-0}" -lt 1 ] || [ "$grew" -lt 1 ]; then
    fail "the scale should back off and grow within 8 steps: $(cat "$WORK/device.steps")"
elif cmp -s "$WORK/device.steps" "$WORK/host.steps"; then
    pass "8 steps, $skipped skipped and $grew growth(s): losses, scales and skips identical on the device and on the host ($(tail -n 1 "$WORK/device.steps"))"
else
    fail "the device's scaler logs other figures than the host's:"
    diff "$WORK/device.steps" "$WORK/host.steps"
fi

read -r steps waited <<< "$(round_trips "$WORK/device.trace")"
read -r host_steps host_waited <<< "$(round_trips "$WORK/host.trace")"
[ "$steps" -eq 8 ] && [ "$waited" -eq 0 ] &&
    pass "on the device no step's gradient norm ran before the step was queued to its end (0 of $steps)" ||
    fail "on the device $waited of $steps steps waited for their gradient norm"
[ "$host_steps" -eq 8 ] && [ "$host_waited" -eq 8 ] &&
    pass "on the host every step waited for its gradient norm ($host_waited of $host_steps): the check sees the round trip" ||
    fail "on the host $host_waited of $host_steps steps waited for their gradient norm"
n=$(grep -c '^queue .* kernel loss_scaler_kernel' "$WORK/device.trace")
[ "$n" -eq 8 ] && ! grep -q 'loss_scaler_kernel' "$WORK/host.trace" &&
    pass "one loss_scaler_kernel queued per step on the device, none on the host" ||
    fail "loss_scaler_kernel queued $n times on the device"
finish
