#!/usr/bin/env bash
# Bad input: each case must fail before any work, with a message naming what is wrong.
source "$(dirname "$0")/lib.sh"
make_data
CFG="$WORK/good.ini"
write_config "$CFG"
train() { "$GEARBOX" train "$CFG" --set run.out_dir="$WORK/out-bad" "$@"; }

# plugins
expect_error "plugin file missing" 2 "cannot open plugin file /nonexistent/attn-x-cpu.so" -- \
    train --set attn.plugin=/nonexistent/attn-x-cpu.so
expect_error "no entry symbol" 2 "does not export the entry symbol gearbox_plugin_entry" -- \
    train --plugin-path "$FIXTURES" --set attn.plugin=noentry
expect_error "another ABI major" 2 "built for plugin ABI 2.0, but this gearbox speaks ABI 1.7" -- \
    train --plugin-path "$FIXTURES" --set attn.plugin=abi2
expect_error "wrong kind" 2 "its file name says attn/wrongkind but its descriptor says optim/wrongkind" -- \
    train --plugin-path "$FIXTURES" --set attn.plugin=wrongkind
expect_error "unknown plugin lists what exists" 2 "no such attn plugin (looked for attn-flsh-cpu.so or attn-flsh.so)" -- \
    train --set attn.plugin=flsh
expect_error "unknown plugin suggests the nearest" 2 "did you mean 'flash'?" -- \
    train --set attn.plugin=flsh
expect_error "unknown plugin shows found plugins" 2 "math ($GEARBOX_PLUGIN_PATH/attn/math/attn-math-cpu.so)" -- \
    train --set attn.plugin=flsh
expect_error "unknown plugin shows the search path" 2 "search path: $GEARBOX_PLUGIN_PATH" -- \
    train --set attn.plugin=flsh

# config syntax and schema
printf '[run]\nsteps = 5\nthis line is wrong\n' > "$WORK/syntax.ini"
expect_error "INI syntax error has file:line" 2 "$WORK/syntax.ini:3:" -- \
    "$GEARBOX" train "$WORK/syntax.ini"
cp "$CFG" "$WORK/section.ini"
printf '[modle]\nn_layer = 2\n' >> "$WORK/section.ini"
expect_error "unknown section" 2 "unknown section [modle]; did you mean [model]?" -- \
    "$GEARBOX" train "$WORK/section.ini"
cp "$CFG" "$WORK/key.ini"
sed -i 's/^n_layer = 2$/n_layr = 2/' "$WORK/key.ini"
expect_error "unknown key with did-you-mean" 2 "[model] unknown key 'n_layr'; did you mean 'n_layer'?" -- \
    "$GEARBOX" train "$WORK/key.ini"
expect_refusals train <<'CASES'
unknown plugin key with did-you-mean | [optim] unknown key 'beta3'; did you mean 'beta1'? | --set optim.beta3=0.9
wrong type | n_layer = 'four': expected an integer | --set model.n_layer=four
wrong type (float) | learning_rate = 'fast': expected a number | --set train.learning_rate=fast
out of range | learning_rate = 50: out of range [0, 10] | --set train.learning_rate=50
plugin key out of range | weight_decay = 100: out of range | --set optim.weight_decay=100
n_embd not a multiple of n_head | n_embd = 30 is not a multiple of n_head = 4 | --set model.n_embd=30 --set model.n_head=4
malformed --set | --set 'steps=5': expected section.key=value | --set steps=5
CASES

# data
expect_error "missing data folder" 2 "[data] dir = $WORK/nowhere: No such file or directory" -- \
    train --set data.dir="$WORK/nowhere"
mkdir -p "$WORK/noval"
cp "$WORK/data/vocab.txt" "$WORK/data/train.bin" "$WORK/noval/"
expect_error "missing val.bin" 2 "cannot read $WORK/noval/val.bin: No such file or directory" -- \
    train --set data.dir="$WORK/noval"
mkdir -p "$WORK/nothing"
expect_error "folder without token files" 2 "holds no training tokens: expected train.bin and val.bin" -- \
    train --set data.dir="$WORK/nothing"

# a refused run does no work
if [ -e "$WORK/out-bad" ]; then
    fail "a refused run created its out_dir"
else
    pass "refused runs created no out_dir"
fi

# ids are checked as windows are drawn (token files are mapped, not read whole), so this
# one is met at the first batch, with the file and the token's offset
expect_error "token id >= vocab size" 1 "data/train.bin: token " -- \
    train --set model.vocab_size=10
expect_error "token id >= vocab size names the vocabulary" 1 "but the vocabulary has 10 ids" -- \
    train --set model.vocab_size=10
finish
