#!/usr/bin/env bash
# `gearbox test-plugin --strict` on attn/math's CUDA object, on device/cuda, against the
# CPU attn/math (suite gpu): the kit's shapes within 1e-5 abs + 1e-4 rel, causality (bit
# for bit), reruns bit-identical, the refusals. Exit 77 (skipped) when device/cuda is not
# built, or when the kit finds no usable GPU and nvidia-smi sees none either; a GPU that
# nvidia-smi lists but the kit cannot use is a failure.
# usage: test_conformance_cuda.sh GEARBOX PLUGINS_DIR
set -u
GEARBOX=$1
PLUGINS=$2
device=$PLUGINS/device/cuda/device-cuda.so
if [ ! -f "$device" ]; then
    echo "SKIP: $device is not built"
    exit 77
fi
rc=0
"$GEARBOX" test-plugin --strict --device cuda "$PLUGINS/attn/math/attn-math-cuda.so" || rc=$?
if [ "$rc" -eq 77 ] && nvidia-smi -L > /dev/null 2>&1; then
    echo "FAIL: nvidia-smi lists a GPU, but the checks were skipped"
    exit 1
fi
exit "$rc"
