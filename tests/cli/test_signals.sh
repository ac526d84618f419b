#!/usr/bin/env bash
# SIGTERM, how schedulers preempt a job, ends a run as Ctrl-C does: the current step
# finishes, a checkpoint is written, the exit status is 130, and the run resumes from that
# checkpoint bit-exactly. Before the config is read, a verb waiting for the writer of a
# config that is a named pipe ends at SIGTERM or SIGINT at once, as cat would (it once
# waited on, only SIGKILL ending it); a config that comes through the pipe trains.
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 0"
sed -i 's/^steps = 20$/steps = 1000000/; s/^warmup_iters = 5$/warmup_iters = 0\ndecay_lr = false/' \
    "$WORK/run.ini"

# start-up: gearbox waits in open() for a writer of its config, which never comes; job
# control (set -m) keeps SIGINT from being ignored in the background job
mkfifo "$WORK/piped.ini"
set -m
for verb in train check; do
    for sig in TERM INT; do
        "$GEARBOX" $verb "$WORK/piped.ini" --set run.out_dir="$WORK/early" \
            > "$WORK/early.log" 2>&1 &
        pid=$!
        sleep 0.5
        kill -$sig "$pid"
        ended=no
        for _ in $(seq 100); do
            kill -0 "$pid" 2> /dev/null || { ended=yes; break; }
            sleep 0.05
        done
        if [ $ended = yes ]; then
            wait "$pid" 2> /dev/null
            pass "$verb waiting for a config from a named pipe ends at SIG$sig"
        else
            kill -KILL "$pid"
            fail "$verb waiting for a config from a named pipe ignored SIG$sig for 5 s"
        fi
    done
done
set +m
"$GEARBOX" train "$WORK/piped.ini" --set run.out_dir="$WORK/piped" --set run.steps=2 \
    > "$WORK/piped.log" 2>&1 &
pid=$!
timeout 20 cp "$WORK/run.ini" "$WORK/piped.ini"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 0 ] && [ -f "$WORK/piped/ckpt-000002.gbk" ] &&
    pass "a config read from a named pipe trains" ||
    fail "config from a named pipe: status $rc; $(tail -3 "$WORK/piped.log")"

# during training
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/a" > "$WORK/a.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
    [ "$(grep -c '"loss"' "$WORK/a/metrics.jsonl" 2> /dev/null)" -ge 5 ] && break
    sleep 0.05
done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
step=$(sed -n 's/^gearbox: interrupted at step \([0-9]*\); saving a checkpoint$/\1/p' "$WORK/a.log")
ckpt=$(printf '%s/a/ckpt-%06d.gbk' "$WORK" "${step:-0}")
if [ "$rc" -eq 130 ] && [ -n "$step" ] && [ -f "$ckpt" ]; then
    pass "SIGTERM while training: status 130, checkpoint at step $step"
else
    fail "SIGTERM while training: status $rc; $(tail -3 "$WORK/a.log")"
    finish
fi

# the run goes on from it as if never stopped (constant learning rate, so the number of
# steps asked for changes nothing before the end)
end=$((step + 10))
train_run a --set run.steps=$end --resume "$ckpt"
train_run ref --set run.steps=$end
step_losses "$WORK/a/metrics.jsonl" > "$WORK/a.losses"
step_losses "$WORK/ref/metrics.jsonl" > "$WORK/ref.losses"
same_lines "after SIGTERM and resume, steps 1-$end against an uninterrupted run" \
    "$WORK/a.losses" "$WORK/ref.losses"
finish
