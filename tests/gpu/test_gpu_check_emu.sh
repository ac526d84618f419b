#!/usr/bin/env bash
# scripts/gpu-check.sh in its emulated mode, on this build (no new configure): every stage
# as a GPU machine runs it, so a wrong path, variable or missing file in the script fails
# here and not on rented GPU time. Also: a stage rerun replaces its summary lines, a stage
# without a build says to run the build stage, and a machine without inih stops the build
# stage at once, naming the carry command, before anything is configured.
# usage: test_gpu_check_emu.sh SOURCE_ROOT BUILD_ROOT MESON_TEST
#   MESON_TEST: the one gpu-emu test the test stage runs (the suite is the gpu-emu run's)
src=$1 build=$2 inner_test=$3
source "$(dirname "$0")/../common/checks.sh"

# check NAME PATTERN: summary.txt has a line matching PATTERN (an extended regex)
check() {
    if grep -qE "$2" "$WORK/out/summary.txt"; then pass "$1"
    else fail "$1: no line /$2/ in summary.txt:"; sed 's/^/  /' "$WORK/out/summary.txt"; fi
}

gpu_check() {
    OUT=$WORK/out WORK=$WORK/work/new BUILD=$build STEPS=2 GPU_TESTS=$inner_test \
        "$src/scripts/gpu-check.sh" "$@" > "$WORK/run.log" 2>&1
}

gpu_check --emulated
rc=$?
[ $rc -eq 0 ] && pass "gpu-check.sh --emulated exits 0" ||
    fail "gpu-check.sh --emulated exits $rc: $(tail -n 30 "$WORK/run.log")"
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
    [ -s "$WORK/out/$f" ] && pass "log $f kept" || fail "no log $f"
done

# one stage again, through the environment variable: its lines are replaced, not added
GEARBOX_CUDA_EMU=1 gpu_check --stage test
rc=$?
n=$(grep -cE '^test +stage result' "$WORK/out/summary.txt")
[ $rc -eq 0 ] && [ "$n" -eq 1 ] && grep -qE '^train +stage result +PASS' "$WORK/out/summary.txt" &&
    pass "a rerun stage replaces its own lines and keeps the others'" ||
    fail "rerun of the test stage: exit $rc, $n result lines: $(cat "$WORK/out/summary.txt")"

# a later stage with no build to use
OUT=$WORK/out2 BUILD=$WORK/nothing "$src/scripts/gpu-check.sh" --emulated train \
    > "$WORK/run.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q 'run `scripts/gpu-check.sh build` first' "$WORK/out2/summary.txt" &&
    pass "a stage without a build says to run the build stage" ||
    fail "train without a build: exit $rc: $(cat "$WORK/run.log")"

# a machine without inih: its compiler cannot link -linih
cat > "$WORK/cc-without-inih" <<'CC'
#!/bin/sh
for a; do [ "$a" = -linih ] && { echo "ld: cannot find -linih" >&2; exit 1; }; done
exec cc "$@"
CC
chmod +x "$WORK/cc-without-inih"
start=$SECONDS
CC=$WORK/cc-without-inih OUT=$WORK/out3 BUILD=$WORK/fresh GEARBOX_DEPS=$WORK/no-deps \
    "$src/scripts/gpu-check.sh" --emulated > "$WORK/run.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && [ ! -e "$WORK/fresh" ] && [ $((SECONDS - start)) -lt 30 ] &&
   grep -qE '^build +dependencies +FAIL inih .*scripts/gpu-check.sh deps' "$WORK/out3/summary.txt" &&
   ! grep -q '^test ' "$WORK/out3/summary.txt"; then
    pass "without inih the build stage stops at once, naming the carry command"
else
    folder=$(ls -d "$WORK/fresh" 2>&1)
    fail "without inih: exit $rc, $((SECONDS - start)) s, build folder $folder: $(cat "$WORK/run.log")"
fi

"$src/scripts/gpu-check.sh" --stage nonsense > "$WORK/run.log" 2>&1
[ $? -eq 2 ] && grep -q "unknown stage 'nonsense'" "$WORK/run.log" &&
    pass "an unknown stage is a usage error" || fail "--stage nonsense: $(cat "$WORK/run.log")"

finish
