#!/usr/bin/env bash
# `gearbox ab` end to end on the tiny model of the CLI tests: variants really run with
# their overrides (each one's effective config and learning rate are in the report), an
# identical variant reads as the same curve and a different learning rate is flagged, the
# report folder holds summary.md, per-run metrics and two well-formed SVG plots, a failing
# variant is reported with its stderr tail and a non-zero exit while the others are still
# reported, the A.ini B.ini shorthand, steps and seconds to a target loss (--target-loss),
# and bad arguments. Timings are not asserted.
# usage: test_ab.sh GEARBOX BUILD_DIR SOURCE_ROOT
source "$3/tests/cli/lib.sh"
make_data
write_config "$WORK/tiny.ini"
cd "$WORK" || exit 1

# contains NAME FILE TEXT: FILE holds the fixed string TEXT.
contains() {
    grep -qF -- "$3" "$2" && pass "$1" || fail "$1: $2 lacks '$3'; it says: $(head -c 1500 "$2")"
}

# lr_at FILE STEP: the learning rate a run logged at STEP.
lr_at() {
    grep "^{\"step\": $2, \"loss\"" "$1" | sed 's/.*"lr": \([^,]*\),.*/\1/'
}

# svg_ok NAME FILE: FILE parses as XML with an <svg> root (when python3 is there to say).
svg_ok() {
    if ! command -v python3 > /dev/null; then
        grep -q "^</svg>" "$2" && pass "$1 (python3 absent: only the closing tag checked)" ||
            fail "$1: $2 is not closed"
        return
    fi
    python3 - "$2" <<'PY' && pass "$1" || fail "$1: $2 is not well-formed SVG"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
sys.exit(0 if root.tag == "{http://www.w3.org/2000/svg}svg" else 1)
PY
}

# ---- three variants: the baseline, the same by another route, another learning rate ----
rc=0
"$GEARBOX" ab tiny.ini --variant base: --variant same:attn.plugin=math \
    --variant lr:train.learning_rate=2e-2 --steps 6 --warmup 1 --repeats 2 --out ab1 \
    > ab1.txt 2>&1 || rc=$?
[ "$rc" -eq 0 ] && pass "three variants: exit status 0" || fail "three variants: exit status $rc: $(cat ab1.txt)"
grep -qE "^\| variant +\| step ms, median \(IQR\) +\| tokens/s +\| MFU +\| speed \(95% CI\) +\|" \
    ab1.txt && pass "the verdict table has its header" || fail "no table header: $(cat ab1.txt)"
for v in base same lr; do
    grep -qE "^\| $v +\| +[0-9.]+ \(" ab1.txt && pass "the table has a row for $v" ||
        fail "no table row for $v: $(cat ab1.txt)"
done
contains "base is the baseline (no overrides)" ab1.txt "baseline base;"
contains "an identical variant reads as the same curve" ab1.txt \
    "same loss curve (max difference 0)."
grep -qE "^lr: .*, final val loss [0-9.e-]+ (higher|lower); the curves differ by up to [0-9.e-]+ \(step [0-9]+\)\.$" \
    ab1.txt && pass "another learning rate is flagged" || fail "lr is not flagged: $(cat ab1.txt)"
grep -qE "^same: (no measurable speed difference|[0-9.]+x (faster|slower)) \(.*95% CI .*\), same planned memory," \
    ab1.txt && pass "the sentence gives a speed ratio with a CI and the memory" ||
    fail "sentence for same: $(grep '^same:' ab1.txt)"

for f in summary.md loss.svg step_times.svg base/config.ini lr/config.ini same/config.ini; do
    [ -s "ab1/$f" ] && pass "report holds $f" || fail "report lacks $f"
done
svg_ok "loss.svg is well-formed" ab1/loss.svg
svg_ok "step_times.svg is well-formed" ab1/step_times.svg
[ "$(grep -c "<polyline" ab1/loss.svg)" -ge 3 ] && pass "loss.svg draws a curve per variant" ||
    fail "loss.svg has $(grep -c "<polyline" ab1/loss.svg) curves"
for v in base same lr; do
    grep -q ">$v</text>" ab1/loss.svg && grep -q ">$v</text>" ab1/step_times.svg &&
        pass "both plots label $v" || fail "a plot lacks the label $v"
done

n_runs=0
for v in base same lr; do
    for r in 1 2; do
        m="ab1/$v/r$r/metrics.jsonl"
        [ "$(grep -c '"loss":' "$m" 2> /dev/null)" -eq 6 ] && grep -q '"val_loss"' "$m" &&
            n_runs=$((n_runs + 1)) || fail "$m lacks 6 steps and a final evaluation"
    done
done
[ "$n_runs" -eq 6 ] && pass "every run kept its metrics.jsonl (3 variants x 2 repeats)"
[ -z "$(find ab1 -name '*.gbk')" ] && pass "no checkpoints are left in the report" ||
    fail "checkpoints left: $(find ab1 -name '*.gbk')"

grep -A3 '^\[train\]' ab1/lr/config.ini | grep -q "^learning_rate = 0.02$" &&
    grep -A3 '^\[train\]' ab1/base/config.ini | grep -q "^learning_rate = 0.01$" &&
    pass "each variant's effective config has its own learning rate" ||
    fail "effective configs: $(grep learning_rate ab1/*/config.ini)"
base_lr=$(lr_at ab1/base/r2/metrics.jsonl 3)
lr_lr=$(lr_at ab1/lr/r2/metrics.jsonl 3)
awk -v a="$base_lr" -v b="$lr_lr" 'BEGIN { exit !(a > 0 && b / a > 1.999 && b / a < 2.001) }' &&
    pass "the lr runs trained at twice the baseline's rate ($lr_lr vs $base_lr at step 3)" ||
    fail "learning rates at step 3: base '$base_lr', lr '$lr_lr'"
contains "summary.md gives the exact command" ab1/summary.md \
    "gearbox ab tiny.ini --variant base: --variant same:attn.plugin=math --variant lr:train.learning_rate=2e-2"
contains "summary.md names what lr changes" ab1/summary.md \
    '`[train] learning_rate = 0.02` (baseline: `0.01`)'
contains "summary.md holds each effective config" ab1/summary.md "out_dir = $WORK/ab1/lr/r1"
contains "summary.md says how the interval was made" ab1/summary.md \
    "t-interval (1 degree of freedom) on the log-ratios"
contains "summary.md has the memory table" ab1/summary.md "| variant | params | grads | optimizer |"

# ---- a failing variant: reported with its stderr, the others still reported ----
rc=0
"$GEARBOX" ab tiny.ini --variant base: --variant broken:attn.plugin=nope --steps 4 --warmup 1 \
    --repeats 1 --out ab2 > ab2.txt 2>&1 || rc=$?
[ "$rc" -eq 1 ] && pass "a failing variant makes the exit status 1" ||
    fail "failing variant: exit status $rc: $(cat ab2.txt)"
contains "the failure names the command and status" ab2.txt \
    "broken FAILED: gearbox check exited with status 2"
contains "the failure shows the variant's stderr" ab2.txt "nope"
grep -qE "^\| base +\| +[0-9.]+ \(" ab2.txt && pass "the baseline is still reported" ||
    fail "no row for base: $(cat ab2.txt)"
contains "the failed variant has a row" ab2.txt "failed (exit status 2)"
contains "summary.md lists the failure" ab2/summary.md "## Failures"

# ---- the shorthand: two config files; one repeat falls back to a bootstrap ----
cp tiny.ini first.ini
cp tiny.ini second.ini
rc=0
"$GEARBOX" ab first.ini second.ini --steps 5 --warmup 1 --repeats 1 --out ab3 > ab3.txt 2>&1 || rc=$?
[ "$rc" -eq 0 ] && pass "A.ini B.ini: exit status 0" || fail "A.ini B.ini: exit status $rc: $(cat ab3.txt)"
contains "variants are named after their files, the first the baseline" ab3.txt "baseline first;"
grep -qE "^second: .*, same loss curve \(max difference 0\)\.$" ab3.txt &&
    pass "identical configs give identical curves" || fail "first vs second: $(cat ab3.txt)"
contains "one repeat says it bootstrapped" ab3.txt ", bootstrap over steps)"
contains "summary.md explains the bootstrap" ab3/summary.md "percentile bootstrap over those steps"

# ---- a target loss: steps and seconds to it, evaluations along the runs ----
rc=0
"$GEARBOX" ab tiny.ini --variant base: --variant lr:train.learning_rate=2e-2 --steps 6 \
    --warmup 1 --repeats 2 --target-loss 100 --eval-every 2 --out ab4 > ab4.txt 2>&1 || rc=$?
[ "$rc" -eq 0 ] && pass "--target-loss: exit status 0" || fail "--target-loss: exit status $rc: $(cat ab4.txt)"
contains "the target table says what it measures" ab4.txt \
    "To val loss 100 (evaluated every 2 steps and after the last):"
grep -qE "^\| base +\| +2 \[2-2\] +\| +[0-9.]+ \[[0-9.]+-[0-9.]+\] +\| +baseline +\|$" ab4.txt &&
    pass "a target every run meets at its first evaluation: 2 steps" ||
    fail "target row for base: $(cat ab4.txt)"
grep -qE "^\| lr +\| +2 \[2-2\] +\| .*\| +[0-9.e+-]+x \([0-9.e+-]+\) +\|$" ab4.txt &&
    pass "the variant's speed to the target has a 95% CI" || fail "target row for lr: $(cat ab4.txt)"
[ "$(grep -c '^{"step": [0-9]*, "train_loss"' ab4/base/r1/metrics.jsonl)" -eq 3 ] &&
    pass "the runs evaluated every 2 steps (3 evaluations in 6 steps)" ||
    fail "evaluations: $(grep '"val_loss"' ab4/base/r1/metrics.jsonl)"
contains "summary.md has the target table" ab4/summary.md "| variant | steps to it, median [min-max] |"
rc=0
"$GEARBOX" ab tiny.ini --variant base: --variant lr:train.learning_rate=2e-2 --steps 4 \
    --warmup 1 --repeats 1 --target-loss 0.001 --out ab5 > ab5.txt 2>&1 || rc=$?
grep -qE "^\| lr +\| +not reached +\| +not reached +\| +n/a +\|$" ab5.txt &&
    pass "a target no run meets reads 'not reached' and n/a" || fail "unreached target: $(cat ab5.txt)"
contains "without --eval-every, every steps/20 (at least 1)" ab5.txt "evaluated every 1 steps"

# ---- threads = auto (the default): a variant left there runs a fixed team; one that asks
# for it keeps it, told that its trial's steps would be timed ----
sed 's/^threads = 2/threads = auto/' tiny.ini > tiny_auto.ini
"$GEARBOX" ab tiny_auto.ini --variant base: --variant auto:run.threads=auto --steps 3 \
    --warmup 1 --repeats 1 --out ab6 > ab6.txt 2>&1
contains "a variant that asks for threads = auto is told its trial steps are timed" ab6.txt \
    "gearbox ab: note: variant auto runs [run] threads = auto"
grep -q "note: variant base" ab6.txt && fail "a variant on a fixed team got the note" ||
    pass "a variant on a fixed team gets no note"
contains "the config's threads = auto runs a fixed team of every CPU" \
    ab6/base/config.ini "threads = 0"
contains "a --set run.threads=auto is kept" ab6/auto/config.ini "threads = auto"

# ---- bad arguments, refused before any run ----
expect_error "one variant is not a comparison" 2 "two or more variants" -- \
    "$GEARBOX" ab tiny.ini --variant base: --out bad
expect_error "--warmup must leave steps to time" 2 "--warmup 5 must be below --steps 5" -- \
    "$GEARBOX" ab tiny.ini --variant a: --variant b: --steps 5 --warmup 5 --out bad
expect_error "a variant needs a name and a colon" 2 "expected NAME:section.key=value" -- \
    "$GEARBOX" ab tiny.ini --variant a: --variant attn.plugin=math --out bad
expect_error "variant names are unique" 2 "two variants are called a" -- \
    "$GEARBOX" ab tiny.ini --variant a: --variant a:attn.plugin=math --out bad
expect_error "a malformed override is caught before running" 2 "attn.plugin" -- \
    "$GEARBOX" ab tiny.ini --variant a: --variant b:attn.plugin --out bad
expect_error "a target loss is a number" 2 "--target-loss low: expected a loss" -- \
    "$GEARBOX" ab tiny.ini --variant a: --variant b: --target-loss low --out bad
expect_error "evaluations are ab's to set" 2 "sets run.eval_every for every run itself" -- \
    "$GEARBOX" ab tiny.ini --variant a: --variant b:run.eval_every=2 --out bad
expect_error "an unknown baseline" 2 "--baseline c: no variant has that name" -- \
    "$GEARBOX" ab tiny.ini --variant a: --variant b: --baseline c --out bad
[ ! -e bad ] && pass "bad arguments create no report folder" || fail "a report folder was made"
"$GEARBOX" ab --help | grep -q "^usage: gearbox ab" && pass "ab --help" || fail "ab --help"
finish
