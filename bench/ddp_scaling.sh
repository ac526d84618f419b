#!/usr/bin/env bash
# Data-parallel scaling on one machine: `gearbox train` on the default config as
# 1 process x 1 thread (comm/single) and as 2 processes x 1 thread (mpirun, comm/mpi),
# the same global batch and steps, one after the other, REPEATS times each; prints the
# median tokens/s of both, the ratio, and the bytes all-reduced per step.
#
# usage: [GEARBOX=path/to/gearbox] bench/ddp_scaling.sh [STEPS] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-200}
repeats=${2:-3}
gearbox=${GEARBOX:-build/tools/gearbox}   # or another build's binary
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -f examples/data/shakespeare_char/train.bin ] ||
    "$gearbox" prepare examples/data/tinyshakespeare.txt examples/data/shakespeare_char > /dev/null
common=(examples/shakespeare_char.ini --set run.steps="$steps" --set run.eval_every=0
        --set run.eval_iters=1 --set run.log_every="$steps" --set run.checkpoint_every=0
        --set run.threads=1)

# tokens/s of a finished run, from its summary line ("... | 4970 tok/s | ...")
tok_s() { grep -o '[0-9]* tok/s' "$1" | tail -n 1 | cut -d' ' -f1; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for r in $(seq "$repeats"); do
    "$gearbox" train "${common[@]}" --set run.out_dir="$work/one-$r" > "$work/one-$r.log"
    tok_s "$work/one-$r.log" >> "$work/one"
    mpirun --allow-run-as-root --oversubscribe -np 2 "$gearbox" train "${common[@]}" \
        --set run.out_dir="$work/two-$r" --set comm.plugin=mpi > "$work/two-$r.log"
    tok_s "$work/two-$r.log" >> "$work/two"
    echo "repeat $r: 1 x 1 thread $(tail -n 1 "$work/one") tok/s, 2 x 1 thread $(tail -n 1 "$work/two") tok/s"
done
one=$(median < "$work/one")
two=$(median < "$work/two")
echo "$(grep -o 'data parallel: .*' "$work/two-1.log")"
awk -v a="$one" -v b="$two" -v n="$repeats" -v s="$steps" 'BEGIN {
    printf "median of %d runs of %d steps: 1 process x 1 thread %.0f tok/s, 2 processes x 1 thread %.0f tok/s: %.2fx\n", n, s, a, b, b / a }'
