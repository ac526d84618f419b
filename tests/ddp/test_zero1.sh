#!/usr/bin/env bash
# Sharded optimizer state ([optim] shard_state, ZeRO-1) on the CPU:
# - 2 ranks with comm/mpi end where 1 unsharded process ends (same global batch), with and
#   without gradient accumulation, each rank keeping half the optimizer state (the memory
#   plan's figures);
# - one process with comm/single ends bit-identical to the unsharded run;
# - a sharded run's checkpoint resumes unsharded in one process and sharded on 2 ranks, and
#   an unsharded one resumes sharded, each ending where the uninterrupted run ends.
# usage: test_zero1.sh GEARBOX FIXTURES_DIR SOURCE_ROOT MPIRUN COMPARE_PARAMS
source "$(dirname "$0")/../cli/lib.sh"
COMPARE=$5
source "$(dirname "$0")/mpirun.sh" "$4"
source "$(dirname "$0")/same_params.sh"

make_data
write_config "$WORK/run.ini" "checkpoint_every = 10"
# As tests/ddp/test_ddp.sh: one thread, a learning rate at which summing in another order
# stays a rounding difference.
sed -i -e 's/^threads = .*/threads = 1/' -e 's/^learning_rate = .*/learning_rate = 3e-3/' \
    "$WORK/run.ini"

# sharded2 NAME SETTINGS...: 2 ranks, comm/mpi, sharded state, into $WORK/NAME.
sharded2() {
    local name=$1
    shift
    mpirun2 "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/$name" \
        --set comm.plugin=mpi --set optim.shard_state=true "$@" > "$WORK/$name.log" 2>&1 ||
        fail "$name: $(grep -v warning "$WORK/$name.log" | tail -n 3)"
}

train_run plain
sharded2 sharded
same_params plain sharded 1e-5
grep -q "reduce-scattered per step, parameters all-gathered (\[optim\] shard_state)" \
    "$WORK/sharded.log" && pass "the plan says the gradients are reduce-scattered" ||
    fail "no sharded data-parallel line: $(grep 'data parallel' "$WORK/sharded.log")"

# the optimizer state per rank, as the memory plan counts it: half of the whole
line=$(grep -o "optimizer state sharded (\[optim\] shard_state): [0-9]* bytes on this rank of [0-9]* in all, 1/2" \
    "$WORK/sharded.log")
mine=$(echo "$line" | awk '{ print $6 }')
all=$(echo "$line" | awk '{ print $12 }')
plain_optim=$(grep -o "optimizer [0-9.]*" "$WORK/plain.log" | head -n 1 | cut -d' ' -f2)
sharded_optim=$(grep -o "optimizer [0-9.]*" "$WORK/sharded.log" | head -n 1 | cut -d' ' -f2)
if [ -n "$mine" ] && [ $((2 * mine - all)) -ge 0 ] && [ $((2 * mine - all)) -lt 64 ] &&
    awk -v p="$plain_optim" -v s="$sharded_optim" 'BEGIN { exit !(s < 0.55 * p) }'; then
    pass "optimizer state per rank halves: $mine of $all bytes; plan's optimizer $sharded_optim MiB per rank vs $plain_optim unsharded"
else
    fail "optimizer state per rank: '$line'; plan's optimizer $sharded_optim vs $plain_optim MiB"
fi

train_run accum --set data.gradient_accumulation_steps=2
sharded2 accum-sharded --set data.gradient_accumulation_steps=2
same_params accum accum-sharded 1e-5

# comm/single: the one shard is everything, so the run is the unsharded one, bit for bit
train_run single --set optim.shard_state=true
same_params plain single 0

# checkpoints: the whole state, as unsharded, whichever way they were written
# resume FROM NAME RUNNER SETTINGS...: RUNNER (train_run, sharded2) resumes FROM's step 10 as NAME.
resume() {
    local from=$1 name=$2 runner=$3
    shift 3
    "$runner" "$name" --resume "$WORK/$from/ckpt-000010.gbk" "$@" || return
    grep -q "resumed from $WORK/$from/ckpt-000010.gbk at step 10" "$WORK/$name.log" ||
        fail "$name: resume not announced"
    same_params plain "$name" 1e-5
}
resume sharded sharded-to-one train_run --set optim.shard_state=false
resume sharded sharded-to-sharded sharded2
resume plain plain-to-sharded sharded2
finish
