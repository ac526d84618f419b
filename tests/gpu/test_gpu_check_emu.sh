#!/usr/bin/env bash
# scripts/gpu-check.sh in its emulated mode, on this build (no new configure): every stage
# as a GPU machine runs it, so a wrong path, variable or missing file in the script fails
# here and not on rented GPU time. Also: a stage rerun replaces its summary lines, a stage
# without a build says to run the build stage, and a machine without inih stops the build
# stage at once, naming the carry command, before anything is configured.
# usage: test_gpu_check_emu.sh SOURCE_ROOT BUILD_ROOT MESON_TEST
#   MESON_TEST: the one gpu-emu test the test stage runs (the suite is the gpu-emu run's)
set -u
src=$1 build=$2 inner_test=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
pass() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; failures=$((failures + 1)); }

# check NAME PATTERN: summary.txt has a line matching PATTERN (an extended regex)
check() {
    if grep -qE "$2" "$tmp/out/summary.txt"; then pass "$1"
    else fail "$1: no line /$2/ in summary.txt:"; sed 's/^/  /' "$tmp/out/summary.txt"; fi
}

gpu_check() {
    OUT=$tmp/out WORK=$tmp/work/new BUILD=$build STEPS=2 GPU_TESTS=$inner_test \
        "$src/scripts/gpu-check.sh" "$@" > "$tmp/run.log" 2>&1
}

gpu_check --emulated
rc=$?
[ $rc -eq 0 ] && pass "gpu-check.sh --emulated exits 0" ||
    fail "gpu-check.sh --emulated exits $rc: $(tail -n 30 "$tmp/run.log")"
check "build stage passes" '^build +stage result +PASS'
check "build reuses the configured tree" '^build +configure +PASS .* configured already'
check "the emulated device stands in for the GPU" '^build +gpu +PASS emulated'
check "test stage runs $inner_test" "^test +meson test +PASS $inner_test: Ok: 1 "
check "prepare writes into folders that do not exist yet" '^train +prepare data +PASS .*-> .*/work/new/data/'
for precision in fp32 tf32 bf16 fp16; do
    check "train $precision" "^train +train $precision \(2 steps\) +PASS done: 2 steps"
done
check "sanitize is skipped, saying why" '^sanitize +compute-sanitizer +SKIP emulated'
check "bench is skipped, saying why" '^bench +benchmarks +SKIP emulated'
for f in build/build.log build/doctor.log test/test-gpu.log train/train-fp16.log; do
    [ -s "$tmp/out/$f" ] && pass "log $f kept" || fail "no log $f"
done

# one stage again, through the environment variable: its lines are replaced, not added
GEARBOX_CUDA_EMU=1 gpu_check --stage test
rc=$?
n=$(grep -cE '^test +stage result' "$tmp/out/summary.txt")
[ $rc -eq 0 ] && [ "$n" -eq 1 ] && grep -qE '^train +stage result +PASS' "$tmp/out/summary.txt" &&
    pass "a rerun stage replaces its own lines and keeps the others'" ||
    fail "rerun of the test stage: exit $rc, $n result lines: $(cat "$tmp/out/summary.txt")"

# a later stage with no build to use
OUT=$tmp/out2 BUILD=$tmp/nothing "$src/scripts/gpu-check.sh" --emulated train > "$tmp/run.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q 'run `scripts/gpu-check.sh build` first' "$tmp/out2/summary.txt" &&
    pass "a stage without a build says to run the build stage" ||
    fail "train without a build: exit $rc: $(cat "$tmp/run.log")"

# a machine without inih: its compiler cannot link -linih
cat > "$tmp/cc-without-inih" <<'CC'
#!/bin/sh
for a; do [ "$a" = -linih ] && { echo "ld: cannot find -linih" >&2; exit 1; }; done
exec cc "$@"
CC
chmod +x "$tmp/cc-without-inih"
start=$SECONDS
CC=$tmp/cc-without-inih OUT=$tmp/out3 BUILD=$tmp/fresh GEARBOX_DEPS=$tmp/no-deps \
    "$src/scripts/gpu-check.sh" --emulated > "$tmp/run.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && [ ! -e "$tmp/fresh" ] && [ $((SECONDS - start)) -lt 30 ] &&
   grep -qE '^build +dependencies +FAIL inih .*scripts/gpu-check.sh deps' "$tmp/out3/summary.txt" &&
   ! grep -q '^test ' "$tmp/out3/summary.txt"; then
    pass "without inih the build stage stops at once, naming the carry command"
else
    fail "without inih: exit $rc, $((SECONDS - start)) s, build folder $(ls -d "$tmp/fresh" 2>&1): $(cat "$tmp/run.log")"
fi

"$src/scripts/gpu-check.sh" --stage nonsense > "$tmp/run.log" 2>&1
[ $? -eq 2 ] && grep -q "unknown stage 'nonsense'" "$tmp/run.log" &&
    pass "an unknown stage is a usage error" || fail "--stage nonsense: $(cat "$tmp/run.log")"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all checks passed"
