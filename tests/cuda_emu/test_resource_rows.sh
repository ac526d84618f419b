#!/usr/bin/env bash
# Every kernel of the emulated CUDA plugins has its row in the table of the real build's
# resources beside its plugin (<plugin>.resources.tsv, cuda_emu/resources.py), found by the
# demangled name as the emulator finds it (cuda_emu/src/resources.cc), so every launch is
# checked against sm_90's register and shared memory limits. Skips where the build wrote no
# table (no nvcc). Fails naming each kernel without a row.
# usage: test_resource_rows.sh PLUGIN.so...
source "$(dirname "$0")/../common/checks.sh"
source "$(dirname "$0")/emu_kernels.sh"
tables=0
for plugin; do
    [ ! -f "${plugin%.so}.resources.tsv" ] || tables=$((tables + 1))
done
if [ "$tables" -eq 0 ]; then
    echo "SKIP: no emulated plugin has a resource table: the build writes them only where" \
         "nvcc is found (CUDA_PATH), and without them launches are not checked against" \
         "sm_90's registers"
    exit 77
fi
for plugin; do
    kernel_offsets "$plugin" > "$WORK/kernels"
    total=$(wc -l < "$WORK/kernels")
    [ "$total" -gt 0 ] || continue
    table="${plugin%.so}.resources.tsv"
    if [ ! -f "$table" ]; then
        fail "$(basename "$plugin"): $total kernels but no $table"
        continue
    fi
    tail -n +2 "$table" | cut -f1 | c++filt | sort -u > "$WORK/rows"
    symbol_names "$plugin" > "$WORK/names"
    missing=0
    while read -r at; do
        name=$(awk -v a="$at" '$1 == a { $1 = ""; print substr($0, 2); exit }' "$WORK/names")
        if ! grep -qxF -- "$name" "$WORK/rows"; then
            fail "$(basename "$plugin"): no row of $(basename "$table") for kernel $name"
            missing=$((missing + 1))
        fi
    done < "$WORK/kernels"
    [ "$missing" -gt 0 ] || pass "$(basename "$plugin"): all $total kernels have their row"
done
finish
