#!/usr/bin/env bash
# batch_size = auto: the largest batch whose plan fits [run] memory_budget (batch B plans
# within it, B + 1 does not, and the run allocates exactly B's plan), tokens_per_step
# kept by gradient accumulation, and the refusals (no budget on cpu, nothing fits).
source "$(dirname "$0")/../cli/lib.sh"
make_data
# One thread: OpenMP threads that spin-wait slow to a crawl when the machine is busy
# with other work, and these checks are not about speed.
write_config "$WORK/run.ini" "checkpoint_every = 0"
BUDGET=2097152   # 2MiB

# train_auto NAME [--set ...]: an auto-batch run whose log is $WORK/NAME.log
train_auto() {
    local name=$1
    shift
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/$name" \
        --set data.batch_size=auto --set run.memory_budget=2MiB --set run.steps=2 \
        --set run.threads=1 "$@" > "$WORK/$name.log" 2>&1 ||
        fail "$name: $(cat "$WORK/$name.log")"
}

train_auto largest
line=$(grep "^batch_size = auto: budget" "$WORK/largest.log")
read -r B FIT NEXT NEXT_BYTES <<< "$(echo "$line" | sed -nE \
    's/.*; batch ([0-9]+) plans ([0-9]+) bytes .*, batch ([0-9]+) would plan ([0-9]+) bytes.*/\1 \2 \3 \4/p')"
if [ -z "${B:-}" ]; then
    fail "no choice printed: $(cat "$WORK/largest.log")"
else
    echo "$line" | grep -q "budget $BUDGET bytes" && [ "$FIT" -le "$BUDGET" ] &&
        [ "$NEXT" -eq $((B + 1)) ] && [ "$NEXT_BYTES" -gt "$BUDGET" ] &&
        pass "batch $B plans $FIT bytes <= $BUDGET < $NEXT_BYTES for batch $NEXT" ||
        fail "choice does not bracket the budget: $line"
    mib=$(awk -v b="$FIT" 'BEGIN {printf "%.2f", b / 1048576}')
    grep -q "^memory plan: $mib MiB = " "$WORK/largest.log" &&
        pass "the run allocates the plan of batch $B ($mib MiB)" ||
        fail "planned $mib MiB, run: $(grep 'memory plan' "$WORK/largest.log")"
    grep -q "^batch_size = auto: batch_size $B, gradient_accumulation_steps 1: $((B * 16)) tokens" \
        "$WORK/largest.log" && grep -q "\"batch_size\": $B," "$WORK/largest/manifest.json" &&
        grep -q '"batch_size_auto": true' "$WORK/largest/manifest.json" &&
        pass "batch_size $B used and recorded in manifest.json" ||
        fail "resolved batch: $(grep -A3 '"resolved"' "$WORK/largest/manifest.json")"
fi

# 48 sequences of 16 tokens per step: the largest fitting divisor of 48, times accumulation
train_auto per_step --set data.tokens_per_step=768
read -r PB PACC PTOK <<< "$(sed -nE \
    's/^batch_size = auto: batch_size ([0-9]+), gradient_accumulation_steps ([0-9]+): ([0-9]+) tokens.*/\1 \2 \3/p' \
    "$WORK/per_step.log")"
if [ -z "${PB:-}" ] || [ -z "${B:-}" ]; then
    fail "tokens_per_step choice: $(cat "$WORK/per_step.log")"
else
    larger_fits=0
    for d in $(seq $((PB + 1)) "$B"); do
        [ $((48 % d)) -eq 0 ] && larger_fits=1
    done
    [ "$PTOK" -eq 768 ] && [ $((PB * PACC)) -eq 48 ] && [ "$PB" -le "$B" ] &&
        [ "$larger_fits" -eq 0 ] &&
        pass "tokens_per_step 768 kept: batch $PB x accumulation $PACC, the largest fitting divisor of 48" ||
        fail "tokens_per_step: batch $PB, accumulation $PACC, $PTOK tokens (largest fit $B)"
    grep -q "\"gradient_accumulation_steps\": $PACC," "$WORK/per_step/manifest.json" &&
        grep -q '"tokens_per_step": 768' "$WORK/per_step/manifest.json" &&
        pass "manifest.json records the accumulation" || fail "manifest resolved section"
fi

# fewer sequences per step than fit: the step size caps the batch
train_auto capped --set data.tokens_per_step=64
grep -q "batch 4 plans [0-9]* bytes .*, the most \[data\] tokens_per_step allows" "$WORK/capped.log" &&
    grep -q "batch_size 4, gradient_accumulation_steps 1: 64 tokens" "$WORK/capped.log" &&
    pass "tokens_per_step below the largest fit caps the batch" ||
    fail "capped: $(grep 'batch_size = auto' "$WORK/capped.log")"

expect_error "auto on cpu needs a budget" 2 "needs [run] memory_budget" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/x" --set data.batch_size=auto
expect_error "nothing fits" 2 "even batch 1 does not fit" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/x" --set data.batch_size=auto \
    --set run.memory_budget=1KiB
expect_error "bad budget" 2 "[run] memory_budget = 'plenty'" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.memory_budget=plenty
finish
