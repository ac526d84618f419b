#!/usr/bin/env bash
# Fuzzes every parser of user input: builds tests/fuzz's targets with clang, libFuzzer,
# AddressSanitizer and UBSan in build-fuzz/, then runs each for SECONDS (default 300), one
# at a time, from its committed corpus (tests/fuzz/corpus/NAME). New coverage goes to
# build-fuzz/corpus/NAME; a crash, leak or hang is written into tests/fuzz/corpus/NAME/
# (crash-*, leak-*, timeout-*): fix it and commit the file, and the fuzz suite replays it
# under the sanitizers from then on. Ends with the executions each target got.
# usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: ini checkpoint data vocab cli bpe hellaswag)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(ini checkpoint data vocab cli bpe hellaswag)
./scripts/setup.sh --fuzz > /dev/null

flags="-fsanitize=fuzzer-no-link -fno-sanitize-recover=all"
if [ ! -f build-fuzz/build.ninja ]; then
    mkdir -p build-fuzz
    CC=clang meson setup build-fuzz -Dfuzzing=true -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized -Dc_args="$flags" -Dcuda=disabled \
        -Ddnnl=disabled -Dmpi=disabled > build-fuzz/setup.log 2>&1 ||
        { cat build-fuzz/setup.log; exit 1; }
fi
ninja -C build-fuzz "${targets[@]/#/tests/fuzz/fuzz-}" \
    $(printf 'tests/fuzz/fuzz-%s-libfuzzer ' "${targets[@]}") > /dev/null

summary=()
status=0
for t in "${targets[@]}"; do
    mkdir -p "build-fuzz/corpus/$t"
    log="build-fuzz/fuzz-$t.log"
    echo "fuzz: $t for ${seconds}s (log: $log)"
    rc=0
    "build-fuzz/tests/fuzz/fuzz-$t-libfuzzer" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="tests/fuzz/corpus/$t/" \
        "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" > "$log" 2>&1 || rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ "$rc" -eq 0 ] || { status=1; grep -E "^(==|SUMMARY|artifact_prefix|Test unit)" "$log" | head -20; }
    summary+=("$(printf '%-11s %12s executions  %s' "$t" "${runs:-?}" \
        "$([ "$rc" -eq 0 ] && echo "no finding" || echo "FINDING (exit $rc), see $log")")")
done
printf '%s\n' "${summary[@]}"
exit "$status"
