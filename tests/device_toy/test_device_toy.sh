#!/usr/bin/env bash
# The toy device (device_toy.c): a family of its own, f32 only, synchronous with no stream
# or event entries. `gearbox train` runs it with the CPU plugins of the other kinds (they
# declare any host-memory device), its loss goes down, and the run names it; a device that
# fills part of the stream group is refused, the missing entries named; training with
# [model] dropout is refused on it, as it has no dropout entry, evaluation is not.
# usage: test_device_toy.sh GEARBOX FIXTURES_DIR SOURCE_ROOT TOY_DIR
source "$(dirname "$0")/../cli/lib.sh" "$1" "$2" "$3"
TOY=$4
cd "$WORK" || exit 1
make_data
write_config run.ini

"$GEARBOX" train run.ini --plugin-path "$TOY" --set device.plugin=toy \
    --set precision.plugin=auto --set run.steps=30 --set run.out_dir=toy > train.txt 2>&1 ||
    fail "train on the toy device: $(tail -n 5 train.txt)"
grep -q "^plugins: device toy, attn math, optim adamw, precision auto, comm single" train.txt &&
    pass "the toy device runs with the CPU plugins ($(grep '^plugins:' train.txt | cut -c1-90))" ||
    fail "plugins line: $(grep '^plugins:' train.txt)"
grep -q "^precision: auto chose fp32: the toy device prefers it: the toy device computes f32 only" \
    train.txt && pass "precision = auto takes the toy device's preferred precision" ||
    fail "precision = auto: $(grep '^precision' train.txt)"
grep -q "^data: prefetch on" train.txt &&
    pass "prefetch runs on the core's stream group for a synchronous device" ||
    fail "prefetch: $(grep '^data: prefetch' train.txt)"
first=$(sed -n 's/.*step *1\/30 | loss \([0-9.]*\).*/\1/p' train.txt)
last=$(sed -n 's/.*step *30\/30 | loss \([0-9.]*\).*/\1/p' train.txt)
[ -n "$first" ] && [ -n "$last" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' &&
    pass "the loss goes down on the toy device ($first -> $last)" ||
    fail "the loss did not go down on the toy device ($first -> $last)"
grep -q '"family": "toy"' toy/manifest.json && grep -q '"memory": "host"' toy/manifest.json &&
    grep -q '"name": "toy device (plain f32 loops)"' toy/manifest.json &&
    pass "manifest.json names the toy device" ||
    fail "manifest.json: $(grep -A4 '"device"' toy/manifest.json)"

# the same device built against ABI 1.0's headers: known by the CPU's fixed bit, no
# description, no stream entries; the core describes it from the bit and supplies the rest
"$GEARBOX" train run.ini --plugin-path "$TOY" --set device.plugin=toy_abi10 \
    --set precision.plugin=auto --set run.steps=30 --set run.out_dir=toy10 > train10.txt 2>&1 ||
    fail "train on the ABI 1.0 toy device: $(tail -n 5 train10.txt)"
grep -q "^precision: auto chose fp32: the cpu device prefers it: a device built before ABI 1.6" \
    train10.txt && grep -q "^data: prefetch on" train10.txt &&
    grep -q '"family": "cpu"' toy10/manifest.json &&
    pass "a device built for ABI 1.0 is described by its fixed bit and gets the core's streams" ||
    fail "the ABI 1.0 toy device: $(grep '^precision\|^data: prefetch' train10.txt)"
last10=$(sed -n 's/.*step *30\/30 | loss \([0-9.]*\).*/\1/p' train10.txt)
[ -n "$last10" ] && [ "$last10" = "$last" ] &&
    pass "the ABI 1.0 build computes the 1.6 build's bits (final loss $last10)" ||
    fail "the ABI 1.0 toy device ended at loss '$last10', the 1.6 one at $last"

"$GEARBOX" test-plugin "$TOY/device-toy.so" > kit.txt 2>&1 &&
    grep -q "^describe (ABI 1.6) *PASS *family toy, host memory, synchronous, prefers fp32; stream and event entries: the core's" kit.txt &&
    grep -q "^context *PASS *a family of its own" kit.txt &&
    pass "the conformance kit passes the toy device ($(tail -n 1 kit.txt))" ||
    fail "gearbox test-plugin device-toy.so: $(grep -v PASS kit.txt | head -c 600)"

"$GEARBOX" test-plugin --device toy --plugin-path "$TOY" \
    "$(dirname "$GEARBOX")/../plugins/attn/math/attn-math-cpu.so" > kit-attn.txt 2>&1 &&
    grep -q "^[0-9]* passed, 0 failed" kit-attn.txt &&
    pass "the conformance kit checks attn/math (cpu) on the toy device ($(tail -n 1 kit-attn.txt))" ||
    fail "test-plugin --device toy attn-math-cpu.so: $(grep -v PASS kit-attn.txt | head -c 600)"

expect_error "a 16-bit policy on the f32-only toy device" 2 \
    "[device] plugin = toy does not compute in bf16" -- \
    "$GEARBOX" check run.ini --plugin-path "$TOY" --set device.plugin=toy \
    --set precision.plugin=bf16 --set optim.plugin=adamw_fused
expect_error "a plugin that needs CUDA memory on the toy device" 2 \
    "not on this run's device toy" -- \
    "$GEARBOX" check run.ini --plugin-path "$TOY" --set device.plugin=toy \
    --set precision.plugin=tf32
expect_error "part of the stream group" 2 \
    "fills 2 of the 12 stream and event entries (ABI 1.6: all or none); missing: copy_async, stream_create" -- \
    "$GEARBOX" check run.ini --plugin-path "$TOY" --set device.plugin=toy_partial
# the toy device has no dropout kernel (ABI 1.7's optional entry): dropout is refused
expect_error "dropout on a device without the entry" 2 \
    "[model] dropout = 0.1: [device] plugin = toy" -- \
    "$GEARBOX" check run.ini --plugin-path "$TOY" --set device.plugin=toy --set model.dropout=0.1
# ... but evaluating such a model, which never drops, is not
"$GEARBOX" eval run.ini --plugin-path "$TOY" --set device.plugin=toy --set model.dropout=0.1 \
    --ckpt toy --batches 1 > eval.txt 2>&1 && grep -q "^val loss [0-9.]* over 1 batches" eval.txt &&
    pass "eval of a dropout config on the toy device ($(cat eval.txt))" ||
    fail "eval of a dropout config on the toy device: $(cat eval.txt)"
finish
