#!/usr/bin/env bash
# The sanitize test with clang instead of gcc: the whole tree built with clang and
# -Db_sanitize=address,undefined in build/sanitize-clang, then the fast suite there
# (tests/sanitize/test_sanitize.sh). Not part of scripts/test.sh, whose sanitizer build is
# gcc's: run it after changes that either compiler may see differently. Needs clang
# (scripts/setup.sh --fuzz installs it).
# usage: scripts/sanitize-clang.sh
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --fuzz > /dev/null
exec bash tests/sanitize/test_sanitize.sh "$PWD" "$PWD/build" clang
