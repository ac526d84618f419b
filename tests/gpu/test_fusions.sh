#!/usr/bin/env bash
# [train] fuse_classifier, fuse_gelu, fuse_bias_grad and fuse_residual_norm: the fused and
# the unfused paths train the same model to the same losses.
# - device/cuda (the gpu suite sets GEARBOX_TEST_DEVICE=cuda), a tiny GPT with biases in
#   fp32 and bf16, GELU's tanh form (cuBLASLt's GELU epilogues) and erf form (element-wise
#   after the product): every fusion on against every fusion off, 20 losses each, within
#   1e-3 in fp32 (gpu-train's allowance against the CPU: on a GPU cuBLASLt computes GELU
#   and the bias gradients' sums its own way; the emulator's curves agree to about 1e-6)
#   and 0.02 in bf16 (the epilogues apply GELU before the pre-activation is rounded to
#   bf16; about 6e-3 in the emulator); the plan names the fusions in effect.
# - the fused path's own bits hold where the engine reorders work around it: recompute =
#   block (recomputed blocks add and normalise apart) and CUDA graphs with gradient
#   accumulation (the loss gradient moves into the recorded forward) give the plain fused
#   run's losses bit for bit.
# - device/cpu, which has only the classifier fusion: the same bits on and off, and the
#   plan says why the others are off.
# usage: test_fusions.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
source "$(dirname "$0")/../cli/lib.sh"
make_data
device=${GEARBOX_TEST_DEVICE:-cuda}
GEARBOX_TEST_DEVICE=$device write_config "$WORK/gpu.ini"
GEARBOX_TEST_DEVICE= write_config "$WORK/cpu.ini"
all="fuse_classifier, fuse_gelu, fuse_bias_grad, fuse_residual_norm"

losses() { grep -o '"step": [0-9]*, "loss": [0-9.e-]*' "$1/metrics.jsonl" | sed 's/.*"loss": //'; }

train() { # CONFIG OUT_DIR FUSE(true|false) PRECISION GELU [--set ...]
    local config=$1 out=$2 fuse=$3 precision=$4 gelu=$5
    shift 5
    "$GEARBOX" train "$config" --set run.out_dir="$out" --set precision.plugin="$precision" \
        --set optim.plugin=adamw_fused --set model.bias=true --set model.gelu="$gelu" \
        --set train.fuse_classifier="$fuse" --set train.fuse_gelu="$fuse" \
        --set train.fuse_bias_grad="$fuse" --set train.fuse_residual_norm="$fuse" \
        "$@" > "$out.log" 2>&1 || { fail "$out: $(grep -v warning "$out.log" | tail -n 3)"; return 1; }
    losses "$out" > "$out.losses"
}

# the largest difference between two runs' losses, or "mismatch"
distance() {
    paste "$1.losses" "$2.losses" | awk '
        NF != 2 { bad = 1 } { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d }
        END { if (NR != 20 || bad) print "mismatch"; else printf "%.2e\n", m }'
}

for precision in fp32 bf16; do
    tol=$([ "$precision" = fp32 ] && echo 1e-3 || echo 0.02)
    for gelu in tanh erf; do
        off="$WORK/$precision-$gelu-off" on="$WORK/$precision-$gelu-on"
        train "$WORK/gpu.ini" "$off" false "$precision" "$gelu" &&
            train "$WORK/gpu.ini" "$on" true "$precision" "$gelu" || continue
        grep -q "^fusions: none$" "$off.log" && grep -q "^fusions: $all$" "$on.log" &&
            pass "$precision, $gelu: the plan says fusions: none, then fusions: $all" ||
            fail "$precision, $gelu: the plan's fusions line: $(grep '^fusions' "$off.log" "$on.log")"
        d=$(distance "$off" "$on")
        if [ "$d" = mismatch ]; then
            fail "$precision, $gelu: $(wc -l < "$on.losses") fused losses against $(wc -l < "$off.losses")"
        elif awk -v d="$d" -v t="$tol" 'BEGIN { exit !(d <= t) }'; then
            pass "$precision, $gelu on $device: fused and unfused losses within $d (tolerance $tol), last $(tail -n 1 "$on.losses")"
        else
            fail "$precision, $gelu on $device: fused and unfused losses $d apart (tolerance $tol)"
        fi
    done
done

same_bits() { # WHAT A B
    if cmp -s "$2.losses" "$3.losses" && [ "$(wc -l < "$2.losses")" -eq 20 ]; then
        pass "$1: the same 20 losses bit for bit"
    else
        fail "$1: the losses differ"; paste "$2.losses" "$3.losses" | head -5
    fi
}
base="$WORK/fp32-tanh-on"
train "$WORK/gpu.ini" "$WORK/recompute" true fp32 tanh --set train.recompute=block &&
    same_bits "fused, recompute = block against fused" "$base" "$WORK/recompute"
train "$WORK/gpu.ini" "$WORK/accum" true fp32 tanh --set data.gradient_accumulation_steps=2 &&
    train "$WORK/gpu.ini" "$WORK/graphs" true fp32 tanh --set data.gradient_accumulation_steps=2 \
        --set run.cuda_graphs=true &&
    same_bits "fused, 2 micro-steps, CUDA graphs against calls" "$WORK/accum" "$WORK/graphs"

train "$WORK/cpu.ini" "$WORK/cpu-off" false fp32 tanh &&
    train "$WORK/cpu.ini" "$WORK/cpu-on" true fp32 tanh &&
    same_bits "device/cpu, fusions on against off" "$WORK/cpu-off" "$WORK/cpu-on"
grep -q "^fusions: fuse_classifier; fuse_gelu = true, not applied: the device's matmul has no epilogues" \
    "$WORK/cpu-on.log" &&
    grep -q "fuse_residual_norm = true, not applied: the device has no add_layernorm_forward" \
    "$WORK/cpu-on.log" &&
    pass "device/cpu: the plan says which fusions are off and why" ||
    fail "device/cpu's plan: $(grep '^fusions' "$WORK/cpu-on.log")"
finish
