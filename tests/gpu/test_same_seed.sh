#!/usr/bin/env bash
# Two runs with the same seed on the device tests/cli/lib.sh's device_section names (the gpu
# suite sets GEARBOX_TEST_DEVICE=cuda) must log bit-identical losses at every step and the
# same final evaluation: the device's kernels are deterministic.
# usage: test_same_seed.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/run.ini"
for run in a b; do
    train_run $run || finish
    grep -E '"step": [0-9]+, "(loss|train_loss)"' "$WORK/$run/metrics.jsonl" |
        sed -E 's/, "ms".*//' > "$WORK/$run.losses"
done
n=$(wc -l < "$WORK/a.losses")
if [ "$n" -lt 20 ]; then
    fail "expected at least 20 logged steps, found $n"
else
    same_lines "$n logged lines of the two runs, bit-identical" "$WORK/a.losses" "$WORK/b.losses"
fi
finish
