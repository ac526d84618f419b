#!/usr/bin/env bash
# `gearbox bench step --predict H100,H200` on the emulated CUDA plugins over a tiny GPT (a
# second a run): it runs, a table for each GPU, every line of its table says it is a prediction, each phase's time is the
# sum of its kernels', the step's total the sum of the phases', every kernel names a bound
# the model knows, the H200 (more bandwidth, the same compute) is predicted no slower than
# the H100; without the emulator's counts (the CPU device) --predict is refused, saying
# what it needs, as are an unknown GPU and --predict with --profile.
# usage: test_predict.sh GEARBOX FIXTURES_DIR SOURCE_ROOT  (GEARBOX_TEST_DEVICE=cuda, the
# emulated plugins first on GEARBOX_PLUGIN_PATH)
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/run.ini"
plugins=(--set attn.plugin=flash --set precision.plugin=bf16 --set optim.plugin=adamw_fused)

table=$WORK/predict.txt

# check_table GPU: the structure and sums of GPU's table in $table
check_table() {
    local verdict
    grep -q "^\[prediction $1\] one step of" "$table" && pass "$1: a table" ||
        fail "$1: no table in $(head -c 600 "$table")"
    # columns after the 46-character name: calls, ms, bound (then the kernel's counters)
    verdict=$(awk -v tag="[prediction $1] " '
        index($0, tag) != 1 { next }
        { line = substr($0, length(tag) + 1); name = substr(line, 1, 46)
          n = split(substr(line, 48), f, " ") }
        line ~ /^step total/ { total = $0; sub(/.*step total /, "", total); sub(/ ms.*/, "", total)
                               have_total = 1; next }
        name ~ /^phase \/ kernel/ || name ~ /^  \(/ || line ~ /^occupancy with/ || line ~ /^one step/ { next }
        name ~ /^  / { kernels += f[2]
                       if (f[3] !~ /^(compute|DRAM|L2|shared|latency|issue|fitted|PCIe)$/) bad = bad " bound " f[3]
                       if (n != 7) bad = bad " fields " n
                       nk++; next }
        { if (phases_seen && (kernels - phase > 0.0006 || phase - kernels > 0.0006))
              bad = bad " phase " last " " phase " vs kernels " kernels
          phases += f[2]; phase = f[2]; kernels = 0; last = name; phases_seen++ }
        END { if (kernels - phase > 0.0006 || phase - kernels > 0.0006) bad = bad " last phase"
              if (!have_total) bad = bad " no total"
              else if (total - phases > 0.0015 || phases - total > 0.0015)
                  bad = bad " total " total " vs phases " phases
              if (phases_seen < 8 || nk < phases_seen) bad = bad " only " phases_seen " phases"
              printf "%s|%s|%d", bad, total, phases_seen }' "$table")
    if [ -z "${verdict%%|*}" ]; then
        echo "$verdict" | cut -d'|' -f2 > "$WORK/$1.total"
        pass "$1: $(echo "$verdict" | cut -d'|' -f3) phases, each the sum of its kernels; the total ($(cat "$WORK/$1.total") ms) theirs"
    else
        fail "$1: the table does not add up:${verdict%%|*}"
    fi
    for phase in "forward: matmul" "forward: attention" "backward: layernorm" "optimizer step" \
                 "zeroing gradients"; do
        grep -q "^\[prediction $1\] $phase " "$table" && pass "$1: the phase $phase" ||
            fail "$1: no line for the phase $phase"
    done
    grep -q "^\[prediction $1\] step total .* MFU [0-9.]*% " "$table" &&
        pass "$1: the step's predicted MFU" || fail "$1: no predicted MFU on the total line"
}

if "$GEARBOX" bench step "$WORK/run.ini" --device cuda --predict H100,H200 "${plugins[@]}" \
    > "$table" 2> "$WORK/predict.err"; then
    # the tables start at the first labelled line and every line from there is labelled
    if awk 'index($0, "[prediction ") == 1 { seen = 1 }
            seen && index($0, "[prediction ") != 1 { bad = 1 } END { exit !(seen && !bad) }' "$table"
    then pass "every line of the tables is labelled a prediction"
    else fail "a line of the tables is not labelled [prediction GPU]: $(head -c 600 "$table")"
    fi
    check_table H100
    check_table H200
    if [ -s "$WORK/H100.total" ] && [ -s "$WORK/H200.total" ]; then
        awk '{ t[NR] = $1 } END { exit !(t[2] <= t[1]) }' "$WORK/H100.total" "$WORK/H200.total" &&
            pass "H200 ($(cat "$WORK/H200.total") ms) no slower than H100 ($(cat "$WORK/H100.total") ms)" ||
            fail "H200 predicted slower than H100: $(cat "$WORK/H200.total") > $(cat "$WORK/H100.total") ms"
    fi
else
    fail "--predict H100,H200: exit status $?: $(tail -n 3 "$WORK/predict.err")"
fi

# bench matmul --predict: every product of a layer and the LM head predicted, each with the
# cuBLASLt call its epilogue makes (the bias gradient fused as BGRADB) and no upload
if "$GEARBOX" bench matmul S --device cuda --epilogues --predict H100 > "$WORK/mm.txt" 2> "$WORK/mm.err"; then
    rows=$(grep -c '^\[prediction\]   [a-z_.]* \(forward\|d input\|d weight\) ' "$WORK/mm.txt")
    if [ "$rows" = 15 ] && grep -q 'cuBLASLt 128x384x768 f32 BGRADB' "$WORK/mm.txt" &&
        ! grep -q 'copy HtoD' "$WORK/mm.txt"; then
        pass "bench matmul --predict: 15 products predicted, the bias gradient fused"
    else
        fail "bench matmul --predict: $rows product rows: $(head -n 12 "$WORK/mm.txt")"
    fi
else
    fail "bench matmul --predict: exit status $?: $(tail -n 3 "$WORK/mm.err")"
fi

# refusals: the CPU device counts nothing; an unknown GPU; --predict beside --profile
"$GEARBOX" bench step "$WORK/run.ini" --device cpu --predict H100 > "$WORK/cpu.txt" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "runs on the CUDA emulator's plugins" "$WORK/cpu.txt" &&
    pass "--predict on the CPU device: refused, naming the emulated plugins" ||
    fail "--predict on the CPU device: exit $rc: $(tail -n 2 "$WORK/cpu.txt")"
"$GEARBOX" bench step "$WORK/run.ini" --predict A100 > "$WORK/a100.txt" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "unknown GPU 'A100'; expected one of H100, H200" "$WORK/a100.txt" &&
    pass "--predict A100: a usage error naming the GPUs known" ||
    fail "--predict A100: exit $rc: $(tail -n 2 "$WORK/a100.txt")"
"$GEARBOX" bench step "$WORK/run.ini" --predict H100 --profile > "$WORK/both.txt" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "choose one" "$WORK/both.txt" &&
    pass "--predict with --profile: a usage error" ||
    fail "--predict with --profile: exit $rc: $(tail -n 2 "$WORK/both.txt")"
finish
