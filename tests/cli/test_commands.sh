#!/usr/bin/env bash
# The other verbs: plugins, plugins show, check, prepare's split, sample, --help.
source "$(dirname "$0")/lib.sh"
make_data

"$GEARBOX" plugins > "$WORK/plugins.txt" 2>&1 || fail "gearbox plugins exited non-zero"
for row in "device +cpu" "attn +math" "optim +adamw" "precision +fp32" "comm +single"; do
    grep -qE "^$row " "$WORK/plugins.txt" && pass "plugins lists $row" ||
        fail "plugins does not list $row: $(cat "$WORK/plugins.txt")"
done
n_files=$(find "$GEARBOX_PLUGIN_PATH" -name '*.so' | wc -l)
[ "$(tail -n +2 "$WORK/plugins.txt" | wc -l)" -eq "$n_files" ] &&
    pass "plugins lists every one of the $n_files plugin files" ||
    fail "expected $n_files plugins: $(cat "$WORK/plugins.txt")"
"$GEARBOX" plugins show adamw > "$WORK/show.txt" 2>&1
grep -qE "^    beta2 +float +default 0.95" "$WORK/show.txt" && pass "plugins show adamw: beta2" ||
    fail "plugins show adamw: $(cat "$WORK/show.txt")"
"$GEARBOX" plugins attn | grep -q "math" && pass "plugins attn" || fail "plugins attn"
expect_error "plugins show unknown" 1 "no plugin named 'nope'" -- "$GEARBOX" plugins show nope

"$GEARBOX" check "$SRC/examples/shakespeare_char.ini" --set data.dir="$WORK/data" \
    > "$WORK/check.txt" 2> "$WORK/check.err" && pass "check examples/shakespeare_char.ini exits 0" ||
    fail "check examples/shakespeare_char.ini: $(cat "$WORK/check.err")"
grep -q "^beta2 = 0.99$" "$WORK/check.txt" && grep -q "^eps = 1e-08$" "$WORK/check.txt" &&
    pass "check prints the effective config with defaults" || fail "check output: $(cat "$WORK/check.txt")"

grep -q "^# memory plan: .* MiB = params .* + grads .* + optimizer .* + activations .* + workspace" \
    "$WORK/check.txt" && pass "check prints the memory plan" || fail "check lacks the memory plan"
"$GEARBOX" check "$SRC/examples/shakespeare_char.ini" --set data.dir="$WORK/data" \
    --set attn.plugin=auto > "$WORK/auto.txt" 2>&1 || fail "check with attn auto: $(cat "$WORK/auto.txt")"
n_attn=$("$GEARBOX" plugins attn | tail -n +2 | awk '$4 ~ /cpu/' | wc -l)
n_passed=$(grep -c "^attn auto:   passed over " "$WORK/auto.txt")
grep -q "^attn auto: chose [a-z_]* for B 12, heads 4, T 64, head_dim 32, f32: forward+backward" \
    "$WORK/auto.txt" && [ "$n_passed" -eq $((n_attn - 1)) ] &&
    pass "attn auto names its choice and why each of the other $n_passed was passed over" ||
    fail "attn auto report: $(cat "$WORK/auto.txt")"

vocab=$(($(wc -l < "$WORK/data/vocab.txt") - 1))
train_bytes=$(stat -c %s "$WORK/data/train.bin")
val_bytes=$(stat -c %s "$WORK/data/val.bin")
[ "$train_bytes" -eq 90000 ] && [ "$val_bytes" -eq 10000 ] &&
    pass "prepare: 90/10 split of 50000 characters, vocab $vocab" ||
    fail "prepare split: train $train_bytes bytes, val $val_bytes bytes"

write_config "$WORK/run.ini"
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/out" > "$WORK/train.log" 2>&1 ||
    fail "train: $(cat "$WORK/train.log")"
grep -q '"val_loss"' "$WORK/out/metrics.jsonl" && pass "metrics.jsonl has val_loss" ||
    fail "metrics.jsonl lacks val_loss"
grep -q '"step": 20, "loss": .*"lr": .*"ms": .*"tokens_per_s"' "$WORK/out/metrics.jsonl" &&
    pass "metrics.jsonl has step, loss, lr, ms, tokens_per_s" || fail "metrics.jsonl fields"
"$GEARBOX" sample "$WORK/out" --tokens 40 --prompt "ROMEO:" > "$WORK/sample.txt" \
    2> "$WORK/sample.err" || fail "sample: $(cat "$WORK/sample.err")"
chars=$(head -c -1 "$WORK/sample.txt" | wc -c)
[ "$chars" -eq 46 ] && head -c 6 "$WORK/sample.txt" | grep -q "ROMEO:" &&
    pass "sample prints the prompt and 40 tokens" || fail "sample output ($chars bytes): $(cat "$WORK/sample.txt")"
"$GEARBOX" sample "$WORK/out" --tokens 40 --prompt "ROMEO:" > "$WORK/sample2.txt" 2> /dev/null
cmp -s "$WORK/sample.txt" "$WORK/sample2.txt" && pass "sample is reproducible for a seed" ||
    fail "sample differs between runs with one seed"
expect_error "sample prompt outside the vocabulary" 1 "is not in the model's vocabulary" -- \
    "$GEARBOX" sample "$WORK/out" --prompt "~~~€"

for verb in train check prepare sample plugins; do
    "$GEARBOX" "$verb" --help | grep -q "^usage: gearbox $verb" && pass "$verb --help" ||
        fail "$verb --help"
done
# The verbs that parse with the option tables (tools/cli/options.h): a bad option names
# the verb and the option, and says where the options are listed.
for verb in train check ab doctor plugins test-plugin new-plugin "bench attn" "bench optim" \
    "bench matmul" "bench step"; do
    # shellcheck disable=SC2086
    expect_error "$verb --bogus" 2 "gearbox $verb: unknown option --bogus" -- "$GEARBOX" $verb --bogus
    grep -qF "(see \`gearbox $verb --help\`)" "$WORK/stderr" || fail "$verb --bogus: no pointer to --help"
    # shellcheck disable=SC2086
    "$GEARBOX" $verb --help | grep -q "^usage: gearbox $verb" && pass "$verb --help" ||
        fail "$verb --help"
done
expect_error "a missing value" 2 "gearbox train: option --resume needs a value: --resume CHECKPOINT" -- \
    "$GEARBOX" train "$WORK/run.ini" --resume
expect_error "gearbox itself" 2 "gearbox: unknown option --bogus" -- "$GEARBOX" --bogus
# ---- threads unset: auto, its first trial (up to 26 steps) announced, the same losses as
# on one thread ----
write_config "$WORK/auto.ini"
sed -i '/^threads = /d' "$WORK/auto.ini"
"$GEARBOX" train "$WORK/auto.ini" --set run.steps=30 --set run.out_dir="$WORK/auto_out" \
    > "$WORK/auto.log" 2>&1 ||
    fail "train with threads unset: $(cat "$WORK/auto.log")"
grep -qE "^plugins: .* \| [0-9]+ threads, or fewer while fewer step faster \(threads = auto\)$" \
    "$WORK/auto.log" && pass "threads unset is threads = auto (the plan says so)" ||
    fail "the plan line with threads unset: $(grep '^plugins' "$WORK/auto.log")"
if [ "$(nproc)" -gt 1 ]; then
    grep -qE "^threads: auto -> [0-9]+ \(" "$WORK/auto.log" &&
        pass "threads = auto announces its first trial's choice" ||
        fail "no 'threads: auto ->' line: $(cat "$WORK/auto.log")"
else
    echo "skipped: the trial's announcement (one online CPU leaves threads = auto nothing to try)"
fi
"$GEARBOX" train "$WORK/auto.ini" --set run.steps=30 --set run.threads=1 \
    --set run.out_dir="$WORK/one_out" \
    > "$WORK/one.log" 2>&1 || fail "train on 1 thread: $(cat "$WORK/one.log")"
losses() { grep -o '"loss": [^,]*' "$1/metrics.jsonl"; }
[ -n "$(losses "$WORK/one_out")" ] && [ "$(losses "$WORK/auto_out")" = "$(losses "$WORK/one_out")" ] &&
    pass "threads = auto's 30 steps (its trial switching teams) give 1 thread's losses, bit for bit" ||
    fail "losses differ between threads = auto and 1 thread"

finish
