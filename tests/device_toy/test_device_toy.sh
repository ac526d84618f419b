#!/usr/bin/env bash
# The toy device (device_toy.c): a family of its own, f32 only, synchronous with no stream
# or event entries. `gearbox train` runs it with the CPU plugins of the other kinds (they
# declare any host-memory device), its loss goes down, and the run names it; a device that
# fills part of the stream group is refused, the missing entries named.
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
finish
