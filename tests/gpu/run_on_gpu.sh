#!/usr/bin/env bash
# Runs a test of the gpu suite on device/cuda, or skips it (exit 77, meson's SKIP) when it
# cannot run here: no GPU (gpu-probe says why), a CUDA plugin it needs is not built (each
# KIND/NAME must be listed by `gearbox plugins` for device cuda), or a plugin refuses the
# device at start ("cannot run here", e.g. a precision the GPU lacks).
# usage: run_on_gpu.sh GEARBOX GPU_PROBE [KIND/NAME...] -- COMMAND...
set -u
gearbox=$1 probe=$2
shift 2
"$probe" || exit 77
listed=$("$gearbox" plugins 2>/dev/null)
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    kind=${1%/*} name=${1#*/}
    if ! awk -v k="$kind" -v n="$name" '$1 == k && $2 == n && $4 ~ /cuda/ { found = 1 }
                                       END { exit !found }' <<< "$listed"; then
        echo "SKIP: no $kind plugin '$name' for device cuda is built (this test needs it)"
        exit 77
    fi
    shift
done
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ] && grep -q "cannot run here" <<< "$out"; then
    echo "SKIP: a plugin refuses device cuda (above)"
    exit 77
fi
exit $rc
