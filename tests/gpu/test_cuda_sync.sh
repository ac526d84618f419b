#!/usr/bin/env bash
# GEARBOX_CUDA_SYNC=1 on a training run of device/cuda (the gpu-emu suite runs it on the
# emulated GPU): the run with every launch and library call synchronised and checked must
# log the same losses, bit for bit, as the run without the switch, on attn/flash (its own
# kernels) and on attn/math (cuBLASLt's batched products), with the fused optimizer.
# usage: test_cuda_sync.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/run.ini"
for attn in flash math; do
    for sync in 0 1; do
        out="$WORK/$attn-$sync"
        if ! GEARBOX_CUDA_SYNC=$sync "$GEARBOX" train "$WORK/run.ini" --set run.steps=6 \
            --set attn.plugin=$attn --set optim.plugin=adamw_fused \
            --set run.out_dir="$out" > "$out.log" 2>&1; then
            fail "attn/$attn, GEARBOX_CUDA_SYNC=$sync: $(tail -n 5 "$out.log")"
            continue
        fi
        grep -E '"step": [0-9]+, "(loss|train_loss)"' "$out/metrics.jsonl" |
            sed -E 's/, "ms".*//' > "$out.losses"
    done
    n=$(wc -l < "$WORK/$attn-0.losses" 2> /dev/null || echo 0)
    if [ "$n" -lt 6 ]; then
        fail "attn/$attn: expected 6 logged steps, found $n"
    elif cmp -s "$WORK/$attn-0.losses" "$WORK/$attn-1.losses"; then
        pass "attn/$attn: $n steps with GEARBOX_CUDA_SYNC=1 log the losses of the run without it ($(tail -n 1 "$WORK/$attn-1.losses"))"
    else
        fail "attn/$attn: the runs differ:"
        diff "$WORK/$attn-0.losses" "$WORK/$attn-1.losses" | head -10
    fi
done
finish
