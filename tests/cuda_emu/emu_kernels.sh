# What the shell tests of the emulator know of an emulated plugin's kernels: the functions
# in its __patchable_function_entries section, where the emulator's __global__ lists every
# kernel and every instance of a kernel template, and their names.
# usage (from a test): source emu_kernels.sh

# kernel_offsets PLUGIN: the offset of each kernel in PLUGIN, in hex without leading zeros.
# The section holds one address per kernel, which the dynamic linker fills in from a
# RELATIVE relocation whose addend is the kernel's offset.
kernel_offsets() {
    local start size
    read -r start size < <(readelf -SW "$1" | sed 's/\[ */[/' |
        awk '$2 == "__patchable_function_entries" { print $4, $6 }')
    [ -n "${start:-}" ] || return 0
    local first=$((16#$start)) end=$((16#$start + 16#$size)) at addend
    readelf -rW "$1" | awk '$3 ~ /_RELATIVE$/ { print $1, $4 }' | while read -r at addend; do
        if [ $((16#$at)) -ge "$first" ] && [ $((16#$at)) -lt "$end" ]; then
            printf '%x\n' $((16#$addend))
        fi
    done | sort -u
}

# symbol_names PLUGIN: "offset name" for each function symbol of PLUGIN, demangled.
symbol_names() {
    nm --defined-only "$1" | awk '$2 ~ /^[tTwW]$/ { print $1, $3 }' | c++filt |
        while read -r at name; do printf '%x %s\n' $((16#$at)) "$name"; done
}
