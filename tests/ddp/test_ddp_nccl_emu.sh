#!/usr/bin/env bash
# Data-parallel training on emulated GPUs: device = cuda, comm = nccl, each rank a process
# of its own with its own emulated GPU (LOCAL_RANK), started with torchrun's variables,
# the ranks' NCCL exchanging the gradients through shared memory (cuda_emu/src/nccl_world.cc).
# - 2 and 4 ranks end where 1 process ends (same global batch), with and without gradient
#   accumulation;
# - on every rank of 2, bucket 1's all-reduce was queued before the kernels of the rest of
#   backward and ran while they were still queued (the emulator's operation trace);
# - a rank killed during training makes the other stop at once with an error naming it and
#   the collective that failed.
# usage: test_ddp_nccl_emu.sh GEARBOX FIXTURES_DIR SOURCE_ROOT COMPARE_PARAMS (suite
# gpu-emu: the emulated plugins lead GEARBOX_PLUGIN_PATH and GEARBOX_TEST_DEVICE=cuda)
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/../comm/overlap_trace.sh"
COMPARE=$4
source "$(dirname "$0")/nccl_emu_ranks.sh"

make_data
write_config "$WORK/run.ini"
# As tests/ddp/test_ddp.sh: one thread, a learning rate at which summing in another order
# stays a rounding difference.
sed -i -e 's/^threads = .*/threads = 1/' -e 's/^learning_rate = .*/learning_rate = 3e-3/' \
    "$WORK/run.ini"

same_params() {
    local one=$1 many=$2 out
    if out=$("$COMPARE" "$WORK/$one/ckpt-000020.gbk" "$WORK/$many/ckpt-000020.gbk" 1e-5); then
        pass "$many: final parameters = 1 process within 1e-5 ($out)"
    else
        fail "$many: final parameters differ from 1 process: $out"
    fi
}

for accum in 1 2; do
    train_ranks 1 "one-accum$accum" --set data.gradient_accumulation_steps=$accum
    for world in 2 4; do
        train_ranks "$world" "ranks$world-accum$accum" --set data.gradient_accumulation_steps=$accum
        same_params "one-accum$accum" "ranks$world-accum$accum"
    done
done
grep -q "data parallel: 4 ranks x 1 rows of each batch of 4" "$WORK/ranks4-accum1.0.log" &&
    pass "the plan names 4 ranks of 1 row" || fail "no data-parallel line for 4 ranks"

for r in 0 1; do
    facts=$(analyse "$WORK/ranks2-accum1.$r.trace")
    [ "$(fact later_kernels "$facts")" -gt 0 ] && [ "$(fact queued_at_run "$facts")" -gt 0 ] &&
        [ "$(fact late "$facts")" -eq 0 ] &&
        pass "rank $r: bucket 1's all-reduce was queued before $(fact later_kernels "$facts") kernels of the rest of backward and ran while $(fact queued_at_run "$facts") of them were still queued, before the optimizer" ||
        fail "rank $r: no overlap of bucket 1's all-reduce with the rest of backward: $facts"
done

# Rank 1 killed once rank 0 has logged a step: rank 0 stops within [comm] timeout_s,
# naming rank 1.
launch 2 death --set comm.timeout_s=5 --set run.steps=1000000
for _ in $(seq 300); do
    grep -q "^step *2/" "$WORK/death.0.log" 2> /dev/null && break
    sleep 0.1
done
kill -KILL "${ranks[1]}"
start=$SECONDS
for _ in $(seq 150); do
    kill -0 "${ranks[0]}" 2> /dev/null || break
    sleep 0.1
done
if kill -0 "${ranks[0]}" 2> /dev/null; then
    fail "death: rank 0 still runs $((SECONDS - start)) s after rank 1 was killed"
elif wait "${ranks[0]}"; then
    fail "death: rank 0 exited 0 after rank 1 was killed"
elif ! grep -q "rank 1 (pid ${ranks[1]}) exited" "$WORK/death.0.log"; then
    fail "death: rank 0's error does not name rank 1: $(tail -c 800 "$WORK/death.0.log")"
elif ! grep -Eq 'all_reduce #([0-9]+) .*ncclAllReduce #\1 ' "$WORK/death.0.log"; then
    fail "death: comm/nccl names another collective than the one that failed: $(grep -m 1 error "$WORK/death.0.log")"
else
    pass "death: rank 0 stopped $((SECONDS - start)) s after rank 1 was killed: $(grep -m 1 -o "rank 1 (pid.*" "$WORK/death.0.log" | cut -c1-120)"
fi
finish
