#!/usr/bin/env bash
# A second build of the whole tree (every target, tests included) with AddressSanitizer
# (and LeakSanitizer) and UBSan, in BUILD_ROOT/sanitize, configured as a user would
# (`meson setup -Db_sanitize=address,undefined`: the default release buildtype, -O3, whose
# warnings differ from -O2's, with asserts kept). Then the fast tests run there (suite fast:
# the config and fuzz corpus replays, the CLI's refusals, hostile inputs, plugin search
# and token folders). A sanitizer report fails the test it occurs in. Left out: CUDA (nvcc
# code is not instrumented; compute-sanitizer covers it, scripts/gpu-check.sh) and the
# CUDA emulator (its Boost.Context fibers switch stacks without telling ASan, which then
# reports false overflows). scripts/sanitize-clang.sh does the same with clang.
# usage: test_sanitize.sh SOURCE_ROOT BUILD_ROOT [CC]   CC: the compiler (default cc)
set -u
src=$1
dir=$2/sanitize${3:+-$3}
fail() { echo "FAIL: $*"; exit 1; }

c_args=()
if [ -n "${3:-}" ]; then
    export CC=$3 CXX=g++
    # clang: the sanitizers' checks keep some `omp simd` loops from vectorising, which
    # clang reports as a warning (pass-failed), an error here; speed is not tested here
    [[ $3 == clang* ]] && CXX=${3/clang/clang++} c_args=(-Dc_args=-Wno-pass-failed)
fi
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$src" "${c_args[@]}" \
        -Db_sanitize=address,undefined -Db_lundef=false -Db_ndebug=false \
        -Dcuda=disabled -Dgpu_emu=disabled > "$dir.setup.log" 2>&1 ||
        { cat "$dir.setup.log"; fail "meson setup with -Db_sanitize=address,undefined"; }
fi
ninja -C "$dir" > "$dir.build.log" 2>&1 ||
    { grep -E "error|FAILED" -A3 "$dir.build.log" | head -60
      fail "the whole tree does not build with -Db_sanitize=address,undefined ($dir.build.log)"; }
# halt on the first report of either sanitizer, with a stack. LeakSanitizer reads the
# dynamic TLS of OpenMP's worker threads wrongly under Debian 12's glibc and crashes
# ("Tracer caught signal 11"), so it scans no TLS, and libgomp's own allocations, which
# only its TLS holds, are suppressed (lsan.supp).
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1
export LSAN_OPTIONS=use_tls=0:suppressions=$src/tests/sanitize/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
# spinning OpenMP threads crawl under the sanitizers when the cores are busy
export OMP_WAIT_POLICY=passive
meson test -C "$dir" --suite fast --print-errorlogs > "$dir.test.log" 2>&1
rc=$?
grep -E "^ *[0-9]+/[0-9]+ " "$dir.test.log"
if [ $rc -ne 0 ]; then
    grep -E "runtime error|ERROR: (Address|Leak)Sanitizer|^FAIL" -A12 "$dir.test.log" | head -80
    fail "the fast tests under -Db_sanitize=address,undefined (log: $dir.test.log)"
fi
grep -Eq '^Ok: +[1-9]' "$dir.test.log" || fail "no test ran under the sanitizers"
echo "ok: the fast tests pass under AddressSanitizer, LeakSanitizer and UBSan"
