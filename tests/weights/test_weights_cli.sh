#!/usr/bin/env bash
# `gearbox import`, `export`, fine-tuning with [train] init_from and sampling, end to end
# on the fixtures of make_fixtures.py, and `gearbox check` on the GPT-2 examples.
# usage: test_weights_cli.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
source "$3/tests/cli/lib.sh"

"$GEARBOX" import "$FIXTURES/gpt2_tiny" "$WORK/hf.gbk" > "$WORK/import.txt" 2>&1 &&
    grep -q "114944 parameters .* vocab 200 (200 rows), bias true, gelu tanh" "$WORK/import.txt" &&
    pass "import a Hugging Face folder" || fail "import HF: $(cat "$WORK/import.txt")"
"$GEARBOX" import "$FIXTURES/gpt2_tiny/model.safetensors" "$WORK/padded.gbk" \
    --padded-vocab-size 256 > "$WORK/import.txt" 2>&1 &&
    grep -q "vocab 200 (256 rows)" "$WORK/import.txt" &&
    pass "import model.safetensors, padded to 256 rows" || fail "import padded: $(cat "$WORK/import.txt")"
"$GEARBOX" import "$FIXTURES/gpt2_tiny_llmc.bin" "$WORK/llmc.gbk" > "$WORK/import.txt" 2>&1 &&
    grep -q "vocab 200 (256 rows)" "$WORK/import.txt" &&
    pass "import llm.c's .bin" || fail "import llm.c: $(cat "$WORK/import.txt")"
expect_error "import refuses a padding below the vocabulary" 1 "smaller than the vocabulary" -- \
    "$GEARBOX" import "$FIXTURES/gpt2_tiny" "$WORK/x.gbk" --padded-vocab-size 100

# GPT-2's ids are BPE tokens: sample asks for the vocabulary that decodes them, and
# refuses one that does not fit the model (the fixture's 557 tokens on 200 ids).
TOKENIZER="$SRC/tests/tokenizer/fixture"
expect_error "sample from an imported checkpoint asks for --vocab" 1 "pass --vocab PATH" -- \
    "$GEARBOX" sample "$WORK/padded.gbk" --tokens 20 --prompt "ab"
expect_error "sample refuses a vocabulary of more tokens than the model has ids" 1 \
    "--vocab $TOKENIZER holds 557 tokens, but the model has only 200 ids ([model] vocab_size)" -- \
    "$GEARBOX" sample "$WORK/padded.gbk" --tokens 20 --prompt "ab" --vocab "$TOKENIZER"

# Fine-tuning: the config names the checkpoint, data of ids below 200 (nanoGPT's layout:
# token files without a vocab.txt) and the run; the model is the checkpoint's.
make_data
mkdir "$WORK/ids"
cp "$WORK/data/train.bin" "$WORK/data/val.bin" "$WORK/ids/"
cat > "$WORK/finetune.ini" <<INI
[run]
steps = 3
out_dir = $WORK/ft
threads = 2
log_every = 1
eval_every = 0
eval_iters = 2
[data]
dir = $WORK/ids
batch_size = 2
[train]
init_from = $WORK/padded.gbk
learning_rate = 1e-4
$(device_section)
INI
"$GEARBOX" train "$WORK/finetune.ini" > "$WORK/ft.log" 2>&1 &&
    grep -q "weights from $WORK/padded.gbk (\[train\] init_from; fresh optimizer, step 0)" \
        "$WORK/ft.log" && [ -f "$WORK/ft/ckpt-000003.gbk" ] &&
    pass "fine-tune 3 steps from the imported weights, the config without [model]" ||
    fail "fine-tune: $(tail -5 "$WORK/ft.log")"
"$GEARBOX" check "$WORK/finetune.ini" > "$WORK/check.txt" 2> "$WORK/check.err" &&
    grep -qx "gelu = tanh" "$WORK/check.txt" && grep -qx "padded_vocab_size = 256" "$WORK/check.txt" &&
    pass "check takes the model from init_from as train does" ||
    fail "check of the fine-tune config: $(cat "$WORK/check.err")"
"$GEARBOX" check "$WORK/padded.gbk" > "$WORK/check.txt" 2> "$WORK/check.err" &&
    grep -q "^# 118528 parameters | n_layer 2, n_head 4, n_embd 64, block_size 32, vocab 200 (256 rows), bias true, gelu tanh" "$WORK/check.txt" &&
    grep -q "^# memory plan: .* MiB = params" "$WORK/check.txt" &&
    grep -q "^# checkpoint $WORK/padded.gbk: step 0, weights only" "$WORK/check.txt" &&
    "$GEARBOX" check "$WORK/ft" > "$WORK/check.txt" 2> "$WORK/check.err" &&
    grep -q "^# checkpoint $WORK/ft/ckpt-000003.gbk: step 3, \[optim\] plugin = adamw" "$WORK/check.txt" &&
    pass "check CHECKPOINT (or an out_dir) prints its shape, parameters and memory plan" ||
    fail "check CHECKPOINT: $(cat "$WORK/check.txt" "$WORK/check.err")"
# The INI's [model] keys agree with the checkpoint's (bias = yes is true) or are refused.
sed -i 's/^\[train\]$/[model]\nbias = yes\ngelu = erf\n[train]/' "$WORK/finetune.ini"
for verb in train check; do
    expect_error "$verb: an INI key that disagrees with init_from names both values, file:line and key" 2 \
        "$WORK/finetune.ini:13: [model] gelu = erf, but [train] init_from = $WORK/padded.gbk holds a model with gelu = tanh" -- \
        "$GEARBOX" $verb "$WORK/finetune.ini"
    expect_error "$verb: ... and so does --set" 2 \
        "--set model.n_layer=3: [model] n_layer = 3, but [train] init_from = $WORK/padded.gbk holds a model with n_layer = 2" -- \
        "$GEARBOX" $verb "$WORK/finetune.ini" --set model.gelu=tanh --set model.n_layer=3
    expect_error "$verb: byte data of fewer tokens than the init_from model's ids" 2 \
        "[data] dir = $WORK/data: its vocab.txt holds 59 tokens, but the model has 200 ids ([model] vocab_size)" -- \
        "$GEARBOX" $verb "$WORK/finetune.ini" --set model.gelu=tanh --set data.dir="$WORK/data"
    expect_error "$verb: GPT-2 data of more tokens than the model's ids" 2 \
        "its GPT-2 vocabulary $TOKENIZER holds 557 tokens, but the model has only 200 ids" -- \
        "$GEARBOX" $verb "$WORK/finetune.ini" --set model.gelu=tanh --set data.vocab="$TOKENIZER"
done
sed -i '/^gelu = erf$/d' "$WORK/finetune.ini"
expect_error "--resume of an imported checkpoint points at init_from" 2 "[train] init_from instead" -- \
    "$GEARBOX" train "$WORK/finetune.ini" --resume "$WORK/padded.gbk"
expect_error "check refuses a missing init_from" 2 "[train] init_from = $WORK/none.gbk: not a readable checkpoint" -- \
    "$GEARBOX" check "$WORK/finetune.ini" --set train.init_from="$WORK/none.gbk"

# Models of GPT-2 tokens trained here: of as many ids as the fixture's vocabulary has
# tokens (557), and of many more (1000); sample fits the vocabulary to each.
for ids in 557 1000; do
    "$GEARBOX" train "$WORK/finetune.ini" --set train.init_from= --set model.bias=false \
        --set model.vocab_size=$ids --set model.padded_vocab_size=0 --set model.n_layer=1 \
        --set run.out_dir="$WORK/v$ids" > "$WORK/v$ids.log" 2>&1 ||
        fail "train a model of $ids ids: $(tail -3 "$WORK/v$ids.log")"
done
"$GEARBOX" sample "$WORK/v557" --tokens 20 --prompt "ab" --vocab "$TOKENIZER" > "$WORK/sample.txt" 2>&1
if grep -q "unavailable" "$WORK/sample.txt"; then
    echo "skipped: sampling with --vocab (this build has no PCRE2, so no GPT-2 tokenizer)"
elif head -c 2 "$WORK/sample.txt" | grep -qx "ab"; then
    pass "sample a model of GPT-2 tokens with --vocab"
else
    fail "sample --vocab: $(cat "$WORK/sample.txt")"
fi
expect_error "sample refuses a vocabulary of far fewer tokens than the model has ids" 1 \
    "--vocab $TOKENIZER holds 557 tokens, but the model has 1000 ids ([model] vocab_size), more than those tokens padded up to a multiple of 128 (640)" -- \
    "$GEARBOX" sample "$WORK/v1000" --tokens 20 --prompt "ab" --vocab "$TOKENIZER"

# Export the fine-tuned run both ways, and import it back.
"$GEARBOX" export "$WORK/ft" "$WORK/ft_hf" > "$WORK/export.txt" 2>&1 &&
    grep -q '"activation_function": "gelu_new"' "$WORK/ft_hf/config.json" &&
    "$GEARBOX" import "$WORK/ft_hf" "$WORK/back.gbk" --padded-vocab-size 256 > /dev/null 2>&1 &&
    pass "export a run to Hugging Face and import it again" || fail "export hf: $(cat "$WORK/export.txt")"
"$GEARBOX" export "$WORK/ft/ckpt-000003.gbk" "$WORK/ft.bin" --format llm.c > "$WORK/export.txt" 2>&1 &&
    "$GEARBOX" import "$WORK/ft.bin" "$WORK/back_llmc.gbk" > /dev/null 2>&1 &&
    pass "export a checkpoint to llm.c and import it again" || fail "export llm.c: $(cat "$WORK/export.txt")"
write_config "$WORK/nobias.ini"
"$GEARBOX" train "$WORK/nobias.ini" --set run.steps=1 --set run.out_dir="$WORK/nb" > /dev/null 2>&1
expect_error "export refuses a model without biases" 1 "bias = false" -- \
    "$GEARBOX" export "$WORK/nb" "$WORK/nb_hf"
expect_error "export names its formats" 2 "expected hf or llm.c" -- \
    "$GEARBOX" export "$WORK/nb" "$WORK/nb_hf" --format onnx

# Import's edges: the output folder, llm.c's magic first, each refusal with its fix.
"$GEARBOX" import "$FIXTURES/gpt2_tiny" "$WORK/new/deeper/" > "$WORK/import.txt" 2>&1 &&
    [ -f "$WORK/new/deeper/ckpt-000000.gbk" ] &&
    "$GEARBOX" import "$FIXTURES/gpt2_tiny" "$WORK/made/x.gbk" > /dev/null 2>&1 &&
    [ -f "$WORK/made/x.gbk" ] &&
    pass "import creates its output folders (a path ending in / holds ckpt-000000.gbk)" ||
    fail "import into a new folder: $(cat "$WORK/import.txt")"
printf '\x88\xd8\x34\x01\x01\x00\x00\x00' > "$WORK/shard.bin"   # 20240520: llm.c's token data
head -c 2000 /dev/zero >> "$WORK/shard.bin"
expect_error "import names an llm.c token file by its magic" 1 \
    "shard.bin is llm.c's token data (a shard of dev/data: ids, no weights), not a model: import takes llm.c's gpt2_124M.bin" -- \
    "$GEARBOX" import "$WORK/shard.bin" "$WORK/x.gbk"
head -c 2000 /dev/zero > "$WORK/zeros.bin"
expect_error "import says a .bin's magic is not llm.c's model's, not 'not safetensors'" 1 \
    "zeros.bin: magic 0: not llm.c's model file (magic 20240326): give llm.c's gpt2_124M.bin" -- \
    "$GEARBOX" import "$WORK/zeros.bin" "$WORK/x.gbk"
cp "$FIXTURES/gpt2_tiny_llmc.bin" "$WORK/v9.bin"
printf '\x09' | dd of="$WORK/v9.bin" bs=1 seek=4 conv=notrunc 2> /dev/null   # version 9
expect_error "import names an llm.c version it does not read, and which it does" 1 \
    "llm.c model file of version 9; gearbox reads version 3 (f32, gpt2_124M.bin) and 5" -- \
    "$GEARBOX" import "$WORK/v9.bin" "$WORK/x.gbk"
cp "$FIXTURES/gpt2_tiny_llmc.bin" "$WORK/heads.bin"
printf '\x07' | dd of="$WORK/heads.bin" bs=1 seek=20 conv=notrunc 2> /dev/null   # NH 7
expect_error "import's llm.c header check names the one condition that fails" 1 \
    "header: the width C 64 is not a multiple of the head count NH 7" -- \
    "$GEARBOX" import "$WORK/heads.bin" "$WORK/x.gbk"
cp "$FIXTURES/gpt2_tiny_llmc.bin" "$WORK/vp.bin"
printf '\x64\x00' | dd of="$WORK/vp.bin" bs=1 seek=28 conv=notrunc 2> /dev/null   # Vp 100
expect_error "... and the padded vocabulary apart" 1 \
    "header: the padded vocabulary Vp 100 is below the vocabulary V 200" -- \
    "$GEARBOX" import "$WORK/vp.bin" "$WORK/x.gbk"
expect_error "import refuses a padding for llm.c's file, saying to drop it" 1 \
    "gives its padding itself: drop --padded-vocab-size" -- \
    "$GEARBOX" import "$FIXTURES/gpt2_tiny_llmc.bin" "$WORK/x.gbk" --padded-vocab-size 300
: > "$WORK/empty.safetensors"
expect_error "a safetensors refusal says what to give" 1 \
    "is not a safetensors file: shorter than the 8-byte header length; give a model.safetensors" -- \
    "$GEARBOX" import "$WORK/empty.safetensors" "$WORK/x.gbk"
"$GEARBOX" train "$WORK/nobias.ini" --set run.steps=1 --set run.out_dir="$WORK/bytes" \
    --set model.bias=true > /dev/null 2>&1
"$GEARBOX" export "$WORK/hf.gbk" "$WORK/hf_again" > /dev/null 2>&1 &&
    "$GEARBOX" export "$WORK/bytes" "$WORK/bytes_hf" > /dev/null 2>&1 &&
    grep -q '"bos_token_id": 199' "$WORK/hf_again/config.json" &&
    grep -q '"eos_token_id": 199' "$WORK/hf_again/config.json" &&
    grep -q '"bos_token_id": null' "$WORK/bytes_hf/config.json" &&
    pass "export writes bos/eos_token_id: <|endoftext|> (the last id) for GPT-2 tokens, null for bytes" ||
    fail "export's bos/eos: $(cat "$WORK/hf_again/config.json" "$WORK/bytes_hf/config.json")"

# --vocab and prepare's OUTDIR where the other kind of path was meant.
expect_error "--vocab at encoder.json asks for its folder" 1 \
    "encoder.json is one of GPT-2's two vocabulary files: give the folder that holds encoder.json and vocab.bpe ($SRC/tests/tokenizer/fixture)" -- \
    "$GEARBOX" sample "$WORK/hf.gbk" --vocab "$SRC/tests/tokenizer/fixture/encoder.json"
touch "$WORK/a_file"
expect_error "prepare's OUTDIR that is a file asks for a folder" 1 \
    "OUTDIR $WORK/a_file is a file, but prepare writes train.bin and val.bin into a folder: give the path of a folder" -- \
    "$GEARBOX" prepare "$SRC/examples/data/tinyshakespeare.txt" "$WORK/a_file"

# Greedy decoding is --top-k 1 whatever the seed; a seed repeats its sample.
sample() { "$GEARBOX" sample "$WORK/v557" --vocab "$TOKENIZER" --prompt ab --tokens 24 "$@" 2> /dev/null; }
greedy=$(sample --temperature 0 --seed 1)
topk1=$(sample --top-k 1 --seed 2)
[ -n "$greedy" ] && [ "$greedy" = "$topk1" ] &&
    pass "sample --temperature 0 equals --top-k 1 (greedy)" ||
    fail "greedy: '$greedy' vs top-k 1: '$topk1'"
[ "$(sample --seed 5 --top-k 0 --temperature 2)" = "$(sample --seed 5 --top-k 0 --temperature 2)" ] &&
    [ "$(sample --seed 5 --top-k 0 --temperature 2)" != "$(sample --seed 6 --top-k 0 --temperature 2)" ] &&
    pass "sample --seed repeats its text, another seed gives another" ||
    fail "sample --seed: $(sample --seed 5 --top-k 0 --temperature 2)"
"$GEARBOX" sample "$WORK/v557" --vocab "$TOKENIZER" --prompt "" --tokens 5 > "$WORK/sample.txt" 2>&1 &&
    pass "an empty prompt starts from <|endoftext|>" || fail "empty prompt: $(cat "$WORK/sample.txt")"

# The GPT-2 examples: a memory plan even where their CUDA device and data are not.
for ini in gpt2_124m gpt2_finetune; do
    "$GEARBOX" check "$SRC/examples/$ini.ini" --set run.out_dir="$WORK/out_$ini" \
        > "$WORK/check.txt" 2> "$WORK/check.err"
    grep -q "^# memory plan: .* MiB = params" "$WORK/check.txt" &&
        pass "check examples/$ini.ini prints the memory plan" ||
        fail "check $ini: $(cat "$WORK/check.txt" "$WORK/check.err")"
done
finish
