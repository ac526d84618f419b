#!/usr/bin/env bash
# `gearbox test-plugin` on every plugin file under a folder, as TAP: one test per file,
# and on failure the kit's whole table as diagnostics. A plugin whose device this machine
# lacks (exit status 77) is a skip.
# usage: run_kit.sh GEARBOX PLUGINS_DIR
set -u
GEARBOX=$1
PLUGINS=$2
mapfile -t files < <(find "$PLUGINS" -name '*.so' | sort)
echo "1..${#files[@]}"
n=0
for file in "${files[@]}"; do
    n=$((n + 1))
    rc=0
    table=$("$GEARBOX" test-plugin "$file" 2>&1) || rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "ok $n - $(basename "$file"): $(tail -n 1 <<< "$table")"
    elif [ "$rc" -eq 77 ]; then
        echo "ok $n - $(basename "$file") # SKIP $(grep -m 1 "could not start" <<< "$table")"
    else
        echo "not ok $n - $(basename "$file") (exit status $rc)"
        sed 's/^/# /' <<< "$table"
    fi
done
