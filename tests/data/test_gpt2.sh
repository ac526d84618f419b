#!/usr/bin/env bash
# GPT-2 BPE data end to end, with the tokenizer test's small vocabulary (557 ids, made by
# tests/tokenizer/make_fixture.py): prepare writes the ids tiktoken gives (and
# <|endoftext|> as its id), in nanoGPT's layout, from either vocabulary file; a run on it
# finds the vocabulary by itself, and sample decodes what the model draws.
source "$(dirname "$0")/../cli/lib.sh"
VOCAB=$SRC/tests/tokenizer/fixture
EOT=556
ids() { od -An -tu2 -v "$1" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; }
repeat() { local i; for ((i = 0; i < $2; i++)); do printf '%s' "$1"; done; }

# 33 copies of the fixture's first text, then 17 <|endoftext|>: 90% of the 2201 bytes
# cuts exactly between them
first='First Citizen:
Before we proceed any further, hear me speak.'
{ repeat "$first" 33; repeat '<|endoftext|>' 17; } > "$WORK/text.txt"
"$GEARBOX" prepare --tokenizer gpt2 --vocab "$VOCAB" "$WORK/text.txt" "$WORK/bpe" \
    > "$WORK/prepare.out" 2>&1 || fail "prepare: $(cat "$WORK/prepare.out")"
expected_train=$(repeat "$(head -n 1 "$VOCAB/expected.txt") " 33)
expected_val=$(repeat "$EOT " 17)
[ "$(ids "$WORK/bpe/train.bin") " = "$expected_train" ] &&
    pass "train.bin holds tiktoken's ids for the text" ||
    fail "train.bin: $(ids "$WORK/bpe/train.bin" | head -c 300)"
[ "$(ids "$WORK/bpe/val.bin") " = "$expected_val" ] &&
    pass "val.bin holds <|endoftext|> as id $EOT, 17 times" ||
    fail "val.bin: $(ids "$WORK/bpe/val.bin")"
[ ! -e "$WORK/bpe/vocab.txt" ] && grep -qxF "$(cd "$VOCAB" && pwd -P)" "$WORK/bpe/tokenizer.txt" &&
    pass "nanoGPT's layout, and tokenizer.txt names the vocabulary" ||
    fail "folder: $(ls "$WORK/bpe"), note: $(cat "$WORK/bpe/tokenizer.txt")"
"$GEARBOX" prepare --tokenizer gpt2 --vocab "$VOCAB/tiny.tiktoken" "$WORK/text.txt" \
    "$WORK/bpe-tiktoken" > /dev/null 2>&1
cmp -s "$WORK/bpe/train.bin" "$WORK/bpe-tiktoken/train.bin" &&
    cmp -s "$WORK/bpe/val.bin" "$WORK/bpe-tiktoken/val.bin" &&
    pass "the tiktoken ranks file gives the same ids" || fail "tiktoken file: other ids"
expect_error "gpt2 without --vocab" 2 "--tokenizer gpt2 needs --vocab PATH" -- \
    "$GEARBOX" prepare --tokenizer gpt2 "$WORK/text.txt" "$WORK/x"
expect_error "a vocabulary that is not there" 1 "$WORK/nowhere" -- \
    "$GEARBOX" prepare --tokenizer gpt2 --vocab "$WORK/nowhere" "$WORK/text.txt" "$WORK/x"

# a model of " the the the ...": after 30 steps it draws " the" every time, and sample
# must print it as text
repeat ' the' 3000 > "$WORK/the.txt"
"$GEARBOX" prepare --tokenizer gpt2 --vocab "$VOCAB" "$WORK/the.txt" "$WORK/the" > /dev/null
write_config "$WORK/run.ini"
sed -i "s|^dir = .*|dir = $WORK/the|; s|^steps = .*|steps = 30|" "$WORK/run.ini"
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/out" > "$WORK/train.log" 2>&1 ||
    fail "train on GPT-2 ids: $(tail -3 "$WORK/train.log")"
grep -q "vocab 557" "$WORK/train.log" && pass "the run takes its vocabulary size from the note" ||
    fail "vocabulary size: $(grep -m1 model: "$WORK/train.log")"
sample() { "$GEARBOX" sample "$@" --prompt ' the' --top-k 1 --tokens 8; }
expected="$(repeat ' the' 9)"
[ "$(sample "$WORK/out" 2> /dev/null)" = "$expected" ] &&
    pass "sample decodes GPT-2 ids: '$expected'" || fail "sample: $(sample "$WORK/out" 2>&1)"

# nanoGPT's own folder has no note: the config's [data] vocab names the vocabulary, or
# sample must be told
mkdir -p "$WORK/nanogpt"
cp "$WORK/the/train.bin" "$WORK/the/val.bin" "$WORK/nanogpt/"
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/out-vocab" \
    --set data.dir="$WORK/nanogpt" --set data.vocab="$VOCAB" > "$WORK/train.log" 2>&1 &&
    [ "$(sample "$WORK/out-vocab" 2> /dev/null)" = "$expected" ] &&
    pass "[data] vocab: sample decodes without --vocab" || fail "[data] vocab: $(tail -2 "$WORK/train.log")"
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/out-bare" \
    --set data.dir="$WORK/nanogpt" --set model.vocab_size=557 > "$WORK/train.log" 2>&1 ||
    fail "train with [model] vocab_size only: $(tail -2 "$WORK/train.log")"
expect_error "sample without a vocabulary says what to pass" 1 "pass --vocab PATH" -- \
    sample "$WORK/out-bare"
[ "$(sample "$WORK/out-bare" --vocab "$VOCAB/tiny.tiktoken" 2> /dev/null)" = "$expected" ] &&
    pass "sample --vocab decodes" || fail "sample --vocab: $(sample "$WORK/out-bare" --vocab "$VOCAB/tiny.tiktoken" 2>&1)"
finish
