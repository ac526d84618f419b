#!/usr/bin/env bash
# manifest.json and metrics.jsonl of a tiny run: every required key, every plugin with a
# SHA-256 equal to sha256sum's, MFU and memory figures on each logged step, the summary
# line, and valid JSON throughout (checked with python3 where there is one).
source "$(dirname "$0")/../cli/lib.sh"
make_data
# One thread: OpenMP threads that spin-wait slow to a crawl when the machine is busy
# with other work, and these checks are not about speed.
write_config "$WORK/run.ini"
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/out" --set run.threads=1 \
    > "$WORK/train.log" 2>&1 ||
    { fail "train: $(cat "$WORK/train.log")"; finish; }
M="$WORK/out/manifest.json"
METRICS="$WORK/out/metrics.jsonl"

# ---- manifest.json ----
[ -s "$M" ] && pass "manifest.json written" || { fail "no $M"; finish; }
missing=""
for key in gearbox_version git_revision plugin_abi hostname start_time threads config_ini \
    config resolved plugins libraries openmp cuda_driver cuda_runtime cudnn nccl mpi \
    cpu model avx2 fma avx512f avx512_bf16 amx_tile online_cpus device memory_bytes \
    peak_flops_f32 batch_size gradient_accumulation_steps tokens_per_step; do
    grep -q "\"$key\": " "$M" || missing="$missing $key"
done
[ -z "$missing" ] && pass "manifest.json has every required key" ||
    fail "manifest.json lacks:$missing"
for kind in device attn optim precision comm; do
    grep -q "\"kind\": \"$kind\"" "$M" || fail "manifest.json lists no $kind plugin"
done
n_sha=$(grep -cE '"sha256": "[0-9a-f]{64}"' "$M")
[ "$n_sha" -eq 5 ] && pass "five plugins, each with a 64-hex sha256" ||
    fail "expected 5 plugin sha256 values, found $n_sha"
mismatched=0
for path in $(grep -oE '"path": "[^"]*"' "$M" | cut -d'"' -f4); do
    want=$(sha256sum "$path" | cut -c1-64)
    grep -q "\"sha256\": \"$want\"" "$M" || { mismatched=1; fail "sha256 of $path is not $want"; }
done
[ "$mismatched" -eq 0 ] && pass "every plugin's sha256 equals sha256sum's"
revision=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)
grep -qE "\"git_revision\": \"([0-9a-f]{40}|unknown)\"" "$M" &&
    pass "git_revision is a commit or 'unknown' (source tree at $revision)" ||
    fail "git_revision: $(grep git_revision "$M")"
grep -q '"config_ini": "\[run\]\\nseed = 7\\n' "$M" && grep -q '"batch_size": "4"' "$M" &&
    pass "config recorded as INI text and as an object of sections" ||
    fail "config in manifest: $(grep -A3 '"config' "$M" | head -8)"
grep -qE '"libraries": "oneDNN [0-9]+\.[0-9]+\.[0-9]+ ' "$M" &&
    pass "the device names the libraries it computes with (oneDNN for cpu)" ||
    fail "device libraries: $(grep -A4 '"device": {' "$M")"
grep -q '"mpi": "not loaded"' "$M" && grep -q '"nccl": "not loaded"' "$M" &&
    pass "libraries not in use are 'not loaded'" || fail "libraries: $(grep -A8 libraries "$M")"

# ---- metrics.jsonl ----
steps=$(grep -c '"loss": ' "$METRICS")
full=$(grep -cE '"grad_norm": [0-9.e+-]+, "mfu": [0-9.e+-]+, "rss_bytes": [1-9][0-9]*, "peak_rss_bytes": [1-9][0-9]*' "$METRICS")
[ "$steps" -eq 20 ] && [ "$full" -eq 20 ] &&
    pass "each of the 20 logged steps has mfu, rss_bytes and peak_rss_bytes" ||
    fail "logged steps $steps, with mfu and memory figures $full: $(head -n 2 "$METRICS")"
grep -q loss_scale "$METRICS" && fail "fp32 has no loss scaler, yet loss_scale was written" ||
    pass "no loss_scale without a loss scaler"
summary_re='^\{"summary": true, "steps": 20, "seconds": [0-9.]+, "tokens_per_s": [0-9.]+, "train_loss": [0-9.]+, "val_loss": [0-9.]+, "mfu": [0-9.e+-]+, "peak_rss_bytes": [1-9][0-9]*, "planned_bytes": \{"params": [0-9]+, "grads": [0-9]+, "optimizer": [0-9]+, "activations": [0-9]+, "workspace": [0-9]+\}\}$'
tail -n 1 "$METRICS" | grep -qE "$summary_re" && pass "the last line is the summary" ||
    fail "summary line: $(tail -n 1 "$METRICS")"
planned=$(tail -n 1 "$METRICS" | grep -oE '"planned_bytes": \{[^}]*\}' | grep -oE '[0-9]+' |
    awk '{s += $1} END {printf "%.2f", s / 1048576}')
grep -q "^memory plan: $planned MiB = " "$WORK/train.log" &&
    pass "planned_bytes add up to the printed memory plan ($planned MiB)" ||
    fail "planned_bytes sum to $planned MiB; log: $(grep 'memory plan' "$WORK/train.log")"

if command -v python3 > /dev/null; then
    python3 -c 'import json, sys
json.load(open(sys.argv[1]))
[json.loads(line) for line in open(sys.argv[2])]' "$M" "$METRICS" &&
        pass "manifest.json and metrics.jsonl parse as JSON" || fail "invalid JSON"
fi
finish
