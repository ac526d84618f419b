#!/usr/bin/env bash
# Sharded optimizer state ([optim] shard_state, ZeRO-1) on emulated GPUs with comm/nccl,
# its reduce-scatter and all-gather moving the data between the ranks' processes
# (cuda_emu/src/nccl_world.cc):
# - f32: 2 sharded ranks end where 1 unsharded process ends (same global batch);
# - bf16 with adamw_fused: 3 sharded ranks (the parameters padded to a multiple of 3, the
#   low-precision working copy all-gathered beside the f32 master weights) end where 3
#   unsharded ranks end.
# Few steps and one thread per emulated GPU: emu_each_order runs it three times.
# usage: test_zero1_nccl_emu.sh GEARBOX FIXTURES_DIR SOURCE_ROOT COMPARE_PARAMS (suite
# gpu-emu: the emulated plugins lead GEARBOX_PLUGIN_PATH and GEARBOX_TEST_DEVICE=cuda)
source "$(dirname "$0")/../cli/lib.sh"
COMPARE=$4
source "$(dirname "$0")/nccl_emu_ranks.sh"
source "$(dirname "$0")/same_params.sh"

make_data
write_config "$WORK/run.ini"
# As tests/ddp/test_ddp.sh: one thread, a learning rate at which summing in another order
# stays a rounding difference; few steps, with the checkpoint at the last.
sed -i -e 's/^threads = .*/threads = 1/' -e 's/^learning_rate = .*/learning_rate = 3e-3/' \
    -e 's/^steps = .*/steps = 4/' "$WORK/run.ini"

train_ranks 1 one
train_ranks 2 sharded2 --set optim.shard_state=true
same_params one sharded2 1e-5 4
grep -q "optimizer state sharded (\[optim\] shard_state): [0-9]* bytes on this rank of [0-9]* in all, 1/2" \
    "$WORK/sharded2.0.log" && pass "rank 0 keeps 1/2 of the optimizer state" ||
    fail "no sharded optimizer line: $(grep 'memory plan' "$WORK/sharded2.0.log")"

bf16=(--set optim.plugin=adamw_fused --set precision.plugin=bf16 --set data.batch_size=6
      --set run.steps=2)
train_ranks 3 bf16-3 "${bf16[@]}"
train_ranks 3 bf16-sharded3 "${bf16[@]}" --set optim.shard_state=true
same_params bf16-3 bf16-sharded3 1e-6 2
finish
