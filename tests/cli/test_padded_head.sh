#!/usr/bin/env bash
# The LM head at a padded vocabulary ([model] padded_vocab_size above vocab_size): its
# three products run at the padded width, cross-entropy skips the pad columns, and wte's
# pad rows are zero and stay zero, so training logs the losses and gradient norms of the
# same run without padding, bit for bit; a sample from the padded checkpoint is the
# unpadded one's text (no pad id can be drawn: the sampler reads the real columns only).
# On the device of GEARBOX_TEST_DEVICE when set (the gpu suites run it on device/cuda).
# usage: test_padded_head.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini"
figures() { grep -o '"loss": [0-9.e+-]*\|"grad_norm": [0-9.e+-]*' "$1/metrics.jsonl"; }

train() { # OUT_DIR SETTINGS...
    local out=$1
    shift
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$out" "$@" > "$out.log" 2>&1 ||
        { fail "train $out: $(tail -n 3 "$out.log")"; finish; }
}
train "$WORK/plain"
train "$WORK/padded" --set model.padded_vocab_size=128
figures "$WORK/plain" > "$WORK/plain.fig"
figures "$WORK/padded" > "$WORK/padded.fig"
if [ ! -s "$WORK/plain.fig" ]; then
    fail "no losses logged: $(tail -n 3 "$WORK/plain.log")"
elif cmp -s "$WORK/plain.fig" "$WORK/padded.fig"; then
    pass "padded_vocab_size = 128: $(grep -c loss "$WORK/plain.fig") losses and gradient norms bit for bit the unpadded run's"
else
    fail "padded_vocab_size = 128 moved the figures: $(diff "$WORK/plain.fig" "$WORK/padded.fig" | head -n 4)"
fi
for run in plain padded; do
    "$GEARBOX" sample "$WORK/$run" --tokens 40 --prompt "ROMEO:" > "$WORK/$run.txt" 2> "$WORK/$run.err" ||
        fail "sample $run: $(tail -n 3 "$WORK/$run.err")"
done
if cmp -s "$WORK/plain.txt" "$WORK/padded.txt" && [ -s "$WORK/plain.txt" ]; then
    pass "the padded checkpoint samples the unpadded one's text"
else
    fail "the samples differ: $(head -c 200 "$WORK/plain.txt") / $(head -c 200 "$WORK/padded.txt")"
fi
finish
