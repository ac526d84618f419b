#!/usr/bin/env bash
# Runs one emulated GPU test in each of the CUDA emulator's resume orders, in-order,
# reversed and random, one after the other: a result that changes with the order is a
# race, and every run of the suite tries all three. The random order takes a fresh seed
# per run unless GEARBOX_CUDA_EMU_SEED is set, and a failure names the order and the seed
# that reproduce it. The emulator runs on at least two host threads (more where the
# machine has them), so blocks of one launch also run at the same time.
# usage: emu_each_order.sh COMMAND [ARGS...]
set -u
if [ $# -eq 0 ]; then
    echo "usage: emu_each_order.sh COMMAND [ARGS...]" >&2
    exit 2
fi
cpus=$(nproc)
export GEARBOX_CUDA_EMU_THREADS=${GEARBOX_CUDA_EMU_THREADS:-$((cpus > 2 ? cpus : 2))}
seed=${GEARBOX_CUDA_EMU_SEED:-$(printf '0x%04x%04x' $RANDOM $RANDOM)}
skipped=0
for order in in-order reversed random; do
    echo "== GEARBOX_CUDA_EMU_ORDER=$order GEARBOX_CUDA_EMU_SEED=$seed" \
         "GEARBOX_CUDA_EMU_THREADS=$GEARBOX_CUDA_EMU_THREADS"
    rc=0
    GEARBOX_CUDA_EMU_ORDER=$order GEARBOX_CUDA_EMU_SEED=$seed "$@" || rc=$?
    if [ "$rc" -eq 77 ]; then
        skipped=$((skipped + 1))
    elif [ "$rc" -ne 0 ]; then
        echo "FAIL: exit status $rc in resume order $order; reproduce with" \
             "GEARBOX_CUDA_EMU_ORDER=$order GEARBOX_CUDA_EMU_SEED=$seed" \
             "GEARBOX_CUDA_EMU_THREADS=$GEARBOX_CUDA_EMU_THREADS $*"
        exit "$rc"
    fi
done
# A test that cannot run here skips in every order; one that skips in some orders only
# is broken.
if [ "$skipped" -eq 3 ]; then
    exit 77
elif [ "$skipped" -ne 0 ]; then
    echo "FAIL: the test skipped in $skipped of the 3 resume orders"
    exit 1
fi
echo "ok: in-order, reversed and random (seed $seed)"
