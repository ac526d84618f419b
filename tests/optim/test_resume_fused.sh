#!/usr/bin/env bash
# Exact resume with adamw_fused, as tests/cli/test_resume.sh checks it for adamw: 20 steps
# with a checkpoint at step 10, then a second run resumed from that checkpoint; steps
# 11-20 must log bit-identical losses and learning rates, and the final evaluation must
# be identical too.
# usage: test_resume_fused.sh GEARBOX BUILD_DIR SOURCE_ROOT
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 10"
run() { "$GEARBOX" train "$WORK/run.ini" --set optim.plugin=adamw_fused "$@"; }
run --set run.out_dir="$WORK/a" > "$WORK/a.log" 2>&1 ||
    { cat "$WORK/a.log"; fail "uninterrupted run"; finish; }
[ -f "$WORK/a/ckpt-000010.gbk" ] && pass "checkpoint at step 10 written" ||
    { fail "no checkpoint at step 10"; finish; }
run --set run.out_dir="$WORK/b" --resume "$WORK/a/ckpt-000010.gbk" > "$WORK/b.log" 2>&1 ||
    { cat "$WORK/b.log"; fail "resumed run"; finish; }
grep -q "resumed from $WORK/a/ckpt-000010.gbk at step 10" "$WORK/b.log" &&
    pass "resume announced" || fail "resume not announced"

losses() { grep -E '"step": (1[1-9]|20), "loss"' "$1" | sed -E 's/, "ms".*//'; }
finals() { grep -E '^\{"step": [0-9]+, "train_loss"' "$1"; }
losses "$WORK/a/metrics.jsonl" > "$WORK/a.losses"
losses "$WORK/b/metrics.jsonl" > "$WORK/b.losses"
n=$(wc -l < "$WORK/a.losses")
if [ "$n" -ne 10 ]; then
    fail "expected 10 logged steps after the checkpoint, found $n"
elif cmp -s "$WORK/a.losses" "$WORK/b.losses"; then
    pass "steps 11-20: bit-identical losses and learning rates ($(tail -n 1 "$WORK/a.losses"))"
else
    fail "steps 11-20 differ:"; diff "$WORK/a.losses" "$WORK/b.losses"
fi
if [ -n "$(finals "$WORK/a/metrics.jsonl")" ] &&
   [ "$(finals "$WORK/a/metrics.jsonl")" = "$(finals "$WORK/b/metrics.jsonl")" ]; then
    pass "final train and val loss identical"
else
    fail "final evaluation differs"
fi
finish
