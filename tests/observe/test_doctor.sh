#!/usr/bin/env bash
# `gearbox doctor`: exits 0 within 30 s and prints every section (CPU, threads, BLAS,
# measured speed, CUDA, MPI, plugins, warnings); warns about OMP_NUM_THREADS unset or
# unlike [run] threads, and about plugins that fail to load.
source "$(dirname "$0")/../cli/lib.sh"
start=$(date +%s)
env -u OMP_NUM_THREADS "$GEARBOX" doctor > "$WORK/doctor.txt" 2>&1
rc=$?
seconds=$(($(date +%s) - start))
[ "$rc" -eq 0 ] && [ "$seconds" -lt 30 ] && pass "doctor exits 0 in ${seconds}s" ||
    fail "doctor: exit $rc after ${seconds}s: $(cat "$WORK/doctor.txt")"
missing=0
for section in cpu threads blas speed cuda mpi plugins warnings; do
    grep -q "^$section$" "$WORK/doctor.txt" ||
        { fail "doctor lacks the '$section' section"; missing=$((missing + 1)); }
done
[ "$missing" -eq 0 ] &&
    pass "doctor prints the cpu, threads, blas, speed, cuda, mpi, plugins and warnings sections"
for pattern in '^  model +[^ ]' '^  features +avx2 (yes|no), fma (yes|no), avx512f (yes|no), avx512_bf16 (yes|no)' \
    '^  online CPUs +[0-9]+' '^  OMP_NUM_THREADS +unset' '^  oneDNN +[0-9]+\.[0-9]+\.[0-9]+ ' \
    '^  sgemm +[0-9.]+ GFLOP/s: 1024x1024x1024 f32 through device/cpu' \
    '^  triad +[0-9.]+ GB/s' '^  plugin +(no CUDA plugin built|[0-9]+ CUDA device plugins? on the search path)' \
    '^  plugin +(comm/mpi on the search path|no MPI comm plugin built)' '^  search path +' '^  device +cpu ' \
    '^  - OMP_NUM_THREADS is unset: .*fix: export OMP_NUM_THREADS='; do
    grep -qE "$pattern" "$WORK/doctor.txt" && pass "doctor: /$pattern/" ||
        fail "doctor lacks /$pattern/: $(cat "$WORK/doctor.txt")"
done

write_config "$WORK/run.ini"
sed -i 's/^threads = 2$/threads = 1/' "$WORK/run.ini"
OMP_NUM_THREADS=2 "$GEARBOX" doctor "$WORK/run.ini" --plugin-path "$FIXTURES" \
    > "$WORK/doctor2.txt" 2>&1 || fail "doctor CONFIG: $(cat "$WORK/doctor2.txt")"
grep -q "^  - OMP_NUM_THREADS=2 but \[run\] threads is 1" "$WORK/doctor2.txt" &&
    pass "doctor warns when OMP_NUM_THREADS differs from [run] threads" ||
    fail "no OMP_NUM_THREADS warning: $(grep -A5 '^warnings' "$WORK/doctor2.txt")"
grep -q "^  failed to load: .*attn-noentry-cpu.so" "$WORK/doctor2.txt" &&
    grep -q "^  - a plugin failed to load: .*fix: " "$WORK/doctor2.txt" &&
    pass "doctor lists plugins that fail to load, with a fix" ||
    fail "broken plugins not reported: $(grep -A12 '^plugins' "$WORK/doctor2.txt")"
expect_error "doctor with a bad argument" 2 "unexpected argument" -- "$GEARBOX" doctor a b
"$GEARBOX" doctor --help | grep -q "^usage: gearbox doctor" && pass "doctor --help" ||
    fail "doctor --help"
finish
