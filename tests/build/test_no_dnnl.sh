#!/bin/bash
# Configures a second build of this source with oneDNN disabled (as on a GPU machine
# without it), builds it, and runs its suite: what needs no CPU device must pass there
# (config, abi, layout, plugins, ...). The install, build and sanitize suites are left out
# (they build the tree again), and so is the slow one.
# Usage: test_no_dnnl.sh SOURCE_ROOT
set -u
src=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gearbox-nodnnl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

meson setup "$tmp/build" "$src" -Ddnnl=disabled -Dtests=true -Dcuda=disabled \
  > "$tmp/setup.log" 2>&1 || { cat "$tmp/setup.log"; fail "meson setup -Ddnnl=disabled failed"; }
grep -q "device/cpu and the CPU attention plugins skipped" "$tmp/setup.log" ||
  { cat "$tmp/setup.log"; fail "no message about the skipped CPU plugins"; }
ninja -C "$tmp/build" > "$tmp/ninja.log" 2>&1 || { tail -40 "$tmp/ninja.log"; fail "build failed"; }
[ ! -e "$tmp/build/plugins/device/cpu/device-cpu.so" ] || fail "device-cpu.so was built without oneDNN"
if ldd "$tmp"/build/plugins/*/*/*.so 2>/dev/null | grep -q "libdnnl"; then
  fail "a plugin links oneDNN"
fi
meson test -C "$tmp/build" --no-suite install --no-suite build --no-suite slow --no-suite sanitize \
  --print-errorlogs > "$tmp/test.log" 2>&1
rc=$?
tail -25 "$tmp/test.log"
[ $rc -eq 0 ] || fail "the oneDNN-free build's suite failed"
grep -Eq '^Ok: +[1-9]' "$tmp/test.log" || fail "the oneDNN-free build ran no test"
for t in config-api abi-frozen layout; do
  grep -Eq " $t +OK" "$tmp/test.log" || fail "$t did not pass in the oneDNN-free build"
done
echo "ok: the build without oneDNN configures, builds and passes its suite"
