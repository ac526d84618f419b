#!/usr/bin/env python3
"""Lists the tests a meson run skipped, each with its reason: the last line of its output
that starts with "SKIP" (a test that cannot run here exits 77 and prints why).
usage: skips.py TESTLOG_JSON [--strict]   --strict: exit 1 when a skip gives no reason
"""
import json
import sys


def main():
    path, strict = sys.argv[1], "--strict" in sys.argv[2:]
    silent = 0
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            test = json.loads(line)
            if test.get("result") != "SKIP":
                continue
            reasons = [l.strip() for l in (test.get("stdout") or "").splitlines()
                       if l.lstrip().startswith("SKIP")]
            print(f"  {test['name']}: {reasons[-1] if reasons else 'NO REASON GIVEN'}")
            silent += not reasons
    if silent:
        print(f"{silent} skipped test(s) gave no reason (a test that skips must print why)")
    return 1 if strict and silent else 0


if __name__ == "__main__":
    sys.exit(main())
