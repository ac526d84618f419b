#!/usr/bin/env bash
# `gearbox eval`: a tiny model memorises a text of three repeated sentences; its
# validation loss with [run] eval_iters batches is the one training logged at the same
# step, and on tests/cli/fixtures/hellaswag_memorised.jsonl (four items whose memorised
# ending is known; the fourth item's label names another ending on purpose) it scores
# exactly 3 of 4, and 4 of 4 once that label is fixed. Bad JSONL lines are refused with
# file:line and what was expected; so are a missing --ckpt and a bad --batches.
source "$(dirname "$0")/lib.sh"
HELLASWAG=$SRC/tests/cli/fixtures/hellaswag_memorised.jsonl
for _ in $(seq 400); do
    printf 'the cat sat on the mat. a dog ran to the park. we eat red apples. '
done > "$WORK/memorised.txt"
"$GEARBOX" prepare "$WORK/memorised.txt" "$WORK/data" > /dev/null || fail "prepare the text"
write_config "$WORK/run.ini"
sed -i -e 's/^steps = 20/steps = 150/' -e 's/^eval_every = 0/eval_every = 50/' \
    -e 's/^block_size = 16/block_size = 32/' -e 's/^batch_size = 4/batch_size = 8/' "$WORK/run.ini"
train_run mem || finish

logged=$(grep -o '"step": 150, "train_loss": [^,]*, "val_loss": [0-9.e-]*' \
    "$WORK/mem/metrics.jsonl" | sed 's/.*"val_loss": //')
"$GEARBOX" eval "$WORK/run.ini" --set run.out_dir="$WORK/mem" --ckpt "$WORK/mem" \
    --hellaswag "$HELLASWAG" > "$WORK/eval.out" 2> "$WORK/eval.err" ||
    fail "eval failed: $(tail -n 3 "$WORK/eval.err")"
evaluated=$(sed -n 's/^val loss \([0-9.]*\) over 2 batches of 8 x 32 tokens.*step 150)$/\1/p' \
    "$WORK/eval.out")
[ -n "$evaluated" ] && [ "$evaluated" = "$(printf '%.4f' "$logged")" ] &&
    pass "val loss over eval_iters batches is the logged one: $evaluated" ||
    fail "val loss '$evaluated' (from: $(head -n 1 "$WORK/eval.out")), logged $logged"
grep -qx "hellaswag: 4 items of $HELLASWAG: acc 0.7500 (3 right), acc_norm 0.7500 (3 right)" \
    "$WORK/eval.out" && pass "3 of 4 items right ($(tail -n 1 "$WORK/eval.out"))" ||
    fail "expected 3 of 4 right: $(cat "$WORK/eval.out")"

sed '$s/"label": 0/"label": 3/' "$HELLASWAG" > "$WORK/fixed.jsonl"
"$GEARBOX" eval "$WORK/run.ini" --ckpt "$WORK/mem/ckpt-000150.gbk" --batches 0 \
    --hellaswag "$WORK/fixed.jsonl" > "$WORK/fixed.out" 2>&1
[ "$(cat "$WORK/fixed.out")" = \
  "hellaswag: 4 items of $WORK/fixed.jsonl: acc 1.0000 (4 right), acc_norm 1.0000 (4 right)" ] &&
    pass "--batches 0 and the label fixed: 4 of 4 right" ||
    fail "expected only 4 of 4 right: $(cat "$WORK/fixed.out")"
"$GEARBOX" eval "$WORK/run.ini" --ckpt "$WORK/mem" --batches 3 > "$WORK/three.out" 2>&1
grep -q "^val loss [0-9.]* over 3 batches of 8 x 32 tokens" "$WORK/three.out" &&
    pass "--batches 3" || fail "--batches 3: $(cat "$WORK/three.out")"

printf '%s\n' '{"ctx": "a", "endings": ["b", "c"], "label": 1}' '{"ctx": "a", "endings": [' \
    '{"endings": ["b", "c"], "label": 0}' '{"ctx": "a", "endings": ["b"], "label": 0}' \
    '{"ctx": "a", "endings": ["b", "c"], "label": 2}' '[1, 2]' > "$WORK/bad.jsonl"
: > "$WORK/empty.jsonl"
printf '%s\n' '{"ctx": "the cat", "endings": ["sat", "zzz"], "label": 0}' > "$WORK/bytes.jsonl"
for _ in $(seq 1000); do printf '\x8b\x00\xff'; done > "$WORK/garbage.jsonl"
printf '%*s' 100000 '' | tr ' ' '[' > "$WORK/deep.jsonl"
run=("$GEARBOX" eval "$WORK/run.ini" --ckpt "$WORK/mem" --batches 0)
expect_error "a line that is not JSON" 2 "bad.jsonl:2: not a JSON object" -- \
    "${run[@]}" --hellaswag "$WORK/bad.jsonl"
for expected in '3: expected "ctx": the context, a string' \
    '4: expected "endings": an array of 2 to 16 strings' \
    '5: expected "label": the index of the right ending' \
    '6: expected a JSON object with "ctx", "endings" and "label"'; do
    grep -qF "bad.jsonl:$expected" "$WORK/stderr" && pass "line $expected" ||
        fail "no 'bad.jsonl:$expected' in: $(cat "$WORK/stderr")"
done
expect_refusals "${run[@]}" <<TABLE
an empty file | empty.jsonl holds no items | --hellaswag $WORK/empty.jsonl
a missing file | cannot read $WORK/none.jsonl | --hellaswag $WORK/none.jsonl
a byte the vocabulary lacks | bytes.jsonl:1: ending 1's byte 122 'z' is not in the model's vocabulary | --hellaswag $WORK/bytes.jsonl
binary bytes | garbage.jsonl:1: not a JSON object | --hellaswag $WORK/garbage.jsonl
100000 nested arrays | deep.jsonl:1: not a JSON object | --hellaswag $WORK/deep.jsonl
TABLE
expect_refusals "$GEARBOX" eval "$WORK/run.ini" <<TABLE
no --ckpt | --ckpt CHECKPOINT is needed |
nothing to evaluate | --batches 0 without --hellaswag leaves nothing | --ckpt $WORK/mem --batches 0
a bad --batches | --batches x: expected a whole number | --ckpt $WORK/mem --batches x
a folder without checkpoints | the folder holds no checkpoint | --ckpt $WORK/data
TABLE
finish
