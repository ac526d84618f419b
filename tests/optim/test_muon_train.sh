#!/usr/bin/env bash
# optim/muon through `gearbox train`, on the CPU or (GEARBOX_TEST_DEVICE=cuda) on device/cuda:
# - 20 steps with a checkpoint at step 10, then a run resumed from it: steps 11-20 log
#   bit-identical losses and the final checkpoints hold the same parameters and optimizer
#   state, byte for byte (lib.sh's exact_resume, then the two ckpt-000020.gbk compared
#   after their CONF section, whose out_dir differs: vocabulary, step, PRMS, OPTM, PREC);
# - the loss falls over those 20 steps;
# - config errors name the file, the line and the key: an unknown key (with the key meant),
#   a value outside a key's range, and a momentum of 1 that the plugin refuses by name.
# usage: test_muon_train.sh GEARBOX FIXTURES_DIR SOURCE_ROOT
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 10"
sed -i 's/^plugin = adamw$/plugin = muon/' "$WORK/run.ini"

# The sections of checkpoint FILE after its first, CONF (checkpoint.h: an 8-byte magic,
# two u32, then the tag and u64 length of each section), without the closing checksum.
after_config() {
    local len
    len=$(od -An -t u8 -j 20 -N 8 "$1" | tr -d ' ')
    tail -c +$((28 + len + 1)) "$1" | head -c -8
}

if exact_resume muon; then
    cmp -s <(after_config "$WORK/muon-a/ckpt-000020.gbk") \
        <(after_config "$WORK/muon-b/ckpt-000020.gbk") &&
        pass "muon: the resumed run's final parameters and optimizer state are byte-identical" ||
        fail "muon: the final checkpoints' parameters or state differ"
    first=$(step_losses "$WORK/muon-a/metrics.jsonl" | head -n 1 | sed 's/.*"loss": \([^,]*\),.*/\1/')
    last=$(step_losses "$WORK/muon-a/metrics.jsonl" | tail -n 1 | sed 's/.*"loss": \([^,]*\),.*/\1/')
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.1) }' &&
        pass "muon: the loss falls ($first -> $last in 20 steps)" ||
        fail "muon: the loss did not fall ($first -> $last)"
fi

# expect_config_error NAME LINE WANT: the [optim] line LINE added to run.ini makes train
# fail with a message that matches WANT
expect_config_error() {
    local name=$1 line=$2 want=$3
    sed "s/^plugin = muon$/plugin = muon\n$line/" "$WORK/run.ini" > "$WORK/bad.ini"
    if "$GEARBOX" train "$WORK/bad.ini" --set run.out_dir="$WORK/bad" > "$WORK/bad.log" 2>&1; then
        fail "$name: trained"
    elif grep -q "$want" "$WORK/bad.log"; then
        pass "$name: $(grep "$want" "$WORK/bad.log" | head -n 1)"
    else
        fail "$name: no message matching '$want': $(tail -n 2 "$WORK/bad.log")"
    fi
}
line=$(($(grep -n '^plugin = muon$' "$WORK/run.ini" | cut -d: -f1) + 1))
expect_config_error "an unknown key" "muon_lrr = 0.1" \
    "bad.ini:$line: \[optim\] unknown key 'muon_lrr'; did you mean 'muon_lr'?"
expect_config_error "a value out of range" "muon_ns_steps = 0" \
    "bad.ini:$line: \[optim\] muon_ns_steps = 0: out of range \[1, 20\]"
expect_config_error "a momentum of 1" "muon_momentum = 1" "muon_momentum must be below 1"
finish
