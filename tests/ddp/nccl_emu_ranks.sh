# Shared by the tests of tests/ddp that train on emulated GPUs with comm/nccl: each rank a
# process with an emulated GPU of its own (LOCAL_RANK), started with torchrun's variables;
# the ranks this test started are killed when it exits, whatever happened to its checks.
# usage (after tests/cli/lib.sh): source nccl_emu_ranks.sh
started=()
trap 'for pid in "${started[@]}"; do kill -KILL "$pid" 2> /dev/null; done; rm -rf "$WORK"' EXIT

export GEARBOX_CUDA_EMU_THREADS=1   # up to 4 ranks share the machine's cores
export GEARBOX_CUDA_EMU_DEVICES=4   # a GPU for each LOCAL_RANK
# rank 0's bootstrap, the next launch taking the next port: spread by the pid times 97, so
# that two of these tests started together (pids a few apart, as meson starts them) do not
# take the same ports, where one rank 0 failed to listen and its ranks waited out timeout_s
port=$((20000 + $$ * 97 % 20000))

# launch W NAME SETTINGS...: starts W ranks training $WORK/run.ini into $WORK/NAME; rank r
# logs to $WORK/NAME.r.log and traces to $WORK/NAME.r.trace. Their pids go to `ranks`.
launch() {
    local world=$1 name=$2
    shift 2
    port=$((port + 1))
    ranks=()
    for ((r = 0; r < world; r++)); do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            GEARBOX_CUDA_EMU_TRACE="$WORK/$name.$r.trace" "$GEARBOX" train "$WORK/run.ini" \
            --set run.out_dir="$WORK/$name" --set comm.plugin=nccl --set comm.timeout_s=120 \
            --set train.bucket_cap_mb=0.01 "$@" > "$WORK/$name.$r.log" 2>&1 &
        ranks+=($!)
        started+=($!)
    done
}

# train_ranks W NAME SETTINGS...: W ranks (1: one process, comm/single), to the end.
train_ranks() {
    local world=$1 name=$2 r
    shift 2
    if [ "$world" -eq 1 ]; then
        train_run "$name" "$@"
        return
    fi
    launch "$world" "$name" "$@"
    for r in "${!ranks[@]}"; do
        wait "${ranks[$r]}" || fail "$name: rank $r failed: $(tail -n 5 "$WORK/$name.$r.log")"
    done
}
