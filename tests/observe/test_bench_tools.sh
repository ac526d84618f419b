#!/usr/bin/env bash
# The benchmark tools a GPU run uses, checked on the CPU: `gearbox bench attn` runs in the
# dtype it is asked for (its [precision] plugin follows --dtype, so a 16-bit-only plugin
# such as cudnn is not refused for computing no f32), takes --set like the other verbs and
# refuses a --set that makes the precision compute in another dtype; bench/compare_gpu.py
# takes its interpreter by name (found on PATH) and names one it cannot find; `gearbox bench
# matmul` times a run's products in its dtype and with GPT-2's epilogues.
source "$(dirname "$0")/../cli/lib.sh"
attn() { "$GEARBOX" bench attn --plugins math --T 32 --heads 2 --head-dim 16 --repeats 1 "$@"; }

for pair in f32:fp32 bf16:bf16 f16:fp16; do
    dtype=${pair%:*} precision=${pair#*:}
    if ! attn --dtype "$dtype" > "$WORK/attn-$dtype.txt" 2>&1; then
        fail "bench attn --dtype $dtype: $(cat "$WORK/attn-$dtype.txt")"
    elif grep -q "^precision: \[precision\] plugin = $precision, computing in $dtype$" "$WORK/attn-$dtype.txt" &&
         grep -qE "^  math +[0-9.]+ " "$WORK/attn-$dtype.txt"; then
        pass "bench attn --dtype $dtype runs with [precision] plugin = $precision"
    else
        fail "bench attn --dtype $dtype output: $(cat "$WORK/attn-$dtype.txt")"
    fi
done
attn --dtype bf16 --set run.threads=1 > "$WORK/set.txt" 2>&1 &&
    grep -q "head_dim 16, 1 thread(s)$" "$WORK/set.txt" &&
    pass "bench attn --set run.threads=1 reaches the run" ||
    fail "bench attn --set run.threads=1: $(cat "$WORK/set.txt")"
expect_error "bench attn: a --set precision that does not compute in --dtype" 2 \
    "--dtype bf16, but [precision] plugin = fp16 computes in f16" -- \
    attn --dtype bf16 --set precision.plugin=fp16
expect_error "bench attn: a malformed --set" 2 "expected section.key=value" -- \
    attn --set threads
"$GEARBOX" bench attn --help | grep -q -- "--set K=V" &&
    pass "bench attn --help lists --set" || fail "bench attn --help lacks --set"

# bench matmul in a dtype, with the epilogues a GPT-2 run gives each product
matmul() { "$GEARBOX" bench matmul 32,16,2 --repeats 1 --threads 1 "$@"; }
if matmul --dtype bf16 --epilogues > "$WORK/matmul.txt" 2>&1; then
    for want in "1 threads, bf16 with GPT-2's epilogues" "mlp.c_fc forward .* bias+gelu" \
                "mlp.c_proj d input .* dgelu" "attn.c_attn d weight .* bgrad" "lm_head forward .* B^T  "; do
        grep -q -- "$want" "$WORK/matmul.txt" && pass "bench matmul --dtype bf16 --epilogues: $want" ||
            fail "bench matmul --dtype bf16 --epilogues lacks '$want': $(cat "$WORK/matmul.txt")"
    done
else
    fail "bench matmul --dtype bf16 --epilogues: $(cat "$WORK/matmul.txt")"
fi
expect_error "bench matmul: an unknown --dtype" 2 "--dtype f64: expected f32, bf16 or f16" -- \
    matmul --dtype f64

# compare_gpu.py without running anything (--dry-run), on a token folder of its own
make_data
python=$(command -v python3)
compare() { python3 "$SRC/bench/compare_gpu.py" --dry-run --smoke-cpu --data "$WORK/data" "$@"; }
if compare --python python3 > "$WORK/compare.txt" 2>&1; then
    want=$(python3 -c 'import shutil; print(shutil.which("python3"))')
    grep -qF "pytorch: $want $SRC/bench/torch_gpt.py" "$WORK/compare.txt" &&
        pass "compare_gpu.py --python python3 runs $want" ||
        fail "compare_gpu.py --python python3: $(cat "$WORK/compare.txt")"
else
    fail "compare_gpu.py --python python3: $(cat "$WORK/compare.txt")"
fi
compare --python "$python" > "$WORK/path.txt" 2>&1 &&
    pass "compare_gpu.py --python still takes a path" ||
    fail "compare_gpu.py --python $python: $(cat "$WORK/path.txt")"
expect_error "compare_gpu.py --python with an unknown name" 2 \
    "'no-such-python-here': no executable program of that name on PATH" -- \
    compare --python no-such-python-here
finish
