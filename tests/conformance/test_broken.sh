#!/usr/bin/env bash
# `gearbox test-plugin` on plugins with one known fault each: it must fail and name the
# fault. The correct twins of the numerically broken ones must pass, so each failure is
# the planted fault's and not the kit's.
# usage: test_broken.sh GEARBOX FIXTURES_DIR SOURCE_ROOT CLI_FIXTURES_DIR
source "$(dirname "$0")/../cli/lib.sh" "$1" "$2" "$3"
CLI_FIXTURES=$4

# expect_kit NAME STATUS TEXT PLUGIN: test-plugin PLUGIN exits with STATUS and prints
# TEXT (a fixed string).
expect_kit() {
    local name=$1 status=$2 text=$3 plugin=$4 rc=0
    "$GEARBOX" test-plugin "$plugin" > "$WORK/table" 2>&1 || rc=$?
    if [ "$rc" -ne "$status" ]; then
        fail "$name: exit status $rc, expected $status; it printed: $(cat "$WORK/table")"
    elif ! grep -qF -- "$text" "$WORK/table"; then
        fail "$name: the table lacks '$text'; it printed: $(cat "$WORK/table")"
    else
        pass "$name ($(grep -F -- "$text" "$WORK/table" | head -n 1 | tr -s ' ' | cut -c1-170))"
    fi
}

expect_kit "no entry symbol" 1 "does not export the entry symbol gearbox_plugin_entry()" \
    "$CLI_FIXTURES/attn-noentry-cpu.so"
expect_kit "ABI major 2" 1 "built for plugin ABI 2.0, but this gearbox speaks ABI 1.8" \
    "$CLI_FIXTURES/attn-abi2-cpu.so"
expect_kit "file name says another kind" 1 \
    "[optim] plugin = wrongkind looks for optim-wrongkind-cpu.so or optim-wrongkind.so; this file is attn-wrongkind-cpu.so" \
    "$CLI_FIXTURES/attn-wrongkind-cpu.so"
expect_kit "short descriptor" 1 "descriptor is 64 bytes, shorter than ABI 1.0's 72" \
    "$FIXTURES/attn-shortdesc-cpu.so"
expect_kit "NULL mandatory entry" 1 "mandatory vtable entry backward is NULL" \
    "$FIXTURES/attn-nullentry-cpu.so"
expect_kit "missing file" 1 "cannot open plugin file $WORK/nothing.so" "$WORK/nothing.so"

expect_kit "naive attention (the twin)" 0 "0 failed, 0 unsupported" "$FIXTURES/attn-naive-cpu.so"
expect_kit "attention without 1/sqrt(head_dim)" 1 "out is attention without the 1/sqrt(head_dim) scale" \
    "$FIXTURES/attn-noscale-cpu.so"
expect_kit "causal mask off by one" 1 "causal mask violated" "$FIXTURES/attn-peek-cpu.so"
expect_kit "16-bit gradients summed in their dtype" 1 "bf16 B2 H2 T257 D64 causal, packed views     FAIL" \
    "$FIXTURES/attn-sum16-cpu.so"

expect_kit "sgd (the twin)" 0 "0 failed" "$FIXTURES/optim-sgd-cpu.so"
expect_kit "weight decay on decay = 0 groups" 1 \
    "parameters of a group with decay = 0 and zero gradients moved" \
    "$FIXTURES/optim-decayall-cpu.so"
expect_kit "momentum outside the state buffer" 1 "the state buffer must hold everything" \
    "$FIXTURES/optim-hiddenstate-cpu.so"

expect_kit "dynamic loss scaler (the twin)" 0 "0 failed, 0 unsupported" \
    "$FIXTURES/precision-scaler-cpu.so"
expect_kit "inf that does not skip the step" 1 "found_inf = 1 gave skip_step 0" \
    "$FIXTURES/precision-noskip-cpu.so"

expect_error "no plugin given" 2 "missing PLUGIN.so" -- "$GEARBOX" test-plugin
"$GEARBOX" test-plugin --help | grep -q "^usage: gearbox test-plugin" && pass "test-plugin --help" ||
    fail "test-plugin --help"
finish
