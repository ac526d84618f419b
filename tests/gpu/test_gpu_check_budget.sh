#!/usr/bin/env bash
# scripts/gpu-check.sh's one budget (--budget S), on a machine without a GPU, in seconds:
# --help states the budget and the time plan; a budget too small to start any stage skips
# every one (SKIP, not FAIL: exit 0), names its log folder in the first line and leaves a
# folder per stage; without a GPU the stages that need one skip saying so; a training run
# the budget cuts short is SKIP, and its log keeps what it printed before it was stopped
# (line by line, not lost in a buffer); a budget that is not whole seconds is a usage
# error.
# usage: test_gpu_check_budget.sh SOURCE_ROOT BUILD_ROOT EMULATED(0|1)
#   EMULATED: 1 where the emulated CUDA plugins are built (the cut-short run uses them)
src=$1 build=$2 emulated=$3
source "$(dirname "$0")/../common/checks.sh"
script=$src/scripts/gpu-check.sh

# no_fail NAME OUT: OUT's summary has lines, none of them FAIL
no_fail() {
    if [ -s "$2/summary.txt" ] && ! grep -qE '^[a-z]+ +.* FAIL ' "$2/summary.txt"; then
        pass "$1"
    else
        fail "$1: $(cat "$2/summary.txt" 2> /dev/null)"
    fi
}

"$script" --help > "$WORK/help.txt" 2>&1
if [ $? -eq 0 ] && grep -q -- '--budget S' "$WORK/help.txt" &&
   grep -q 'build 150' "$WORK/help.txt" && grep -q 'bench 200' "$WORK/help.txt" &&
   grep -q 'SKIP, not FAIL' "$WORK/help.txt"; then
    pass "--help states the budget, the time plan per stage and what is SKIP"
else
    fail "--help: $(cat "$WORK/help.txt")"
fi

OUT=$WORK/tiny BUILD=$WORK/no-build "$script" --budget 10 > "$WORK/tiny.log" 2>&1
rc=$?
skips=$(grep -cE '^[a-z]+ +stage result +SKIP' "$WORK/tiny/summary.txt" 2> /dev/null)
if [ $rc -eq 0 ] && [ "$skips" = 5 ] && [ ! -e "$WORK/no-build" ] &&
   grep -q 'no time to start it' "$WORK/tiny/summary.txt"; then
    pass "--budget 10: every stage SKIP for want of time, exit 0, nothing built"
else
    fail "--budget 10: exit $rc, $skips stages skipped: $(cat "$WORK/tiny.log")"
fi
no_fail "--budget 10: no FAIL line" "$WORK/tiny"
head -n 1 "$WORK/tiny.log" | grep -q "logs in $WORK/tiny " &&
    pass "the first line names the log folder" || fail "first line: $(head -n 1 "$WORK/tiny.log")"
missing=""
for stage in build test train sanitize bench; do
    [ -d "$WORK/tiny/$stage" ] || missing="$missing $stage"
done
[ -z "$missing" ] && pass "a log folder per stage" || fail "no log folder for:$missing"

OUT=$WORK/bad "$script" --budget 5m > "$WORK/bad.log" 2>&1
[ $? -eq 2 ] && grep -q "expected whole seconds" "$WORK/bad.log" &&
    pass "--budget 5m is a usage error" || fail "--budget 5m: $(cat "$WORK/bad.log")"

if [ ! -x "$build/tests/gpu/gpu-probe" ] || [ ! -x "$build/tools/gearbox" ]; then
    echo "not checked: no gpu-probe or gearbox in $build (no real CUDA build), so the stages that need a GPU cannot be asked here"
elif "$build/tests/gpu/gpu-probe" > /dev/null 2>&1; then
    echo "not checked: this machine has a GPU, so train, sanitize and bench would run, not skip"
else
    # shellcheck disable=SC2097,SC2098 # the script's WORK lies inside the test's
    OUT=$WORK/no-gpu BUILD=$build WORK=$WORK/no-gpu-work "$script" --budget 600 train sanitize bench \
        > "$WORK/no-gpu.log" 2>&1
    rc=$?
    n=$(grep -cE '^(train|sanitize|bench) +gpu +SKIP no NVIDIA GPU' "$WORK/no-gpu/summary.txt")
    [ $rc -eq 0 ] && [ "$n" = 3 ] &&
        pass "without a GPU, train, sanitize and bench skip, naming it" ||
        fail "without a GPU: exit $rc, $n stages skipped for it: $(cat "$WORK/no-gpu.log")"
    no_fail "without a GPU: no FAIL line" "$WORK/no-gpu"
fi

if [ "$emulated" != 1 ]; then
    echo "not checked: no emulated CUDA plugins, so no training run to cut short"
else
    # 22 s: prepare, then about 20 s for a run of 100000 steps, which the budget cuts short
    # shellcheck disable=SC2097,SC2098 # the script's WORK lies inside the test's
    OUT=$WORK/cut BUILD=$build WORK=$WORK/cut-work STEPS=100000 "$script" --emulated --budget 22 \
        train > "$WORK/cut.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -qE '^train +train fp32 \(100000 steps\) +SKIP cut at [0-9]+ s by the --budget 22 s' "$WORK/cut/summary.txt" &&
       grep -qE '^train +train fp16 .* SKIP no time to start it' "$WORK/cut/summary.txt"; then
        pass "a run the budget cuts short is SKIP, and so are the runs after it"
    else
        fail "the cut-short run: exit $rc: $(cat "$WORK/cut/summary.txt" 2> /dev/null)"
    fi
    no_fail "the cut-short run: no FAIL line" "$WORK/cut"
    grep -q '^model: ' "$WORK/cut/train/train-fp32.log" &&
        pass "the stopped run's log keeps the lines it printed" ||
        fail "train-fp32.log of the stopped run: $(head -c 400 "$WORK/cut/train/train-fp32.log")"
fi

finish
