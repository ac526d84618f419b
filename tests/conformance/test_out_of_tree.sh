#!/usr/bin/env bash
# Plugins built out of tree against this build's headers (its uninstalled
# gearbox-plugin.pc): `gearbox new-plugin` for every kind, which must build warning-free,
# be listed by `gearbox plugins` and go through `gearbox test-plugin` without crashing;
# `new-plugin --cuda` for attn and optim, built with nvcc where there is one; new-plugin's
# refusals; and examples/plugins/lion, copied away from the source tree,
# which must pass the kit and train.
# usage: test_out_of_tree.sh GEARBOX FIXTURES_DIR SOURCE_ROOT UNINSTALLED_PC_DIR
source "$(dirname "$0")/../cli/lib.sh" "$1" "$2" "$3"
export PKG_CONFIG_PATH=$4

# build DIR: meson setup and ninja, warnings as errors; 0 on success.
build() {
    meson setup "$1/build" "$1" -Dwerror=true > "$WORK/build.log" 2>&1 &&
        ninja -C "$1/build" >> "$WORK/build.log" 2>&1
}

# scaffold KIND DIR MODULE DEVICE [--cuda]: `gearbox new-plugin` writes KIND/mine into
# DIR, which builds MODULE, and `gearbox plugins` lists it for DEVICE; 1 when a step fails.
scaffold() {
    local kind=$1 dir=$2 module=$3 device=$4
    shift 4
    local what="new-plugin${1:+ $1} $kind"
    "$GEARBOX" new-plugin "$@" "$kind" mine "$dir" > "$WORK/new.log" 2>&1 ||
        { fail "$what: $(cat "$WORK/new.log")"; return 1; }
    build "$dir" && [ -f "$dir/build/$module" ] && pass "$what builds $module" ||
        { fail "$what does not build: $(tail -n 30 "$WORK/build.log")"; return 1; }
    "$GEARBOX" plugins --plugin-path "$dir/build" "$kind" > "$WORK/list" 2>&1
    grep -qE "^$kind +mine +0.1.0 +$device +$dir/build/$module$" "$WORK/list" &&
        pass "gearbox plugins lists $kind/mine for $device" ||
        fail "plugins $kind: $(cat "$WORK/list")"
}

for kind in device attn optim precision comm; do
    dir=$WORK/$kind
    module=$kind-mine-cpu.so
    [ "$kind" = device ] && module=device-mine.so
    devices="cpu,host-memory"
    [ "$kind" = device ] && devices="its own family"
    scaffold "$kind" "$dir" "$module" "$devices" || continue
    rc=0
    "$GEARBOX" test-plugin "$dir/build/$module" > "$WORK/table" 2>&1 || rc=$?
    # every entry is a stub: unsupported (or failing) checks and exit status 1, no crash
    if [ "$rc" -eq 1 ] && grep -q "^load: descriptor, ABI, vtable  *PASS" "$WORK/table" &&
        grep -qE "^[0-9]+ passed, [0-9]+ failed, [0-9]+ unsupported$" "$WORK/table" &&
        ! grep -q "TODO" <(grep " PASS " "$WORK/table"); then
        pass "test-plugin on the $kind stub: $(grep -c " UNSUPPORTED " "$WORK/table") unsupported, $(grep -c " FAIL " "$WORK/table") failing, exit status 1"
    else
        fail "test-plugin on the $kind stub (exit status $rc): $(cat "$WORK/table")"
    fi
done

# --cuda: built with nvcc where there is one; without a GPU the kit loads it, passes its
# descriptor, file name and schema, and says the device is unavailable (exit status 77).
for kind in attn optim; do
    if ! command -v "${NVCC:-nvcc}" > /dev/null; then
        echo "ok: new-plugin --cuda $kind not built: no nvcc here (SKIP)"
        continue
    fi
    dir=$WORK/cuda-$kind
    module=$kind-mine-cuda.so
    scaffold "$kind" "$dir" "$module" cuda --cuda || continue
    rc=0
    "$GEARBOX" test-plugin "$dir/build/$module" > "$WORK/table" 2>&1 || rc=$?
    if grep -q "^load: descriptor, ABI, vtable  *PASS" "$WORK/table" &&
        grep -q "^file name  *PASS" "$WORK/table" &&
        { [ "$rc" -eq 77 ] || [ "$rc" -eq 1 ]; }; then
        pass "test-plugin on the --cuda $kind stub: exit status $rc (77: no GPU here)"
    else
        fail "test-plugin on the --cuda $kind stub (exit status $rc): $(cat "$WORK/table")"
    fi
    rc=0
    "$GEARBOX" test-plugin --device cpu "$dir/build/$module" > "$WORK/table" 2>&1 || rc=$?
    [ "$rc" -eq 1 ] && grep -q "runs on cuda, not on the device cpu" "$WORK/table" &&
        pass "test-plugin --device cpu refuses the --cuda $kind stub" ||
        fail "test-plugin --device cpu on the --cuda $kind stub (exit status $rc): $(cat "$WORK/table")"
done
expect_error "new-plugin --cuda for a host-code kind" 2 "is for attn and optim" -- \
    "$GEARBOX" new-plugin --cuda comm mine "$WORK/bad"

expect_error "new-plugin into a folder that is not empty" 1 "is not empty" -- \
    "$GEARBOX" new-plugin attn other "$WORK/attn"
expect_error "new-plugin with a bad name" 2 "lower_snake_case" -- \
    "$GEARBOX" new-plugin attn My-Plugin "$WORK/bad"
expect_error "new-plugin with an unknown kind" 2 "unknown kind 'optimizer'" -- \
    "$GEARBOX" new-plugin optimizer mine "$WORK/bad"
expect_error "new-plugin attn auto" 2 "'auto' is taken" -- \
    "$GEARBOX" new-plugin attn auto "$WORK/bad"
[ ! -e "$WORK/bad" ] && pass "refusals write nothing" || fail "a refused new-plugin wrote $WORK/bad"

cp -r "$SRC/examples/plugins/lion" "$WORK/lion"
rm -rf "$WORK/lion/build"
if build "$WORK/lion"; then
    pass "examples/plugins/lion builds out of tree"
    check_lion "this build's gearbox:"
else
    fail "examples/plugins/lion does not build: $(tail -n 30 "$WORK/build.log")"
fi
finish
