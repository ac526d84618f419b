#!/usr/bin/env bash
# bench/gpu_watch.py, what bench/compare_gpu.py watches a GPU run with, checked on the CPU
# against the emulator's NVML double (its folder is the fourth argument): it reads the
# device's memory and utilisation without a CUDA context, finds no per-process figure where
# NVML lists no process of the program's, and its NVML neighbour runs until it is ended.
# Without a GPU compare_gpu.py exits 77 naming NVML, and it refuses an unknown --neighbors.
# bench/gpu_summary.py reads `gearbox bench attn` and `bench step --profile` as they print
# today (run here on device/cpu, when the build has it: the fifth argument says) and a
# compare_gpu.py --json, and judges each goal. A part that cannot run here is named, and
# the test is then a skip unless another part failed.
source "$(dirname "$0")/../cli/lib.sh"
NVML_DOUBLE=${4:-}
CPU_DEVICE=${5:-}
NOT_RUN=()
watch_py() { PYTHONPATH="$SRC/bench" python3 -c "$1"; }

expect_error "compare_gpu.py --neighbors with an unknown condition" 2 \
    "'mps': expected none, cuda, nvml" -- \
    python3 "$SRC/bench/compare_gpu.py" --dry-run --neighbors none,mps
# (the double stays out of the library path here: meson may put built libraries on it)
if env -u LD_LIBRARY_PATH python3 -c 'import ctypes; ctypes.CDLL("libnvidia-ml.so.1")' 2> /dev/null; then
    echo "not checked: this machine has NVML, so compare_gpu.py would measure, not refuse"
else
    expect_error "compare_gpu.py without a GPU" 77 "needs an NVIDIA GPU: libnvidia-ml.so.1 cannot be loaded" -- \
        env -u LD_LIBRARY_PATH python3 "$SRC/bench/compare_gpu.py" --steps 1
fi

# gpu_summary.py on this build's own tables and a compare_gpu.py --json with known figures
if [ -z "$CPU_DEVICE" ]; then
    NOT_RUN+=("gpu_summary.py on gearbox's own tables: device/cpu is not built (no oneDNN)")
else
    mkdir -p "$WORK/logs"
    make_data
    "$GEARBOX" bench attn --plugins math --T 32 --heads 2 --head-dim 16 --repeats 1 --threads 1 \
        > "$WORK/logs/bench-attn-cuda.txt" 2>&1
    "$GEARBOX" bench matmul 32,16,2 --repeats 1 --threads 1 --dtype bf16 --epilogues \
        > "$WORK/logs/bench-matmul.txt" 2>&1
    write_config "$WORK/tiny.ini"
    "$GEARBOX" bench step "$WORK/tiny.ini" --steps 1 --warmup 0 --profile --set run.threads=1 \
        > "$WORK/logs/bench-profile.txt" 2>&1
    python3 -c '
import json, sys
fig = lambda ms, mem: dict(ms=ms, tok_s=8192e3 / ms, mfu=50.0 * 30 / ms, process_peak=mem,
                           device_rise=mem, gpu_busy=90.0, rounds=[ms])
json.dump({"figures": {"none": {"gearbox": fig(30.0, 2 << 30), "pytorch": fig(40.0, 3 << 30)},
                       "cuda": {"gearbox": fig(33.0, 2 << 30), "pytorch": fig(40.0, 3 << 30)}}},
          open(sys.argv[1], "w"))' "$WORK/logs/compare-gpu.json"
    if python3 "$SRC/bench/gpu_summary.py" --logs "$WORK/logs" > "$WORK/summary.md" 2>&1; then
        for want in "- MFU 50.0% (goal >= 40%): met" "- gearbox/PyTorch tokens/s 1.33x (goal >= 1.25x): met" \
                    "GPU memory 0.67x of PyTorch's (goal <= 1): met" "ms/step against alone: gearbox 1.10x, pytorch 1.00x" \
                    "| gearbox | math |" "| forward: matmul |" "T = 32, forward+backward:" \
                    "- 15 products, 0 at >= 550 TFLOP/s (goal: all): MISSED" "mlp.c_fc forward 0"; do
            grep -qF -- "$want" "$WORK/summary.md" && pass "gpu_summary.py: $want" ||
                fail "gpu_summary.py lacks '$want': $(cat "$WORK/summary.md" "$WORK/logs/bench-attn-cuda.txt")"
        done
    else
        fail "gpu_summary.py: $(cat "$WORK/summary.md")"
    fi
fi

# finish, or a skip naming what did not run when nothing failed
finish_or_skip() {
    if [ "$FAILURES" -ne 0 ] || [ ${#NOT_RUN[@]} -eq 0 ]; then
        finish
        exit 0
    fi
    printf 'SKIP: %s\n' "${NOT_RUN[@]}"
    exit 77
}
if [ -z "$NVML_DOUBLE" ]; then
    NOT_RUN+=("GpuWatch and the nvml neighbour: the emulator's NVML double was not built (-Dgpu_emu disabled or unavailable)")
    finish_or_skip
fi
export LD_LIBRARY_PATH=$NVML_DOUBLE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
watch_py '
import subprocess, gpu_watch
w = gpu_watch.GpuWatch(gpu_watch.Nvml())
p = subprocess.Popen(["sleep", "0.4"])
w.start(p.pid)
p.wait()
w.stop()
print(f"busy={w.busy:.0f} rise={w.device_rise} process={w.process_peak}")' > "$WORK/watch.txt" 2>&1
grep -qx "busy=87 rise=0 process=None" "$WORK/watch.txt" &&
    pass "GpuWatch reads the double's utilisation and memory; no per-process figure without a listed process" ||
    fail "GpuWatch on the NVML double: $(cat "$WORK/watch.txt")"

python3 "$SRC/bench/gpu_watch.py" --neighbor nvml > "$WORK/neighbour.txt" 2>&1 &
neighbour=$!
sleep 1
if kill -0 "$neighbour" 2> /dev/null; then
    kill "$neighbour"
    wait "$neighbour" 2> /dev/null
    pass "the nvml neighbour polls until it is ended"
else
    wait "$neighbour"
    fail "the nvml neighbour ended by itself (status $?): $(cat "$WORK/neighbour.txt")"
fi
finish_or_skip
