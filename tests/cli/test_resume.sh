#!/usr/bin/env bash
# Exact resume: 20 steps with a checkpoint at step 10, then a second run resumed from that
# checkpoint; steps 11-20 must log bit-identical losses (printed with 9 significant digits,
# which round-trips a float32), and so must the final evaluation.
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 10"
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/a" > "$WORK/a.log" 2>&1 ||
    { cat "$WORK/a.log"; fail "uninterrupted run"; finish; }
[ -f "$WORK/a/ckpt-000010.gbk" ] && pass "checkpoint at step 10 written" ||
    fail "no checkpoint at step 10"
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/b" \
    --resume "$WORK/a/ckpt-000010.gbk" > "$WORK/b.log" 2>&1 ||
    { cat "$WORK/b.log"; fail "resumed run"; finish; }
grep -q "resumed from $WORK/a/ckpt-000010.gbk at step 10" "$WORK/b.log" &&
    pass "resume announced" || fail "resume not announced"

losses() { grep -E '"step": (1[1-9]|20), "loss"' "$1" | sed -E 's/, "ms".*//'; }
finals() { grep '^{"step": [0-9]*, "train_loss"' "$1"; }
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
# the first run's log must not be spoiled by a resumed one (different out_dir), and a
# resume beyond the end is refused
expect_error "resume past the last step" 2 "leaves nothing to train" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/c" --resume "$WORK/a/ckpt-000020.gbk"
head -c 100 "$WORK/a/ckpt-000010.gbk" > "$WORK/torn.gbk"
expect_error "a torn checkpoint is refused" 2 "checksum mismatch; the file is damaged or incomplete" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/d" --resume "$WORK/torn.gbk"
cp "$WORK/a/ckpt-000010.gbk" "$WORK/flipped.gbk"
printf '\x01' | dd of="$WORK/flipped.gbk" bs=1 seek=5000 conv=notrunc 2> /dev/null
expect_error "a corrupted checkpoint is refused" 2 "checksum mismatch" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/e" --resume "$WORK/flipped.gbk"
finish
