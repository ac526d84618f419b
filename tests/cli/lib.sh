# Shared by the CLI tests: arguments, a scratch folder, tiny data and config, and checks.
# usage (from a test): source lib.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
set -u
GEARBOX=$1
FIXTURES=$2
SRC=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FAILURES=0

pass() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; FAILURES=$((FAILURES + 1)); }

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

# expect_error NAME STATUS TEXT -- COMMAND...: COMMAND exits with STATUS and its stderr
# contains TEXT (a fixed string).
expect_error() {
    local name=$1 status=$2 text=$3
    shift 4
    local err="$WORK/stderr" rc=0
    "$@" > "$WORK/stdout" 2> "$err" || rc=$?
    if [ "$rc" -ne "$status" ]; then
        fail "$name: exit status $rc, expected $status; stderr: $(head -c 600 "$err")"
    elif ! grep -qF -- "$text" "$err"; then
        fail "$name: stderr lacks '$text'; it says: $(head -c 600 "$err")"
    else
        pass "$name ($(head -n 1 "$err" | cut -c1-150))"
    fi
}

finish() {
    if [ "$FAILURES" -ne 0 ]; then
        echo "$FAILURES check(s) failed"
        exit 1
    fi
    echo "all checks passed"
}
