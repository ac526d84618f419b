# Shared by the shell tests: a scratch folder removed at exit, pass/fail lines and the
# exit status they add up to.
# usage (from a test): source checks.sh; ...; finish
set -u
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FAILURES=0

pass() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; FAILURES=$((FAILURES + 1)); }

# same_lines WHAT A B: files A and B hold the same lines; else fails WHAT with the first
# lines of their difference.
same_lines() {
    if cmp -s "$2" "$3"; then
        pass "$1 ($(tail -n 1 "$2"))"
    else
        fail "$1: they differ:"
        diff "$2" "$3" | head -20
    fi
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

# expect_refusals COMMAND... <<TABLE: each line "NAME | TEXT | ARGUMENTS" is a case of
# expect_error NAME 2 TEXT -- COMMAND ARGUMENTS (ARGUMENTS split at spaces).
expect_refusals() {
    local cases line name text args
    mapfile -t cases
    for line in "${cases[@]}"; do
        IFS='|' read -r name text args <<< "$line"
        name=${name% } text=${text# } text=${text% } args=${args# }
        # shellcheck disable=SC2086 # the arguments are split on purpose
        expect_error "$name" 2 "$text" -- "$@" $args
    done
}

finish() {
    if [ "$FAILURES" -ne 0 ]; then
        echo "$FAILURES check(s) failed"
        exit 1
    fi
    echo "all checks passed"
}
