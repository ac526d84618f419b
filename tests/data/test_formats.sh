#!/usr/bin/env bash
# nanoGPT's and llm.c's token folders: each trains, and resumes bit-exactly; llm.c shards
# read as one stream train exactly as the same ids in one nanoGPT file; every malformed
# shard is refused with a message naming the file and what is wrong.
source "$(dirname "$0")/../cli/lib.sh"
make_data
TRAIN=$WORK/data/train.bin
VAL=$WORK/data/val.bin
# `gearbox prepare`'s ids without its vocab.txt: nanoGPT's layout; the ids are < 65
mkdir -p "$WORK/nanogpt"
cp "$TRAIN" "$VAL" "$WORK/nanogpt/"

# le32 N: N as 4 bytes, little-endian
le32() {
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) \
        $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"
}
# shard OUT IDS [MAGIC VERSION COUNT]: an llm.c shard of the ids in file IDS
shard() {
    local out=$1 ids=$2 count=$(($(stat -c %s "$2") / 2))
    { le32 "${3:-20240520}"; le32 "${4:-1}"; le32 "${5:-$count}"; head -c 1012 /dev/zero
      cat "$ids"; } > "$out"
}
# piece FILE FIRST_BYTE BYTES: a part of FILE
piece() { tail -c +$(($2 + 1)) "$1" | head -c "$3"; }

mkdir -p "$WORK/llmc"
piece "$TRAIN" 0 30000 > "$WORK/p0"
piece "$TRAIN" 30000 30002 > "$WORK/p1"
piece "$TRAIN" 60002 100000000 > "$WORK/p2"
shard "$WORK/llmc/tiny_train_000000.bin" "$WORK/p0"
shard "$WORK/llmc/tiny_train_000001.bin" "$WORK/p1"
shard "$WORK/llmc/tiny_train_000002.bin" "$WORK/p2"
shard "$WORK/llmc/tiny_val.bin" "$VAL"

write_config "$WORK/run.ini" "checkpoint_every = 10"
run() { "$GEARBOX" train "$WORK/run.ini" --set model.vocab_size=65 "$@"; }

# check names the layout and counts each split's tokens
train_tokens=$(($(stat -c %s "$TRAIN") / 2))
val_tokens=$(($(stat -c %s "$VAL") / 2))
"$GEARBOX" check "$WORK/run.ini" --set data.dir="$WORK/llmc" --set model.vocab_size=65 \
    > "$WORK/check.out" 2>&1
if grep -q "^# data: llm.c format, GPT-2 BPE tokens" "$WORK/check.out" &&
   grep -q "^#   train $train_tokens tokens in 3 files" "$WORK/check.out" &&
   grep -q "^#   val   $val_tokens tokens in 1 file," "$WORK/check.out"; then
    pass "check: llm.c format, $train_tokens train tokens in 3 shards, $val_tokens val"
else
    fail "check's data lines: $(grep '^#' "$WORK/check.out" | head -5)"
fi
"$GEARBOX" check "$WORK/run.ini" --set data.dir="$WORK/nanogpt" --set model.vocab_size=65 \
    > "$WORK/check.out" 2>&1
grep -q "^# data: nanoGPT format" "$WORK/check.out" &&
    pass "check: nanoGPT format" || fail "check on nanoGPT's layout: $(head -c 400 "$WORK/check.out")"
expect_error "nanoGPT's layout needs a vocabulary size" 2 "set [model] vocab_size (50257" -- \
    "$GEARBOX" check "$WORK/run.ini" --set data.dir="$WORK/nanogpt"

for format in nanogpt llmc; do
    exact_resume "$format" --set model.vocab_size=65 --set data.dir="$WORK/$format"
done
if cmp -s "$WORK/nanogpt-a.losses" "$WORK/llmc-a.losses" &&
   cmp -s "$WORK/nanogpt-a.finals" "$WORK/llmc-a.finals"; then
    pass "three llm.c shards train exactly as their ids in one nanoGPT file"
else
    fail "llm.c shards and the nanoGPT file of the same ids train differently"
fi
grep -q "tokenizer = gpt2" "$WORK/llmc-a/manifest.json" &&
    pass "the run records [data] tokenizer = gpt2" || fail "the run does not record its tokenizer"

# malformed shards, each alone in a folder beside a good val shard
bad() {
    local name=$1 text=$2
    shift 2
    rm -rf "$WORK/bad"
    mkdir -p "$WORK/bad"
    cp "$WORK/llmc/tiny_val.bin" "$WORK/bad/"
    "$@"
    expect_error "$name" 2 "$WORK/bad/x_train_000000.bin: $text" -- \
        run --set data.dir="$WORK/bad" --set run.out_dir="$WORK/out-bad"
}
count=$((30000 / 2))
bad "bad magic" "its header starts with 12345, not llm.c's magic number 20240520" \
    shard "$WORK/bad/x_train_000000.bin" "$WORK/p0" 12345
bad "unknown version" "it is an llm.c shard of version 2, but gearbox reads version 1" \
    shard "$WORK/bad/x_train_000000.bin" "$WORK/p0" 20240520 2
bad "count beyond the file" "its header counts $((count + 7)) tokens, $((1024 + 2 * count + 14)) bytes with the header, but the file is $((1024 + 2 * count)) bytes long: it is truncated" \
    shard "$WORK/bad/x_train_000000.bin" "$WORK/p0" 20240520 1 $((count + 7))
bad "count short of the file" "its header counts $((count - 1)) tokens" \
    shard "$WORK/bad/x_train_000000.bin" "$WORK/p0" 20240520 1 $((count - 1))
truncate_shard() {
    shard "$WORK/bad/x_train_000000.bin" "$WORK/p0"
    truncate -s 1000 "$WORK/bad/x_train_000000.bin"
}
bad "shorter than a header" "it is 1000 bytes long, shorter than the 1024-byte header" truncate_shard
cut_shard() {
    shard "$WORK/bad/x_train_000000.bin" "$WORK/p0"
    truncate -s 20000 "$WORK/bad/x_train_000000.bin"
}
bad "truncated tokens" "its header counts $count tokens, $((1024 + 2 * count)) bytes with the header, but the file is 20000 bytes long: it is truncated" \
    cut_shard
expect_error "an id beyond the vocabulary names the shard and the byte offset" 1 \
    "$WORK/llmc/tiny_train_000000.bin: token " -- \
    run --set data.dir="$WORK/llmc" --set model.vocab_size=10 --set run.out_dir="$WORK/out-ids"
grep -qE "token [0-9]+ \(byte offset (10[2-9][0-9]|1[1-9][0-9]{2}|[2-9][0-9]{3}|[0-9]{5,})\)" "$WORK/stderr" &&
    pass "the byte offset counts the shard's header" || fail "byte offset: $(cat "$WORK/stderr")"
mkdir -p "$WORK/noval"
cp "$WORK/llmc/tiny_train_000000.bin" "$WORK/noval/"
expect_error "llm.c folder without val shards" 2 "holds no validation tokens" -- \
    run --set data.dir="$WORK/noval" --set run.out_dir="$WORK/out-noval"
finish
