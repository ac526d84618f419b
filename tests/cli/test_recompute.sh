#!/usr/bin/env bash
# [train] recompute: backward runs forward kernels again instead of keeping their outputs.
# The losses must be bit-identical to keeping everything (the same kernels on the same
# inputs), in f32 and bf16, and the peak resident memory must drop by what the memory plan
# says the mode saves, within 5%.
# usage: test_recompute.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/tiny.ini"

# train NAME SETTINGS...: trains the tiny config with the settings into $WORK/NAME; its
# per-step losses go to $WORK/NAME.losses.
train() {
    local name=$1
    shift
    local sets=()
    for s in "$@"; do sets+=(--set "$s"); done
    "$GEARBOX" train "$WORK/tiny.ini" --set run.out_dir="$WORK/$name" "${sets[@]}" \
        > "$WORK/$name.log" 2>&1 || { fail "train $name: $(tail -n 3 "$WORK/$name.log")"; return 1; }
    grep -E '^\{"step": [0-9]+, "loss"' "$WORK/$name/metrics.jsonl" |
        sed -E 's/^\{"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/' > "$WORK/$name.losses"
}

for precision in fp32 bf16; do
    train "none-$precision" precision.plugin=$precision optim.plugin=adamw_fused
    for mode in norm_gelu block; do
        train "$mode-$precision" precision.plugin=$precision optim.plugin=adamw_fused \
            train.recompute=$mode || continue
        if [ -s "$WORK/$mode-$precision.losses" ] &&
            cmp -s "$WORK/none-$precision.losses" "$WORK/$mode-$precision.losses"; then
            pass "recompute = $mode, $precision: $(wc -l < "$WORK/$mode-$precision.losses") losses bit-identical to none"
        else
            fail "recompute = $mode, $precision: losses differ from none"
            paste "$WORK/none-$precision.losses" "$WORK/$mode-$precision.losses" | head -n 5
        fi
    done
done

# A model whose activations dwarf everything else the process holds, for memory: what
# the allocator and oneDNN add varies by a megabyte or two between runs.
big=(model.n_layer=8 model.n_head=4 model.n_embd=128 model.block_size=256 data.batch_size=16
     run.steps=2 run.log_every=1)
plan_activations() { # MiB of activations in the memory plan train printed
    sed -nE 's/^memory plan: .*activations ([0-9.]+) .*/\1/p' "$WORK/$1.log" | head -n 1
}
peak_rss() { # MiB
    sed -nE 's/.*"peak_rss_bytes": ([0-9]+).*/\1/p' "$WORK/$1/metrics.jsonl" | tail -n 1 |
        awk '{ printf "%.2f", $1 / 1048576 }'
}
train big-none "${big[@]}"
for mode in norm_gelu block; do
    train "big-$mode" "${big[@]}" train.recompute=$mode || continue
    planned=$(awk -v a="$(plan_activations big-none)" -v b="$(plan_activations "big-$mode")" \
        'BEGIN { printf "%.2f", a - b }')
    measured=$(awk -v a="$(peak_rss big-none)" -v b="$(peak_rss "big-$mode")" \
        'BEGIN { printf "%.2f", a - b }')
    what="recompute = $mode: the plan saves $planned MiB of activations, peak RSS dropped $measured MiB"
    if awk -v p="$planned" -v m="$measured" \
        'BEGIN { d = m - p; if (d < 0) d = -d; exit !(p > 0 && d <= 0.05 * p) }'; then
        pass "$what (within 5%)"
    else
        fail "$what (more than 5% apart)"
    fi
done

# batch_size = auto plans with the mode: less kept, a larger batch in the same budget.
auto_batch() {
    "$GEARBOX" check "$WORK/tiny.ini" --set data.batch_size=auto --set run.memory_budget=8MiB \
        --set train.recompute="$1" 2>&1 | sed -nE 's/^batch_size = auto: batch_size ([0-9]+),.*/\1/p'
}
b_none=$(auto_batch none) b_norm=$(auto_batch norm_gelu) b_block=$(auto_batch block)
if [ -n "$b_none" ] && [ -n "$b_norm" ] && [ -n "$b_block" ] &&
    [ "$b_none" -lt "$b_norm" ] && [ "$b_norm" -lt "$b_block" ]; then
    pass "batch_size = auto in 8 MiB: $b_none (none), $b_norm (norm_gelu), $b_block (block)"
else
    fail "batch_size = auto does not grow with recomputation: '$b_none' '$b_norm' '$b_block'"
fi
finish
