#!/usr/bin/env bash
# The engine decides from what a device says of itself (gb_device_desc, ABI 1.6: family,
# memory kind, native dtypes, preferred precision, asynchrony), never from which device it
# is: no engine code names a fixed device bit (GB_DEVICE_CPU, GB_DEVICE_CUDA) or compares
# with a device's name ("cpu", "cuda"). Allowed, each for its reason: the loader's table of
# what the fixed bits mean (frozen for ABI 1, how devices built before 1.6 are described),
# the settings' default plugin table, and manifest.json's "cpu" key (the host CPU, which
# every run has, not a device).
# usage: test_device_neutral.sh SOURCE_ROOT
set -u
cd "$1" || exit 1
failures=0

allowed() { # FILE LINE: whether the line is one of the reasons above
    case "$1" in
    engine/loader.c) [[ $2 =~ ^[[:space:]]*\{GB_DEVICE_(CPU|CUDA),\ \"(cpu|cuda)\",\ GB_MEMORY_[A-Z]+, ]] ;;
    engine/settings.c) [[ $2 =~ default_plugins\[\]\ =\ \{NULL,\ \"cpu\", ]] ;;
    engine/manifest.c) [[ $2 =~ \"cpu\",\ cpu_object\(\) ]] ;;
    *) false ;;
    esac
}

files=$(find engine -type f \( -name '*.c' -o -name '*.h' \) | sort)
[ -n "$files" ] || { echo "FAIL: no engine sources under $PWD"; exit 1; }
for f in $files; do
    while IFS=: read -r n line; do
        code=${line%%/\**}  # what precedes a comment on the line
        [[ $code =~ ^[[:space:]]*(\*|//|$) ]] && continue
        [[ $code =~ GB_DEVICE_(CPU|CUDA)|\"(cpu|cuda)\" ]] || continue
        allowed "$f" "$line" && continue
        echo "FAIL: $f:$n decides by a fixed device: $(echo "$line" | sed 's/^[[:space:]]*//')"
        echo "      (decide from rt->device, the gb_device_desc the device describes itself with)"
        failures=$((failures + 1))
    done < <(grep -nE 'GB_DEVICE_(CPU|CUDA)|"(cpu|cuda)"' "$f")
done
if [ "$failures" -ne 0 ]; then
    echo "$failures place(s) in engine/ decide by a fixed device"
    exit 1
fi
echo "ok: no engine code compares a device name or bit with a fixed device ($(echo "$files" | wc -l) files)"
