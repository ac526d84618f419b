#!/usr/bin/env bash
# batch_size = auto on device/cuda asks the GPU how much memory is free (cudaMemGetInfo,
# after the plugins' own allocations) and plans within 95% of it, and its answer trains.
# On the emulated GPU with GEARBOX_CUDA_EMU_MEMORY_MB=65 device/cuda's own workspaces
# (64 MiB) leave 1 MiB free, so the answer is limited by device memory: batch B plans within
# the budget, B + 1 does not, and two training steps at B run without running out of
# memory. The same run told to plan for the whole device ([run] memory_budget = 65MiB, the
# old behaviour) picks a batch that does not fit, and fails naming the allocation.
# usage: test_autobatch_emu.sh GEARBOX FIXTURES_DIR SOURCE_ROOT (suite gpu-emu:
# GEARBOX_TEST_DEVICE=cuda and the emulated plugins lead GEARBOX_PLUGIN_PATH)
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 0"
export GEARBOX_CUDA_EMU_MEMORY_MB=65
MIB=1048576

auto_train() {
    local name=$1
    shift
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/$name" --set data.batch_size=auto \
        --set run.steps=2 "$@" > "$WORK/$name.log" 2>&1
}

auto_train free || fail "training at the batch chosen from free memory: $(tail -n 5 "$WORK/free.log")"
line=$(grep "^batch_size = auto: budget" "$WORK/free.log")
echo "$line"
read -r BUDGET FREE B FIT NEXT_BYTES <<< "$(sed -nE 's/.*budget ([0-9]+) bytes .*95% of the ([0-9.]+) MiB the device has free\); batch ([0-9]+) plans ([0-9]+) bytes .*would plan ([0-9]+) bytes.*/\1 \2 \3 \4 \5/p' <<< "$line")"
if [ -z "${B:-}" ]; then
    fail "no budget from the device's free memory: $(head -n 20 "$WORK/free.log")"
    finish
fi
awk -v f="$FREE" -v b="$BUDGET" -v m=$MIB 'BEGIN { exit !(f < 65 && b <= 0.95 * f * m + 1) }' &&
    pass "the budget is 95% of the $FREE MiB free of 65 MiB: device/cuda's own allocations are not planned for" ||
    fail "budget $BUDGET bytes from $FREE MiB free"
[ "$FIT" -le "$BUDGET" ] && [ "$NEXT_BYTES" -gt "$BUDGET" ] &&
    pass "batch $B plans $FIT bytes <= $BUDGET < $NEXT_BYTES for batch $((B + 1)): the device's memory limits it" ||
    fail "the choice does not bracket the budget: $line"
grep -q "^done: 2 steps" "$WORK/free.log" && ! grep -q "cannot allocate" "$WORK/free.log" &&
    pass "2 steps at batch $B trained without running out of memory ($(grep '^step     2/2' "$WORK/free.log" | cut -c1-60))" ||
    fail "the run at batch $B: $(tail -n 5 "$WORK/free.log")"

# planning for the whole device, as before free memory was asked: out of memory
if auto_train whole --set run.memory_budget=65MiB; then
    fail "a batch planned for the whole 65 MiB trained; the device's own 64 MiB should leave no room"
elif grep -q "cannot allocate" "$WORK/whole.log"; then
    pass "planned for the whole device instead: $(grep -o 'batch_size [0-9]*,' "$WORK/whole.log" | head -n 1) runs out of memory ($(grep -o 'cannot allocate [0-9]* bytes' "$WORK/whole.log" | head -n 1))"
else
    fail "planned for the whole device: $(tail -n 5 "$WORK/whole.log")"
fi
finish
