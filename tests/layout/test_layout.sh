#!/usr/bin/env bash
# The source tree's architecture (docs/architecture.md), checked: the engine includes
# nothing of the tools (nor oneDNN, which is the device plugin's), no plugin reaches into
# another plugin's folder, kernels/ stands on include/ alone, and no file takes an ABI
# header's name. Shared code lives in plugins/KIND/common/ or kernels/DEVICE/, which any plugin
# may include; include/gearbox/ is the ABI every file may include.
# usage: test_layout.sh SOURCE_ROOT
set -u
cd "$1" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The "..." includes of a file, one per line.
quoted_includes() { sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1"; }

# Every source file under a folder.
sources() { find "$@" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.in' \) | sort; }

# ---- engine/ includes engine/ and include/ only (its public headers also by bare name) ----
engine_files=$(sources engine)
[ -n "$engine_files" ] || fail "no engine/ sources found under $PWD"
for f in $engine_files; do
    while read -r inc; do
        [ -z "$inc" ] && continue
        if [ -e "engine/$inc" ] || [ -e "include/$inc" ] || [ -e "include/gearbox/engine/$inc" ]; then
            continue
        fi
        found=$(find tools -path "*/$inc" -type f 2>/dev/null | head -n 1)
        if [ -n "$found" ]; then
            fail "$f includes \"$inc\", a tools file ($found): the engine must not depend on its tools"
        else
            fail "$f includes \"$inc\", which is neither in engine/ nor include/"
        fi
    done < <(quoted_includes "$f")
    grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(oneapi/)?dnnl' "$f" &&
        fail "$f includes oneDNN: the engine links no compute library (the device plugin does)"
done
grep -nE "tools|dnnl" engine/meson.build | grep -v '^[0-9]*:#' | grep -q . &&
    fail "engine/meson.build names tools or oneDNN: $(grep -nE 'tools|dnnl' engine/meson.build | grep -v '^[0-9]*:#')"

# ---- plugins/KIND/NAME includes its own folder, plugins/KIND/common, kernels/, include/ ----
plugin_dirs=$(find plugins -mindepth 2 -maxdepth 2 -type d ! -name common | sort)
[ -n "$plugin_dirs" ] || fail "no plugin folders found under $PWD/plugins"
for dir in $plugin_dirs; do
    kind_common="$(dirname "$dir")/common"
    for f in $(sources "$dir"); do
        here=$(dirname "$f")
        while read -r inc; do
            [ -z "$inc" ] && continue
            if [ -e "$here/$inc" ] || [ -e "$dir/$inc" ] || [ -e "$kind_common/$inc" ] ||
                [ -e "include/$inc" ] || compgen -G "kernels/*/$inc" > /dev/null; then
                continue
            fi
            # Not one of the allowed places: name where it does live, if in this tree.
            owner=$(find plugins engine tools -path "*/$inc" -type f 2>/dev/null | head -n 1)
            [ -n "$owner" ] &&
                fail "$f includes \"$inc\" from $(dirname "$owner"): a plugin includes only its own folder, plugins/KIND/common/, kernels/ and include/"
        done < <(quoted_includes "$f")
    done
    if [ -f "$dir/meson.build" ] && grep -nE "'\.\./|\"\.\./" "$dir/meson.build" | grep -q .; then
        fail "$dir/meson.build names a path outside its folder: $(grep -nE "'\.\./|\"\.\./" "$dir/meson.build")"
    fi
done

# ---- kernels/ includes kernels/ and include/ only ----
for f in $(sources kernels); do
    while read -r inc; do
        [ -z "$inc" ] && continue
        [ -e "$(dirname "$f")/$inc" ] || [ -e "kernels/$inc" ] || [ -e "include/$inc" ] ||
            compgen -G "kernels/*/$inc" > /dev/null ||
            fail "$f includes \"$inc\": kernels/ includes only kernels/ and include/"
    done < <(quoted_includes "$f")
done

# ---- no file outside include/gearbox/ is named after an ABI header ----
# (an include matched by file name would take tools/conformance/device.c for device.h's)
for h in include/gearbox/*.h; do
    stem=$(basename "$h" .h)
    clash=$(find engine tools plugins kernels -type f \( -name "$stem.c" -o -name "$stem.h" -o -name "$stem.cu" \) | head -n 3)
    [ -n "$clash" ] && fail "$(echo $clash) named like the ABI header $h: name the file after its layer as well (tools/conformance/check_$stem.c, tools/bench/bench_$stem.c)"
done

# ---- the public engine API: tools/ builds on include/gearbox alone ----
# tools/ includes its own files and include/gearbox/ (the plugin ABI and the engine API),
# never an engine/ private header; include/gearbox/engine/ includes only include/gearbox/;
# plugins/ include nothing of the engine, public or private, nor of tools/.
for f in $(sources tools); do
    here=$(dirname "$f")
    while read -r inc; do
        [ -z "$inc" ] && continue
        case "$inc" in gearbox/*) [ -e "include/$inc" ] && continue ;; esac
        # a tools file (scaffold templates include the .in-generated files beside them)
        [ -e "$here/$inc" ] || [ -e "$here/$inc.in" ] && continue
        [ -n "$(find tools -path "*/$inc" -type f | head -n 1)" ] && continue
        if [ -e "engine/$inc" ] || [ -e "engine/$(basename "$inc")" ]; then
            fail "$f includes \"$inc\", an engine/ private header: include \"gearbox/engine.h\" (or its gearbox/engine/*.h) and add to the public API what is missing"
        else
            fail "$f includes \"$inc\", which is neither in tools/ nor include/gearbox/"
        fi
    done < <(quoted_includes "$f")
done
grep -nE "engine_dep\b|include_directories\([^)]*engine" tools/meson.build | grep -v '^[0-9]*:#' | grep -q . &&
    fail "tools/meson.build puts engine/ on the tools' include path: $(grep -nE "engine_dep\b|include_directories\([^)]*engine" tools/meson.build | grep -v '^[0-9]*:#'); use engine_api_dep"
for f in $(sources include/gearbox/engine) include/gearbox/engine.h; do
    while read -r inc; do
        case "$inc" in gearbox/*) [ -e "include/$inc" ] && continue ;; esac
        fail "$f includes \"$inc\": a public engine header includes only \"gearbox/...\" headers"
    done < <(quoted_includes "$f")
done
for f in $(sources plugins); do
    grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"gearbox/engine[./]' "$f" &&
        fail "$f includes the engine's API: a plugin talks to the engine only through the ABI of include/gearbox/*.h"
done

if [ "$failures" -eq 0 ]; then
    echo "ok: engine/ includes nothing of tools/ nor oneDNN; $(wc -w <<< "$plugin_dirs") plugin folders include only their own files, common/, kernels/ and include/; kernels/ only itself and include/; no file is named like an ABI header; tools/ builds on include/gearbox alone and plugins/ on the ABI alone"
    exit 0
fi
echo "$failures layout violation(s)"
exit 1
