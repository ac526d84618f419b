#!/usr/bin/env bash
# [model] dropout through `gearbox train`: a run with dropout 0.1 resumes bit-exactly (each
# micro-step's masks are a function of the seed and the micro-step), logs the same bits
# when backward recomputes each block (the masks are drawn again, the same), trains
# differently from one without dropout; bad values and dropout with [run] cuda_graphs are
# refused before any work.
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 10"
exact_resume drop --set model.dropout=0.1 || finish
train_run plain
train_run recomputed --set model.dropout=0.1 --set train.recompute=block
step_losses "$WORK/drop-a/metrics.jsonl" > "$WORK/kept.losses"
step_losses "$WORK/recomputed/metrics.jsonl" > "$WORK/recomputed.losses"
same_lines "recompute = block with dropout: bit-identical losses" "$WORK/kept.losses" \
    "$WORK/recomputed.losses"
if cmp -s <(step_losses "$WORK/drop-a/metrics.jsonl") <(step_losses "$WORK/plain/metrics.jsonl"); then
    fail "dropout 0.1 logged the losses of a run without dropout"
else
    pass "dropout 0.1 trains differently from dropout 0"
fi
expect_refusals "$GEARBOX" train "$WORK/run.ini" <<TABLE
dropout of 1 | [model] dropout = 1: out of range | --set model.dropout=1
dropout below 0 | [model] dropout = -0.1: out of range | --set model.dropout=-0.1
dropout with cuda_graphs | not available with [model] dropout = 0.1 | --set model.dropout=0.1 --set run.cuda_graphs=true --set run.out_dir=$WORK/graphs
TABLE
finish
