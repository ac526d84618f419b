#!/usr/bin/env bash
# Installs gearbox into a temporary prefix and checks what an installed gearbox offers:
# the binary, the public headers and the plugin toolkit (gearbox/toolkit, which lion
# includes), our plugins in libdir/gearbox/plugins, gearbox-plugin.pc
# (headers and pluginsdir, no libraries), and a gearbox that finds its plugins with no
# environment at all. Then examples/plugins/lion, copied out of the source tree, is built
# against the prefix with pkg-config alone, passes `gearbox test-plugin`, trains 20 steps
# as [optim] plugin = lion through --plugin-path, and once installed into pluginsdir is
# found without it. Last, a program of its own (embed.c) is built against the installed
# engine with `pkg-config gearbox-engine` alone, trains a few steps through its API,
# evaluates and writes a checkpoint.
# usage: test_install.sh SOURCE_ROOT
source "$(dirname "$0")/../cli/lib.sh" "" "" "$1"
PREFIX=$WORK/prefix
unset GEARBOX_PLUGIN_PATH   # the installed gearbox must find its plugins by itself

step() {
    local what=$1
    shift
    "$@" > "$WORK/step.log" 2>&1 && return 0
    fail "$what: $(tail -n 40 "$WORK/step.log")"
    finish
}

# CUDA left out: its plugins install by the same rule as the CPU ones, and nvcc would
# double the time this takes (attn/flash's kernels alone take a minute per architecture)
step "configure into $PREFIX" meson setup "$WORK/build" "$SRC" --prefix="$PREFIX" -Dtests=false \
    -Dgpu_emu=disabled -Dcuda=disabled
step "build" ninja -C "$WORK/build"
step "install" meson install -C "$WORK/build"
GEARBOX=$PREFIX/bin/gearbox

[ -x "$GEARBOX" ] && pass "bin/gearbox" || fail "no $GEARBOX"
for h in plugin tensor device attn optim precision comm engine engine/run engine/train \
    toolkit/instance toolkit/attn_checks toolkit/optim_checks toolkit/comm_checks; do
    [ -f "$PREFIX/include/gearbox/$h.h" ] || fail "include/gearbox/$h.h not installed"
done
pass "the public headers and the plugin toolkit in include/gearbox"

pc_dir=$(dirname "$(find "$PREFIX" -name gearbox-plugin.pc | head -n 1)")
export PKG_CONFIG_PATH=$pc_dir
plugins_dir=$(pkg-config --variable=pluginsdir gearbox-plugin)
[ -f "$pc_dir/gearbox-plugin.pc" ] && [ "${plugins_dir#"$PREFIX"/}" != "$plugins_dir" ] &&
    [ -f "$plugins_dir/device-cpu.so" ] &&
    pass "gearbox-plugin.pc: pluginsdir $plugins_dir holds the plugins" ||
    fail "gearbox-plugin.pc in '$pc_dir', pluginsdir '$plugins_dir'"
cflags=$(pkg-config --cflags gearbox-plugin)
[[ "$cflags" == *"-I$PREFIX/include"* ]] && [ -z "$(pkg-config --libs gearbox-plugin)" ] &&
    pass "gearbox-plugin.pc: $cflags, no libraries" || fail "gearbox-plugin.pc cflags '$cflags'"

env -i PATH="$PATH" "$GEARBOX" plugins > "$WORK/plugins.txt" 2>&1 ||
    fail "installed gearbox plugins: $(cat "$WORK/plugins.txt")"
for row in "device +cpu" "attn +math" "optim +adamw" "precision +fp32" "comm +single"; do
    grep -qE "^$row .* $plugins_dir/" "$WORK/plugins.txt" ||
        fail "the installed gearbox, with no environment, does not find $row in $plugins_dir: $(cat "$WORK/plugins.txt")"
done
pass "the installed gearbox finds its plugins with no environment"

cp -r "$SRC/examples/plugins/lion" "$WORK/lion"
rm -rf "$WORK/lion/build"
step "build examples/plugins/lion against the prefix" \
    bash -c "meson setup '$WORK/lion/build' '$WORK/lion' && ninja -C '$WORK/lion/build'"
pass "examples/plugins/lion builds out of tree with pkg-config alone"

check_lion "the installed gearbox:"

# A third program on the engine: the installed headers, gearbox-engine.pc and the shared
# library, built with pkg-config alone; it finds the installed plugins by itself too.
mkdir -p "$WORK/embed"
cp "$SRC/tests/install/embed.c" "$WORK/embed/"
[ -f "$pc_dir/gearbox-engine.pc" ] && [ -f "$PREFIX/include/gearbox/engine.h" ] ||
    fail "gearbox-engine.pc in '$pc_dir' or include/gearbox/engine.h not installed"
step "build a program on the engine with pkg-config alone" bash -c \
    "cc -std=c11 -Wall -Wextra -Werror '$WORK/embed/embed.c' -o '$WORK/embed/embed' \
     \$(pkg-config --cflags --libs gearbox-engine) -lm \
     -Wl,-rpath,\$(pkg-config --variable=libdir gearbox-engine)"
write_config "$WORK/embed/run.ini"
if "$WORK/embed/embed" "$WORK/embed/run.ini" 3 > "$WORK/embed/log" 2>&1 &&
    grep -qE '^step 3 loss [0-9]+\.[0-9]+$' "$WORK/embed/log" &&
    grep -qE '^eval train [0-9.]+ val [0-9.]+$' "$WORK/embed/log" &&
    [ -f "$WORK/embed/out/ckpt-000003.gbk" ]; then
    pass "a program built on gearbox-engine trains 3 steps, evaluates and saves: $(grep -E '^(step|eval)' "$WORK/embed/log" | tr '\n' ' ')"
else
    fail "the program on gearbox-engine: $(tail -n 20 "$WORK/embed/log")"
fi

step "install lion" meson install -C "$WORK/lion/build"
"$GEARBOX" plugins optim 2>&1 | grep -qE "^optim +lion .* $plugins_dir/optim-lion-cpu.so$" &&
    pass "installed into pluginsdir, lion is found without --plugin-path" ||
    fail "lion not found after meson install: $("$GEARBOX" plugins optim 2>&1)"
finish
