#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: configure and build gearbox there, run the
# gpu test suite, train 50 steps of the default model on device/cuda in each precision,
# run compute-sanitizer (memcheck, racecheck, synccheck, initcheck) over a few training steps, then short
# benchmarks (`gearbox bench attn` on device/cuda, bench/sdpa_attn.py, bench/compare_gpu.py);
# print a summary and keep every log. docs/gpu.md explains what each stage checks.
#
# Made for a GPU machine without apt: nvcc and the CUDA libraries under CUDA_PATH
# (default /usr/local/cuda), cuDNN and NCCL as Python wheels (site-packages/nvidia/cudnn,
# .../nccl, found here and passed as -Dcudnn_root/-Dnccl_root), meson and ninja from pip,
# and inih, oneDNN and pkg-config from a deps folder unpacked from Debian's packages
# (GEARBOX_DEPS, default .gpu-deps; docs/gpu.md says how to make it). Without oneDNN the
# build has no CPU device, and the GPU tests that compare with it are not defined.
#
# usage: scripts/gpu-check.sh        (from the source root)
# environment: GEARBOX_DEPS  deps folder with env.sh (default .gpu-deps; skipped if absent)
#              OUT           where logs go (default ./gpu-check-out)
#              BUILD         build folder (default build-gpu)
#              STEPS         training steps per precision (default 50)
#              BENCH         0 skips the benchmarks (default 1)
#              PYTHON        the interpreter with PyTorch 2.x for bench/*.py (default python3)
# Exit status: 0 when no stage failed (skipped stages do not fail), 1 otherwise.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src" || exit 1
out=${OUT:-$src/gpu-check-out}
build=${BUILD:-build-gpu}
steps=${STEPS:-50}
deps=${GEARBOX_DEPS:-.gpu-deps}
mkdir -p "$out"
: > "$out/summary.txt"
summary=()
failed=0

# record STAGE STATUS DETAIL: one line of the summary (STATUS: PASS, FAIL or SKIP), also
# appended to summary.txt at once, so a run cut short still leaves what it did
record() {
    summary+=("$(printf '%-28s %-4s %s' "$1" "$2" "$3")")
    printf '%s\n' "${summary[${#summary[@]}-1]}" >> "$out/summary.txt"
    [ "$2" = FAIL ] && failed=1
    echo "== $1: $2 $3"
}

finish() {
    echo
    echo "gpu-check summary (logs in $out):"
    printf '  %s\n' "${summary[@]}"
    printf '%s\n' "${summary[@]}" > "$out/summary.txt"
    exit "$failed"
}

# ---- environment --------------------------------------------------------------------------
cuda=${CUDA_PATH:-/usr/local/cuda}
export PATH=$cuda/bin:$PATH
if [ -f "$deps/env.sh" ]; then
    # shellcheck disable=SC1090,SC1091
    . "$deps/env.sh"
    record "deps" PASS "$deps/env.sh"
else
    record "deps" SKIP "no $deps/env.sh: inih, oneDNN and pkg-config must be installed"
fi
{
    if command -v nvidia-smi > /dev/null; then nvidia-smi -L 2>&1; else echo "no nvidia-smi"; fi
    nvcc --version 2>&1 | tail -n 2
    echo "meson $(meson --version 2>&1), ninja $(ninja --version 2>&1)"
} > "$out/machine.txt"
cat "$out/machine.txt"

site=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null || true)
setup_args=()
for lib in cudnn nccl; do
    if [ -n "$site" ] && [ -d "$site/nvidia/$lib/include" ]; then
        setup_args+=("-D${lib}_root=$site/nvidia/$lib")
        # the wheels' libraries are found at run time through LD_LIBRARY_PATH too
        export LD_LIBRARY_PATH=$site/nvidia/$lib/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
done

# ---- build --------------------------------------------------------------------------------
if [ -d "$build" ]; then
    meson setup --reconfigure "$build" "${setup_args[@]}" > "$out/setup.log" 2>&1
else
    meson setup "$build" "${setup_args[@]}" > "$out/setup.log" 2>&1
fi || { record "configure" FAIL "see setup.log"; finish; }
if [ ${#setup_args[@]} -eq 0 ]; then
    record "configure" PASS "cuDNN and NCCL of the CUDA toolkit"
else
    record "configure" PASS "${setup_args[*]}"
fi
ninja -C "$build" > "$out/build.log" 2>&1 || { record "build" FAIL "see build.log"; finish; }
record "build" PASS "$build"
gearbox=$build/tools/gearbox
export GEARBOX_PLUGIN_PATH=$src/$build/plugins
if [ ! -f "$build/plugins/device/cuda/device-cuda.so" ]; then
    record "device/cuda" FAIL "not built (see setup.log: nvcc or cuBLASLt missing?)"
    finish
fi
if ! "$build/tests/gpu/gpu-probe" > "$out/probe.log" 2>&1; then
    record "gpu" FAIL "$(sed "s/^SKIP: //" "$out/probe.log")"
    finish
fi
record "gpu" PASS "$(cat "$out/probe.log")"
"$gearbox" doctor > "$out/doctor.log" 2>&1
"$gearbox" plugins > "$out/plugins.log" 2>&1

# ---- the test suites ----------------------------------------------------------------------
meson test -C "$build" --suite gpu --suite cuda --print-errorlogs > "$out/test-gpu.log" 2>&1
rc=$?
counts=$(grep -E '^(Ok|Fail|Skipped|Timeout):' "$out/test-gpu.log" | tr -s ' ' | tr '\n' ' ')
[ $rc -eq 0 ] && record "meson test --suite gpu" PASS "$counts" ||
    record "meson test --suite gpu" FAIL "$counts(test-gpu.log)"

# ---- short training runs on device/cuda -----------------------------------------------------
data=$out/data/shakespeare_char
if [ ! -f "$data/train.bin" ]; then
    "$gearbox" prepare examples/data/tinyshakespeare.txt "$data" > "$out/prepare.log" 2>&1 ||
        record "prepare data" FAIL "see prepare.log"
fi
# train NAME PRECISION STEPS [COMMAND PREFIX...]
train() {
    local name=$1 precision=$2 n=$3
    shift 3
    "$@" "$gearbox" train examples/shakespeare_char.ini --set device.plugin=cuda \
        --set precision.plugin="$precision" --set run.steps="$n" --set run.eval_every="$n" \
        --set run.log_every=10 --set run.checkpoint_every=0 --set data.dir="$data" \
        --set run.out_dir="$out/$name" > "$out/$name.log" 2>&1
}
for precision in fp32 tf32 bf16 fp16; do
    if train "train-$precision" "$precision" "$steps"; then
        record "train $precision ($steps steps)" PASS "$(grep '^done:' "$out/train-$precision.log" | cut -c1-90)"
    elif grep -q "cannot run here\|no such .* plugin" "$out/train-$precision.log"; then
        record "train $precision ($steps steps)" SKIP "$(grep -m1 'error' "$out/train-$precision.log" | cut -c1-120)"
    else
        record "train $precision ($steps steps)" FAIL "train-$precision.log"
    fi
done

# ---- compute-sanitizer ----------------------------------------------------------------------
sanitizer=$(command -v compute-sanitizer || ls "$cuda"/bin/compute-sanitizer 2>/dev/null || true)
if [ -z "$sanitizer" ]; then
    record "compute-sanitizer" SKIP "not installed"
else
    for tool in memcheck racecheck synccheck initcheck; do
        if train "sanitize-$tool" fp32 3 "$sanitizer" --tool "$tool" --error-exitcode 99 \
            --target-processes all; then
            record "compute-sanitizer $tool" PASS "3 fp32 steps: $(grep -m1 'ERROR SUMMARY' "$out/sanitize-$tool.log")"
        else
            record "compute-sanitizer $tool" FAIL "sanitize-$tool.log: $(grep -m1 'ERROR SUMMARY\|error' "$out/sanitize-$tool.log" | cut -c1-100)"
        fi
    done
fi

# ---- benchmarks (short settings: the whole script must fit a 10-minute slot) --------------
# Each runs under `timeout`; its output is $out/bench-*.txt. They measure, they do not judge:
# a benchmark FAILs only when it does not run to the end. The full settings are in
# bench/README.md (run them by hand, one command each).
# bench_detail FILE: the summary's words for a benchmark's output: the ratio line of
# compare_gpu.py, else the last T of an attention table as "T=4096: NAME MS ms TFLOPS TF/s, ..."
bench_detail() {
    grep -m1 '^gearbox/PyTorch' "$1" ||
        awk '/^T = / { t = $3; sub(":", "", t); row = "" }
             /^  [a-z_]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.e+-]+ / {
                 row = row (row == "" ? "" : ", ") $1 " " $4 " ms " $5 " TF/s" }
             END { if (t != "") print "T=" t ": " row }' "$1"
}
# bench NAME SECONDS COMMAND...: runs COMMAND into $out/NAME.txt; exit 77 is a skip
bench() {
    local name=$1 limit=$2
    shift 2
    timeout -k 10 "$limit" "$@" > "$out/$name.txt" 2>&1
    local rc=$?
    if [ $rc -eq 0 ]; then
        record "$name" PASS "$(bench_detail "$out/$name.txt" | cut -c1-150) ($name.txt)"
    elif [ $rc -eq 77 ]; then
        record "$name" SKIP "$(tail -n 1 "$out/$name.txt" | cut -c1-110)"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        record "$name" FAIL "past its ${limit} s limit ($name.txt)"
    else
        record "$name" FAIL "exit status $rc ($name.txt)"
    fi
}
py=${PYTHON:-python3}
if [ "${BENCH:-1}" = 0 ]; then
    record "benchmarks" SKIP "BENCH=0"
else
    attn_plugins=$(ls "$build"/plugins/attn/*/attn-*-cuda.so 2>/dev/null |
        sed 's|.*/attn-\(.*\)-cuda\.so$|\1|' | paste -sd, -)
    if [ -z "$attn_plugins" ]; then
        record "bench attn (cuda)" SKIP "no attention plugin built for cuda"
    else
        bench "bench-attn-cuda" 120 "$gearbox" bench attn --device cuda \
            --dtype bf16 --T 1024,4096 --repeats 3 --max-seconds 10 --plugins "$attn_plugins"
    fi
    if ! "$py" -c 'import torch' > /dev/null 2>&1; then
        record "bench sdpa/compare_gpu" SKIP "no PyTorch in $py (set PYTHON)"
    else
        bench "bench-sdpa" 120 "$py" bench/sdpa_attn.py --T 1024,4096 \
            --repeats 3 --json "$out/bench-sdpa.json"
        bench "bench-compare-gpu" 300 "$py" bench/compare_gpu.py --gearbox "$gearbox" \
            --python "$py" --steps 10 --warmup 3 --repeats 1 --timeout 200 \
            --logs "$out/compare-gpu"
    fi
fi
finish
