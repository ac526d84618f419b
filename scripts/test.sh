#!/usr/bin/env bash
# Set-up, then the whole test suite. Ends with the skipped tests, each with its reason, and
# one line "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh || exit 1

log=$(mktemp)
meson test -C build --print-errorlogs 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
count() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$log" | tail -n 1; }
ok=$(count Ok); failed=$(count Fail); skipped=$(count Skipped); timeouts=$(count Timeout)
rm -f "$log"
# Each skipped test with the reason it printed (a test that cannot run here says why).
[ "${skipped:-0}" -gt 0 ] && { echo "skipped:"; python3 scripts/skips.py build/meson-logs/testlog.json; }
echo "${ok:-0} passed, $(( ${failed:-0} + ${timeouts:-0} )) failed, ${skipped:-0} skipped"
exit "$status"
