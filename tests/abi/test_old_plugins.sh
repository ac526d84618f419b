#!/usr/bin/env bash
# Plugins built against the frozen headers of ABI 1.0 to 1.7 (tests/abi/v1.0 to v1.7: an
# attention and an optimizer each) load, are reported with their version, and
# train under this gearbox's ABI.
# usage: test_old_plugins.sh GEARBOX FIXTURES_DIR SOURCE_ROOT OLD_PLUGINS_DIR
source "$(dirname "$0")/../cli/lib.sh" "$1" "$2" "$3"
OLD=$4
cd "$WORK" || exit 1
make_data

for v in 1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.7; do
    tag=${v/./}
    attn="$OLD/attn-naive-abi$tag-cpu.so"
    optim="$OLD/optim-sgd-abi$tag-cpu.so"
    "$GEARBOX" plugins --plugin-path "$OLD" > list.txt 2>&1 && grep -q "$attn" list.txt &&
        grep -q "$optim" list.txt && pass "plugins lists the ABI $v plugins" ||
        { fail "plugins --plugin-path $OLD"; cat list.txt; }
    write_config "cfg$tag.ini"
    if "$GEARBOX" train "cfg$tag.ini" --set run.out_dir="out$tag" --set run.steps=8 \
        --set attn.plugin="$attn" --set optim.plugin="$optim" \
        > train$tag.txt 2>&1 && grep -q "^done: 8 steps" train$tag.txt &&
        grep -q "\"abi\": \"$v\"" "out$tag/manifest.json"; then
        pass "ABI $v attention and optimizer train 8 steps (manifest: abi $v)"
    else
        fail "ABI $v plugins did not train"
        cat train$tag.txt
    fi
done

# sampling with an attention plugin built before ABI 1.7, which has no forward_cached:
# every token runs the forward over the whole window, and says so
if "$GEARBOX" sample out16 --tokens 30 --temperature 0 > sample16.txt 2> sample16.err &&
    "$GEARBOX" sample out16 --tokens 30 --temperature 0 --no-cache > window16.txt 2> /dev/null &&
    cmp -s sample16.txt window16.txt && grep -q "predates ABI 1.7" sample16.err; then
    pass "an ABI 1.6 attention samples without a KV cache ($(cat sample16.err))"
else
    fail "sampling with the ABI 1.6 attention: $(cat sample16.err)"
fi

# the losses move: the old optimizer really updated the parameters
first=$(sed -n 's/.*step *1\/8 | loss \([0-9.]*\).*/\1/p' train10.txt)
last=$(sed -n 's/.*step *8\/8 | loss \([0-9.]*\).*/\1/p' train10.txt)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' &&
    pass "loss falls with the 1.0 optimizer ($first -> $last)" ||
    fail "loss did not fall with the 1.0 optimizer ($first -> $last)"

exit $((FAILURES > 0))
