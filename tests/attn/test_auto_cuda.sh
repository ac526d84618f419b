#!/usr/bin/env bash
# `[attn] plugin = auto` on device/cuda picks by measurement, as on the CPU: a tiny bf16
# run prints its choice with a time, the other timed candidate with its time and ratio,
# and attn/mem_efficient passed over with its refusal naming attn/flash and attn/cudnn.
# usage: test_auto_cuda.sh GEARBOX FIXTURES_DIR SOURCE_ROOT  (GEARBOX_TEST_DEVICE=cuda)
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/auto.ini"
log=$WORK/auto.log
if ! "$GEARBOX" train "$WORK/auto.ini" --set run.out_dir="$WORK/out" --set run.steps=2 \
    --set precision.plugin=bf16 --set optim.plugin=adamw_fused --set attn.plugin=auto \
    > "$log" 2>&1; then
    fail "training with attn = auto on cuda: $(grep -v warning "$log" | tail -n 3)"
    finish
fi
chose=$(grep -E "^attn auto: chose (math|flash) .*, bf16: forward\+backward [0-9.]+ ms" "$log")
[ -n "$chose" ] && pass "$chose" || fail "no measured choice of math or flash: $(grep 'attn auto' "$log")"
grep -Eq "^attn auto: +passed over (math|flash): [0-9.]+ ms, [0-9.]+x slower" "$log" &&
    pass "the other candidate timed and passed over" ||
    fail "the other candidate was not timed: $(grep 'attn auto' "$log")"
grep -q "^attn auto: *passed over mem_efficient: attn/mem_efficient does not run on cuda.*attn/flash.*attn/cudnn" "$log" &&
    pass "mem_efficient passed over with its refusal" ||
    fail "mem_efficient not passed over with its refusal: $(grep 'attn auto' "$log")"
finish
