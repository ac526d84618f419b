#!/usr/bin/env bash
# The CUDA objects of attn/math, attn/mem_efficient, attn/flash, optim/adamw,
# optim/adamw_fused and optim/muon (and attn/cudnn where cuDNN was found to build it) on any machine, GPU
# or not: `gearbox plugins` lists each for the cuda device; the conformance kit loads
# each, passes its descriptor, file name and schema, and then skips (exit 77: no
# device/cuda or no GPU here) or passes, never fails (attn/mem_efficient, which refuses
# every problem on cuda, ends "no check of the attn contract passed" with 0 failed); on the cpu device the kit and
# `gearbox check` refuse them with a message naming the device.
# usage: test_cuda_plugins.sh GEARBOX PLUGINS_DIR SOURCE_ROOT
set -u
GEARBOX=$1
PLUGINS=$2
SRC=$3
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# `gearbox check` reads the data folder too: a tiny one
head -c 20000 "$SRC/examples/data/tinyshakespeare.txt" > "$WORK/tiny.txt"
"$GEARBOX" prepare "$WORK/tiny.txt" "$WORK/data" > /dev/null || fail "gearbox prepare"

listing=$("$GEARBOX" plugins 2>&1)
# attn/cudnn: built only with cuDNN; 16-bit only, so `gearbox check` runs it under bf16
cudnn_row=
[ -f "$PLUGINS/attn/cudnn/attn-cudnn-cuda.so" ] &&
    cudnn_row="attn cudnn attn/cudnn/attn-cudnn-cuda.so precision.plugin=bf16"
# the kernel plugins are built at the top of PLUGINS_DIR (plugins/meson.build)
for row in "attn math attn-math-cuda.so" "attn mem_efficient attn-mem_efficient-cuda.so" \
    "attn flash attn-flash-cuda.so" "optim adamw optim-adamw-cuda.so" \
    "optim adamw_fused optim-adamw_fused-cuda.so" "optim muon optim-muon-cuda.so" \
    ${cudnn_row:+"$cudnn_row"}; do
    read -r kind name file extra <<< "$row"
    grep -Eq "^$kind +$name +[0-9.]+ +cuda +.*/$file\$" <<< "$listing" ||
        fail "gearbox plugins does not list $kind/$name for cuda ($file):"$'\n'"$listing"

    so=$PLUGINS/$file
    rc=0
    table=$("$GEARBOX" test-plugin "$so" 2>&1) || rc=$?
    # attn/mem_efficient's CUDA object refuses every problem: on a GPU no contract check passes
    if [ "$name" = mem_efficient ] && [ "$rc" -eq 1 ] &&
        grep -q "no check of the attn contract passed" <<< "$table" &&
        grep -q " 0 failed" <<< "$table"; then
        rc=0
    fi
    if [ "$rc" -ne 77 ] && [ "$rc" -ne 0 ]; then
        fail "test-plugin $file exited $rc (77: skipped, 0: passed):"$'\n'"$table"
    fi
    for check in "load: descriptor, ABI, vtable" "file name" "config schema and defaults"; do
        grep -q "^$check *PASS" <<< "$table" || fail "test-plugin $file: '$check' did not pass"
    done

    rc=0
    table=$("$GEARBOX" test-plugin --device cpu "$so" 2>&1) || rc=$?
    [ "$rc" -eq 1 ] && grep -q "runs on cuda, not on the device cpu" <<< "$table" ||
        fail "test-plugin --device cpu $file: exit $rc, expected 1 naming the device:"$'\n'"$table"

    rc=0
    out=$("$GEARBOX" check "$SRC/examples/shakespeare_char.ini" --set "data.dir=$WORK/data" \
        --set "$kind.plugin=$so" ${extra:+--set "$extra"} 2>&1) || rc=$?
    [ "$rc" -eq 2 ] && grep -Eq "cuda.*(device|only)" <<< "$out" ||
        fail "gearbox check with [$kind] plugin = $file on the cpu device: exit $rc, expected 2 "$'\n'"$out"
done

if [ "$failures" -eq 0 ]; then
    echo "ok: the CUDA objects load, list for cuda, skip or pass the kit, refuse the cpu device"
    exit 0
fi
exit 1
