#!/usr/bin/env bash
# adamw and adamw_fused through `gearbox train`: 200 steps of examples/shakespeare_char.ini
# on the full Tiny Shakespeare text, logging every step, once with each optimizer. The
# per-step training losses must agree within 1e-6 (absolute, on losses around 2-4); the
# script prints the largest difference and says whether the logs are bit-identical
# (losses are logged with 9 significant digits, which round-trips a float32).
# GEARBOX_E2E_STEPS=N trains N steps instead, for a quicker look on a slow machine.
# usage: test_e2e_losses.sh GEARBOX BUILD_DIR SOURCE_ROOT
source "$(dirname "$0")/../cli/lib.sh"
STEPS=${GEARBOX_E2E_STEPS:-200}
"$GEARBOX" prepare "$SRC/examples/data/tinyshakespeare.txt" "$WORK/data" > /dev/null ||
    { fail "prepare the data"; finish; }

train_with() {
    local plugin=$1
    "$GEARBOX" train "$SRC/examples/shakespeare_char.ini" --set data.dir="$WORK/data" \
        --set run.steps=$STEPS --set run.log_every=1 --set run.eval_every=0 \
        --set run.out_dir="$WORK/$plugin" --set optim.plugin="$plugin" \
        > "$WORK/$plugin.log" 2>&1 ||
        { cat "$WORK/$plugin.log"; fail "training with $plugin"; finish; }
    grep -E '"step": [0-9]+, "loss"' "$WORK/$plugin/metrics.jsonl" |
        sed -E 's/^\{"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/' > "$WORK/$plugin.losses"
}
train_with adamw
train_with adamw_fused

n=$(wc -l < "$WORK/adamw_fused.losses")
[ "$n" -eq $STEPS ] && pass "$STEPS losses logged" || fail "expected $STEPS logged losses, found $n"
max=$(paste "$WORK/adamw.losses" "$WORK/adamw_fused.losses" | awk '
    $1 != $3 { print "misaligned"; exit }
    { d = $2 - $4; if (d < 0) d = -d; if (d > m) m = d }
    END { if (NR) printf "%.3g\n", m }')
if [ "$max" = misaligned ] || [ -z "$max" ]; then
    fail "the two logs do not cover the same steps"
elif awk -v m="$max" 'BEGIN { exit !(m <= 1e-6) }'; then
    if cmp -s "$WORK/adamw.losses" "$WORK/adamw_fused.losses"; then
        pass "losses over $STEPS steps: max difference $max (bit-identical)"
    else
        pass "losses over $STEPS steps: max difference $max (not bit-identical)"
    fi
else
    fail "losses differ by up to $max (more than 1e-6)"
fi
final() { grep -E '^\{"step": [0-9]+, "train_loss"' "$WORK/$1/metrics.jsonl"; }
echo "adamw:       $(final adamw)"
echo "adamw_fused: $(final adamw_fused)"
finish
