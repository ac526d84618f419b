#!/bin/bash
# cuDNN and NCCL as pip wheels lay them out: site-packages/nvidia/{cudnn,nccl}/{lib,include}
# with versioned-only libraries (libcudnn.so.9, libnccl.so.2; no unversioned .so). Makes
# such a layout with tiny stand-in libraries and configures the project against it with
# -Dcudnn_root and -Dnccl_root; both must be reported found there. Skips (77) without nvcc.
# Usage: test_wheel_layout.sh SOURCE_ROOT NVCC
set -u
src=$1 nvcc=${2:-}
[ -n "$nvcc" ] && [ -x "$nvcc" ] || { echo "SKIP: nvcc not found"; exit 77; }
cuda_root=$(dirname "$(dirname "$nvcc")")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gearbox-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

nv=$tmp/site-packages/nvidia
for pair in cudnn:9 nccl:2; do
  name=${pair%%:*} ver=${pair#*:}
  mkdir -p "$nv/$name/lib" "$nv/$name/include"
  echo "int gearbox_fake_$name(void) { return $ver; }" > "$tmp/$name.c"
  cc -shared -fPIC -Wl,-soname,lib$name.so.$ver -o "$nv/$name/lib/lib$name.so.$ver" \
    "$tmp/$name.c" || fail "cannot build the stand-in lib$name.so.$ver"
  if [ -f "$cuda_root/include/$name.h" ]; then
    cp "$cuda_root/include/$name.h" "$nv/$name/include/"
    # cudnn.h includes its siblings: the wheel has them too.
    [ "$name" = cudnn ] && cp "$cuda_root"/include/cudnn_*.h "$nv/$name/include/" 2>/dev/null
  else
    echo "/* stand-in $name.h */ int gearbox_fake_$name(void);" > "$nv/$name/include/$name.h"
  fi
done
ls -R "$nv"

CUDA_PATH=$cuda_root meson setup "$tmp/build" "$src" -Dtests=false \
  -Dcudnn_root="$nv/cudnn" -Dnccl_root="$nv/nccl" > "$tmp/setup.log" 2>&1 ||
  { cat "$tmp/setup.log"; fail "meson setup against the wheel layout failed"; }
grep -Ei "cudnn|nccl" "$tmp/setup.log"
grep -q "cudnn found in $nv/cudnn: $nv/cudnn/lib/libcudnn.so.9" "$tmp/setup.log" ||
  fail "libcudnn.so.9 not found in the wheel layout"
grep -q "nccl found in $nv/nccl: $nv/nccl/lib/libnccl.so.2" "$tmp/setup.log" ||
  fail "libnccl.so.2 not found in the wheel layout"
grep -Eq "cuDNN +: YES \($nv/cudnn\)" "$tmp/setup.log" || fail "summary does not say cuDNN YES"
grep -Eq "NCCL +: YES \($nv/nccl\)" "$tmp/setup.log" || fail "summary does not say NCCL YES"
echo "ok: cuDNN and NCCL found in the wheel layout"
