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

# GPT-2's ids are BPE tokens: sample asks for the vocabulary that decodes them
expect_error "sample from an imported checkpoint asks for --vocab" 1 "pass --vocab PATH" -- \
    "$GEARBOX" sample "$WORK/padded.gbk" --tokens 20 --prompt "ab"
"$GEARBOX" sample "$WORK/padded.gbk" --tokens 20 --prompt "ab" \
    --vocab "$SRC/tests/tokenizer/fixture" > "$WORK/sample.txt" 2>&1
if grep -q "unavailable" "$WORK/sample.txt"; then
    echo "skipped: sampling with --vocab (this build has no PCRE2, so no GPT-2 tokenizer)"
elif head -c 2 "$WORK/sample.txt" | grep -qx "ab"; then
    pass "sample from an imported checkpoint with --vocab"
else
    fail "sample --vocab: $(cat "$WORK/sample.txt")"
fi

# Fine-tuning: the imported model's shape, data of ids below 200, 3 steps.
make_data
cat > "$WORK/finetune.ini" <<INI
[run]
steps = 3
out_dir = $WORK/ft
threads = 2
log_every = 1
eval_every = 0
eval_iters = 2
[model]
n_layer = 2
n_head = 4
n_embd = 64
block_size = 32
vocab_size = 200
padded_vocab_size = 256
bias = true
gelu = tanh
[data]
dir = $WORK/data
batch_size = 2
[train]
init_from = $WORK/padded.gbk
learning_rate = 1e-4
$(device_section)
INI
"$GEARBOX" train "$WORK/finetune.ini" > "$WORK/ft.log" 2>&1 &&
    grep -q "weights from $WORK/padded.gbk (\[train\] init_from; fresh optimizer, step 0)" \
        "$WORK/ft.log" && [ -f "$WORK/ft/ckpt-000003.gbk" ] &&
    pass "fine-tune 3 steps from the imported weights" || fail "fine-tune: $(tail -5 "$WORK/ft.log")"
expect_error "init_from refuses another model shape" 2 "[model] gelu = tanh, this config says erf" -- \
    "$GEARBOX" train "$WORK/finetune.ini" --set model.gelu=erf
expect_error "--resume of an imported checkpoint points at init_from" 2 "[train] init_from instead" -- \
    "$GEARBOX" train "$WORK/finetune.ini" --resume "$WORK/padded.gbk"
expect_error "check refuses a missing init_from" 2 "[train] init_from = $WORK/none.gbk: not a readable" -- \
    "$GEARBOX" check "$WORK/finetune.ini" --set train.init_from="$WORK/none.gbk"

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

# The GPT-2 examples: a memory plan even where their CUDA device and data are not.
for ini in gpt2_124m gpt2_finetune; do
    "$GEARBOX" check "$SRC/examples/$ini.ini" --set run.out_dir="$WORK/out_$ini" \
        > "$WORK/check.txt" 2> "$WORK/check.err"
    grep -q "^# memory plan: .* MiB = params" "$WORK/check.txt" &&
        pass "check examples/$ini.ini prints the memory plan" ||
        fail "check $ini: $(cat "$WORK/check.txt" "$WORK/check.err")"
done
finish
