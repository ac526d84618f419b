#!/usr/bin/env bash
# gearbox's check for a machine with an NVIDIA GPU: one command of at most --budget seconds
# (default 600: a GPU is often lent for minutes only), in stages that can also be run, and
# rerun, one command at a time:
#   build     check the dependencies, configure BUILD (-Dwerror=false: warnings are kept in
#             the log, not fatal; the C compiler is CC, else cc, else gcc, and nvcc's host
#             compiler NVCC_CCBIN, else g++, both found by name), build, and ask the GPU
#             whether it runs here
#   test      the gpu and cuda test suites (meson test)
#   train     `gearbox prepare`, then STEPS steps of examples/shakespeare_char.ini on
#             device/cuda in fp32, tf32, bf16 and fp16
#   sanitize  compute-sanitizer: memcheck over 3 training steps; racecheck, synccheck and
#             initcheck over each CUDA attention plugin's conformance shapes and the
#             device-op test
#   bench     short benchmarks: bench/compare_gpu.py (GPT-2 124M against PyTorch, alone and
#             beside a process polling the GPU), `gearbox bench step --profile`, `gearbox
#             bench matmul G` (each GPT-2 product with its epilogue), `gearbox bench attn`
#             and bench/sdpa_attn.py; then one page of it all, bench-summary.md; the time
#             model's prediction of the step's phases and the attention cells on the
#             emulated plugins of the same build, beside what was measured
#             (predicted-vs-measured.txt); last a `gearbox ab` of the [train] fuse_*
#             settings on GPT-2 124M's shape
# Each stage writes its logs into OUT/STAGE/ as they go (each program's output line by
# line, so a run killed mid-way leaves what it wrote) and its lines, ending with "stage
# result", into OUT/summary.txt at once (a rerun of a stage replaces its lines); the first
# line printed names OUT. Later stages use the build the build stage left in BUILD.
# docs/gpu.md ("Building on a GPU machine") is the guide.
#
# usage: scripts/gpu-check.sh [--budget S] [--emulated] [--pack] [STAGE... | --stage STAGE]
#        scripts/gpu-check.sh deps      (on a Debian or Ubuntu machine with apt: makes the
#                                        folder of inih, oneDNN and pkg-config to carry)
#   no STAGE: build test train sanitize bench, in that order, stopping after a failed build
#   --budget S (or BUDGET): seconds the whole command may take (default 600). The time plan
#              on an H100 machine, from a fresh clone: build 150 (meson setup, then nvcc for
#              sm_90a only), test 120, train 40, sanitize 90, bench 200 (compare-gpu 120 with
#              a cold torch.compile, profile 30, matmul 15, attn 20, sdpa 15, then the
#              fusions' A/B if time is left). Each stage may run until the budget's end less
#              the plans of the stages after it in this command (scaled down when the budget
#              is smaller than their sum), so time a stage leaves goes to the next; each
#              run and benchmark in it gets at most its planned seconds of what is left. A
#              stage or benchmark with less than 20 s left to start is SKIP, not FAIL, and
#              so is one the budget cut short of its planned time
#   --emulated (or GEARBOX_CUDA_EMU=1): every stage but sanitize and bench on the SIMT
#              emulator's CUDA plugins (BUILD/cuda_emu/plugins), on a machine without a GPU
#   --pack     pack each stage's logs into OUT/STAGE-logs.tar.gz (a few files to copy back)
# environment: OUT           where logs and summary.txt go (default ./gpu-check-out)
#              BUILD         build folder (default build-gpu); one already configured is
#                            built as it is, without a new `meson setup`
#              WORK          data and training runs (default BUILD/gpu-check-work)
#              GEARBOX_DEPS  carried dependencies with env.sh (default .gpu-deps)
#              CUDA_PATH     the CUDA toolkit (default /usr/local/cuda)
#              GPU_ARCH      -Dgpu_arch (default: the GPU's, from nvidia-smi)
#              GPU_TESTS     meson test's arguments (default --suite gpu --suite cuda;
#                            emulated: --suite gpu-emu --no-suite gpu-check)
#              STEPS         training steps per precision (default 50; emulated 2)
#              STAGE_LIMIT   at most this many seconds for each stage (default: no cap
#                            beyond the budget); TRAIN_LIMIT (30; emulated 120) and
#                            SANITIZE_RUN_LIMIT (60) bound a run
#              BENCH         0 skips the benchmarks
#              PREDICT_LIMIT seconds the step's prediction may take (default 300)
#              PYTHON        the interpreter with PyTorch 2.x for bench/*.py (default python3)
#              DEPS_PACKAGES the packages `deps` unpacks (default: Debian 12's names)
# Exit status: 0 when no stage run by this command failed (skips do not fail), 1 when one
# did, 2 for a usage error. Without a GPU, the stages that need one (train, sanitize, bench)
# are SKIP, and the test stage's gpu tests skip one by one.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src" || exit 1

usage() { sed -n '/^# usage:/,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

add_stage() {
    case $1 in
        build|test|train|sanitize|bench|deps) stages+=("$1") ;;
        *) echo "gpu-check.sh: unknown stage '$1': expected build, test, train, sanitize," \
                "bench (or deps alone); see --help" >&2
           exit 2 ;;
    esac
}
emulated=${GEARBOX_CUDA_EMU:-0}
pack=0
budget=${BUDGET:-600}
stages=()
while [ $# -gt 0 ]; do
    case $1 in
        --emulated) emulated=1 ;;
        --budget) shift; budget=${1:-} ;;
        --budget=*) budget=${1#--budget=} ;;
        --pack) pack=1 ;;
        --stage) shift; add_stage "${1:-}" ;;
        --stage=*) add_stage "${1#--stage=}" ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "gpu-check.sh: unknown option '$1'; see --help" >&2; exit 2 ;;
        *) add_stage "$1" ;;
    esac
    shift
done
[ ${#stages[@]} -eq 0 ] && stages=(build test train sanitize bench)
case $budget in
    ''|*[!0-9]*) echo "gpu-check.sh: --budget '$budget': expected whole seconds, such as 600" >&2
                 exit 2 ;;
esac
budget_end=$((SECONDS + budget))

absolute() { case $1 in /*) echo "$1" ;; *) echo "$src/$1" ;; esac; }
out=$(absolute "${OUT:-gpu-check-out}")
build=$(absolute "${BUILD:-build-gpu}")
work=$(absolute "${WORK:-$build/gpu-check-work}")
deps=$(absolute "${GEARBOX_DEPS:-.gpu-deps}")
cuda=${CUDA_PATH:-/usr/local/cuda}
gearbox=$build/tools/gearbox
# The compilers, found by name: the C compiler is CC, else cc, else gcc (a machine may have
# gcc and no cc), which meson reads from CC; nvcc's host compiler is NVCC_CCBIN (nvcc reads
# it), else g++ from PATH.
CC=${CC:-$(command -v cc > /dev/null && echo cc || echo gcc)}
NVCC_CCBIN=${NVCC_CCBIN:-$(command -v g++)}
export CC
[ -n "$NVCC_CCBIN" ] && export NVCC_CCBIN
# a training run's limit: seconds on a GPU, minutes on the emulator (about 1000 times slower)
if [ "$emulated" = 1 ]; then steps=${STEPS:-2} train_limit=${TRAIN_LIMIT:-120}
else steps=${STEPS:-50} train_limit=${TRAIN_LIMIT:-30}; fi

# ---- deps: the carried folder, made on a machine with apt ----------------------------------
# The GPU machines we borrow have no apt, inih, oneDNN, Jansson, nettle or pkg-config: this unpacks Debian's
# (or Ubuntu's) packages of them into GEARBOX_DEPS/root and writes GEARBOX_DEPS/env.sh,
# which the stages source. DEPS_PACKAGES overrides the list for another release's names.
make_deps() {
    local pkgs
    read -r -a pkgs <<< "${DEPS_PACKAGES:-libinih-dev libinih1 libdnnl-dev libdnnl2 libjansson-dev libjansson4 nettle-dev libnettle8 pkgconf-bin libpkgconf3}"
    if ! command -v apt-get > /dev/null || ! command -v dpkg > /dev/null; then
        echo "gpu-check.sh deps: needs apt-get and dpkg (a Debian or Ubuntu machine); run it" \
             "there and copy $deps along with the checkout" >&2
        return 1
    fi
    if [ -e "$deps" ] && [ ! -f "$deps/env.sh" ]; then
        echo "gpu-check.sh deps: $deps exists and has no env.sh, so this command did not make" \
             "it; name another folder in GEARBOX_DEPS" >&2
        return 1
    fi
    rm -rf "$deps" && mkdir -p "$deps/debs" || return 1
    if ! (cd "$deps/debs" && apt-get download "${pkgs[@]}"); then
        echo "gpu-check.sh deps: apt-get download ${pkgs[*]} failed: run apt-get update, or" \
             "name this release's packages in DEPS_PACKAGES" >&2
        return 1
    fi
    for deb in "$deps"/debs/*.deb; do dpkg -x "$deb" "$deps/root" || return 1; done
    rm -rf "$deps/debs" "$deps/root/usr/share/doc" "$deps/root/usr/share/man"
    cat > "$deps/env.sh" <<'ENV'
# Sourced by scripts/gpu-check.sh (or by hand before meson): the unpacked packages' tree.
_r=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/root
_l=$(echo "$_r"/usr/lib/*-linux-gnu)
[ -e "$_r/usr/bin/pkg-config" ] || ln -sf pkgconf "$_r/usr/bin/pkg-config"
export PATH=$_r/usr/bin:$PATH
# pkg-config sees only the carried .pc files: their prefix=/usr is mapped onto the tree,
# which would give any other package's .pc wrong paths.
export PKG_CONFIG_LIBDIR=$_l/pkgconfig PKG_CONFIG_SYSROOT_DIR=$_r
export CPATH=$_r/usr/include${CPATH:+:$CPATH}
export LIBRARY_PATH=$_l${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$_l${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset _r _l
ENV
    echo "gpu-check.sh deps: $(du -sh "$deps" | cut -f1) in $deps; copy it with the checkout" \
         "(or name it in GEARBOX_DEPS) and run scripts/gpu-check.sh there"
}
if [ "${stages[*]}" = deps ]; then make_deps; exit; fi
case " ${stages[*]} " in *" deps "*)
    echo "gpu-check.sh: deps runs alone, on a machine with apt, not with the stages" >&2
    exit 2 ;;
esac
# carry_hint PACKAGE: what to do about a missing dependency
carry_hint() {
    echo "run \`scripts/gpu-check.sh deps\` on a Debian or Ubuntu machine with apt and copy .gpu-deps/ along, or install $1"
}

# ---- the summary ----------------------------------------------------------------------------
mkdir -p "$out" || exit 1
touch "$out/summary.txt"
failed=0
echo "gpu-check: logs in $out (summary.txt, and a folder per stage, written as they go);" \
     "budget $budget s for: ${stages[*]}"
# Every program's output reaches its log line by line (a C program's stdio through stdbuf,
# Python's unbuffered), so a run killed at its limit, or with the whole command, leaves it.
export PYTHONUNBUFFERED=1
line_buffered=()
command -v stdbuf > /dev/null && line_buffered=(stdbuf -oL -eL)

# stage_plan STAGE: its seconds in the time plan of --help (0 for the stages the emulated
# mode skips at once)
stage_plan() {
    if [ "$emulated" = 1 ]; then
        case $1 in sanitize|bench) echo 0; return ;; esac
    fi
    case $1 in build) echo 150 ;; test) echo 120 ;; train) echo 40 ;; sanitize) echo 90 ;;
               bench) echo 200 ;; esac
}
# plans_after INDEX: the planned seconds of the stages after stages[INDEX] (-1: all of them)
plans_after() {
    local i sum=0
    for ((i = $1 + 1; i < ${#stages[@]}; i++)); do
        sum=$((sum + $(stage_plan "${stages[i]}")))
    done
    echo "$sum"
}

# record NAME STATUS DETAIL: one line of the summary (STATUS: PASS, FAIL or SKIP), also
# written to summary.txt at once, so a stage cut short still leaves what it did
record() {
    local line
    line=$(printf '%-8s %-30s %-4s %s' "$stage" "$1" "$2" "$3")
    printf '%s\n' "$line" >> "$out/summary.txt"
    case $2 in PASS) n_pass=$((n_pass + 1)) ;; SKIP) n_skip=$((n_skip + 1)) ;;
               *) n_fail=$((n_fail + 1)); failed=1 ;; esac
    echo "== $line"
}

# begin_stage NAME INDEX: a fresh log folder, the stage's lines of an earlier run removed,
# and its deadline: the budget's end less the plans of the stages after it (scaled down
# when the budget is smaller than all the plans), at most STAGE_LIMIT from now
begin_stage() {
    stage=$1 n_pass=0 n_skip=0 n_fail=0 stage_start=$SECONDS log=$out/$1
    local reserve total
    reserve=$(plans_after "$2")
    total=$(plans_after -1)
    [ "$budget" -lt "$total" ] && reserve=$((reserve * budget / total))
    deadline=$((budget_end - reserve))
    if [ -n "${STAGE_LIMIT:-}" ] && [ $((SECONDS + STAGE_LIMIT)) -lt "$deadline" ]; then
        deadline=$((SECONDS + STAGE_LIMIT))
    fi
    awk -v s="$stage" '$1 != s' "$out/summary.txt" > "$out/summary.tmp" &&
        mv "$out/summary.tmp" "$out/summary.txt"
    rm -rf "$log" "$out/$stage-logs.tar.gz"
    mkdir -p "$log"
}

# end_stage: the stage's own line: FAIL if a check failed, SKIP if every one skipped
end_stage() {
    local verdict=PASS counts
    counts="$n_pass passed, $n_skip skipped, $n_fail failed in $((SECONDS - stage_start)) s"
    if [ "$n_fail" -gt 0 ]; then verdict=FAIL
    elif [ "$n_pass" -eq 0 ]; then verdict=SKIP; fi
    record "stage result" "$verdict" "$counts (logs: $stage/)"
    [ "$pack" = 1 ] && tar -czf "$out/$stage-logs.tar.gz" -C "$out" "$stage" && rm -rf "$log"
    [ "$verdict" != FAIL ]
}

finish() {
    echo
    echo "gpu-check summary (logs in $out):"
    sed 's/^/  /' "$out/summary.txt"
    exit "$failed"
}

# ---- the environment every stage shares ------------------------------------------------------
# load_deps [quiet]: source the carried folder's env.sh when there is one, and keep
# pkg-config to its .pc files (the sysroot it sets would misplace any other package's)
load_deps() {
    if [ ! -f "$deps/env.sh" ]; then
        [ $# -eq 0 ] && record "carried deps" SKIP "no $deps/env.sh: inih, oneDNN and pkg-config come from this machine"
        return 0
    fi
    # shellcheck disable=SC1090,SC1091
    . "$deps/env.sh"
    PKG_CONFIG_LIBDIR=$(find "$deps/root" -type d -name pkgconfig | paste -sd: -)
    export PKG_CONFIG_LIBDIR
    [ $# -eq 0 ] && record "carried deps" PASS "$deps/env.sh; pkg-config reads only $PKG_CONFIG_LIBDIR"
    return 0
}

cuda_device() {
    if [ "$emulated" = 1 ]; then echo "$build/cuda_emu/plugins/device-cuda.so"
    else echo "$build/plugins/device/cuda/device-cuda.so"; fi
}

# stage_env: what a stage after build needs: the build, the deps' and the CUDA libraries'
# folders on LD_LIBRARY_PATH (cuDNN loads NVRTC with dlopen, past the plugins' rpaths),
# the plugin path. 1 (after recording why) when there is no build to use.
stage_env() {
    load_deps quiet
    export PATH=$cuda/bin:$PATH
    if [ ! -x "$gearbox" ] || [ ! -f "$(cuda_device)" ]; then
        record "build in $(basename "$build")" FAIL "no gearbox or device/cuda in $build: run \`scripts/gpu-check.sh build\` first (same BUILD)"
        return 1
    fi
    if [ -f "$build/cuda-ld-library-path.txt" ]; then
        LD_LIBRARY_PATH=$(paste -sd: "$build/cuda-ld-library-path.txt")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export LD_LIBRARY_PATH
    fi
    if [ "$emulated" = 1 ]; then
        export GEARBOX_PLUGIN_PATH=$build/cuda_emu/plugins:$build/plugins
    else
        export GEARBOX_PLUGIN_PATH=$build/plugins
    fi
}

# have_time CHECK: whether 20 s of the stage's share of the budget are left to start
# CHECK; if not, CHECK is recorded as a SKIP (it did not run, so it did not fail)
have_time() {
    [ $((deadline - SECONDS)) -ge 20 ] && return 0
    record "$1" SKIP "no time to start it: $((deadline - SECONDS)) s left of this stage's share of the --budget $budget s (raise --budget)"
    return 1
}

# run_limited FILE SECONDS COMMAND...: COMMAND into $log/FILE (line by line) under
# `timeout`, for at most SECONDS and never past the stage's end; its status (124 or 137:
# out of time). $limit is the limit it ran under, $planned the SECONDS asked for.
run_limited() {
    local file=$1 left=$((deadline - SECONDS))
    limit=$2 planned=$2
    shift 2
    [ "$left" -lt "$limit" ] && limit=$left
    timeout -k 10 "$limit" "${line_buffered[@]}" "$@" > "$log/$file" 2>&1
}

# out_of_time CHECK FILE: a run that reached its limit: SKIP when the budget cut it below
# its planned seconds (it had no time to finish), else FAIL (it took longer than planned)
out_of_time() {
    if [ "$limit" -lt "$planned" ]; then
        record "$1" SKIP "cut at $limit s by the --budget $budget s (it plans $planned s; raise --budget) ($2)"
    else
        record "$1" FAIL "past its $limit s limit ($2)"
    fi
}

# needs_gpu: whether a GPU answers (always, emulated); if not, the stage is recorded SKIP
needs_gpu() {
    [ "$emulated" = 1 ] && return 0
    local probe=$build/tests/gpu/gpu-probe
    if [ -x "$probe" ]; then
        "$probe" > "$log/probe.log" 2>&1 && return 0
        record "gpu" SKIP "$(sed 's/^SKIP: //' "$log/probe.log"): this stage needs one"
    else
        nvidia-smi -L > "$log/probe.log" 2>&1 && return 0
        record "gpu" SKIP "no NVIDIA GPU (nvidia-smi -L: $(head -c 100 "$log/probe.log")): this stage needs one"
    fi
    return 1
}

# first_error FILE: the first error line of a log, without gearbox's prefix and plugin paths
first_error() {
    grep -m1 -i 'error' "$1" | sed 's/^gearbox: error: //; s| ([^ ]*\.so)||' | cut -c1-150
}

no_cpu_device_note="device/cpu is not built (no oneDNN), so the gpu-suite tests that compare with it skip, each saying so; $(carry_hint libdnnl-dev)"

# ---- stage build ------------------------------------------------------------------------------
# links_with HEADER LIB PKG: whether a program including HEADER links with -lLIB, as meson
# will try it (pkg-config's flags for PKG when it knows the package)
links_with() {
    local flags rc
    flags=$(pkg-config --cflags --libs "$3" 2> /dev/null)
    echo "-- $1, -l$2 $flags" >> "$log/dependencies.log"
    # shellcheck disable=SC2086
    printf '#include <%s>\nint main(void) { return 0; }\n' "$1" |
        $CC -x c - -o "$log/probe" $flags "-l$2" >> "$log/dependencies.log" 2>&1
    rc=$?
    rm -f "$log/probe"
    return $rc
}

# check_dependencies: everything the build needs, before anything is built: a missing one
# stops the stage here, with what to do, instead of half-way through configure or build
check_dependencies() {
    local tool missing=""
    for tool in meson ninja "$CC"; do
        command -v "${tool%% *}" > /dev/null || missing="$missing $tool"
    done
    [ "$emulated" = 1 ] || [ -x "$cuda/bin/nvcc" ] || missing="$missing nvcc($cuda/bin; set CUDA_PATH)"
    [ "$emulated" = 1 ] || [ -n "$NVCC_CCBIN" ] || missing="$missing g++(nvcc's host compiler; or set NVCC_CCBIN)"
    if [ -n "$missing" ]; then
        record "dependencies" FAIL "not found:$missing; nothing was built"
        return 1
    fi
    if ! links_with ini.h inih inih; then
        record "dependencies" FAIL "inih (ini.h, libinih) not found; nothing was built: $(carry_hint libinih-dev)"
        return 1
    fi
    if ! links_with jansson.h jansson jansson; then
        record "dependencies" FAIL "Jansson (jansson.h, libjansson) not found; nothing was built: $(carry_hint libjansson-dev)"
        return 1
    fi
    if ! links_with nettle/sha2.h nettle nettle; then
        record "dependencies" FAIL "nettle (nettle/sha2.h, libnettle) not found; nothing was built: $(carry_hint nettle-dev)"
        return 1
    fi
    if links_with oneapi/dnnl/dnnl.h dnnl dnnl; then
        record "dependencies" PASS "meson, ninja, $CC, inih, Jansson, nettle, oneDNN$([ "$emulated" = 1 ] || echo ", nvcc")"
    else
        record "dependencies" PASS "meson, ninja, $CC, inih, Jansson, nettle$([ "$emulated" = 1 ] || echo ", nvcc")"
        record "oneDNN" SKIP "oneapi/dnnl/dnnl.h or libdnnl not found: no device/cpu will be built; $(carry_hint libdnnl-dev)"
    fi
}

# The machine's GPU architecture for nvcc (sm_90a on an H100 or H200, whose Hopper-only
# wgmma kernels need it): one architecture builds in about a minute where the default two
# take twice that.
gpu_arch() {
    local cap
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -n 1)
    case $cap in
        9.0) echo "sm_90a" ;;
        [0-9]*.[0-9]*) echo "sm_${cap/./}" ;;
    esac
}

configure() {
    local args=(-Dwerror=false)
    if [ -f "$build/build.ninja" ]; then
        record "configure" PASS "$build is configured already: built as it is (meson setup --reconfigure $build to change it)"
        return 0
    fi
    if [ "$emulated" = 1 ]; then
        args+=(-Dgpu_emu=enabled)
    else
        local arch=${GPU_ARCH:-$(gpu_arch)}
        args+=(-Dcuda=enabled -Dgpu_emu=disabled ${arch:+-Dgpu_arch=$arch})
    fi
    run_limited setup.log 60 meson setup "$build" "${args[@]}"
    local rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        out_of_time "configure" setup.log
        return 1
    elif [ $rc -ne 0 ]; then
        record "configure" FAIL "meson setup ${args[*]}: $(grep -m1 'ERROR' "$log/setup.log" | cut -c1-150) (setup.log)"
        return 1
    fi
    record "configure" PASS "meson setup ${args[*]}; $(grep -E '^ +(cuDNN|NCCL|NVRTC) ' "$log/setup.log" |
        sed -E 's/^ +//; s/ +: /: /; s/ \(cuDNN loads it at run time\)//' | paste -sd';' - | sed 's/;/; /g')"
}

# The CUDA plugins the build made, as "device-cuda attn-flash-cuda ..."
cuda_plugins() {
    if [ "$emulated" = 1 ]; then
        find "$build/cuda_emu/plugins" -maxdepth 1 -name '*.so'
    else
        find "$build/plugins" -name '*-cuda.so' -o -name 'comm-nccl.so'
    fi | sed 's|.*/||; s|\.so$||' | sort | paste -sd' ' -
}

stage_build() {
    local rc
    load_deps
    export PATH=$cuda/bin:$PATH
    {
        if command -v nvidia-smi > /dev/null; then nvidia-smi -L 2>&1; else echo "no nvidia-smi"; fi
        "$cuda/bin/nvcc" --version 2>&1 | tail -n 2
        echo "meson $(meson --version 2>&1), ninja $(ninja --version 2>&1), CC=$CC: $($CC --version 2>&1 | head -n 1)"
        echo "nvcc's host compiler NVCC_CCBIN=${NVCC_CCBIN:-none}: $(${NVCC_CCBIN:-false} --version 2>&1 | head -n 1)"
    } > "$log/machine.txt"
    check_dependencies && configure || return
    # all the stage's time; less than the plan's 150 s counts as cut short by the budget
    run_limited build.log $((deadline - SECONDS)) ninja -C "$build"
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        planned=$(stage_plan build)
        out_of_time "build" "build.log; run the build stage again to go on where it stopped"
        return
    elif [ $rc -ne 0 ]; then
        record "build" FAIL "$(grep -m1 'error' "$log/build.log" | cut -c1-150) (build.log)"
        return
    fi
    record "build" PASS "$build: $(grep -c 'warning:' "$log/build.log") compiler warnings (build.log)"
    if [ ! -f "$(cuda_device)" ]; then
        record "device/cuda" FAIL "$(cuda_device) not built (setup.log says why: nvcc, cuBLASLt or the emulator missing?)"
        return
    fi
    record "CUDA plugins" PASS "$(cuda_plugins)"
    [ -f "$build/plugins/device/cpu/device-cpu.so" ] || record "device/cpu" SKIP "$no_cpu_device_note"
    stage_env || return
    if [ "$emulated" = 1 ]; then
        record "gpu" PASS "emulated: the SIMT emulator's plugins lead GEARBOX_PLUGIN_PATH"
    elif "$build/tests/gpu/gpu-probe" > "$log/probe.log" 2>&1; then
        record "gpu" PASS "$(cat "$log/probe.log")"
    else
        record "gpu" FAIL "$(sed 's/^SKIP: //' "$log/probe.log")"
    fi
    "$gearbox" doctor > "$log/doctor.log" 2>&1
    "$gearbox" plugins > "$log/plugins.log" 2>&1
}

# ---- stage test ---------------------------------------------------------------------------------
stage_test() {
    stage_env || return
    [ -f "$build/plugins/device/cpu/device-cpu.so" ] || record "device/cpu" SKIP "$no_cpu_device_note"
    local tests rc counts
    if [ "$emulated" = 1 ]; then tests=${GPU_TESTS:---suite gpu-emu --no-suite gpu-check}
    else tests=${GPU_TESTS:---suite gpu --suite cuda}; fi
    # --logbase: its own log files, so a meson test already running in BUILD keeps its own
    # shellcheck disable=SC2086
    run_limited test-gpu.log $((deadline - SECONDS)) meson test -C "$build" --no-rebuild \
        --logbase gpu-check --print-errorlogs $tests
    rc=$?
    counts=$(grep -E '^(Ok|Fail|Skipped|Timeout):' "$log/test-gpu.log" | tr -s ' ' | tr '\n' ' ')
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        planned=$(stage_plan test)
        out_of_time "meson test" "$tests: ${counts}test-gpu.log"
    elif [ $rc -ne 0 ]; then
        record "meson test" FAIL "$tests: ${counts}(test-gpu.log)"
    elif grep -qE '^Ok: +0 *$' "$log/test-gpu.log"; then
        record "meson test" SKIP "$tests: ${counts}(every test skipped: test-gpu.log says why)"
    else
        record "meson test" PASS "$tests: $counts"
    fi
}

# ---- stage train ---------------------------------------------------------------------------------
# train_command NAME PRECISION STEPS: train_cmd becomes a short run of the default config
# on device/cuda into WORK/NAME, evaluated only at its end, on 2 batches; the emulator
# trains a smaller model (it is about 1000 times slower than a GPU)
train_command() {
    train_cmd=("$gearbox" train examples/shakespeare_char.ini --set device.plugin=cuda
        --set precision.plugin="$2" --set run.steps="$3" --set run.eval_every=0
        --set run.eval_iters=2 --set run.log_every=10 --set run.checkpoint_every=0
        --set data.dir="$data" --set run.out_dir="$work/$1")
    [ "$emulated" = 1 ] && train_cmd+=(--set model.n_layer=2 --set model.n_embd=64)
    return 0
}

stage_train() {
    stage_env && needs_gpu || return
    data=$work/data/shakespeare_char
    rm -rf "$work"   # prepare must create the missing folders itself
    if ! run_limited prepare.log 60 "$gearbox" prepare examples/data/tinyshakespeare.txt "$data"; then
        record "prepare data" FAIL "$(first_error "$log/prepare.log") (prepare.log)"
        return
    fi
    record "prepare data" PASS "$(sed 's/^[^:]*: //' "$log/prepare.log" | cut -c1-150)"
    local precision rc
    for precision in fp32 tf32 bf16 fp16; do
        have_time "train $precision ($steps steps)" || continue
        train_command "train-$precision" "$precision" "$steps"
        run_limited "train-$precision.log" "$train_limit" "${train_cmd[@]}"
        rc=$?
        if [ $rc -eq 0 ]; then
            record "train $precision ($steps steps)" PASS "$(grep '^done:' "$log/train-$precision.log" | cut -c1-100)"
        elif grep -q "cannot run here\|no such .* plugin" "$log/train-$precision.log"; then
            record "train $precision ($steps steps)" SKIP "$(first_error "$log/train-$precision.log")"
        elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            out_of_time "train $precision ($steps steps)" "train-$precision.log"
        else
            record "train $precision ($steps steps)" FAIL "$(first_error "$log/train-$precision.log") (train-$precision.log)"
        fi
    done
}

# ---- stage sanitize -----------------------------------------------------------------------------
# sanitize TOOL TARGET COMMAND...: COMMAND under compute-sanitizer's TOOL, for at most
# SANITIZE_RUN_LIMIT (default 60 s) of what is left of the stage
sanitize() {
    local tool=$1 name="$1 $2" file="$1-$2" rc
    shift 2
    have_time "$name" || return
    run_limited "$file.log" "${SANITIZE_RUN_LIMIT:-60}" "$sanitizer" --tool "$tool" \
        --error-exitcode 99 --target-processes all "$@"
    rc=$?
    local verdict
    verdict=$(grep -m1 'ERROR SUMMARY' "$log/$file.log" | sed 's/^=* *//')
    case $rc in
        0) record "$name" PASS "$verdict" ;;
        77) record "$name" SKIP "$(grep -i -m1 'skip' "$log/$file.log" | cut -c1-120)" ;;
        99) record "$name" FAIL "$verdict ($file.log)" ;;
        124|137) out_of_time "$name" "no verdict; $file.log" ;;
        *) record "$name" FAIL "exit status $rc: $(first_error "$log/$file.log") ($file.log)" ;;
    esac
}

stage_sanitize() {
    if [ "$emulated" = 1 ]; then
        record "compute-sanitizer" SKIP "emulated: it needs a GPU (the emulator asserts its own rules in every gpu-emu test)"
        return
    fi
    stage_env && needs_gpu || return
    sanitizer=$(command -v compute-sanitizer ||
        ls "$cuda"/compute-sanitizer/compute-sanitizer 2> /dev/null)
    if [ -z "$sanitizer" ]; then
        record "compute-sanitizer" SKIP "not installed (not on PATH, not in $cuda/bin or $cuda/compute-sanitizer)"
        return
    fi
    data=$work/data/shakespeare_char
    [ -f "$data/train.bin" ] ||
        "$gearbox" prepare examples/data/tinyshakespeare.txt "$data" > "$log/prepare.log" 2>&1
    train_command sanitize-memcheck fp32 3
    sanitize memcheck train-fp32-3-steps "${train_cmd[@]}"
    local tool plugin attn_plugins
    attn_plugins=$(find "$build/plugins" -name 'attn-*-cuda.so' | sort)
    # the smallest shapes there are: the conformance table (T up to 257) and the device-op
    # test, not training steps (racecheck takes 16-20 s for one step of the tiny model)
    for tool in racecheck synccheck initcheck; do
        for plugin in $attn_plugins; do
            sanitize "$tool" "$(basename "$plugin" .so)" "$gearbox" test-plugin "$plugin" --device cuda
        done
        if [ -f "$build/plugins/device/cpu/device-cpu.so" ]; then
            sanitize "$tool" "device-ops" "$build/tests/gpu/test-device-cuda" "$(cuda_device)" \
                "$build/plugins/device/cpu/device-cpu.so" ops
        else
            record "$tool device-ops" SKIP "$no_cpu_device_note"
        fi
    done
}

# ---- stage bench ---------------------------------------------------------------------------------
# Each benchmark runs under `timeout`, its output in $log/NAME.txt. They measure, they do
# not judge: one FAILs only when it does not run to the end. The full settings are in
# bench/README.md (run them by hand, one command each).
# bench_detail FILE: the summary's words for a benchmark's output: the ratio line of
# compare_gpu.py, the profile's total, bench matmul's total, the fusions' ab verdict, else the last T of an
# attention table as
# "T=4096: NAME MS ms TFLOPS TF/s, ..."
bench_detail() {
    sed -n -E '/^ *gearbox\/PyTorch|^profile:|^unfused: |^  all of the above/ { s/^ *//; s/  +/ /g; p; q }' "$1" | grep . ||
        awk '/^T = / { t = $3; sub(":", "", t); row = "" }
             /^  [a-z_]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.e+-]+ / {
                 row = row (row == "" ? "" : ", ") $1 " " $4 " ms " $5 " TF/s" }
             END { if (t != "") print "T=" t ": " row }' "$1"
}
# bench NAME SECONDS COMMAND...: runs COMMAND into $log/NAME.txt; exit 77 is a skip
bench() {
    local name=$1 seconds=$2 rc
    shift 2
    have_time "$name" || return
    run_limited "$name.txt" "$seconds" "$@"
    rc=$?
    if [ $rc -eq 0 ]; then
        record "$name" PASS "$(bench_detail "$log/$name.txt" | cut -c1-150) ($name.txt)"
    elif [ $rc -eq 77 ]; then
        record "$name" SKIP "$(tail -n 1 "$log/$name.txt" | cut -c1-110)"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        out_of_time "$name" "$name.txt"
    else
        record "$name" FAIL "exit status $rc: $(first_error "$log/$name.txt") ($name.txt)"
    fi
}

# ---- predictions beside the measurements ----
# The time model (docs/gpu.md, "Predicting GPU time without a GPU") predicts, on the
# emulated plugins of this same build (BUILD/cuda_emu/plugins, -Dgpu_emu), what the bench
# stage has just measured; each pair goes into predicted-vs-measured.txt, so every GPU run
# recalibrates the model.
# gpu_model: H100 or H200 from nvidia-smi's name of GPU 0, else nothing
gpu_model() {
    case $(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -n 1) in
        *H200*) echo H200 ;;
        *H100*) echo H100 ;;
    esac
}
# pair_step PROFILE PREDICTION GPU: per phase, measured and predicted ms and their ratio
# (the attention phases against cuDNN's predicted time: the profile ran attn/cudnn)
pair_step() {
    awk -v tag="[prediction $3] " '
        FNR == NR { if ($0 ~ /^  [a-z].* +[0-9.]+ +[0-9.-]+% /) {
                        name = substr($0, 3, 30); sub(/ +$/, "", name)
                        measured[name] = substr($0, 34, 10) + 0; order[n++] = name }
                    next }
        index($0, tag) != 1 { next }
        { line = substr($0, length(tag) + 1) }
        line ~ /^  \(cuDNN/ { v = line; sub(/.*shapes: /, "", v); sub(/ ms.*/, "", v)
                              predicted[last] = v + 0; next }
        line ~ /^step total/ { v = line; sub(/^step total /, "", v); sub(/ ms.*/, "", v)
                               total = v + 0; next }
        line !~ /^  / { name = substr(line, 1, 46); sub(/ +$/, "", name); split(substr(line, 48), f, " ")
                        predicted[name] = f[2] + 0; last = name }
        END { printf "%-30s %12s %13s %10s\n", "phase", "measured ms", "predicted ms", "pred/meas"
              for (i = 0; i < n; i++) { k = order[i]
                  if (k in predicted) printf "%-30s %12.3f %13.3f %10.2f\n", k, measured[k],
                                             predicted[k], predicted[k] / measured[k]
                  else printf "%-30s %12.3f %13s\n", k, measured[k], "-" }
              if (total) printf "%-30s %12s %13.3f\n", "step total (prediction)", "", total }' "$1" "$2"
}
# pair_attn MEASURED PREDICTION GPU: per T and plugin, measured and predicted fwd+bwd ms
pair_attn() {
    awk -v tag="[prediction $3] " '
        FNR == NR { if ($0 ~ /^T = /) { t = $3; sub(":", "", t) }
                    else if ($0 ~ /^  [a-z_]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ /) measured[t " " $1] = $4
                    next }
        index($0, tag) != 1 { next }
        { line = substr($0, length(tag) + 1) }
        line ~ /^T = .*inputs/ { split(line, w, " "); t = w[3]; sub(":", "", t) }
        line ~ /^  [a-z_]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ / { split(line, f, " ")
            k = t " " f[1]
            printf "T %-6s %-14s measured %10s ms  predicted %10.2f ms  pred/meas %s\n",
                   t, f[1], (k in measured) ? measured[k] : "-", f[4],
                   (k in measured && measured[k] > 0) ? sprintf("%.2f", f[4] / measured[k]) : "-" }' "$1" "$2"
}
bench_predictions() {
    local gpu emu=$build/cuda_emu/plugins pairs=$log/predicted-vs-measured.txt
    gpu=$(gpu_model)
    if [ ! -f "$emu/device-cuda.so" ]; then
        record "bench predictions" SKIP "no emulated plugins in $emu: the build needs -Dgpu_emu (g++, libboost-context-dev)"
        return
    elif [ -z "$gpu" ]; then
        record "bench predictions" SKIP "the time model has figures for H100 and H200, not this GPU"
        return
    elif [ ! -f "$1/train.bin" ]; then
        record "bench predictions" SKIP "no GPT-2 tokens in $1 (made with PyTorch's numpy above)"
        return
    fi
    GEARBOX_PLUGIN_PATH=$emu:$build/plugins bench "bench-predict-step" "${PREDICT_LIMIT:-300}" \
        "$gearbox" bench step examples/gpt2_124m.ini --device cuda --predict "$gpu" \
        --set data.dir="$1" --set data.tokens_per_step=0 --set data.gradient_accumulation_steps=1 \
        --set data.batch_size=16 --set precision.plugin=bf16 --set optim.plugin=adamw_fused \
        --set attn.plugin=flash
    GEARBOX_PLUGIN_PATH=$emu:$build/plugins bench "bench-predict-attn" 120 "$gearbox" bench attn \
        --device cuda --dtype bf16 --T 1024,4096 --plugins flash,math --predict "$gpu"
    {
        echo "# $gpu: measured on this GPU, predicted by the time model on the emulated plugins of the same build"
        [ -f "$log/bench-profile.txt" ] && [ -f "$log/bench-predict-step.txt" ] &&
            pair_step "$log/bench-profile.txt" "$log/bench-predict-step.txt" "$gpu"
        [ -f "$log/bench-attn-cuda.txt" ] && [ -f "$log/bench-predict-attn.txt" ] &&
            pair_attn "$log/bench-attn-cuda.txt" "$log/bench-predict-attn.txt" "$gpu"
    } > "$pairs"
    record "bench predicted/measured" PASS "$(grep -cE ' [0-9.]+ +[0-9.]+ +[0-9.]+$|pred/meas [0-9]' "$pairs") pairs (predicted-vs-measured.txt)"
}

# The fusions ([train] fuse_*, docs/gpu.md) on and off, GPT-2 124M's shape in bf16 on the
# train stage's characters (vocab_size 50257 keeps the classifier GPT-2's size).
bench_fusions() {
    local data=$work/data/shakespeare_char attn=flash off=""
    if [ ! -f "$data/train.bin" ]; then
        record "bench-fusions" SKIP "no $data: the train stage prepares it"
        return
    fi
    [ -f "$build/plugins/attn/cudnn/attn-cudnn-cuda.so" ] && attn=cudnn
    for key in classifier gelu bias_grad residual_norm; do
        off+="${off:+,}train.fuse_$key=false"
    done
    bench "bench-fusions" 100 "$gearbox" ab examples/gpt2_124m.ini --set data.dir="$data" \
        --set data.tokens_per_step=0 --set data.gradient_accumulation_steps=1 \
        --set data.batch_size=8 --set attn.plugin="$attn" --set run.eval_iters=2 \
        --variant fused: --variant "unfused:$off" --steps 20 --warmup 5 --repeats 2 \
        --tolerance 0.02 --out "$log/ab-fusions"
}

stage_bench() {
    if [ "$emulated" = 1 ]; then
        record "benchmarks" SKIP "emulated: the emulator's speed says nothing about a GPU's"
        return
    fi
    if [ "${BENCH:-1}" = 0 ]; then
        record "benchmarks" SKIP "BENCH=0"
        return
    fi
    stage_env && needs_gpu || return
    local py attn_plugins tokens=$work/gpt2-tokens compare_limit
    py=$(command -v "${PYTHON:-python3}")
    if [ -z "$py" ] || ! "$py" -c 'import torch, numpy' > /dev/null 2>&1; then
        record "bench compare-gpu/profile/sdpa" SKIP "no PyTorch and numpy in ${PYTHON:-python3} (set PYTHON)"
        py=
    elif [ ! -f "$tokens/train.bin" ]; then
        "$py" -c 'import sys; sys.path.insert(0, "bench"); import compare_gpu as c; c.make_tokens(sys.argv[1], 4 << 20)' \
            "$tokens"
    fi
    # the step, alone and beside a process polling the GPU as a torch-importing harness does;
    # its runs share what its limit leaves (the first PyTorch run compiles cold)
    compare_limit=$((deadline - SECONDS < 120 ? deadline - SECONDS : 120))
    [ -n "$py" ] && bench "bench-compare-gpu" 120 "$py" bench/compare_gpu.py --gearbox "$gearbox" \
        --python "$py" --data "$tokens" --steps 10 --warmup 3 --repeats 1 --neighbors none,cuda \
        --budget $((compare_limit > 15 ? compare_limit - 10 : 5)) --logs "$log/compare-gpu" \
        --json "$log/compare-gpu.json"
    [ -n "$py" ] && bench "bench-profile" 30 "$gearbox" bench step examples/gpt2_124m.ini --steps 5 \
        --warmup 2 --profile --set data.dir="$tokens" --set data.tokens_per_step=0 \
        --set data.gradient_accumulation_steps=1 --set data.batch_size=16 --set device.plugin=cuda \
        --set precision.plugin=bf16 --set optim.plugin=adamw_fused --set attn.plugin=cudnn
    # every GPT-2 matmul alone, with its epilogue: which products run below the rate
    bench "bench-matmul" 15 "$gearbox" bench matmul G --device cuda --dtype bf16 --epilogues \
        --repeats 5
    attn_plugins=$(find "$build/plugins" -name 'attn-*-cuda.so' |
        sed 's|.*/attn-\(.*\)-cuda\.so$|\1|' | sort | paste -sd, -)
    if [ -z "$attn_plugins" ]; then
        record "bench attn (cuda)" SKIP "no attention plugin built for cuda"
    else
        bench "bench-attn-cuda" 20 "$gearbox" bench attn --device cuda \
            --dtype bf16 --T 1024,4096 --repeats 3 --max-seconds 10 --plugins "$attn_plugins"
    fi
    [ -n "$py" ] && bench "bench-sdpa" 15 "$py" bench/sdpa_attn.py --T 1024,4096 \
        --repeats 3 --json "$log/bench-sdpa.json"
    python3 bench/gpu_summary.py --logs "$log" --out "$log/bench-summary.md" > /dev/null &&
        record "bench summary" PASS "one page: bench-summary.md"
    bench_predictions "$tokens"
    bench_fusions
}

# ---- the stages asked for -------------------------------------------------------------------------
[ "$emulated" = 1 ] && echo "gpu-check: emulated (the SIMT emulator's CUDA plugins, no GPU)"
for i in "${!stages[@]}"; do
    s=${stages[i]}
    begin_stage "$s" "$i"
    have_time "start of the stage" && "stage_$s"
    end_stage || { [ "$s" = build ] && break; }
done
finish
