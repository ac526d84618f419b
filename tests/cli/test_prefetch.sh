#!/usr/bin/env bash
# Input prefetch ([data] prefetch): the batches sent ahead on a stream of their own must
# train exactly as the batches drawn in line, bit for bit, with and without gradient
# accumulation, and when the host reads the figures of only a few steps (then nothing
# waits for the device between steps, so a pinned buffer refilled before its copy ran, or
# a batch read before its copy arrived, shows: the emulated GPU faults on the first and
# gives garbage tokens for the second).
# usage: test_prefetch.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
# (GEARBOX_TEST_DEVICE=cuda: the CUDA device; GEARBOX_TEST_GPU_LIKE=1: the CPU's GPU-like mode)
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini"

final_eval() { grep '"val_loss"' "$WORK/$1/metrics.jsonl" | grep -v summary; }

same_run() { # NAME REFERENCE WHAT
    local diff
    diff=$(figures_diff "$2" "$1")
    if [ -n "$diff" ]; then
        fail "$3: the figures differ from the run without prefetch: $diff"
    else
        pass "$3: $(run_figures "$1" | grep -c '"loss"') losses and the evaluation bit for bit as without prefetch"
    fi
}

run_pair() { # SUFFIX SETTINGS...
    local suffix=$1
    shift
    train_run "off$suffix" --set data.prefetch=false "$@" &&
        train_run "on$suffix" --set data.prefetch=true "$@"
}

if run_pair ""; then
    if grep -q "data: prefetch on" "$WORK/on.log" && ! grep -q "data: prefetch" "$WORK/off.log"; then
        pass "the plan says prefetch is on, and nothing with prefetch = false"
    else
        fail "the plan line: on: '$(grep 'data:' "$WORK/on.log")', off: '$(grep 'data:' "$WORK/off.log")'"
    fi
    same_run on off "20 steps"
fi
if run_pair "-accum" --set data.gradient_accumulation_steps=3 --set run.steps=8; then
    same_run on-accum off-accum "3 micro-steps per step"
fi
# steps 1 and 20 logged: the host waits for the device only there and at the evaluation
if train_run lazy --set data.prefetch=true --set run.log_every=20; then
    if [ -n "$(final_eval off)" ] && [ "$(final_eval lazy)" = "$(final_eval off)" ]; then
        pass "with two logged steps of 20, the final evaluation as without prefetch: $(final_eval lazy)"
    else
        fail "with two logged steps of 20: '$(final_eval lazy)' against '$(final_eval off)'"
    fi
fi
finish
