#!/bin/bash
# Configures a second build of this source with every optional dependency disabled
# (oneDNN, as on a GPU machine without it; CUDA, the emulator, Open MPI, PCRE2), builds it,
# and runs its suite: what needs none of them must pass there (config, abi, layout,
# plugins, ...), and every test that needs one is still defined, under the same name as in
# BUILD_ROOT's build, and skips saying why. The install, build and sanitize suites are left
# out (they build the tree again), and so is the slow one.
# Usage: test_no_deps.sh SOURCE_ROOT BUILD_ROOT
set -u
src=$1 main=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gearbox-nodeps.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

meson setup "$tmp/build" "$src" -Ddnnl=disabled -Dcuda=disabled -Dgpu_emu=disabled \
  -Dmpi=disabled -Dpcre2=disabled -Dtests=true > "$tmp/setup.log" 2>&1 ||
  { cat "$tmp/setup.log"; fail "meson setup with every optional dependency disabled failed"; }
grep -q "device/cpu and the CPU attention plugins skipped" "$tmp/setup.log" ||
  { cat "$tmp/setup.log"; fail "no message about the skipped CPU plugins"; }
# tests BUILD: the tests BUILD defines ("project:suites / name"), sorted
tests() { meson test -C "$1" --list --no-rebuild 2> /dev/null | grep ' / ' | sort; }
diff <(tests "$main") <(tests "$tmp/build") ||
  fail "the tests defined differ from $main's (above: < there, > without the dependencies)"
echo "ok: $(tests "$tmp/build" | wc -l) tests defined, as in $main"
ninja -C "$tmp/build" > "$tmp/ninja.log" 2>&1 || { tail -40 "$tmp/ninja.log"; fail "build failed"; }
[ ! -e "$tmp/build/plugins/device/cpu/device-cpu.so" ] || fail "device-cpu.so was built without oneDNN"
if ldd "$tmp"/build/plugins/*/*/*.so 2>/dev/null | grep -q "libdnnl"; then
  fail "a plugin links oneDNN"
fi
meson test -C "$tmp/build" --no-suite install --no-suite build --no-suite slow --no-suite sanitize \
  --print-errorlogs > "$tmp/test.log" 2>&1
rc=$?
tail -25 "$tmp/test.log"
[ $rc -eq 0 ] || fail "the dependency-free build's suite failed"
grep -Eq '^Ok: +[1-9]' "$tmp/test.log" || fail "the dependency-free build ran no test"
for t in config-api abi-frozen layout; do
  grep -Eq " $t +OK" "$tmp/test.log" || fail "$t did not pass in the dependency-free build"
done
for t in kernels-device-cpu ddp-mpi tokenizer-bpe cuda-emu-rules gpu-reference-fp32; do
  grep -Eq " $t +SKIP" "$tmp/test.log" || fail "$t did not skip in the dependency-free build"
done
python3 "$src/scripts/skips.py" "$tmp/build/meson-logs/testlog.json" --strict ||
  fail "a skipped test does not say why"
echo "ok: the build without its optional dependencies configures, builds and passes its suite"
