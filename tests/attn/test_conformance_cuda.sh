#!/usr/bin/env bash
# `gearbox test-plugin --strict` on the CUDA objects of attn/math and attn/flash, on
# device/cuda, against the CPU attn/math (suite gpu): the kit's shapes within 1e-5 abs +
# 1e-4 rel (and its bf16 and f16 rows at theirs), causality (bit for bit), reruns
# bit-identical, the refusals. attn/cudnn, where cuDNN was found to build it, computes in
# 16-bit only, so it runs without --strict (whose promises start with f32): its bf16 and
# f16 rows at their tolerances, causality, reruns bit-identical, its f32 rows unsupported.
# attn/mem_efficient's CUDA object refuses every problem: every shape must be unsupported
# with a reason naming attn/flash and attn/cudnn. Exit 77 (skipped) when device/cuda is
# not built, or when the kit finds no usable GPU and nvidia-smi sees none either; a GPU
# that nvidia-smi lists but the kit cannot use is a failure. With CUDA_DIR (the emulated
# plugins' folder, build/cuda_emu/plugins, which must also lead GEARBOX_PLUGIN_PATH), the
# CUDA objects are taken from it; attn/cudnn has no emulated build (cuDNN is not
# emulated) and is left out, saying so.
# usage: test_conformance_cuda.sh GEARBOX PLUGINS_DIR [CUDA_DIR]
set -u
GEARBOX=$1
PLUGINS=$2
CUDA_DIR=${3:-}
cuda_object() { # KIND NAME: the CUDA object's file (nvcc-built ones at PLUGINS_DIR's top)
    if [ -n "$CUDA_DIR" ]; then echo "$CUDA_DIR/$1-$2-cuda.so"
    elif [ -f "$PLUGINS/$1-$2-cuda.so" ]; then echo "$PLUGINS/$1-$2-cuda.so"
    else echo "$PLUGINS/$1/$2/$1-$2-cuda.so"; fi
}
device=$PLUGINS/device/cuda/device-cuda.so
[ -n "$CUDA_DIR" ] && device=$CUDA_DIR/device-cuda.so
if [ ! -f "$device" ]; then
    echo "SKIP: $device is not built"
    exit 77
fi
worst=0
cudnn=
[ -f "$(cuda_object attn cudnn)" ] && cudnn=cudnn
[ -n "$CUDA_DIR" ] && echo "attn/cudnn: not checked here: cuDNN is not emulated (a GPU run checks it)"
for plugin in math flash $cudnn mem_efficient; do
    strict=--strict
    [ "$plugin" = cudnn ] && strict=
    rc=0
    if [ "$plugin" = mem_efficient ]; then
        # refuses every problem on cuda: each shape unsupported, naming flash and cudnn
        table=$("$GEARBOX" test-plugin --device cuda "$(cuda_object attn mem_efficient)" 2>&1) || rc=$?
        echo "$table"
        shapes=$(grep -cE '^(bf16 |f16 )?B[0-9]' <<< "$table")
        refused=$(grep -cE '^(bf16 |f16 )?B[0-9].*UNSUPPORTED.*attn/flash.*attn/cudnn' <<< "$table")
        if [ "$rc" -eq 77 ]; then
            :
        elif [ "$rc" -eq 1 ] && [ "$shapes" -gt 0 ] && [ "$refused" -eq "$shapes" ] &&
            grep -q " 0 failed" <<< "$table"; then
            echo "ok: attn/mem_efficient refuses all $shapes shapes on cuda, naming attn/flash and attn/cudnn"
            rc=0
        else
            echo "FAIL: attn/mem_efficient on cuda: exit $rc, $refused of $shapes shapes refused naming attn/flash and attn/cudnn"
            rc=1
        fi
    else
        "$GEARBOX" test-plugin $strict --device cuda \
            "$(cuda_object attn "$plugin")" || rc=$?
    fi
    if [ "$rc" -eq 77 ] && nvidia-smi -L > /dev/null 2>&1; then
        echo "FAIL: nvidia-smi lists a GPU, but the checks of attn/$plugin were skipped"
        rc=1
    fi
    # a failure outranks a skip, a skip a pass
    if [ "$rc" -ne 0 ] && { [ "$worst" -eq 0 ] || [ "$rc" -ne 77 ]; }; then
        worst=$rc
    fi
done
[ "$worst" -eq 77 ] &&
    echo "SKIP: no usable GPU: gearbox test-plugin --device cuda found none, nor does nvidia-smi"
exit "$worst"
