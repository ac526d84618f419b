#!/usr/bin/env bash
# `gearbox bench matmul` and `gearbox bench step` on a tiny model: they run, print every
# row and the machine's limits beside the figures, and refuse bad arguments.
source "$(dirname "$0")/../cli/lib.sh"
make_data
# One thread: OpenMP threads that spin-wait slow to a crawl when the machine is busy
# with other work, and these checks are not about speed.
"$GEARBOX" bench matmul 32,16,4 --repeats 2 --threads 1 > "$WORK/matmul.txt" 2>&1 ||
    fail "bench matmul: $(cat "$WORK/matmul.txt")"
rows=$(grep -cE '^  (attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj|lm_head) (forward|d input|d weight) +[0-9]+ +[0-9]+ +[0-9]+ .* [0-9.]+ +[0-9.]+ +[0-9]+%$' "$WORK/matmul.txt")
[ "$rows" -eq 15 ] && grep -q "^  all of the above " "$WORK/matmul.txt" &&
    grep -qE "^peak: [0-9.]+ GFLOP/s \(the CPU's (rated f32 peak: [0-9]+ cores x [0-9]+ f32 lanes|measured f32 peak: AVX FMA loop, above the rated [0-9.]+).*\); measured: [0-9.]+ GFLOP/s" "$WORK/matmul.txt" &&
    pass "bench matmul: 15 shapes, the total, the peak and the measured sgemm" ||
    fail "bench matmul output ($rows rows): $(cat "$WORK/matmul.txt")"
grep -q "^  mlp.c_fc forward  *64  *128  *32  B^T" "$WORK/matmul.txt" &&
    pass "bench matmul: forward of mlp.c_fc is (64 x 128 x 32) for C 32, T 16, B 4" ||
    fail "mlp.c_fc shape: $(grep mlp.c_fc "$WORK/matmul.txt")"
expect_error "bench matmul bad model" 2 "expected S, M or C,T,B" -- "$GEARBOX" bench matmul X

write_config "$WORK/run.ini"
"$GEARBOX" bench step "$WORK/run.ini" --steps 3 --warmup 1 --set run.threads=1 \
    > "$WORK/step.txt" 2>&1 ||
    fail "bench step: $(cat "$WORK/step.txt")"
grep -qE "^step: median [0-9.]+ ms \(min [0-9.]+, max [0-9.]+ over 3 steps\) \| 64 tokens per step \| [0-9]+ tok/s \| CPU time [0-9.]+ ms per step \(all threads\)$" "$WORK/step.txt" &&
    grep -qE "^model FLOPs: [0-9.e+-]+ GFLOP per step .* \| MFU [0-9.]+%$" "$WORK/step.txt" &&
    grep -qE "^limits: f32 peak [0-9.]+ GFLOP/s .* \| triad [0-9.]+ GB/s" "$WORK/step.txt" &&
    pass "bench step: median ms, tok/s, MFU and the limits" ||
    fail "bench step output: $(cat "$WORK/step.txt")"
[ ! -e "$WORK/out" ] && pass "bench step writes nothing" || fail "bench step wrote $WORK/out"

# MFU is against the larger of the CPU's rated peak and its measured one (an FMA loop,
# the best kept per machine), never below the rated: a peak measured at start-up alone
# reads low on a busy machine, and MFU read 140% there. doctor shows both.
for run in 1 2; do
    "$GEARBOX" train "$WORK/run.ini" --set run.steps=2 --set run.threads=1 \
        --set run.out_dir="$WORK/mfu$run" 2>&1 | grep "^mfu:" > "$WORK/mfu$run.txt"
done
"$GEARBOX" doctor > "$WORK/doctor.txt" 2>&1
rated=$(sed -nE 's/^  cpu peak f32 +rated ([0-9.]+) GFLOP\/s \(.*\) \| measured [0-9.]+ GFLOP\/s .* \| MFU divides by the (rated|measured) CPU peak$/\1/p' "$WORK/doctor.txt")
for run in 1 2; do
    line=$(cat "$WORK/mfu$run.txt")
    peak=$(sed -nE 's/.* against a (rated|measured) CPU f32 peak of ([0-9.]+) GFLOP\/s$/\2/p' "$WORK/mfu$run.txt")
    if [ -n "$rated" ] && [ -n "$peak" ] && awk -v p="$peak" -v r="$rated" 'BEGIN { exit !(p >= r) }' &&
       { ! grep -q "rated CPU" "$WORK/mfu$run.txt" || [ "$peak" = "$rated" ]; }; then
        pass "run $run: MFU against $peak GFLOP/s, at least the rated $rated doctor shows"
    else
        fail "MFU peak: doctor's rated '$rated'; run $run says: $line; doctor: $(grep 'cpu peak' "$WORK/doctor.txt")"
    fi
done
expect_error "bench step --steps 0" 2 "--steps 0: expected a whole number from 1" -- \
    "$GEARBOX" bench step "$WORK/run.ini" --steps 0
"$GEARBOX" bench --help | grep -q "^  matmul " && "$GEARBOX" bench --help | grep -q "^  step " &&
    pass "bench --help lists matmul and step" || fail "bench --help"
finish
