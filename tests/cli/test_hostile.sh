#!/usr/bin/env bash
# Hostile input, each case a finding of the hardening review: what should be a file but is
# a folder or a named pipe, crafted checkpoints, a resume into a kill's leftovers,
# values whose products overflow, what `check` must refuse because `train` would, and
# messages that echo the file; then inputs as Unix users give them: pipes where a stream
# is enough, write errors, overwrites, empty splits and temperatures too small. Every case
# ends with a message naming the thing at fault, never with a hang (a pipe where a file is
# needed is refused unopened) or a run on bad state.
source "$(dirname "$0")/lib.sh"
make_data
CRAFT="$SRC/tests/cli/craft_checkpoint.py"
write_config "$WORK/run.ini" "checkpoint_every = 2"
sed -i 's/^steps = 20$/steps = 4/' "$WORK/run.ini"
"$GEARBOX" train "$WORK/run.ini" > "$WORK/train.log" 2>&1 ||
    { cat "$WORK/train.log"; fail "the run the checkpoint cases start from"; finish; }
CKPT="$WORK/out/ckpt-000002.gbk"
train() { timeout 60 "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/refused" "$@"; }
check() { timeout 60 "$GEARBOX" check "$WORK/run.ini" "$@"; }

# 2: a folder or a named pipe where a file belongs
for kind in folder pipe; do
    mkdir -p "$WORK/$kind"
    cp "$WORK/data/vocab.txt" "$WORK/data/val.bin" "$WORK/$kind/"
    if [ "$kind" = folder ]; then mkdir "$WORK/$kind/train.bin"; else mkfifo "$WORK/$kind/train.bin"; fi
done
expect_error "token file that is a folder" 2 "train.bin: it is a folder, not a file" -- \
    train --set data.dir="$WORK/folder"
expect_error "token file that is a named pipe" 2 "train.bin: it is a named pipe, not a regular file" -- \
    train --set data.dir="$WORK/pipe"
expect_error "--resume OUT_DIR takes its newest checkpoint" 2 "$WORK/out/ckpt-000004.gbk is at step 4; [run] steps = 4 leaves nothing to train" -- \
    train --resume "$WORK/out"
mkdir -p "$WORK/empty_out"
expect_error "--resume a folder without checkpoints" 2 "cannot read checkpoint $WORK/empty_out: it is a folder; name one of its checkpoints (it holds none)" -- \
    train --resume "$WORK/empty_out"
expect_error "--resume a named pipe" 2 "it is a named pipe" -- train --resume "$WORK/pipe/train.bin"
expect_error "prepare a folder" 1 "cannot read $WORK/folder: it is a folder, not a file" -- \
    timeout 60 "$GEARBOX" prepare "$WORK/folder" "$WORK/prepared"
expect_error "import a named pipe, at once" 1 "it is a named pipe, not a regular file, and this input must be a file" -- \
    timeout 10 "$GEARBOX" import "$WORK/pipe/train.bin" "$WORK/imported.gbk"

# 3 and 5: crafted checkpoints, checksummed so that only the damage is left to refuse
craft() { python3 "$CRAFT" "$CKPT" "$WORK/$1.gbk" "$2" "$3"; }
craft repeated dup CONF
craft nostep drop STEP
craft negative step -1
craft nan nan 5
craft wide conf "vocab_size = 0|vocab_size = 200"
head -c 5000 "$CKPT" > "$WORK/truncated.gbk"
expect_error "a repeated section" 2 "section 6 (CONF): it appears twice" -- \
    train --resume "$WORK/repeated.gbk"
expect_error "no step section" 2 "the STEP section (the step it was written at) is missing" -- \
    train --resume "$WORK/nostep.gbk"
expect_error "a negative step" 2 "section 2 (STEP): the step is negative" -- \
    train --resume "$WORK/negative.gbk"
expect_error "a non-finite parameter" 2 "nan.gbk: tensor wte holds 1 non-finite values (the first, element 5, is nan)" -- \
    train --resume "$WORK/nan.gbk"
expect_error "check CHECKPOINT refuses a non-finite parameter as sample would" 2 \
    "nan.gbk: tensor wte holds 1 non-finite values" -- timeout 60 "$GEARBOX" check "$WORK/nan.gbk"
expect_error "check CHECKPOINT refuses a truncated one" 2 "truncated.gbk: checksum mismatch" -- \
    timeout 60 "$GEARBOX" check "$WORK/truncated.gbk"
timeout 60 "$GEARBOX" check "$WORK/out" --set data.batch_size=2 > "$WORK/ck.txt" 2> "$WORK/ck.err" &&
    grep -q "^# checkpoint $WORK/out/ckpt-000004.gbk: step 4, \[optim\] plugin = adamw" "$WORK/ck.txt" &&
    grep -q "^# memory plan: " "$WORK/ck.txt" &&
    pass "check OUT_DIR describes its newest checkpoint" || fail "check OUT_DIR: $(cat "$WORK/ck.err")"
expect_error "sample refuses a checkpoint whose own vocabulary does not fit its model" 1 \
    "wide.gbk: its byte vocabulary holds 59 tokens, but the model has 200 ids ([model] vocab_size)" -- \
    timeout 60 "$GEARBOX" sample "$WORK/wide.gbk" --tokens 3
expect_error "resume with another n_head" 2 "--set model.n_head=1: [model] n_head = 1, but --resume $CKPT holds a model with n_head = 2" -- \
    train --resume "$CKPT" --set model.n_head=1

# 6: a kill's leftovers next to the checkpoints, and metrics after a resume
printf 'torn' > "$WORK/out/ckpt-000009.gbk.tmp"
cp "$CKPT" "$WORK/out/ckpt-000008.gbk.bak"
if "$GEARBOX" sample "$WORK/out" --tokens 5 > "$WORK/sample.txt" 2> "$WORK/sample.err"; then
    pass "sample OUT_DIR takes ckpt-000004.gbk, not a .tmp or .bak"
else
    fail "sample OUT_DIR with leftovers: $(cat "$WORK/sample.err")"
fi
"$GEARBOX" train "$WORK/run.ini" --resume "$CKPT" > "$WORK/resume.log" 2>&1 ||
    fail "resume into the same out_dir: $(cat "$WORK/resume.log")"
steps=$(grep -c '"loss"' "$WORK/out/metrics.jsonl")
unique=$(grep -o '^{"step": [0-9]*, "loss"' "$WORK/out/metrics.jsonl" | sort -u | wc -l)
summaries=$(grep -c '"summary"' "$WORK/out/metrics.jsonl")
[ "$steps" -eq 4 ] && [ "$unique" -eq 4 ] && [ "$summaries" -eq 1 ] &&
    pass "metrics.jsonl after a resume: one line per step (4) and one summary" ||
    fail "metrics.jsonl after a resume: $steps step lines, $unique distinct, $summaries summaries"

# 8: what train refuses or cannot do, check refuses too
touch "$WORK/a-file"
expect_refusals check <<CASES
check: out_dir under /proc | [run] out_dir = /proc/gearbox-out: a run could not write there | --set run.out_dir=/proc/gearbox-out
check: out_dir that is a file | out_dir = $WORK/a-file: a run could not write there: it is a file | --set run.out_dir=$WORK/a-file
check: a memory plan beyond the device | but the cpu device has | --set data.batch_size=1048576 --set model.block_size=1024 --set model.n_embd=512
check: eval_iters of 2^31 | [run] eval_iters = 2147483648: out of range | --set run.eval_iters=2147483648
check: tokens_per_step of 2^31 | [data] tokens_per_step = 2147483648 needs 33554432 micro-steps | --set data.tokens_per_step=2147483648
check: steps x micro-steps overflow | [run] steps = 8000000000000 with 1048576 gradient accumulation steps | --set run.steps=8000000000000 --set data.gradient_accumulation_steps=1048576
CASES

# init_from: check judges the checkpoint and the model as train does. The config below
# has no [model] section: a fine-tuning run's model is the checkpoint's.
printf '[run]\nsteps = 4\nthreads = 2\neval_every = 0\neval_iters = 2\n[data]\ndir = %s\n[train]\ninit_from = %s\n' \
    "$WORK/data" "$CKPT" > "$WORK/finetune.ini"
for verb in train check; do
    run_it() { timeout 60 "$GEARBOX" $verb "$WORK/finetune.ini" --set run.out_dir="$WORK/refused" "$@"; }
    expect_error "$verb: a truncated init_from checkpoint" 2 \
        "[train] init_from = $WORK/truncated.gbk: not a readable checkpoint" -- \
        run_it --set train.init_from="$WORK/truncated.gbk"
    expect_error "$verb: an init_from checkpoint holding NaN" 2 \
        "nan.gbk: tensor wte holds 1 non-finite values" -- \
        run_it --set train.init_from="$WORK/nan.gbk"
    expect_error "$verb: a [model] key that disagrees with init_from's model" 2 \
        "--set model.n_embd=16: [model] n_embd = 16, but [train] init_from = $CKPT holds a model with n_embd = 32" -- \
        run_it --set model.n_embd=16
    expect_error "$verb: a vocab_size the data's vocab.txt does not fit" 2 \
        "its vocab.txt holds 59 tokens, but the model has only 8 ids ([model] vocab_size)" -- \
        timeout 60 "$GEARBOX" $verb "$WORK/run.ini" --set run.out_dir="$WORK/refused" --set model.vocab_size=8
done
timeout 60 "$GEARBOX" check "$WORK/finetune.ini" > "$WORK/ft_check.txt" 2>&1 &&
    timeout 60 "$GEARBOX" train "$WORK/finetune.ini" --set run.out_dir="$WORK/ft" > "$WORK/ft.log" 2>&1 &&
    grep -qx "n_embd = 32" "$WORK/ft_check.txt" &&
    pass "a fine-tune config without [model] passes check and trains" ||
    fail "fine-tune without [model]: $(tail -3 "$WORK/ft_check.txt" "$WORK/ft.log")"
mv "$CKPT" "$WORK/moved.gbk"   # a resumed run needs no init_from: the model is --resume's
timeout 60 "$GEARBOX" train "$WORK/finetune.ini" --set run.out_dir="$WORK/ft" --set run.steps=6 \
    --resume "$WORK/ft" > "$WORK/ft.log" 2>&1 && grep -q "resumed from $WORK/ft/ckpt-000004.gbk at step 4" "$WORK/ft.log" &&
    pass "--resume OUT_DIR of a config without [model] takes the checkpoint's model, init_from gone" ||
    fail "resume without [model]: $(tail -3 "$WORK/ft.log")"
mv "$WORK/moved.gbk" "$CKPT"

# 9: messages
printf '[run]\nsteps = 5\x1b[2J\x07\n' > "$WORK/control.ini"
"$GEARBOX" check "$WORK/control.ini" > /dev/null 2> "$WORK/control.err"
if grep -q $'\x1b' "$WORK/control.err"; then
    fail "a control byte of the file reached the terminal: $(od -c "$WORK/control.err" | head -3)"
else
    grep -qF "steps = '5\x1b[2J\x07'" "$WORK/control.err" &&
        pass "control bytes are shown escaped ($(head -c 120 "$WORK/control.err"))" ||
        fail "control bytes: $(cat "$WORK/control.err")"
fi
printf '[run]\rsteps = 5\r\rsteps_typo = 1\r' > "$WORK/cr.ini"
expect_error "CR-only line endings: the line is found" 2 "cr.ini:4: [run] unknown key 'steps_typo'" -- \
    "$GEARBOX" check "$WORK/cr.ini"
mkdir -p "$WORK/odd"
cp "$WORK/data/vocab.txt" "$WORK/data/train.bin" "$WORK/odd/"
head -c 1001 "$WORK/data/val.bin" > "$WORK/odd/val.bin"
expect_error "odd-length token file" 2 "val.bin holds 1001 bytes, an odd number: token files hold 2-byte ids" -- \
    train --set data.dir="$WORK/odd"
expect_error "sample --tokens 1.5" 2 "--tokens 1.5: expected a whole number" -- \
    "$GEARBOX" sample "$WORK/out" --tokens 1.5
expect_error "sample --tokens 0x10" 2 "--tokens 0x10: expected a whole number" -- \
    "$GEARBOX" sample "$WORK/out" --tokens 0x10
expect_error "sample -x" 2 "unknown option -x" -- "$GEARBOX" sample "$WORK/out" -x
expect_error "ab variant that sets run.steps" 2 "--variant fast: run.steps=5: \`gearbox ab\` sets run.steps for every run itself" -- \
    "$GEARBOX" ab "$WORK/run.ini" --variant base: --variant fast:run.steps=5 --steps 4 --warmup 1

# pipes and the standard input where a stream is enough
TEXT="$WORK/tiny.txt"
VOCAB="$SRC/tests/tokenizer/fixture"
for how in "<(cat)" "-" "/dev/stdin"; do
    case $how in
        "<(cat)") timeout 60 "$GEARBOX" prepare <(cat "$TEXT") "$WORK/piped" ;;
        *) timeout 60 "$GEARBOX" prepare "$how" "$WORK/piped" < <(cat "$TEXT") ;;
    esac > "$WORK/piped.log" 2>&1 &&
        cmp -s "$WORK/piped/train.bin" "$WORK/data/train.bin" &&
        cmp -s "$WORK/piped/val.bin" "$WORK/data/val.bin" &&
        pass "prepare $how: the token files of the file itself" ||
        fail "prepare $how: $(cat "$WORK/piped.log")"
    rm -rf "$WORK/piped"
done
want=$("$GEARBOX" encode --vocab "$VOCAB" --input "$TEXT")
[ "$(timeout 60 "$GEARBOX" encode --vocab "$VOCAB" --input <(cat "$TEXT"))" = "$want" ] &&
    [ "$(cat "$TEXT" | timeout 60 "$GEARBOX" encode --vocab "$VOCAB" --input /dev/stdin)" = "$want" ] &&
    pass "encode --input <(...) and --input /dev/stdin read the pipe" ||
    fail "encode from a pipe"
[ "$(echo "$want" | timeout 60 "$GEARBOX" decode --vocab "$VOCAB" --input /dev/stdin)" = "$(cat "$TEXT")" ] &&
    pass "decode --input /dev/stdin reads the pipe" || fail "decode from a pipe"
expect_error "--resume a pipe says a file is needed and why" 2 "must be a file that can be sized and read again" -- \
    train --resume <(cat "$CKPT")

# write errors: a full disk, a closed pipe
expect_write_errors "sample" "$GEARBOX" sample "$WORK/out" --tokens 200
expect_write_errors "check" "$GEARBOX" check "$WORK/run.ini"
expect_write_errors "encode" "$GEARBOX" encode --vocab "$VOCAB" --input "$TEXT"
expect_write_errors "decode" "$GEARBOX" decode --vocab "$VOCAB" 40 41 42
expect_write_errors "plugins" "$GEARBOX" plugins
expect_write_errors "prepare's summary" "$GEARBOX" prepare "$TEXT" "$WORK/prepared-full"
expect_write_errors "import's summary" "$GEARBOX" import --force "$SRC/tests/weights/fixtures/gpt2_tiny" "$WORK/full.gbk"
expect_write_errors "--help" "$GEARBOX" sample --help
expect_error "encode --output /dev/full" 1 "cannot write /dev/full: No space left on device" -- \
    "$GEARBOX" encode --vocab "$VOCAB" --input "$TEXT" --output /dev/full

# what would be lost or ignored
expect_ok "import into a new checkpoint" "$GEARBOX" import "$SRC/tests/weights/fixtures/gpt2_tiny" "$WORK/imp.gbk"
expect_error "import over an existing checkpoint" 1 "$WORK/imp.gbk exists; pass --force to overwrite it" -- \
    "$GEARBOX" import "$SRC/tests/weights/fixtures/gpt2_tiny" "$WORK/imp.gbk"
expect_ok "import --force overwrites" "$GEARBOX" import --force "$SRC/tests/weights/fixtures/gpt2_tiny" "$WORK/imp.gbk"
mkfifo "$WORK/imp.fifo"   # a stand-in for /dev/null, which a rename would replace
expect_error "import --force over a named pipe" 1 "CHECKPOINT $WORK/imp.fifo is a device, pipe or socket, which the checkpoint would replace; name a file" -- \
    timeout 10 "$GEARBOX" import --force "$SRC/tests/weights/fixtures/gpt2_tiny" "$WORK/imp.fifo"
[ -p "$WORK/imp.fifo" ] && pass "the named pipe is left in place" || fail "import replaced a named pipe"
expect_error "sample --vocab for a byte-level model" 1 "holds a model of byte tokens, whose vocabulary it carries; --vocab is for GPT-2 BPE models: drop it" -- \
    "$GEARBOX" sample "$WORK/out" --tokens 2 --vocab "$VOCAB"
printf 'a' > "$WORK/one-byte.txt"
expect_error "prepare: an empty train split" 1 "one-byte.txt gives the train split no tokens (train 0, val 1" -- \
    "$GEARBOX" prepare "$WORK/one-byte.txt" "$WORK/prepared-empty"
printf 'ab\xc3\xa9' > "$WORK/short.txt"   # the cut at 90% moves past the last character
expect_error "prepare gpt2: an empty val split" 1 "short.txt gives the val split no tokens (train 4, val 0" -- \
    "$GEARBOX" prepare --tokenizer gpt2 --vocab "$VOCAB" "$WORK/short.txt" "$WORK/prepared-empty"
[ -e "$WORK/prepared-empty" ] && fail "a refused prepare wrote its folder" ||
    pass "a refused prepare wrote nothing"
expect_error "sample --temperature 1e-38" 2 "--temperature 1e-38: too small to compute with (the logits divided by it overflow); the smallest is 1e-30, or 0 for greedy" -- \
    "$GEARBOX" sample "$WORK/out" --temperature 1e-38
expect_ok "sample --temperature 1e-30" "$GEARBOX" sample "$WORK/out" --tokens 5 --temperature 1e-30
expect_ok "sample --temperature 0" "$GEARBOX" sample "$WORK/out" --tokens 5 --temperature 0
finish
