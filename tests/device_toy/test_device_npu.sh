#!/usr/bin/env bash
# The toy NPU (npu/: device_toy.c with TOY_NPU, memory the host cannot read) and the
# plugins written for its family ("toy_npu", ABI 1.8), built out of tree against this
# build's headers with pkg-config alone. `gearbox train` finds attn/math and optim/adamw
# for the family by their names, trains (loss falls, finite, the same losses as the
# host-memory toy device with the CPU plugins), and runs precision/fp32 and comm/single,
# which run on any family; the CPU plugins, the CUDA ones and a plugin of another family
# are refused, naming both families; `gearbox plugins` and test-plugin show the families.
# usage: test_device_npu.sh GEARBOX FIXTURES_DIR SOURCE_ROOT TOY_DIR UNINSTALLED_PC_DIR
source "$(dirname "$0")/../cli/lib.sh" "$1" "$2" "$3"
TOY=$4
export PKG_CONFIG_PATH=$5
cd "$WORK" || exit 1
NPU=$WORK/npu

if ! meson setup "$NPU" "$SRC/tests/device_toy/npu" -Dwerror=true > build.log 2>&1 ||
    ! ninja -C "$NPU" >> build.log 2>&1; then
    fail "the toy NPU does not build out of tree: $(tail -n 30 build.log)"
    finish
fi
pass "the toy NPU and its family's plugins build out of tree with pkg-config alone"

make_data
write_config run.ini
"$GEARBOX" train run.ini --plugin-path "$NPU" --set device.plugin=toy_npu \
    --set run.steps=30 --set run.out_dir=npu > train.txt 2>&1 ||
    fail "train on the toy NPU: $(tail -n 5 train.txt)"
grep -q "^plugins: device toy_npu, attn math, optim adamw, precision fp32, comm single" train.txt &&
    grep -q "\"path\": \"$NPU/attn-math-toy_npu.so\"" npu/manifest.json &&
    grep -q "\"path\": \"$NPU/optim-adamw-toy_npu.so\"" npu/manifest.json &&
    grep -q '"family": "toy_npu"' npu/manifest.json && grep -q '"memory": "device"' npu/manifest.json &&
    pass "the toy NPU runs the attention and optimizer written for its family" ||
    fail "plugins on the toy NPU: $(grep '^plugins:' train.txt); $(grep '"path"' npu/manifest.json)"
first=$(sed -n 's/.*step *1\/30 | loss \([0-9.]*\).*/\1/p' train.txt)
last=$(sed -n 's/.*step *30\/30 | loss \([0-9.]*\).*/\1/p' train.txt)
[ -n "$first" ] && [ -n "$last" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' &&
    pass "the loss goes down on the toy NPU ($first -> $last)" ||
    fail "the loss did not go down on the toy NPU ($first -> $last)"
"$GEARBOX" train run.ini --plugin-path "$TOY" --set device.plugin=toy \
    --set run.steps=30 --set run.out_dir=toy > host.txt 2>&1 ||
    fail "train on the toy device: $(tail -n 5 host.txt)"
host_last=$(sed -n 's/.*step *30\/30 | loss \([0-9.]*\).*/\1/p' host.txt)
[ -n "$host_last" ] && awk -v a="$last" -v b="$host_last" 'BEGIN { d = a - b; exit !(d < 1e-3 && d > -1e-3) }' &&
    pass "the NPU's plugins train as the CPU plugins do on host memory (final loss $last and $host_last)" ||
    fail "final loss $last on the NPU, $host_last on the host-memory toy device"

"$GEARBOX" plugins --plugin-path "$NPU" > list.txt 2>&1
grep -qE "^attn +math +1.0.0 +toy_npu +$NPU/attn-math-toy_npu.so$" list.txt &&
    grep -qE "^optim +adamw +1.0.0 +other_npu +$NPU/optim-adamw-other_npu.so$" list.txt &&
    grep -qE "^precision +fp32 +1.0.0 +cpu,cuda,host-memory,\* " list.txt &&
    pass "gearbox plugins shows the families each plugin names" ||
    fail "gearbox plugins: $(grep -E 'toy_npu|other_npu|fp32' list.txt)"
for f in attn-math-toy_npu optim-adamw-toy_npu; do
    "$GEARBOX" test-plugin --plugin-path "$NPU" "$NPU/$f.so" > kit.txt 2>&1 &&
        grep -qE "^[0-9]+ passed, 0 failed" kit.txt &&
        pass "test-plugin checks $f.so on the toy NPU against the CPU plugins ($(tail -n 1 kit.txt))" ||
        fail "test-plugin $f.so: $(grep -v PASS kit.txt | head -c 600)"
done

expect_refusals "$GEARBOX" check run.ini --plugin-path "$NPU" --set device.plugin=toy_npu <<EOT
the CPU and CUDA optim/adamw_fused | adamw_fused-cpu.so runs on cpu,host-memory, not on this run's device toy_npu (family toy_npu, memory the host cannot read) | --set optim.plugin=adamw_fused
a CPU attention named by its path | attn-mem_efficient-cpu.so runs on cpu,host-memory, not on this run's device toy_npu | --set attn.plugin=$(dirname "$GEARBOX")/../plugins/attn/mem_efficient/attn-mem_efficient-cpu.so
an optimizer of another family | optim-adamw-other_npu.so runs on other_npu, not on this run's device toy_npu (family toy_npu | --set optim.plugin=$NPU/optim-adamw-other_npu.so
a precision for host memory | precision-bf16.so runs on cpu,cuda,host-memory, not on this run's device toy_npu | --set precision.plugin=bf16
EOT
finish
