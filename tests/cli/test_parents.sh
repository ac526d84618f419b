#!/usr/bin/env bash
# Every verb that writes a file or folder creates the folders above it that are missing
# (a fresh machine's `gearbox prepare ... out/data/shakespeare_char` must not need a
# mkdir first), and names the folder it could not create.
source "$(dirname "$0")/lib.sh"
head -c 50000 "$SRC/examples/data/tinyshakespeare.txt" > "$WORK/tiny.txt"
fixture=$SRC/tests/weights/fixtures/gpt2_tiny

# written PATH VERB COMMAND...: COMMAND exits 0 and PATH then exists
written() {
    local path=$1 verb=$2
    shift 2
    if ! "$@" > "$WORK/out.txt" 2>&1; then
        fail "$verb into missing folders: $(head -c 600 "$WORK/out.txt")"
    elif [ ! -e "$path" ]; then
        fail "$verb exited 0 but wrote no ${path#"$WORK"/}"
    else
        pass "$verb creates the missing folders of ${path#"$WORK"/}"
    fi
}

written "$WORK/p/q/data/train.bin" prepare "$GEARBOX" prepare "$WORK/tiny.txt" "$WORK/p/q/data"
write_config "$WORK/run.ini"
written "$WORK/r/s/run/metrics.jsonl" "train's out_dir" "$GEARBOX" train "$WORK/run.ini" \
    --set run.steps=3 --set data.dir="$WORK/p/q/data" --set run.out_dir="$WORK/r/s/run"
written "$WORK/i/j/tiny.gbk" import "$GEARBOX" import "$fixture" "$WORK/i/j/tiny.gbk"
written "$WORK/e/hf/model.safetensors" "export --format hf" \
    "$GEARBOX" export "$WORK/i/j/tiny.gbk" "$WORK/e/hf"
written "$WORK/e/f/tiny.bin" "export --format llm.c" \
    "$GEARBOX" export "$WORK/i/j/tiny.gbk" "$WORK/e/f/tiny.bin" --format llm.c
written "$WORK/n/m/demo/meson.build" new-plugin \
    "$GEARBOX" new-plugin attn demo "$WORK/n/m/demo"

# A folder that cannot be made (a file stands where it would go) is named.
expect_error "prepare under a file" 1 "cannot create $WORK/tiny.txt/data" -- \
    "$GEARBOX" prepare "$WORK/tiny.txt" "$WORK/tiny.txt/data"
expect_error "import under a file" 1 "cannot create the folder $WORK/tiny.txt/x for" -- \
    "$GEARBOX" import "$fixture" "$WORK/tiny.txt/x/tiny.gbk"
expect_error "export --format llm.c under a file" 1 "cannot create the folder $WORK/tiny.txt" -- \
    "$GEARBOX" export "$WORK/i/j/tiny.gbk" "$WORK/tiny.txt/y/tiny.bin" --format llm.c
expect_error "new-plugin under a file" 1 "cannot create the folder $WORK/tiny.txt/z for" -- \
    "$GEARBOX" new-plugin attn demo "$WORK/tiny.txt/z/demo"
finish
