#!/usr/bin/env bash
# What a training step asks of the host, after the first steps: no call that waits for the
# device (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, cudaMemcpy, a
# copy into pageable memory), allocates (cudaMalloc, cudaFree, cudaMallocHost, cudaFreeHost)
# or builds cuBLASLt's per-shape objects (descriptors, layouts, preferences, heuristic
# queries). The emulator records each such call with its callers
# (GEARBOX_CUDA_EMU_HOST_CALLS); two runs of 3 and of 6 steps, logged only at their first
# and last, differ by 3 steps, so a call (with its callers) made more often in the longer
# run is made inside a step, and the test fails naming it and its callers' source lines.
# Two waits are the design and are allowed, each for its reason (docs/gpu.md): the
# previous step's figures (gb_model_step_figures: the loop reads step N-1's loss and norm
# while step N is queued, so the device is never without work) and the pinned slot of the
# input prefetch (gb_prefetch_send: the copy it waits for was queued two micro-steps
# earlier). Run in fp32, bf16 and fp16 (its loss scaler on the device), with CUDA graphs
# (cuda_graphs = auto records them on this device), and in bf16 without them.
# usage: test_step_host_calls.sh GEARBOX FIXTURES_DIR SOURCE_ROOT (suite gpu-emu)
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 0"

ALLOWED='gb_model_step_figures|gb_prefetch_send'

# calls NAME STEPS SETTINGS...: the host calls of a run of STEPS steps, counted by call and
# callers, into $WORK/NAME-STEPS.count
calls() {
    local name=$1 steps=$2
    shift 2
    GEARBOX_CUDA_EMU_HOST_CALLS="$WORK/$name-$steps.calls" train_run "$name-$steps" \
        --set run.steps="$steps" --set run.log_every=1000 "$@" || return
    sort "$WORK/$name-$steps.calls" | uniq -c |
        awk '{ n = $1; $1 = ""; print substr($0, 2) "\t" n }' > "$WORK/$name-$steps.count"
}

# where FRAMES...: each OBJECT+0xOFFSET as "function (file:line)", the line where the
# object has a line table
where() {
    local frame fn line
    for frame; do
        mapfile -t out < <(addr2line -f -e "${frame%+0x*}" "0x${frame##*+0x}" 2> /dev/null)
        fn=${out[0]:-??} line=${out[1]:-??:0}
        line=${line#*build/../} line=${line#"$SRC/"}
        case $line in \?\?:*|*:0|*:\?) echo -n " < $fn" ;; *) echo -n " < $fn ($line)" ;; esac
    done
}

# check NAME SETTINGS...: no host call inside a step but the allowed ones
check() {
    local name=$1
    shift
    calls "$name" 3 "$@" && calls "$name" 6 "$@" || return
    local key short long found=0 allowed=0 named
    while IFS=$'\t' read -r key long; do
        short=$(awk -F'\t' -v k="$key" '$1 == k { print $2 }' "$WORK/$name-3.count")
        [ "${long:-0}" -gt "${short:-0}" ] || continue
        read -r -a words <<< "$key"
        named="${words[0]}$(where "${words[@]:1}")"
        if grep -qE "< ($ALLOWED) " <<< "$named "; then
            allowed=$((allowed + 1))
            echo "  allowed in $name: $named (${short:-0} calls in 3 steps, $long in 6)"
        else
            found=$((found + 1))
            fail "$name: a step calls $named (${short:-0} times in 3 steps, $long in 6)"
        fi
    done < "$WORK/$name-6.count"
    [ "$found" -eq 0 ] &&
        pass "$name: no host call inside a step but the $allowed allowed ($(wc -l < "$WORK/$name-6.calls") calls in the run)"
}

check fp32
check bf16 --set precision.plugin=bf16 --set optim.plugin=adamw_fused
check fp16 --set precision.plugin=fp16 --set optim.plugin=adamw_fused
check bf16-calls --set precision.plugin=bf16 --set optim.plugin=adamw_fused \
    --set run.cuda_graphs=false
finish
