#!/usr/bin/env bash
# [run] keep_last: 20 steps with a checkpoint and an evaluation every 5. Unset, all four
# checkpoints stay; keep_last = 2 keeps the newest two and logs each deletion; a resumed
# run keeps the best by val loss too (the metrics file is edited so that step 5's is the
# best), and never the newest alone. Bad values are refused like any [run] key.
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 5"
sed -i "s/^eval_every = 0/eval_every = 5/" "$WORK/run.ini"

# checkpoints NAME: the checkpoint files run NAME left, on one line.
checkpoints() { (cd "$WORK/$1" && ls ckpt-*.gbk | tr '\n' ' '); }

expect_kept() {
    local what=$1 name=$2 expected=$3
    [ "$(checkpoints "$name")" = "$expected" ] && pass "$what: $expected" ||
        fail "$what: kept '$(checkpoints "$name")', expected '$expected'"
}

train_run all && expect_kept "keep_last unset keeps every checkpoint" all \
    "ckpt-000005.gbk ckpt-000010.gbk ckpt-000015.gbk ckpt-000020.gbk "
train_run two --set run.keep_last=2 && expect_kept "keep_last = 2" two \
    "ckpt-000015.gbk ckpt-000020.gbk "
deleted=$(grep -c "checkpoint retention: deleted $WORK/two/ckpt-0000" "$WORK/two.log")
[ "$deleted" = 2 ] && pass "each deletion is logged ($(grep -m1 retention "$WORK/two.log"))" ||
    fail "expected 2 deletions in the log, found $deleted"

# The best evaluation made step 5's: a run resumed from step 15 keeps it beside the newest.
mkdir -p "$WORK/best" && cp "$WORK/all"/ckpt-*.gbk "$WORK/all/metrics.jsonl" "$WORK/best/"
sed -i 's/^\({"step": 5, "train_loss": [^,]*, "val_loss": \)[^}]*}/\10.5}/' \
    "$WORK/best/metrics.jsonl"
grep -q '"step": 5, "train_loss": [^,]*, "val_loss": 0.5}' "$WORK/best/metrics.jsonl" ||
    fail "could not edit the metrics file: $(grep '"step": 5,' "$WORK/best/metrics.jsonl")"
train_run best --set run.keep_last=1 --resume "$WORK/best/ckpt-000015.gbk" &&
    expect_kept "keep_last = 1 keeps the newest and the best by val loss" best \
        "ckpt-000005.gbk ckpt-000020.gbk "
grep -q "the best val loss, step 5's, is kept" "$WORK/best.log" &&
    pass "the log names the best kept" || fail "the log does not name the best kept"

expect_refusals "$GEARBOX" check "$WORK/run.ini" <<'TABLE'
keep_last below 0 | keep_last | --set run.keep_last=-1
keep_last not a number | keep_last | --set run.keep_last=two
TABLE
finish
