#!/usr/bin/env bash
# Data-parallel training under mpirun: 2 ranks end where 1 process ends (same global
# batch, with and without gradient accumulation), only rank 0 writes, `[attn] plugin =
# auto` takes rank 0's choice on every rank, a batch that does not divide among the ranks
# is refused, and a rank that hangs or dies ends the job with
# an error naming it, within [comm] timeout_s, instead of a hang.
# usage: test_ddp.sh GEARBOX FIXTURES_DIR SOURCE_ROOT MPIRUN COMPARE_PARAMS
source "$(dirname "$0")/../cli/lib.sh"
COMPARE=$5
source "$(dirname "$0")/mpirun.sh" "$4"

make_data
write_config "$WORK/run.ini"
# One thread per rank, and the same for the single process it is compared with. A
# learning rate below lib.sh's 1e-2, which makes this tiny model spike around step 14 with
# accumulation; a spike magnifies the rounding differences of summing in another order.
sed -i -e 's/^threads = .*/threads = 1/' -e 's/^learning_rate = .*/learning_rate = 3e-3/' \
    "$WORK/run.ini"

# train NAME EXTRA_SETTINGS...: one process, then the same under mpirun -np 2 with comm/mpi.
train_both() {
    local name=$1
    shift
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/$name-1" "$@" \
        > "$WORK/$name-1.log" 2>&1 || { cat "$WORK/$name-1.log"; fail "$name: one process"; }
    mpirun2 "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/$name-2" \
        --set comm.plugin=mpi --set train.bucket_cap_mb=0.01 "$@" \
        > "$WORK/$name-2.log" 2>&1 || { cat "$WORK/$name-2.log"; fail "$name: mpirun -np 2"; }
}

same_params() {
    local name=$1 out
    if out=$("$COMPARE" "$WORK/$name-1/ckpt-000020.gbk" "$WORK/$name-2/ckpt-000020.gbk" 1e-5); then
        pass "$name: final parameters of 2 ranks = 1 process within 1e-5 ($out)"
    else
        fail "$name: final parameters differ: $out"
    fi
}

train_both plain
same_params plain
grep -q "data parallel: 2 ranks x 2 rows of each batch of 4" "$WORK/plain-2.log" &&
    pass "the plan names 2 ranks of 2 rows" || fail "no data-parallel line in the log"
grep -Eq "all-reduced per step in ([2-9]|[1-9][0-9]+) buckets" "$WORK/plain-2.log" &&
    pass "gradients go in several buckets ($(grep -o '[0-9]* bytes all-reduced.*buckets' "$WORK/plain-2.log"))" ||
    fail "expected several buckets with bucket_cap_mb = 0.01"
n=$(grep -c "^step 20: train loss" "$WORK/plain-2.log")
[ "$n" -eq 1 ] && pass "only rank 0 prints (one final evaluation line)" ||
    fail "final evaluation printed $n times"
v1=$(grep -o '"val_loss": [0-9.]*' "$WORK/plain-1/metrics.jsonl" | tail -n 1 | cut -d' ' -f2)
v2=$(grep -o '"val_loss": [0-9.]*' "$WORK/plain-2/metrics.jsonl" | tail -n 1 | cut -d' ' -f2)
awk -v a="$v1" -v b="$v2" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }' &&
    pass "validation loss averaged over ranks matches one process ($v1 vs $v2)" ||
    fail "validation loss $v2 (2 ranks) vs $v1 (1 process)"

train_both accum --set data.gradient_accumulation_steps=2
same_params accum

# [attn] plugin = auto: every rank times the plugins, all take rank 0's choice, and only
# rank 0 says which.
mpirun2 "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/auto-2" --set comm.plugin=mpi \
    --set attn.plugin=auto > "$WORK/auto-2.log" 2>&1 &&
    [ "$(grep -c '^attn auto: chose ' "$WORK/auto-2.log")" -eq 1 ] &&
    grep -q '"step": 20, "loss": [0-9]' "$WORK/auto-2/metrics.jsonl" &&
    pass "attn = auto with 2 ranks: $(grep -o '^attn auto: chose [a-z_]*' "$WORK/auto-2.log") on both, trains 20 steps" ||
    fail "attn = auto with 2 ranks: $(cat "$WORK/auto-2.log")"

expect_error "a global batch that does not divide among the ranks" 2 \
    "does not divide among the 2 ranks" -- \
    mpirun2 "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/odd" \
    --set comm.plugin=mpi --set data.batch_size=3

# rank1_pid JOB: the pid of rank 1 of the mpirun job JOB (found under it by its environment).
rank1_pid() {
    for pid in $(descendants "$1"); do
        if tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" &&
           grep -q gearbox "/proc/$pid/cmdline" 2> /dev/null; then
            echo "$pid"
            return
        fi
    done
}

# fault NAME SIGNAL: starts a long run, sends SIGNAL to rank 1 once training runs, and
# expects the job to end within the timeout (plus start-up slack) with rank 1 named.
fault() {
    local name=$1 signal=$2 timeout_s=5
    # mpirun itself in the background (not a function's subshell), so $! is its pid
    "$MPIRUN" --allow-run-as-root --oversubscribe -np 2 "$GEARBOX" train "$WORK/run.ini" \
        --set run.out_dir="$WORK/$name" --set comm.plugin=mpi --set comm.timeout_s=$timeout_s \
        --set run.steps=1000000 --set run.log_every=1 > "$WORK/$name.log" 2>&1 &
    local job=$! pid=""
    started+=("$job")
    for _ in $(seq 600); do
        grep -q "^step " "$WORK/$name.log" 2> /dev/null && pid=$(rank1_pid "$job")
        [ -n "$pid" ] && break
        sleep 0.1
    done
    if [ -z "$pid" ]; then
        fail "$name: the job did not start training; log: $(head -c 600 "$WORK/$name.log")"
        track "$job"
        end_started
        return
    fi
    track "$job"
    local start=$SECONDS
    kill "-$signal" "$pid"
    local waited=0
    while kill -0 "$job" 2> /dev/null && [ "$waited" -lt $((timeout_s * 10 + 300)) ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 "$job" 2> /dev/null; then
        fail "$name: the job still runs $((SECONDS - start)) s after SIG$signal to rank 1"
        end_started
        return
    fi
    local rc=0
    wait "$job" || rc=$?
    if [ "$rc" -eq 0 ]; then
        fail "$name: the job exited 0 after SIG$signal to rank 1"
    elif ! grep -q "rank 1" "$WORK/$name.log"; then
        fail "$name: the error does not name rank 1: $(tail -c 800 "$WORK/$name.log")"
    else
        pass "$name: SIG$signal to rank 1 ended the job in $((SECONDS - start)) s (exit $rc): $(grep -m 1 "rank 1" "$WORK/$name.log" | cut -c1-200)"
    fi
    kill -CONT "$pid" 2> /dev/null
}

# (on the GPU-like device the collective fails inside queued work: the core shows its
# message beside the device call that surfaced it)
fault hang STOP
fault death KILL
finish
