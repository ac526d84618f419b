#!/usr/bin/env bash
# The progress line: plain step lines and no carriage returns when stdout is not a
# terminal; on a terminal (util-linux `script` provides one) a line redrawn with '\r'
# showing step/total, ETA, loss and tokens/s, with evaluation and checkpoint lines on
# lines of their own.
source "$(dirname "$0")/../cli/lib.sh"
# Without a terminal to run train on, the terminal half cannot run: the test then reports
# itself skipped (77), not passed, unless the plain half already failed.
skip_terminal() {
    echo "SKIP: $1"
    [ "$FAILURES" -ne 0 ] && finish
    exit 77
}
make_data
# One thread: OpenMP threads that spin-wait slow to a crawl when the machine is busy
# with other work, and these checks are not about speed.
write_config "$WORK/run.ini"
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/plain" --set run.eval_every=10 \
    --set run.threads=1 > "$WORK/plain.log" 2>&1 || fail "train: $(cat "$WORK/plain.log")"
grep -q $'\r' "$WORK/plain.log" && fail "carriage returns in non-terminal output" ||
    pass "no carriage returns when stdout is not a terminal"
[ "$(grep -cE '^step +[0-9]+/20 \| loss [0-9.]+ \| lr .* \| [0-9.]+ ms \| [0-9]+ tok/s$' "$WORK/plain.log")" -eq 20 ] &&
    grep -q "^step 10: train loss" "$WORK/plain.log" &&
    pass "plain output: one line per logged step and the evaluations" ||
    fail "plain output: $(cat "$WORK/plain.log")"

if ! command -v script > /dev/null; then
    skip_terminal "no util-linux script to run train on a terminal"
fi
script -qec "'$GEARBOX' train '$WORK/run.ini' --set run.out_dir='$WORK/tty' \
    --set run.eval_every=10 --set run.threads=1" /dev/null > "$WORK/tty.log" 2>&1 < /dev/null
if ! grep -q "^model: " "$WORK/tty.log"; then
    skip_terminal "script could not give train a terminal: $(head -c 300 "$WORK/tty.log")"
fi
grep -q $'\rstep 20/20 \[#*\] 100% | ETA [0-9hms]* | loss [0-9.]* | [0-9]* tok/s' "$WORK/tty.log" &&
    pass "terminal: the line is redrawn with \\r up to step 20/20 with ETA, loss, tok/s" ||
    fail "terminal output: $(cat -A "$WORK/tty.log" | head -c 1500)"
grep -qE 'step +[0-9]+/20 \| loss' "$WORK/tty.log" &&
    fail "terminal: plain step lines printed besides the progress line" ||
    pass "terminal: no plain step lines"
grep -qE $'\e\[Kstep 10: train loss [0-9.]+, val loss [0-9.]+\r?$' "$WORK/tty.log" &&
    grep -q $'\e\[Kcheckpoint: ' "$WORK/tty.log" && grep -q "^done: 20 steps" "$WORK/tty.log" &&
    pass "terminal: evaluation, checkpoint and summary lines on lines of their own" ||
    fail "terminal lines: $(cat -A "$WORK/tty.log" | head -c 1500)"
finish
