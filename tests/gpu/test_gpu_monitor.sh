#!/usr/bin/env bash
# GPU monitoring through NVML on device/cuda: with NVML, every logged step records the
# GPU's memory used and total, utilisation, power and temperature in metrics.jsonl and at
# the end of its progress line, the plan names the GPU, and `gearbox doctor` shows it;
# without NVML the fields are absent and both say why. The figures never change training:
# the losses are those of a run without NVML, and a run on the CPU device records none.
# With NVML_DOUBLE (a folder holding cuda_emu's libnvidia-ml.so.1, for the emulated GPU)
# the run without NVML is the machine's own and the run with it loads the double, whose
# fixed figures are checked exactly; without it (a GPU machine) the driver's NVML is used
# and its figures are checked for plausibility.
# usage: test_gpu_monitor.sh GEARBOX FIXTURES_DIR SOURCE_ROOT [NVML_DOUBLE]
source "$(dirname "$0")/../cli/lib.sh" "$1" "$2" "$3"
DOUBLE=${4:-}
# the library path without the double's folder (meson puts the folders of a test's
# dependencies there)
BASE_LIBS=$(tr ':' '\n' <<< "${LD_LIBRARY_PATH:-}" | grep -vxF "${DOUBLE:-/}" | paste -sd: -)
make_data
write_config "$WORK/run.ini"

train() { # NAME LD_LIBRARY_PATH SETTINGS...
    local name=$1 libs=$2
    shift 2
    LD_LIBRARY_PATH=$libs "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/$name" \
        --set run.steps=4 "$@" > "$WORK/$name.log" 2>&1 ||
        { fail "$name: $(grep -v warning "$WORK/$name.log" | tail -n 3)"; return 1; }
}

logged_steps() { grep -c '"loss"' "$WORK/$1/metrics.jsonl"; }
with_gpu_fields() { grep '"loss"' "$WORK/$1/metrics.jsonl" | grep -c '"gpu_memory_used_bytes": [0-9]*, "gpu_memory_total_bytes": [0-9]*, "gpu_utilization_percent": [0-9]*, "gpu_power_watts": [0-9.]*, "gpu_temperature_c": [0-9]*'; }
losses() { grep -o '"loss": [^,]*' "$WORK/$1/metrics.jsonl"; }

# ---- without NVML (where the double stands in for it, this machine has none) ----
if [ -n "$DOUBLE" ]; then
    if train without "$BASE_LIBS"; then
        if grep -q '^gpu monitor: off: NVML, NVIDIA.s driver library, cannot be opened' "$WORK/without.log" &&
            ! grep -q '"gpu_' "$WORK/without/metrics.jsonl" && ! grep -q '| GPU' "$WORK/without.log"; then
            pass "without NVML: the plan says why, and no GPU field is logged"
        else
            fail "without NVML: $(grep 'gpu monitor' "$WORK/without.log"); fields: $(grep -c '"gpu_' "$WORK/without/metrics.jsonl")"
        fi
    fi
    LD_LIBRARY_PATH=$BASE_LIBS "$GEARBOX" doctor > "$WORK/doctor-without.txt" 2>&1
    grep -q '^  nvml  *not available: NVML, NVIDIA.s driver library, cannot be opened' "$WORK/doctor-without.txt" &&
        pass "doctor without NVML: $(grep '^  nvml' "$WORK/doctor-without.txt" | cut -c1-100)..." ||
        fail "doctor without NVML: $(sed -n '/^cuda/,/^mpi/p' "$WORK/doctor-without.txt")"
fi

# ---- with NVML ----
libs=$BASE_LIBS
[ -n "$DOUBLE" ] && libs=$DOUBLE${libs:+:$libs}
if ! train with "$libs"; then
    finish
fi
if ! grep -q '^gpu monitor: [^o].* (NVML, driver ' "$WORK/with.log"; then
    echo "SKIP: NVML cannot be opened here: $(grep 'gpu monitor' "$WORK/with.log")"
    exit 77
fi
pass "the plan names the GPU: $(grep '^gpu monitor' "$WORK/with.log" | cut -c1-100)"
n=$(logged_steps with)
[ "$n" -eq 4 ] && [ "$(with_gpu_fields with)" -eq "$n" ] &&
    pass "all $n logged steps record GPU memory, utilisation, power and temperature" ||
    fail "$(with_gpu_fields with) of $n logged steps have every GPU field: $(head -n 1 "$WORK/with/metrics.jsonl")"
[ "$(grep -c '^step .* tok/s | GPU [0-9]*% [0-9.]*/[0-9.]* GiB [0-9]* W [0-9]* C$' "$WORK/with.log")" -eq "$n" ] &&
    pass "every progress line ends with the GPU's figures: $(grep -m1 '| GPU' "$WORK/with.log" | sed 's/.*tok.s //')" ||
    fail "progress lines: $(grep '^step' "$WORK/with.log" | head -n 2)"
first=$(grep -m1 '"gpu_' "$WORK/with/metrics.jsonl")
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p" <<< "$first"; }
if [ -n "$DOUBLE" ]; then
    expected='1610612736 85899345920 87 312.5 61'
    got="$(field gpu_memory_used_bytes) $(field gpu_memory_total_bytes) $(field gpu_utilization_percent) $(field gpu_power_watts) $(field gpu_temperature_c)"
    [ "$got" = "$expected" ] && pass "the NVML double's figures, found by the emulated GPU's PCI address: $got" ||
        fail "figures '$got', the double answers '$expected'"
else
    awk -v u="$(field gpu_memory_used_bytes)" -v t="$(field gpu_memory_total_bytes)" \
        -v p="$(field gpu_utilization_percent)" -v w="$(field gpu_power_watts)" \
        -v c="$(field gpu_temperature_c)" \
        'BEGIN { exit !(u > 0 && u <= t && p >= 0 && p <= 100 && w > 0 && c > 0 && c < 120) }' &&
        pass "plausible figures: $first" || fail "implausible figures: $first"
fi
if [ -n "$DOUBLE" ]; then
    cmp -s <(losses with) <(losses without) &&
        pass "the losses are those of the run without NVML" ||
        fail "NVML changed the losses: $(diff <(losses without) <(losses with) | head -n 3)"
fi

LD_LIBRARY_PATH=$libs "$GEARBOX" doctor > "$WORK/doctor-with.txt" 2>&1
grep -q '^  nvml  *[^n].*, driver [0-9]' "$WORK/doctor-with.txt" &&
    grep -q '^  gpu now  *GPU [0-9]*% [0-9.]*/[0-9.]* GiB' "$WORK/doctor-with.txt" &&
    pass "doctor shows the GPU: $(grep '^  gpu now' "$WORK/doctor-with.txt")" ||
    fail "doctor with NVML: $(sed -n '/^cuda/,/^mpi/p' "$WORK/doctor-with.txt")"
if [ -n "$DOUBLE" ]; then
    grep -q '^  nvml .* at PCI 0000:65:00.0$' "$WORK/doctor-with.txt" &&
        pass "doctor finds the GPU by device/cuda's PCI address" ||
        fail "doctor's nvml line: $(grep '^  nvml' "$WORK/doctor-with.txt")"
fi

train cpu "$libs" --set device.plugin=cpu &&
    { ! grep -q '"gpu_' "$WORK/cpu/metrics.jsonl" && ! grep -q '^gpu monitor' "$WORK/cpu.log"; } &&
    pass "a run on the CPU device records no GPU figures" ||
    fail "the CPU run: $(grep 'gpu' "$WORK/cpu.log" "$WORK/cpu/metrics.jsonl" | head -n 2)"
finish
