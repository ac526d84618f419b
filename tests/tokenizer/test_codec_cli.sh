#!/usr/bin/env bash
# `gearbox encode` and `gearbox decode` with the fixture's vocabulary: tiktoken's ids for
# the fixture's texts, any bytes back whole (random bytes, UTF-8 or not, as numbers and
# as uint16/uint32 token files), and refusals that say what to do.
# usage: test_codec_cli.sh GEARBOX FIXTURE_DIR SOURCE_ROOT
source "$3/tests/cli/lib.sh"
VOCAB=$FIXTURES

# The fixture's texts (hex, a line each) give tiktoken's ids (expected.txt), in both formats.
n=0
while IFS= read -r hex && IFS= read -r want <&3; do
    n=$((n + 1))
    printf '%b' "$(printf '%s' "$hex" | sed 's/../\\x&/g')" > "$WORK/text"
    for v in "$VOCAB" "$VOCAB/tiny.tiktoken"; do
        got=$("$GEARBOX" encode --vocab "$v" --input "$WORK/text")
        [ "$got" = "$want" ] || fail "encode text $n with $v: got '$got', want '$want'"
    done
done < "$VOCAB/texts.hex" 3< "$VOCAB/expected.txt"
[ "$n" -ge 7 ] && [ "$FAILURES" -eq 0 ] && pass "encode gives tiktoken's ids for the $n fixture texts"

# Random bytes and broken UTF-8 come back whole: numbers, uint16 and uint32 files, stdin.
for seed in 1 2 3; do
    head -c $((seed * 20000)) /dev/urandom > "$WORK/random"
    "$GEARBOX" encode --vocab "$VOCAB" --input "$WORK/random" > "$WORK/ids.txt" &&
        "$GEARBOX" decode --vocab "$VOCAB" --input "$WORK/ids.txt" --output "$WORK/back" &&
        cmp -s "$WORK/random" "$WORK/back" || fail "random bytes $seed through numbers"
    for dtype in uint16 uint32; do
        "$GEARBOX" encode --vocab "$VOCAB" --output "$WORK/ids.bin" --dtype $dtype < "$WORK/random" &&
            "$GEARBOX" decode --vocab "$VOCAB" --input "$WORK/ids.bin" --dtype $dtype |
            cmp -s - "$WORK/random" || fail "random bytes $seed through a $dtype file"
    done
done
[ "$FAILURES" -eq 0 ] && pass "random bytes encode and decode back whole (numbers, uint16, uint32)"
text=$'caf\xc3\xa9 \xff\xfe half<|endoftext|>  end\n'
[ "$("$GEARBOX" encode --vocab "$VOCAB" "$text" | xargs "$GEARBOX" decode --vocab "$VOCAB" | od -c)" = \
  "$(printf '%s' "$text" | od -c)" ] &&
    pass "text with broken UTF-8 and <|endoftext|> round-trips through arguments" ||
    fail "argument round trip"
"$GEARBOX" encode --vocab "$VOCAB" --input "$WORK/random" --output "$WORK/u16.bin" &&
    [ "$(stat -c %s "$WORK/u16.bin")" -eq $((2 * $(wc -w < "$WORK/ids.txt"))) ] &&
    pass "a token file is uint16 by default for a vocabulary below 65536 ids" ||
    fail "default dtype: $(stat -c %s "$WORK/u16.bin") bytes"
"$GEARBOX" decode --vocab "$VOCAB" --input "$WORK/u16.bin" --output "$WORK/back16" &&
    cmp -s "$WORK/random" "$WORK/back16" &&
    "$GEARBOX" decode --vocab "$VOCAB" --input "$WORK/ids.txt" | cmp -s - "$WORK/random" &&
    pass "decode --input FILE reads encode --output's token file, and encode's numbers, with no --dtype" ||
    fail "decode --input without --dtype: $(head -c 300 "$WORK/back16")"

expect_error "decode names an id beyond the vocabulary, and the fix" 1 \
    "argument 2, byte 0: id 557 is not a token of this vocabulary (ids 0 to 556); decode with the vocabulary the ids were encoded with" -- \
    "$GEARBOX" decode --vocab "$VOCAB" 1 557
printf '1 2 x3\n' > "$WORK/bad.txt"
expect_error "decode names where its text stops being ids" 1 \
    "bad.txt, byte 4: expected ids as decimal numbers separated by blanks" -- \
    "$GEARBOX" decode --vocab "$VOCAB" --input "$WORK/bad.txt"
printf 'abc' > "$WORK/odd.bin"
expect_error "decode refuses a token file of a part id" 1 \
    "3 bytes is not a whole number of 2-byte ids; is --dtype right?" -- \
    "$GEARBOX" decode --vocab "$VOCAB" --input "$WORK/odd.bin" --dtype uint16
expect_error "encode needs --vocab" 2 "--vocab PATH is needed" -- "$GEARBOX" encode hello
expect_error "encode names its dtypes" 2 "--dtype int8: expected uint16 or uint32" -- \
    "$GEARBOX" encode --vocab "$VOCAB" --output "$WORK/x" --dtype int8 hi
expect_error "an unknown option is named" 2 "unknown option --bogus" -- \
    "$GEARBOX" decode --vocab "$VOCAB" --bogus
"$GEARBOX" encode --help | grep -q -- "--dtype uint16|uint32" &&
    "$GEARBOX" decode --help | grep -q -- "--input FILE" &&
    pass "--help lists the options" || fail "--help"
finish
