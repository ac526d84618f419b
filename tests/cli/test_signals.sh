#!/usr/bin/env bash
# SIGTERM, how schedulers preempt a job, ends a run as Ctrl-C does: the current step
# finishes, a checkpoint is written, the exit status is 130, and the run resumes from that
# checkpoint bit-exactly. Also when the signal comes while gearbox is still starting (here:
# waiting for its config from a named pipe), which once killed it without a checkpoint.
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 0"
sed -i 's/^steps = 20$/steps = 1000000/; s/^warmup_iters = 5$/warmup_iters = 0\ndecay_lr = false/' \
    "$WORK/run.ini"

# during start-up: gearbox waits in open() for a writer of its config
mkfifo "$WORK/piped.ini"
"$GEARBOX" train "$WORK/piped.ini" --set run.out_dir="$WORK/early" --set run.steps=5 \
    > "$WORK/early.log" 2>&1 &
pid=$!
sleep 0.5
kill -TERM "$pid"
sleep 0.2
timeout 20 cp "$WORK/run.ini" "$WORK/piped.ini"
rc=0
wait "$pid" || rc=$?
if [ "$rc" -eq 130 ] && [ -f "$WORK/early/ckpt-000000.gbk" ]; then
    pass "SIGTERM during start-up: status 130 and a checkpoint ($(grep interrupted "$WORK/early.log"))"
else
    fail "SIGTERM during start-up: status $rc, files: $(ls "$WORK/early" 2>&1); $(tail -3 "$WORK/early.log")"
fi

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
