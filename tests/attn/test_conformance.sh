#!/usr/bin/env bash
# `gearbox test-plugin --strict` on each CPU attention plugin, as TAP: the kit's shapes
# against attn/math plus what these plugins promise beyond the contract (the same bits at
# 1, 2 and 3 threads and for every `isa` choice, bit-exact causality, refusals that name
# their cause, memory linear in T), at the default tile sizes and at tile sizes that
# leave partial tiles everywhere.
# usage: test_conformance.sh GEARBOX PLUGINS_DIR
set -u
GEARBOX=$1
PLUGINS=$2
math=$PLUGINS/attn/math/attn-math-cpu.so
mem=$PLUGINS/attn/mem_efficient/attn-mem_efficient-cpu.so
flash=$PLUGINS/attn/flash/attn-flash-cpu.so
runs=(
    "$math"
    "$mem"
    "$mem --set block_q=7"
    "$flash"
    "$flash --set block_q=16 --set block_k=32"
    "$flash --set block_q=5 --set block_k=16"
)
echo "1..${#runs[@]}"
n=0
for run in "${runs[@]}"; do
    n=$((n + 1))
    rc=0
    # shellcheck disable=SC2086  # a run is a file and its --set options
    table=$("$GEARBOX" test-plugin --strict $run 2>&1) || rc=$?
    name="$(basename "${run%% *}")${run#"${run%% *}"}"
    if [ "$rc" -eq 0 ]; then
        echo "ok $n - $name: $(tail -n 1 <<< "$table")"
    else
        echo "not ok $n - $name (exit status $rc)"
        sed 's/^/# /' <<< "$table"
    fi
done
