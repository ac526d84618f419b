#!/usr/bin/env bash
# [run] cuda_graphs: each micro-step's forward and backward recorded once as CUDA graphs
# and launched from then on must train exactly as the calls queued one by one: the same
# losses, gradient norms and evaluations bit for bit, in fp32 with evaluations between
# the steps, with gradient accumulation and batches drawn in line, under fp16's loss
# scaler as its scale grows (on the device: backward recorded once; on the host: recorded
# again for each new scale), and in bf16
# with recomputation; the run's summary says how many graphs were recorded and launched
# (so a run that silently stayed eager fails); `gearbox bench step --profile` runs its
# profiled steps without recording; and a device without graphs is refused before any
# work, saying what is missing. The default, cuda_graphs = auto, records them on this
# device (the plan says "on (auto)", the figures are the recorded run's) and leaves them
# off, saying why, under GEARBOX_CUDA_SYNC=1, whose waits no recording can hold.
# usage: test_cuda_graphs.sh GEARBOX FIXTURES_DIR SOURCE_ROOT  (GEARBOX_TEST_DEVICE=cuda)
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/run.ini"

graph_counts() { grep -o '"graphs": {"recorded": [0-9]*, "launched": [0-9]*}' "$WORK/$1/metrics.jsonl"; }

# NAME RECORDED LAUNCHED SETTINGS...: the run with graphs against the run without (which
# is trained unless it is there already)
ab() {
    local name=$1 recorded=$2 launched=$3
    shift 3
    { [ -d "$WORK/$name-calls" ] || train_run "$name-calls" --set run.cuda_graphs=false "$@"; } &&
        train_run "$name-graphs" --set run.cuda_graphs=true "$@" || return
    local diff
    diff=$(figures_diff "$name-calls" "$name-graphs")
    if [ -n "$diff" ]; then
        fail "$name: graphs change the figures: $diff"
        return
    fi
    local want="\"graphs\": {\"recorded\": $recorded, \"launched\": $launched}"
    if [ "$(graph_counts "$name-graphs")" = "$want" ]; then
        pass "$name: $(run_figures "$name-graphs" | grep -c '"loss"') losses, gradient norms and evaluations bit for bit as without graphs ($want)"
    else
        fail "$name: the summary says '$(graph_counts "$name-graphs")', expected '$want'"
    fi
}

# 20 steps of one micro-step: forward and backward each run once as calls, are recorded
# at the second step, and launched there and at the 18 after it
ab "fp32" 2 38 --set run.eval_every=10
grep -q '^cuda graphs: on: ' "$WORK/fp32-graphs.log" && ! grep -q '^cuda graphs' "$WORK/fp32-calls.log" &&
    pass "the plan says graphs are on, and nothing without them" ||
    fail "the plan: '$(grep '^cuda graphs' "$WORK/fp32-graphs.log")'"
if train_run fp32-auto --set run.eval_every=10; then
    [ -z "$(figures_diff fp32-graphs fp32-auto)" ] &&
        [ "$(graph_counts fp32-auto)" = "$(graph_counts fp32-graphs)" ] &&
        grep -q '^cuda graphs: on (auto): ' "$WORK/fp32-auto.log" &&
        pass "cuda_graphs = auto, the default, records them here: $(graph_counts fp32-auto)" ||
        fail "cuda_graphs = auto: '$(grep '^cuda graphs' "$WORK/fp32-auto.log")', $(graph_counts fp32-auto)"
fi
if GEARBOX_CUDA_SYNC=1 train_run fp32-auto-sync --set run.steps=2; then
    grep -q '^cuda graphs: off (auto): GEARBOX_CUDA_SYNC=1 waits' "$WORK/fp32-auto-sync.log" &&
        ! grep -q '"graphs"' "$WORK/fp32-auto-sync/metrics.jsonl" &&
        pass "cuda_graphs = auto under GEARBOX_CUDA_SYNC=1: off, saying why" ||
        fail "auto under GEARBOX_CUDA_SYNC=1: '$(grep '^cuda graphs' "$WORK/fp32-auto-sync.log")'"
fi
ab accumulation-in-line 2 34 --set run.steps=6 --set data.gradient_accumulation_steps=3 \
    --set data.prefetch=false
# The scale doubles after every third step without overflow (and halves after one). With
# the scaler on the device (the default) backward reads the scale from device memory and
# is recorded once; with the host's scaler ([precision] device_update = false) the scale is
# a scalar of the recorded work, so forward (whose loss pass writes the scaled loss
# gradient, [train] fuse_classifier) and backward are recorded at step 2 and again at every
# later step whose scale, the one the step before logged, differs from its predecessor's.
fp16=(--set run.steps=8 --set precision.plugin=fp16 --set precision.growth_interval=3
      --set optim.plugin=adamw_fused)
ab fp16-scale-on-device 2 14 "${fp16[@]}"
fp16+=(--set precision.device_update=false)
if train_run fp16-scale-moving-calls "${fp16[@]}"; then
    recorded=$(grep -o '"loss_scale": [0-9.]*' "$WORK/fp16-scale-moving-calls/metrics.jsonl" | sed 's/.*: //' |
        awk 'NR >= 2 && NR <= 7 && $1 != prev { n++ } { prev = $1 }
             END { print 2 + 2 * n }')
    scales=$(grep -o '"loss_scale": [0-9.]*' "$WORK/fp16-scale-moving-calls/metrics.jsonl" |
        sort -u | wc -l)
    [ "$scales" -ge 2 ] && pass "fp16: the loss scale took $scales values" ||
        fail "fp16: the loss scale never moved; the test wants it to"
    ab fp16-scale-moving "$recorded" 14 "${fp16[@]}"
fi
ab bf16-recompute-block 2 14 --set run.steps=8 --set precision.plugin=bf16 \
    --set optim.plugin=adamw_fused --set train.recompute=block

"$GEARBOX" bench step "$WORK/run.ini" --steps 2 --warmup 1 --profile --set run.cuda_graphs=true \
    > "$WORK/bench.log" 2>&1 && grep -q '^profile: ' "$WORK/bench.log" &&
    pass "bench step --profile with graphs: $(grep '^step: ' "$WORK/bench.log")" ||
    fail "bench step --profile with graphs: $(grep -v warning "$WORK/bench.log" | tail -n 3)"

expect_error "cuda_graphs on a device without graphs" 2 \
    "[run] cuda_graphs = true: [device] plugin = cpu" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/cpu" --set device.plugin=cpu \
    --set run.cuda_graphs=true
grep -q "records no graphs (ABI 1.4's graph_begin, graph_end, graph_launch and graph_destroy); use \[device\] plugin = cuda" "$WORK/stderr" &&
    pass "the refusal names the missing entries and the fix" || fail "refusal: $(cat "$WORK/stderr")"
finish
