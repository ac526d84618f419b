#!/usr/bin/env bash
# comm/nccl's overlap of the gradient all-reduce with backward, shown by the order of
# operations the CUDA emulator records (GEARBOX_CUDA_EMU_TRACE), not by timing. One
# training step of a tiny model on the emulated GPU, a world of one with [train]
# ddp_always = true and small buckets, so backward starts several all-reduces:
# - they run on a stream of their own, each queued behind an event recorded on the compute
#   stream, and the compute stream waits for them only after the last bucket was started,
#   where the optimizer reads the averaged gradients;
# - bucket 1's all-reduce was queued before the kernels of the rest of backward, and ran
#   while those were still queued (the emulator's lazy streams run work only when waited
#   for); at least one backward kernel or matmul queued after an all-reduce ran before it
#   (no order between them); every all-reduce ran before the optimizer's first kernel.
# The same run with [comm] overlap = false puts the all-reduces on the compute stream, and
# the interleaving check must then fail: the check tells the two apart. Both give the step
# losses of a run without any all-reduce (comm/single).
# usage: test_overlap_emu.sh GEARBOX FIXTURES_DIR SOURCE_ROOT (suite gpu-emu: the emulated
# plugins lead GEARBOX_PLUGIN_PATH and GEARBOX_TEST_DEVICE=cuda)
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/overlap_trace.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 0"
export GEARBOX_CUDA_EMU_SEED=7   # the streams' interleaving: fixed, so the trace is too

# train NAME [--set ...]: one step; its log is $WORK/NAME.log, its trace $WORK/NAME.trace
train() {
    local name=$1
    shift
    GEARBOX_CUDA_EMU_TRACE="$WORK/$name.trace" "$GEARBOX" train "$WORK/run.ini" \
        --set run.out_dir="$WORK/$name" --set run.steps=1 "$@" > "$WORK/$name.log" 2>&1 ||
        { fail "$name: $(tail -n 20 "$WORK/$name.log")"; finish; }
    grep -E '"step": [0-9]+, "loss"' "$WORK/$name/metrics.jsonl" |
        sed -E 's/, "ms".*//' > "$WORK/$name.losses"
}

train single --set comm.plugin=single
train overlap --set comm.plugin=nccl --set train.ddp_always=true --set train.bucket_cap_mb=0.02
train serial --set comm.plugin=nccl --set train.ddp_always=true --set train.bucket_cap_mb=0.02 \
    --set comm.overlap=false

facts=$(analyse "$WORK/overlap.trace")
echo "overlap = true: $facts"
case $facts in error*) fail "$facts"; finish ;; esac
n=$(fact all_reduces "$facts")
grep -q "in $n buckets" "$WORK/overlap.log" && [ "$n" -ge 3 ] &&
    pass "backward started $n bucket all-reduces ($(grep -o '[0-9]* bytes all-reduced.*' "$WORK/overlap.log"))" ||
    fail "expected 3 or more buckets: $(grep 'data parallel' "$WORK/overlap.log")"
[ "$(fact same_stream "$facts")" -eq 0 ] && [ "$(fact finish_waits "$facts")" -eq "$n" ] &&
    pass "the all-reduces ran on a stream of their own; the compute stream waited for the $n of them once backward was queued" ||
    fail "streams and waits: $facts"
[ "$(fact later_kernels "$facts")" -gt 0 ] && [ "$(fact queued_at_run "$facts")" -gt 0 ] &&
    pass "bucket 1's all-reduce was queued before $(fact later_kernels "$facts") kernels of the rest of backward and ran while $(fact queued_at_run "$facts") of them were still queued" ||
    fail "no overlap of bucket 1's all-reduce with the rest of backward: $facts"
[ "$(fact overtaken "$facts")" -gt 0 ] &&
    pass "$(fact overtaken "$facts") times a backward kernel queued after an all-reduce ran before it: no order between them" ||
    fail "every backward kernel queued after an all-reduce ran after it: $facts"
[ "$(fact late "$facts")" -eq 0 ] && [ "$(fact optimizer_run "$facts")" -gt 0 ] &&
    pass "every all-reduce ran before the optimizer's first kernel (run $(fact optimizer_run "$facts"))" ||
    fail "an all-reduce ran after the optimizer started: $facts"

serial=$(analyse "$WORK/serial.trace")
echo "overlap = false: $serial"
[ "$(fact same_stream "$serial")" -eq 1 ] && [ "$(fact overtaken "$serial")" -eq 0 ] &&
    pass "overlap = false: the all-reduces ran on the compute stream, in order with backward" ||
    fail "overlap = false: $serial"

for run in overlap serial; do
    cmp -s "$WORK/single.losses" "$WORK/$run.losses" &&
        pass "$run: the loss of a run without all-reduces ($(head -n 1 "$WORK/$run.losses"))" ||
        fail "$run: losses differ from comm/single: $(cat "$WORK/$run.losses") vs $(cat "$WORK/single.losses")"
done
finish
