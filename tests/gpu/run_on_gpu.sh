#!/usr/bin/env bash
# Runs a test of the gpu suite on device/cuda. It skips (exit 77, meson's SKIP) only when
# the test cannot run here, saying why: no GPU (gpu-probe exits 77 and says why), or a
# CUDA plugin it needs is not built (each KIND/NAME must be listed by `gearbox plugins` for
# device cuda). Every other outcome is the test's own: a probe or `gearbox plugins` that
# fails otherwise fails the test, and the command's exit code is passed on as it is (77
# only where the command itself skips). A plugin that refuses the GPU ("cannot run here")
# fails: every GPU the build targets (-Dgpu_arch, sm_80 and later) has the precisions the
# suite runs, so a refusal there is a fault to look at, not a machine to skip.
# usage: run_on_gpu.sh GEARBOX GPU_PROBE [KIND/NAME...] -- COMMAND...
set -u
gearbox=$1 probe=$2
shift 2
"$probe"
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: $probe exited $rc (77 is no GPU; anything else is a fault)"; exit 1; }
listed=$("$gearbox" plugins 2>&1) || { printf '%s\n' "$listed"; echo "FAIL: gearbox plugins"; exit 1; }
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
"$@"
