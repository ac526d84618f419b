#!/usr/bin/env bash
# The engine prints only through its reporter (engine/report.c, docs/architecture.md): no
# engine/*.c file but report.c calls printf, vprintf, puts, putchar or perror, or names
# stdout, stderr or their file descriptors (fprintf(stderr, ...), a FILE handed on).
# Functions that write to a FILE their caller gives (gb_config_write, gb_diag_print,
# gb_model_print_memory, gb_batch_auto) and the files the engine writes pass.
# usage: test_engine_prints.sh SOURCE_ROOT
set -u
cd "$1" || exit 1
failures=0
for f in engine/*.c; do
    [ "$f" = engine/report.c ] && continue
    # the code of each line: comments and string literals blanked, so text that mentions
    # stdout is not taken for a use of it
    hits=$(sed -e 's|"\([^"\\]\|\\.\)*"|""|g' -e 's|/\*.*\*/||g' -e 's|//.*||' \
               -e 's|^[[:space:]]*/\?\*.*||' "$f" |
           grep -nE '\b(printf|vprintf|puts|putchar|perror)[[:space:]]*\(|\b(stdout|stderr|STDOUT_FILENO|STDERR_FILENO)\b')
    if [ -n "$hits" ]; then
        while read -r hit; do
            echo "FAIL: $f:${hit%%:*} prints directly: $(sed -n "${hit%%:*}p" "$f" | sed 's/^[[:space:]]*//'); report it with gb_report (engine/report.h) instead"
        done <<< "$hits"
        failures=$((failures + 1))
    fi
done
if [ "$failures" -eq 0 ]; then
    echo "ok: engine/*.c prints only through engine/report.c"
    exit 0
fi
echo "$failures engine file(s) print directly"
exit 1
