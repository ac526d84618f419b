#!/usr/bin/env bash
# The counters of every kernel the emulated plugins launch in a few tiny training steps,
# held to the committed baseline (check_counters.c: global sectors and shared wavefronts
# per request, per kernel; a worse ratio fails naming the kernel and the counter).
# The runs cover device/cuda's kernels fused and unfused (fp32, bf16, fp16; GELU's tanh and
# erf forms; dropout), both AdamW optimizers and Muon (bf16), attn/math, attn/flash at every head size it
# has a kernel for (32, 64, 80, 96, 128) in each dtype (at 64 the emulator takes the sm_90a
# wgmma kernels, [attn] products = auto; mma_sync's run too), and sampling over a KV cache
# (attn/common's cached kernels), one step each on the emulator with
# GEARBOX_CUDA_EMU_COUNT on. Not covered: device/cuda's fallbacks that training never takes
# (cast_kernel, row_sums_kernel, without_k_kernel, and LayerNorm's two-pass backward,
# layernorm_backward_dx_kernel and layernorm_partials_kernel, for rows too wide for the
# one-pass one: gpu-device-ops-emu launches them). The
# counts do not depend on the resume order, so the runs are made once, in order.
# GEARBOX_UPDATE_BASELINE=1 writes the baseline from this run instead (a reviewed edit).
# usage: test_gpu_counters.sh GEARBOX FIXTURES_DIR SOURCE_ROOT CHECK_COUNTERS BASELINE
source "$(dirname "$0")/../cli/lib.sh"
CHECK=$4
BASELINE=$5
export GEARBOX_CUDA_EMU_COUNT=$WORK/counts.jsonl GEARBOX_CUDA_EMU_ORDER=in-order
unset GEARBOX_CUDA_EMU_COUNT_SAMPLE
make_data
write_config "$WORK/run.ini"

# run NAME PRECISION ATTN OPTIM N_EMBD FUSE GELU [--set ...]
run() {
    local name=$1 precision=$2 attn=$3 optim=$4 width=$5 fuse=$6 gelu=$7
    shift 7
    train_run "$name" --set run.steps=1 --set run.eval_iters=1 \
        --set precision.plugin="$precision" --set attn.plugin="$attn" --set optim.plugin="$optim" \
        --set model.n_embd="$width" --set model.bias=true --set model.gelu="$gelu" \
        --set train.fuse_classifier="$fuse" \
        --set train.fuse_gelu="$fuse" --set train.fuse_bias_grad="$fuse" \
        --set train.fuse_residual_norm="$fuse" "$@" &&
        pass "$name: trained a step with counting on"
}

run fp32-math fp32 math adamw 32 false erf
run fp32-flash fp32 flash adamw_fused 64 true tanh
run fp32-flash-64 fp32 flash adamw 128 false tanh --set model.dropout=0.1
run bf16-flash bf16 flash adamw_fused 64 true tanh
run bf16-flash-64 bf16 flash adamw_fused 128 true erf
run fp16-flash fp16 flash adamw_fused 64 true tanh
run fp16-flash-64 fp16 flash adamw_fused 128 false erf
run bf16-math-muon bf16 math muon 32 false erf
for precision in bf16 fp16; do   # head_dim 64 on mma.sync, every GPU's kernels
    run "$precision-flash-64-mma" "$precision" flash adamw_fused 128 true tanh \
        --set model.n_layer=1 --set attn.products=mma_sync
done
# flash's other head sizes, one layer each
for precision in fp32 bf16 fp16; do
    for width in 160 192 256; do
        run "$precision-flash-$((width / 2))" "$precision" flash adamw_fused "$width" true tanh \
            --set model.n_layer=1
    done
done
"$GEARBOX" sample "$WORK/fp32-flash" --tokens 4 --seed 1 > "$WORK/sample.log" 2>&1 &&
    pass "sampled 4 tokens over a KV cache with counting on" ||
    fail "sample: $(tail -n 3 "$WORK/sample.log")"

if [ "${GEARBOX_UPDATE_BASELINE:-0}" = 1 ]; then
    "$CHECK" --write "$WORK/counts.jsonl" "$BASELINE" || fail "writing the baseline"
else
    "$CHECK" "$WORK/counts.jsonl" "$BASELINE" || fail "the counters against $BASELINE"
fi
finish
