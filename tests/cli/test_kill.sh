#!/usr/bin/env bash
# kill -9 at random moments of a run that checkpoints every step, 20 times, each time
# resuming from the newest checkpoint (a kill mid-checkpoint leaves only a .tmp beside
# it): every resume works, the losses of every step are bit-identical to an uninterrupted
# run, and metrics.jsonl has exactly one line per step. A kill comes either after a random
# number of further steps (up to 8, then a random part of a step) or after a random delay
# of up to 50 ms from the start, mostly still in start-up. STEPS leaves room for both
# however fast the machine: the kills never let the run reach its end.
source "$(dirname "$0")/lib.sh"
make_data
STEPS=600
write_config "$WORK/run.ini" "checkpoint_every = 1"
sed -i "s/^steps = 20$/steps = $STEPS/; s/^n_layer = 2$/n_layer = 1/; s/^n_embd = 32$/n_embd = 16/" \
    "$WORK/run.ini"
train_run ref || finish

newest() { ls "$WORK/kill"/ckpt-*.gbk 2> /dev/null | sort | tail -n 1; }
step_of() { [ -n "$1" ] && basename "$1" .gbk | sed 's/^ckpt-0*//; s/^$/0/' || echo 0; }
# starts a run resumed from the newest checkpoint (or fresh when none exists yet)
start_run() {
    local ckpt
    ckpt=$(newest)
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/kill" \
        ${ckpt:+--resume "$ckpt"} > "$WORK/kill.log" 2>&1 &
    pid=$!
    from=$(step_of "$ckpt")
}
# waits until step $1 is logged or the run has ended
wait_for_step() {
    for _ in $(seq 3000); do
        grep -q "^{\"step\": $1, \"loss\"" "$WORK/kill/metrics.jsonl" 2> /dev/null && return
        kill -0 "$pid" 2> /dev/null || return
        sleep 0.01
    done
}

RANDOM=19
failures=0 torn=0
for k in $(seq 20); do
    start_run
    if [ $((RANDOM % 4)) -eq 0 ]; then
        sleep "0.$(printf '%03d' $((RANDOM % 50)))"
    else
        wait_for_step $((from + 1 + RANDOM % 8))
        sleep "0.00$((RANDOM % 10))"
    fi
    kill -9 "$pid" 2> /dev/null
    rc=0
    wait "$pid" 2> /dev/null || rc=$?
    [ "$rc" -eq 137 ] || { failures=$((failures + 1)); echo "kill $k: status $rc"; tail -5 "$WORK/kill.log"; }
    ls "$WORK/kill"/*.tmp > /dev/null 2>&1 && torn=$((torn + 1))
done
start_run
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 0 ] || { failures=$((failures + 1)); tail -5 "$WORK/kill.log"; }
[ "$failures" -eq 0 ] &&
    pass "20 kills -9 ($torn of them mid-checkpoint), then every resume worked" ||
    fail "$failures of the runs after a kill did not end as expected"

step_losses "$WORK/kill/metrics.jsonl" > "$WORK/kill.losses"
step_losses "$WORK/ref/metrics.jsonl" > "$WORK/ref.losses"
same_lines "the losses of all $STEPS steps, against the uninterrupted run" \
    "$WORK/kill.losses" "$WORK/ref.losses"
repeated=$(cut -d, -f1 "$WORK/kill.losses" | sort | uniq -d | wc -l)
count=$(wc -l < "$WORK/kill.losses")
[ "$repeated" -eq 0 ] && [ "$count" -eq "$STEPS" ] &&
    pass "metrics.jsonl: one line for each of the $STEPS steps" ||
    fail "metrics.jsonl: $count step lines, $repeated steps logged more than once"
finish
