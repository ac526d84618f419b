#!/usr/bin/env bash
# Training on device/cuda with attn/math and attn/flash in every precision (attn/mem_efficient
# must refuse, naming the plugins to use): 20 steps of a tiny GPT whose loss curve must
# follow the CPU's fp32 run, step by step, within the precision's tolerance (fp32 1e-3: cuBLASLt sums in its own order; tf32 0.03; bf16 and
# fp16 0.05, as tests/cli/test_precision.sh allows them against fp32 on the CPU), and tf32
# must not give fp32's bits: its products round their inputs (the engine once forgot to
# pass the policy's tf32 to the matmuls, and tf32 trained as fp32).
# usage: test_train_cuda.sh GEARBOX FIXTURES_DIR SOURCE_ROOT  (GEARBOX_TEST_DEVICE=cuda)
source "$(dirname "$0")/../cli/lib.sh"
make_data
device=${GEARBOX_TEST_DEVICE:-cuda}
GEARBOX_TEST_DEVICE= write_config "$WORK/cpu.ini"
GEARBOX_TEST_DEVICE=$device write_config "$WORK/cuda.ini"

losses() { grep -o '"step": [0-9]*, "loss": [0-9.]*' "$1/metrics.jsonl" | sed 's/.*"loss": //'; }

train() { # CONFIG OUT_DIR PRECISION ATTN
    "$GEARBOX" train "$1" --set run.out_dir="$2" --set precision.plugin="$3" \
        --set attn.plugin="$4" --set optim.plugin=adamw_fused > "$2.log" 2>&1
}

train "$WORK/cpu.ini" "$WORK/cpu" fp32 math || { fail "the CPU run: $(tail -n 3 "$WORK/cpu.log")"; finish; }
losses "$WORK/cpu" > "$WORK/cpu.losses"
# attn/mem_efficient's CUDA object refuses every problem, naming attn/flash and attn/cudnn
out="$WORK/mem_efficient"
if train "$WORK/cuda.ini" "$out" bf16 mem_efficient; then
    fail "mem_efficient on $device: trained, but its CUDA object refuses every problem"
elif grep -q "attn/mem_efficient does not run on cuda.*attn/flash.*attn/cudnn" "$out.log"; then
    pass "mem_efficient on $device: refused, naming attn/flash and attn/cudnn"
else
    fail "mem_efficient on $device: failed without the refusal: $(grep -v warning "$out.log" | tail -n 3)"
fi
for attn in math flash; do
    for precision in fp32 tf32 bf16 fp16; do
        out="$WORK/$attn-$precision"
        if ! train "$WORK/cuda.ini" "$out" "$precision" "$attn"; then
            fail "$attn, $precision on $device: $(grep -v warning "$out.log" | tail -n 3)"
            continue
        fi
        case $precision in fp32) tol=1e-3 ;; tf32) tol=0.03 ;; *) tol=0.05 ;; esac
        losses "$out" > "$out.losses"
        worst=$(paste "$WORK/cpu.losses" "$out.losses" | awk -v tol="$tol" '
            NF != 2 { bad = 1 } { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d }
            END { over = m > tol ? " over" : ""
                  if (NR != 20 || bad) print "mismatch"; else printf "%.2e%s\n", m, over }')
        case $worst in
        mismatch | "") fail "$attn, $precision: $(wc -l < "$out.losses") logged losses against 20 on the CPU" ;;
        *over) fail "$attn, $precision: the loss curve is ${worst% over} away from the CPU's fp32 (tolerance $tol)" ;;
        *) pass "$attn, $precision on $device: 20 losses within $worst of the CPU's fp32 (tolerance $tol), last $(tail -n 1 "$out.losses")" ;;
        esac
    done
    if cmp -s "$WORK/$attn-fp32.losses" "$WORK/$attn-tf32.losses"; then
        fail "$attn: tf32 gave fp32's losses bit for bit: its matmuls did not round to TF32"
    else
        pass "$attn: tf32's losses differ from fp32's (TF32 rounding reached the matmuls)"
    fi
done
finish
