# Shared by the CLI tests: arguments, tiny data and config, training runs and what they
# log, over the checks of tests/common/checks.sh.
# usage (from a test): source lib.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
set -u
GEARBOX=$1
FIXTURES=$2
SRC=$3
source "$(dirname "${BASH_SOURCE[0]}")/../common/checks.sh"

# A small token folder made from the first 50,000 bytes of the bundled text.
make_data() {
    head -c 50000 "$SRC/examples/data/tinyshakespeare.txt" > "$WORK/tiny.txt"
    "$GEARBOX" prepare "$WORK/tiny.txt" "$WORK/data" > /dev/null || fail "prepare tiny data"
}

# A tiny model that trains in about a second; extra lines are appended to [run].
write_config() {
    local path=$1
    shift
    cat > "$path" <<INI
[run]
seed = 7
steps = 20
out_dir = out
threads = 2
log_every = 1
eval_every = 0
eval_iters = 2
$(printf '%s\n' "$@")

[model]
n_layer = 2
n_head = 2
n_embd = 32
block_size = 16

[data]
dir = $WORK/data
batch_size = 4

[train]
learning_rate = 1e-2
warmup_iters = 5

[optim]
plugin = adamw
$(device_section)
INI
}

# With GEARBOX_TEST_GPU_LIKE=1 every config runs on the CPU device's GPU-like mode
# (protected device memory, queued work): the same test then proves the plugin contract.
# GEARBOX_TEST_DEVICE=cuda runs it on that device plugin instead (the gpu suite).
device_section() {
    if [ -n "${GEARBOX_TEST_DEVICE:-}" ]; then
        printf '\n[device]\nplugin = %s\n' "$GEARBOX_TEST_DEVICE"
    elif [ "${GEARBOX_TEST_GPU_LIKE:-0}" = 1 ]; then
        printf '\n[device]\nemulate_gpu = true\n'
    fi
    return 0
}

# train_run NAME SETTINGS...: trains $WORK/run.ini into $WORK/NAME, its output in
# $WORK/NAME.log; a run that fails is a failure naming the log's last lines.
train_run() {
    local name=$1
    shift
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/$name" "$@" \
        > "$WORK/$name.log" 2>&1 && return 0
    fail "$name: $(grep -v warning "$WORK/$name.log" | tail -n 3)"
    return 1
}

# step_losses METRICS: each step's number, loss and learning rate, a line per step.
step_losses() { grep -o '^{"step": [0-9]*, "loss": [^,]*, "lr": [^,]*' "$1"; }

# run_figures NAME: every figure run NAME recorded: each step's loss, gradient norm and loss
# scale, and the final evaluation.
run_figures() {
    grep -o '"\(loss\|grad_norm\|train_loss\|val_loss\|loss_scale\)": [^,}]*' \
        "$WORK/$1/metrics.jsonl"
}
# figures_diff A B: nothing when runs A and B recorded the same figures, else the first
# lines of the difference, on one line.
figures_diff() { diff <(run_figures "$1") <(run_figures "$2") | head -n 4 | tr '\n' ' '; }

# exact_resume NAME SETTINGS...: 20 steps with a checkpoint at step 10 ($WORK/NAME-a), then
# a run resumed from it ($WORK/NAME-b): steps 11-20 log bit-identical losses and learning
# rates (printed with 9 significant digits, which round-trips a float32; kept in
# $WORK/NAME-a.losses), and the final evaluation ($WORK/NAME-a.finals) is identical too.
# Returns 1 when a run fails or leaves no checkpoint.
exact_resume() {
    local name=$1 run n
    shift
    local ckpt=$WORK/$name-a/ckpt-000010.gbk
    train_run "$name-a" "$@" || return 1
    [ -f "$ckpt" ] && pass "$name: checkpoint at step 10 written" ||
        { fail "$name: no checkpoint at step 10"; return 1; }
    train_run "$name-b" --resume "$ckpt" "$@" || return 1
    grep -q "resumed from $ckpt at step 10" "$WORK/$name-b.log" &&
        pass "$name: resume announced" || fail "$name: resume not announced"
    for run in "$name-a" "$name-b"; do
        step_losses "$WORK/$run/metrics.jsonl" | grep -E '"step": (1[1-9]|20),' \
            > "$WORK/$run.losses"
        grep -E '^\{"step": [0-9]+, "train_loss"' "$WORK/$run/metrics.jsonl" > "$WORK/$run.finals"
    done
    n=$(wc -l < "$WORK/$name-a.losses")
    if [ "$n" -ne 10 ]; then
        fail "$name: expected 10 logged steps after the checkpoint, found $n"
    else
        same_lines "$name: steps 11-20, bit-identical losses and learning rates" \
            "$WORK/$name-a.losses" "$WORK/$name-b.losses"
    fi
    if [ -s "$WORK/$name-a.finals" ]; then
        same_lines "$name: final train and val loss identical" \
            "$WORK/$name-a.finals" "$WORK/$name-b.finals"
    else
        fail "$name: no final evaluation"
    fi
}

# check_lion WHAT: examples/plugins/lion, built in $WORK/lion/build, passes `gearbox
# test-plugin` and trains 20 steps as [optim] plugin = lion through --plugin-path ($WORK/run.ini
# into $WORK/out); WHAT says in the pass lines which gearbox ran it.
check_lion() {
    local what=$1 rc=0
    "$GEARBOX" test-plugin "$WORK/lion/build/optim-lion-cpu.so" > "$WORK/table" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] && grep -qE "^[0-9]+ passed, 0 failed" "$WORK/table" &&
        pass "$what test-plugin on lion: $(tail -n 1 "$WORK/table")" ||
        fail "test-plugin on lion (exit status $rc): $(cat "$WORK/table")"
    make_data
    write_config "$WORK/run.ini"
    "$GEARBOX" train "$WORK/run.ini" --plugin-path "$WORK/lion/build" --set optim.plugin=lion \
        --set run.out_dir="$WORK/out" > "$WORK/train.log" 2>&1 &&
        grep -q "optim lion" "$WORK/train.log" &&
        grep -q '"step": 20, "loss": [0-9]' "$WORK/out/metrics.jsonl" &&
        pass "$what trains 20 steps with [optim] plugin = lion" ||
        fail "train with lion: $(tail -n 20 "$WORK/train.log")"
}

# expect_ok NAME COMMAND...: COMMAND succeeds.
expect_ok() {
    local name=$1
    shift
    "$@" > "$WORK/ok.out" 2>&1 && pass "$name" || fail "$name: $(tail -3 "$WORK/ok.out")"
}

# expect_write_errors NAME COMMAND...: COMMAND, its standard output a full disk (/dev/full)
# and then a pipe whose reader is gone, fails (status 1) saying that it cannot write the
# standard output.
expect_write_errors() {
    local name=$1 out rc
    shift
    rm -f "$WORK/no-reader"
    mkfifo "$WORK/no-reader"
    # a pipe with a writer (fd 9) and no reader left: every write to it fails with EPIPE
    exec 8<> "$WORK/no-reader" 9> "$WORK/no-reader" 8<&-
    for out in /dev/full pipe; do
        rc=0
        if [ $out = pipe ]; then
            "$@" >&9 2> "$WORK/stderr" || rc=$?
        else
            "$@" > /dev/full 2> "$WORK/stderr" || rc=$?
        fi
        if [ "$rc" -eq 1 ] && grep -q "cannot write the standard output" "$WORK/stderr"; then
            pass "$name > $out: $(head -n 1 "$WORK/stderr" | cut -c1-120)"
        else
            fail "$name > $out: status $rc; stderr: $(head -c 400 "$WORK/stderr")"
        fi
    done
    exec 9>&-
}
