#!/usr/bin/env bash
# Every kernel of the emulated CUDA plugins is launched by some emulated test. The kernels
# are the functions in each plugin's __patchable_function_entries section, where the
# emulator's __global__ lists every kernel and every instance of a kernel template (one
# per dtype and head_dim tile of attn/flash, say); the launches are the lines the emulated
# tests appended to RECORD (GEARBOX_CUDA_EMU_LAUNCHED, cuda_emu/src/launched.cc), those of
# the plugin file as it is now. The suite runs this test last, alone. It fails naming each
# kernel no test launched, then keeps only the current lines of RECORD.
# usage: test_launched.sh RECORD PLUGIN.so...
source "$(dirname "$0")/../common/checks.sh"
source "$(dirname "$0")/emu_kernels.sh"
record=$1
shift
if [ ! -s "$record" ]; then
    echo "FAIL: $record holds no launches: the emulated tests (suite gpu-emu) write it;" \
         "run them, then this test"
    exit 1
fi

current="$WORK/current"
: > "$current"
for plugin; do
    path=$(realpath "$plugin")
    mtime=$(stat -c %.9Y "$path")
    awk -v p="$path" -v m="$mtime" '$1 == p && $2 == m' "$record" | sort -u >> "$current"
    kernel_offsets "$path" > "$WORK/kernels"
    awk -v p="$path" '$1 == p { print $3 }' "$current" | sort -u > "$WORK/launched"
    symbol_names "$path" > "$WORK/names"
    total=$(wc -l < "$WORK/kernels")
    missing=$(comm -23 "$WORK/kernels" "$WORK/launched")
    if [ "$total" -eq 0 ]; then
        pass "$(basename "$path"): no kernels"
    elif [ -z "$missing" ]; then
        pass "$(basename "$path"): all $total kernels launched"
    else
        for at in $missing; do
            fail "$(basename "$path"): no emulated test launches $(awk -v a="$at" \
                '$1 == a { $1 = ""; print substr($0, 2); exit }' "$WORK/names")"
        done
    fi
done
cp "$current" "$record"
if [ "$FAILURES" -ne 0 ]; then
    echo "each kernel named above needs an emulated test that launches it (a shape, dtype" \
         "or call that reaches it)"
fi
finish
