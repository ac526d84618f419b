#!/usr/bin/env bash
# End to end: 100 training steps of examples/shakespeare_char.ini (Tiny Shakespeare,
# prepared into a scratch folder) with [attn] plugin = math, mem_efficient and flash. The
# plugins compute the same mathematics, so every logged per-step loss of mem_efficient
# and flash must be within 1e-4 of math's; the largest difference is printed.
# usage: test_train.sh GEARBOX BUILD_DIR SOURCE_ROOT
source "$(dirname "$0")/../cli/lib.sh"
TOLERANCE=1e-4
# Tests run side by side on few cores: spinning OpenMP threads waiting for a descheduled
# peer made one 10 s run take 130 s. Sleeping waits change no result.
export OMP_WAIT_POLICY=passive
"$GEARBOX" prepare "$SRC/examples/data/tinyshakespeare.txt" "$WORK/data" > /dev/null ||
    { fail "prepare the bundled Tiny Shakespeare"; finish; }

# "STEP LOSS" per logged step of a metrics.jsonl.
losses() { sed -nE 's/^\{"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/p' "$1"; }

for plugin in math mem_efficient flash; do
    if "$GEARBOX" train "$SRC/examples/shakespeare_char.ini" --set data.dir="$WORK/data" \
        --set run.steps=100 --set run.log_every=1 --set run.eval_every=0 \
        --set run.eval_iters=1 --set run.out_dir="$WORK/$plugin" \
        --set attn.plugin="$plugin" > "$WORK/$plugin.log" 2>&1; then
        losses "$WORK/$plugin/metrics.jsonl" > "$WORK/$plugin.losses"
        pass "attn.plugin = $plugin: $(grep '^done' "$WORK/$plugin.log")"
    else
        cat "$WORK/$plugin.log"
        fail "training with attn.plugin = $plugin"
        : > "$WORK/$plugin.losses"
    fi
done

n=$(wc -l < "$WORK/math.losses")
[ "$n" -eq 100 ] || fail "math logged $n steps, expected 100"
for plugin in mem_efficient flash; do
    [ -s "$WORK/$plugin.losses" ] || continue
    # prints: largest |difference|, its step, and 1 when the step columns disagree
    read -r max at misaligned < <(paste -d' ' "$WORK/math.losses" "$WORK/$plugin.losses" |
        awk '{ d = $2 - $4; d = d < 0 ? -d : d; if ($1 != $3) bad = 1
               if (d >= m) { m = d; s = $1 } }
             END { printf "%.3g %d %d\n", m, s, bad + 0 }')
    if [ "$(wc -l < "$WORK/$plugin.losses")" -ne 100 ] || [ "$misaligned" -ne 0 ]; then
        fail "$plugin: logged steps differ from math's"
    elif awk -v m="$max" -v t="$TOLERANCE" 'BEGIN { exit !(m <= t) }'; then
        pass "$plugin vs math over 100 steps: max |loss difference| $max (step $at) <= $TOLERANCE"
    else
        fail "$plugin vs math: max |loss difference| $max at step $at > $TOLERANCE"
    fi
done
finish
