#!/usr/bin/env bash
# Where plugins are looked for and what is trusted: paths in a config resolve against its
# folder, paths given with --set against the working directory; a folder on the search
# path is searched at its top and in KIND/NAME/ only; a plugin found twice is reported;
# files and folders others may write are refused unless [run] allow_writable_plugins; an
# empty plugin folder is no problem (UBSan once caught qsort getting NULL there).
source "$(dirname "$0")/lib.sh"
make_data
PLUGINS="$GEARBOX_PLUGIN_PATH"
ADAMW="$PLUGINS/optim/adamw/optim-adamw-cpu.so"
umask 022
mkdir -p "$WORK/cfg/mine" "$WORK/elsewhere"
cp "$ADAMW" "$WORK/cfg/mine/"
write_config "$WORK/cfg/run.ini"
# the optimizer `check` chose: "#   optim     adamw ... PATH"
chosen() { sed -nE 's/^#   optim +[^ ]+ +[^ ]+ +(.*)$/\1/p' "$WORK/check.out"; }
check_from() {
    local dir=$1
    shift
    (cd "$dir" && "$GEARBOX" check "$WORK/cfg/run.ini" "$@") > "$WORK/check.out" 2> "$WORK/check.err"
}

# a path in the config: against the config's folder, wherever gearbox is run from
sed -i 's|^plugin = adamw$|plugin = mine/optim-adamw-cpu.so|' "$WORK/cfg/run.ini"
check_from "$WORK/elsewhere"
[ "$(chosen)" = "$WORK/cfg/mine/optim-adamw-cpu.so" ] &&
    pass "[optim] plugin = mine/optim-adamw-cpu.so resolves against the config's folder" ||
    fail "a relative plugin path in the config: chose '$(chosen)'; $(cat "$WORK/check.err")"
# ... and from --set: against the working directory, as a shell user expects
check_from "$WORK/cfg/mine" --set optim.plugin=./optim-adamw-cpu.so
[ "$(chosen)" = "$WORK/cfg/mine/optim-adamw-cpu.so" ] &&
    pass "--set optim.plugin=./optim-adamw-cpu.so resolves against the working directory" ||
    fail "a relative plugin path from --set: chose '$(chosen)'; $(cat "$WORK/check.err")"
sed -i 's|^plugin = mine/optim-adamw-cpu.so$|plugin = adamw|' "$WORK/cfg/run.ini"

# [run] plugin_path = mine: the config's folder; the build's adamw further down is reported
sed -i 's|^\[run\]$|[run]\nplugin_path = mine|' "$WORK/cfg/run.ini"
GEARBOX_PLUGIN_PATH= check_from "$WORK/elsewhere"
[ "$(chosen)" = "$WORK/cfg/mine/optim-adamw-cpu.so" ] &&
    pass "[run] plugin_path = mine resolves against the config's folder" ||
    fail "[run] plugin_path = mine: chose '$(chosen)'; $(cat "$WORK/check.err")"
grep -qF "warning: [optim] plugin = adamw: using $WORK/cfg/mine/optim-adamw-cpu.so, the first on the search path; $ADAMW has the same name and is not loaded" "$WORK/check.err" &&
    pass "a plugin found twice on the path is reported" ||
    fail "no report of the shadowed adamw: $(cat "$WORK/check.err")"
"$GEARBOX" plugins optim --plugin-path "$WORK/cfg/mine" > "$WORK/plugins.out" 2>&1
grep -qF "$ADAMW (not used: the same name is found first above)" "$WORK/plugins.out" &&
    pass "gearbox plugins marks the copy the search does not use" ||
    fail "gearbox plugins with adamw twice: $(cat "$WORK/plugins.out")"
sed -i '/^plugin_path = mine$/d' "$WORK/cfg/run.ini"

# only the top of a search folder and KIND/NAME/ below it: nothing deeper
mkdir -p "$WORK/deep/a/b/c" "$WORK/layout/optim/adamw"
cp "$ADAMW" "$WORK/deep/a/b/c/"
cp "$ADAMW" "$WORK/layout/optim/adamw/"
GEARBOX_PLUGIN_PATH= check_from "$WORK/elsewhere" --plugin-path "$WORK/deep"
[ "$(chosen)" != "$WORK/deep/a/b/c/optim-adamw-cpu.so" ] && [ -n "$(chosen)" ] &&
    pass "a plugin three folders below a search folder is not found" ||
    fail "deep search: chose '$(chosen)'"
GEARBOX_PLUGIN_PATH= check_from "$WORK/elsewhere" --plugin-path "$WORK/layout"
[ "$(chosen)" = "$WORK/layout/optim/adamw/optim-adamw-cpu.so" ] &&
    pass "the build tree's layout KIND/NAME/ is searched" ||
    fail "KIND/NAME layout: chose '$(chosen)'; $(cat "$WORK/check.err")"

# writable by others: refused, unless allowed
mkdir -p "$WORK/open" "$WORK/openfile"
cp "$ADAMW" "$WORK/open/"
cp "$ADAMW" "$WORK/openfile/"
chmod 777 "$WORK/open"
chmod 666 "$WORK/openfile/optim-adamw-cpu.so"
expect_error "a plugin folder writable by everyone" 2 "plugin $WORK/open/optim-adamw-cpu.so refused: $WORK/open is writable by everyone (mode 0777)" -- \
    "$GEARBOX" check "$WORK/cfg/run.ini" --plugin-path "$WORK/open"
expect_error "a plugin file writable by everyone" 2 "$WORK/openfile/optim-adamw-cpu.so is writable by everyone (mode 0666)" -- \
    "$GEARBOX" check "$WORK/cfg/run.ini" --set optim.plugin="$WORK/openfile/optim-adamw-cpu.so"
"$GEARBOX" check "$WORK/cfg/run.ini" --plugin-path "$WORK/open" \
    --set run.allow_writable_plugins=true > "$WORK/check.out" 2> "$WORK/check.err"
[ "$(chosen)" = "$WORK/open/optim-adamw-cpu.so" ] &&
    pass "[run] allow_writable_plugins = true loads it" ||
    fail "allow_writable_plugins: chose '$(chosen)'; $(cat "$WORK/check.err")"

# an empty plugin folder on the path
mkdir -p "$WORK/empty"
"$GEARBOX" plugins --plugin-path "$WORK/empty" > "$WORK/plugins.out" 2>&1 &&
    grep -q "optim-adamw-cpu.so" "$WORK/plugins.out" &&
    pass "gearbox plugins --plugin-path EMPTY lists the other folders' plugins" ||
    fail "plugins with an empty folder: $(cat "$WORK/plugins.out")"
finish
