#!/usr/bin/env bash
# `gearbox sample` over its KV cache: the same tokens as without it (--no-cache, the
# forward over the whole window for every token) greedily and at temperature 1 with one
# seed, for each attention plugin of the device, past block_size (16 here) where the window
# slides; then --top-p, --num-samples and --prompt-file, and the refusals of a bad --top-p,
# --num-samples or prompt file. On the device of GEARBOX_TEST_DEVICE when set (the gpu
# suites run it on device/cuda). In fp32 everywhere, and in bf16 on the CPU, whose
# plugins widen to f32 and attend in f32 as the cache does; on CUDA attn/math and
# attn/flash round the probabilities to bf16 before their product with V (the cache's
# kernel keeps them f32), so a near tie may go the other way there.
# usage: test_sample.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini"
device=${GEARBOX_TEST_DEVICE:-cpu}
# the emulated GPU trains its models shorter: the test compares two ways of sampling one
# model, not what the model learnt
case $device in
cpu) plugins="math flash mem_efficient" precisions="fp32 bf16" steps=300 ;;
*) plugins="math flash" precisions=fp32 steps=100 ;;
esac

# sample_text NAME CHECKPOINT ARGS...: the text of a sample into $WORK/NAME.txt, what it
# said on stderr into $WORK/NAME.err; a failure is a failure naming stderr's end.
sample_text() {
    local name=$1
    shift
    "$GEARBOX" sample "$@" > "$WORK/$name.txt" 2> "$WORK/$name.err" && return 0
    fail "sample $name: $(tail -n 3 "$WORK/$name.err")"
    return 1
}

for attn in $plugins; do
    for precision in $precisions; do
        run=$attn-$precision
        train_run "$run" --set run.steps=$steps --set model.n_embd=64 --set model.n_head=4 \
            --set attn.plugin="$attn" --set precision.plugin="$precision" \
            --set optim.plugin=adamw_fused --set run.log_every=100 || continue
        for mode in "--temperature 0" "--temperature 1 --top-k 0"; do
            # shellcheck disable=SC2086 # the mode is two options on purpose
            sample_text cached "$WORK/$run" --tokens 60 --prompt "ROMEO:" $mode &&
                sample_text uncached "$WORK/$run" --tokens 60 --prompt "ROMEO:" $mode \
                    --no-cache || continue
            grep -q "KV cache: attn/$attn attends over it" "$WORK/cached.err" &&
                grep -q "no KV cache, as asked" "$WORK/uncached.err" ||
                fail "$run: stderr does not say how it sampled: $(cat "$WORK/cached.err")"
            if cmp -s "$WORK/cached.txt" "$WORK/uncached.txt"; then
                pass "$run, $mode: the KV cache gives the tokens of the window's forward" \
                    "($(tr '\n' ' ' < "$WORK/cached.txt" | cut -c1-40)...)"
            else
                fail "$run, $mode: the KV cache's tokens differ from the window's forward:"
                diff "$WORK/cached.txt" "$WORK/uncached.txt" | head -6
            fi
        done
    done
done
speed=$(grep "^sample: 60 tokens x 1 sample in [0-9.]* s: [0-9.]* tokens/s" "$WORK/cached.err") &&
    pass "sample prints tokens per second to stderr ($speed)" ||
    fail "no tokens/s line on stderr: $(cat "$WORK/cached.err")"

ck="$WORK/math-fp32"
# top-p: 1 keeps every token (the text of no --top-p); a mass too small for two tokens
# keeps the likeliest alone, which is greedy sampling
sample_text default "$ck" --tokens 40 --prompt "ROMEO:" &&
    sample_text p1 "$ck" --tokens 40 --prompt "ROMEO:" --top-p 1 &&
    sample_text greedy "$ck" --tokens 40 --prompt "ROMEO:" --temperature 0 &&
    sample_text tiny_p "$ck" --tokens 40 --prompt "ROMEO:" --top-p 1e-9 &&
    sample_text half_p "$ck" --tokens 40 --prompt "ROMEO:" --top-p 0.5 &&
    sample_text half_p2 "$ck" --tokens 40 --prompt "ROMEO:" --top-p 0.5
cmp -s "$WORK/default.txt" "$WORK/p1.txt" && pass "--top-p 1 draws the text of no --top-p" ||
    fail "--top-p 1 changed the text"
cmp -s "$WORK/greedy.txt" "$WORK/tiny_p.txt" &&
    pass "--top-p 1e-9 keeps the likeliest token only: greedy's text" ||
    fail "--top-p 1e-9 is not greedy: $(head -c 60 "$WORK/tiny_p.txt") against $(head -c 60 "$WORK/greedy.txt")"
cmp -s "$WORK/half_p.txt" "$WORK/half_p2.txt" && ! cmp -s "$WORK/half_p.txt" "$WORK/default.txt" &&
    pass "--top-p 0.5 is reproducible and draws from fewer tokens than all" ||
    fail "--top-p 0.5: not reproducible, or the text of all tokens"

# --num-samples: N texts, each ended by a line of dashes, the first the single sample's
sample_text three "$ck" --tokens 30 --prompt "ROMEO:" --num-samples 3 &&
    sample_text one "$ck" --tokens 30 --prompt "ROMEO:"
if [ "$(grep -c '^---------------$' "$WORK/three.txt")" -eq 3 ] &&
    [ "$(grep -c '^ROMEO:' "$WORK/three.txt")" -eq 3 ] &&
    grep -q "^sample: 30 tokens x 3 samples" "$WORK/three.err"; then
    pass "--num-samples 3 prints three texts and counts them in tokens/s"
else
    fail "--num-samples 3: $(head -c 300 "$WORK/three.txt")"
fi
first=$(awk '/^---------------$/ { exit } { print }' "$WORK/three.txt")
[ "$first" = "$(cat "$WORK/one.txt")" ] &&
    pass "the first of a batch of samples is the single sample's text" ||
    fail "the batch's first text differs from the single sample's: $first"
[ "$(awk '/^---------------$/ { n++ } END { print n }' "$WORK/three.txt")" = 3 ] &&
    [ "$(sed -n '/^ROMEO:/p' "$WORK/three.txt" | sort -u | wc -l)" -gt 1 ] &&
    pass "the samples of a batch differ (each its own random stream)" ||
    fail "the three samples are one text"
sample_text three_greedy "$ck" --tokens 30 --prompt "ROMEO:" --num-samples 3 --temperature 0 &&
    sample_text greedy30 "$ck" --tokens 30 --prompt "ROMEO:" --temperature 0
awk -v RS='---------------\n' 'NF' "$WORK/three_greedy.txt" | sort -u > "$WORK/distinct.txt"
[ "$(grep -c '^ROMEO:' "$WORK/distinct.txt")" -eq 1 ] &&
    [ "$(awk '/^---------------$/ { exit } { print }' "$WORK/three_greedy.txt")" = \
      "$(cat "$WORK/greedy30.txt")" ] &&
    pass "greedy samples of a batch are the single greedy text" ||
    fail "greedy batch: $(head -c 200 "$WORK/three_greedy.txt")"

# --prompt-file: a file and the standard input read as --prompt
printf 'ROMEO:' > "$WORK/prompt.txt"
sample_text from_file "$ck" --tokens 40 --prompt-file "$WORK/prompt.txt" &&
    cmp -s "$WORK/from_file.txt" "$WORK/default.txt" &&
    pass "--prompt-file FILE continues the file's text as --prompt does" ||
    fail "--prompt-file: $(head -c 100 "$WORK/from_file.txt")"
"$GEARBOX" sample "$ck" --tokens 40 --prompt-file - < "$WORK/prompt.txt" \
    > "$WORK/from_stdin.txt" 2> /dev/null &&
    cmp -s "$WORK/from_stdin.txt" "$WORK/default.txt" &&
    pass "--prompt-file - reads the prompt from the standard input" ||
    fail "--prompt-file -: $(head -c 100 "$WORK/from_stdin.txt")"
printf 'ROMEO\0:' > "$WORK/nul.txt"
printf 'ROMEO: ~\x01' > "$WORK/outside.txt"
expect_error "a prompt file with a NUL byte" 1 "nul.txt: byte 5 is NUL; a prompt is text" -- \
    "$GEARBOX" sample "$ck" --prompt-file "$WORK/nul.txt"
expect_error "a missing prompt file" 1 "cannot read $WORK/none.txt" -- \
    "$GEARBOX" sample "$ck" --prompt-file "$WORK/none.txt"
expect_error "a folder as prompt file" 1 "cannot read $WORK" -- \
    "$GEARBOX" sample "$ck" --prompt-file "$WORK"
expect_error "a prompt file outside the vocabulary" 1 \
    "--prompt-file $WORK/outside.txt: the prompt's byte 126 '~' is not in the model's" -- \
    "$GEARBOX" sample "$ck" --prompt-file "$WORK/outside.txt"

# <|endoftext|> ends a text of a GPT-2 BPE model (the tokenizer fixture's vocabulary, on a
# text of two sentences each ended by it) unless --keep-going; on the CPU only (each
# device runs this part of sample alike)
if [ "$device" = cpu ]; then
    for i in $(seq 400); do printf 'hello world<|endoftext|>to be or not<|endoftext|>'; done \
        > "$WORK/eot.txt"
    "$GEARBOX" prepare --tokenizer gpt2 --vocab "$SRC/tests/tokenizer/fixture" "$WORK/eot.txt" \
        "$WORK/eot_data" > "$WORK/eot_prepare.log" 2>&1 || fail "prepare: $(cat "$WORK/eot_prepare.log")"
    train_run eot --set data.dir="$WORK/eot_data" --set run.steps=60 &&
        sample_text stop "$WORK/eot" --prompt "hello" --tokens 40 --temperature 0 &&
        sample_text keep "$WORK/eot" --prompt "hello" --tokens 40 --temperature 0 --keep-going
    grep -q "^sample: [1-9] tokens x 1 sample" "$WORK/stop.err" &&
        ! grep -q "endoftext" "$WORK/stop.txt" &&
        pass "a GPT-2 BPE text ends at <|endoftext|> ($(head -n 1 "$WORK/stop.txt"); $(cat "$WORK/stop.err"))" ||
        fail "no stop at <|endoftext|>: $(head -c 200 "$WORK/stop.txt") $(cat "$WORK/stop.err")"
    grep -q "^sample: 40 tokens x 1 sample" "$WORK/keep.err" && grep -q "endoftext" "$WORK/keep.txt" &&
        pass "--keep-going samples past <|endoftext|>" ||
        fail "--keep-going: $(head -c 200 "$WORK/keep.txt") $(cat "$WORK/keep.err")"
fi

expect_refusals "$GEARBOX" sample "$ck" <<'CASES'
--top-p 0 | --top-p 0: expected a number in (0, 1] | --top-p 0
--top-p above 1 | --top-p 1.5: expected a number in (0, 1] | --top-p 1.5
--top-p not a number | --top-p abc: expected a number in (0, 1] | --top-p abc
--top-p negative | --top-p -0.1: expected a number in (0, 1] | --top-p -0.1
--num-samples 0 | --num-samples 0: expected a whole number from 1 to 1024 | --num-samples 0
--num-samples too many | --num-samples 1025: expected a whole number from 1 to 1024 | --num-samples 1025
--prompt with --prompt-file | --prompt and --prompt-file x.txt: give the prompt one way | --prompt A --prompt-file x.txt
CASES
finish
