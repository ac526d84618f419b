#!/usr/bin/env bash
# Exact resume (lib.sh's exact_resume): 20 steps with a checkpoint at step 10, then a second
# run resumed from that checkpoint; steps 11-20 must log bit-identical losses, and so must
# the final evaluation. A resume past the end, a torn and a corrupted checkpoint are refused.
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 10"
exact_resume resume || finish
# the first run's log must not be spoiled by a resumed one (different out_dir), and a
# resume beyond the end is refused
expect_error "resume past the last step" 2 "leaves nothing to train" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/c" \
    --resume "$WORK/resume-a/ckpt-000020.gbk"
head -c 100 "$WORK/resume-a/ckpt-000010.gbk" > "$WORK/torn.gbk"
expect_error "a torn checkpoint is refused" 2 "checksum mismatch; the file is damaged or incomplete" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/d" --resume "$WORK/torn.gbk"
cp "$WORK/resume-a/ckpt-000010.gbk" "$WORK/flipped.gbk"
printf '\x01' | dd of="$WORK/flipped.gbk" bs=1 seek=5000 conv=notrunc 2> /dev/null
expect_error "a corrupted checkpoint is refused" 2 "checksum mismatch" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/e" --resume "$WORK/flipped.gbk"
finish
