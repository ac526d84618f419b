#!/usr/bin/env bash
# Messages and help that tell the truth: `gearbox --help` names every option of every verb
# that the issues found missing; `gearbox version`; an empty file name refused by its
# option or argument; import and export speak as their verb and name the user's paths, and
# import says a gearbox checkpoint needs no import; `check`'s fusions line agrees with the
# effective config under it; the plugin table's columns line up; the README and docs/abi.md
# state the plugin ABI the program speaks.
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini"

# The top-level help: --plugin-path for each of the 7 verbs that take it, decode's
# --output, encode's --dtype and --stats.
"$GEARBOX" --help > "$WORK/help.txt"
# verb_lines VERB: the help's lines on VERB, from its synopsis to the next verb's line.
verb_lines() {
    awk -v verb="$1" '/^  [a-z]/ { on = ($1 == verb) } on' "$WORK/help.txt"
}
for verb in train check sample plugins doctor ab test-plugin; do
    verb_lines "$verb" | grep -q -- "--plugin-path DIRS" ||
        fail "gearbox --help: $verb lacks --plugin-path"
done
verb_lines decode | grep -q -- "--output FILE" || fail "gearbox --help: decode lacks --output"
verb_lines encode | grep -q -- "--dtype uint16|uint32" && verb_lines encode | grep -q -- "--stats" ||
    fail "gearbox --help: encode lacks --dtype or --stats"
[ "$FAILURES" -eq 0 ] &&
    pass "gearbox --help lists --plugin-path for its 7 verbs, decode --output, encode --dtype, --stats"

# gearbox version and --version: the version and the ABI of include/gearbox/plugin.h.
major=$(sed -n 's/^#define GB_ABI_MAJOR \([0-9]*\)$/\1/p' "$SRC/include/gearbox/plugin.h")
minor=$(sed -n 's/^#define GB_ABI_MINOR \([0-9]*\)$/\1/p' "$SRC/include/gearbox/plugin.h")
for form in version --version; do
    "$GEARBOX" $form > "$WORK/version.txt" 2>&1 &&
        grep -qE "^gearbox [0-9.]+ \(git [^)]*\), plugin ABI $major\.$minor$" "$WORK/version.txt" &&
        pass "gearbox $form: $(cat "$WORK/version.txt")" ||
        fail "gearbox $form: $(head -c 300 "$WORK/version.txt")"
done
expect_error "gearbox version takes no argument" 2 "gearbox version: unexpected argument x" -- \
    "$GEARBOX" version x

# The README and docs/abi.md state the ABI the headers define.
readme=$(grep -o 'The contract is plugin ABI [0-9]*\.[0-9]*' "$SRC/README.md")
[ "$readme" = "The contract is plugin ABI $major.$minor" ] &&
    pass "README states plugin ABI $major.$minor" ||
    fail "README says '$readme', the headers define $major.$minor: update README.md"
grep -q "^Version \*\*$major\.$minor\*\*" "$SRC/docs/abi.md" &&
    pass "docs/abi.md states version $major.$minor" ||
    fail "docs/abi.md's version is not $major.$minor: $(grep -m1 '^Version' "$SRC/docs/abi.md")"

# An empty file name is refused by the option or argument that holds it.
expect_refusals "$GEARBOX" <<CASES
--output "" | option --output needs a FILE, not an empty value | encode --vocab $WORK --output= hi
decode --output "" | option --output needs a FILE, not an empty value | decode --vocab $WORK --output= 1
--input "" | option --input needs a FILE, not an empty value | decode --vocab $WORK --input=
train --resume "" | option --resume needs a CHECKPOINT, not an empty value | train $WORK/run.ini --resume=
CASES
expect_error "export's DEST ''" 2 \
    "gearbox export: the argument for DEST is empty (expected CHECKPOINT DEST)" -- \
    "$GEARBOX" export "$WORK/x.gbk" ""
expect_error "import's CHECKPOINT ''" 2 "gearbox import: the argument for CHECKPOINT is empty" -- \
    "$GEARBOX" import "$WORK/x" ""
expect_error "train ''" 2 "gearbox train: empty argument for CONFIG" -- "$GEARBOX" train ""

# A model both formats hold (biases, GELU's tanh form), as a checkpoint and in HF's files.
train_run gpt2like --set run.steps=2 --set model.bias=true --set model.gelu=tanh || finish
CKPT=$WORK/gpt2like/ckpt-000002.gbk
"$GEARBOX" export "$CKPT" "$WORK/hf" > /dev/null || fail "export to $WORK/hf"

expect_error "import of a gearbox checkpoint says so and what reads it" 1 \
    "gearbox import: $CKPT is a gearbox checkpoint already: there is nothing to import; [train] \
init_from and \`gearbox sample\` read it as it is" -- "$GEARBOX" import "$CKPT" "$WORK/again.gbk"
grep -q "safetensors\|100 MiB" "$WORK/stderr" && fail "import of a .gbk still speaks of safetensors"
expect_error "import names the checkpoint the user gave, as import" 1 \
    "gearbox import: cannot write checkpoint /proc/gearbox-test.gbk: " -- \
    "$GEARBOX" import "$WORK/hf" /proc/gearbox-test.gbk
expect_error "export names the file it could not write, as export" 1 \
    "gearbox export: cannot write /proc/self/model.safetensors: " -- \
    "$GEARBOX" export "$CKPT" /proc/self
expect_error "export to llm.c names the file, as export" 1 \
    "gearbox export: cannot write /proc/x.bin: " -- "$GEARBOX" export "$CKPT" /proc/x.bin --format llm.c
"$GEARBOX" import "$WORK/hf" /proc/gearbox-test.gbk 2>&1 | grep -q "\.tmp\|gearbox: error" &&
    fail "import still names a .tmp file or speaks as gearbox: error"
"$GEARBOX" export "$CKPT" /proc/self 2>&1 | grep -q "\.tmp\|gearbox: error" &&
    fail "export still names a .tmp file or speaks as gearbox: error"

# check: a fusion the device cannot apply is not called "off" above `fuse_gelu = true`.
"$GEARBOX" check "$WORK/run.ini" > "$WORK/check.txt" 2> "$WORK/check.err" ||
    fail "check: $(cat "$WORK/check.err")"
grep -q "^fuse_gelu = true$" "$WORK/check.txt" &&
    grep -q "^# fusions: .*fuse_gelu = true, not applied: the device's matmul has no epilogues" \
        "$WORK/check.txt" &&
    ! grep -q "fuse_gelu off" "$WORK/check.txt" &&
    pass "check: the fusions line and the effective config agree on fuse_gelu" ||
    fail "check: $(grep -e fusions -e '^fuse_gelu' "$WORK/check.txt")"

# The plugin table: each column starts at the same place on every line (the files too).
"$GEARBOX" plugins > "$WORK/plugins.txt" || fail "gearbox plugins"
columns=$(awk '{ rest = $0; end = 0; starts = ""
    for (i = 1; i <= 5 && match(rest, /[^ ]+/); i++) {
        starts = starts " " end + RSTART; end += RSTART + RLENGTH - 1
        rest = substr(rest, RSTART + RLENGTH) }
    print starts }' "$WORK/plugins.txt" | sort -u)
[ "$(printf '%s\n' "$columns" | wc -l)" -eq 1 ] && [ "$(wc -l < "$WORK/plugins.txt")" -gt 5 ] &&
    pass "gearbox plugins: the columns line up, starting at$columns" ||
    fail "gearbox plugins: columns start at: $(printf '%s;' "$columns")"
finish
