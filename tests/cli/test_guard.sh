#!/usr/bin/env bash
# The guard against non-finite values: an optimizer fixture (fixtures/optim_poison.c)
# writes NaN into the weights from a chosen step. The run must stop with an error that
# names the first step whose loss is not finite and the last good checkpoint, and write
# no checkpoint holding the NaN. Steps are logged only every 100, so the guard works from
# the figures it reads without waiting (one step late on the GPU-like device).
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 4"
poisoned() { "$GEARBOX" train "$WORK/run.ini" --plugin-path "$FIXTURES" \
    --set optim.plugin=poison --set optim.nan_at=6 --set run.log_every=100 "$@"; }

# the update of step 6 writes NaN: step 7's loss is the first that is not finite
expect_error "a NaN loss stops the run" 1 "step 7: the loss is nan" -- \
    poisoned --set run.out_dir="$WORK/a"
grep -qF "the last good checkpoint is $WORK/a/ckpt-000004.gbk (step 4)" "$WORK/stderr" &&
    pass "the message names the last good checkpoint" ||
    fail "last good checkpoint not named: $(cat "$WORK/stderr")"
[ -f "$WORK/a/ckpt-000004.gbk" ] && [ ! -e "$WORK/a/ckpt-000008.gbk" ] &&
    pass "no checkpoint after the NaN" || fail "checkpoints: $(ls "$WORK/a")"

# with a checkpoint every step, the NaN is in the weights saved at step 6: refused
expect_error "a checkpoint holding NaN is not written" 1 \
    "step 6: parameter wte[0] is nan; no checkpoint written" -- \
    poisoned --set run.out_dir="$WORK/b" --set run.checkpoint_every=1
grep -qF "the last good checkpoint is $WORK/b/ckpt-000005.gbk (step 5)" "$WORK/stderr" &&
    [ ! -e "$WORK/b/ckpt-000006.gbk" ] && pass "step 5's checkpoint is the last" ||
    fail "after a refused checkpoint: $(ls "$WORK/b"); $(cat "$WORK/stderr")"

# before any checkpoint the message says there is none
expect_error "no checkpoint yet" 1 "no checkpoint of this run was written" -- \
    poisoned --set run.out_dir="$WORK/c" --set run.checkpoint_every=0
finish
