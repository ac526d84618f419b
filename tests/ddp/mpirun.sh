# Shared by the mpirun tests of tests/ddp: mpirun2 starts 2 ranks, and every mpirun job a
# test started, with the ranks found under it, is ended when the test exits, whatever
# happened to its checks. Only these PIDs are ended, never processes by name.
# usage (after tests/cli/lib.sh): source mpirun.sh MPIRUN
MPIRUN=$1
started=()
# descendants PID: the processes under PID (its children, theirs, ...).
descendants() {
    local kid
    for kid in $(ps -e -o pid= -o ppid= | awk -v p="$1" '$2 == p { print $1 }'); do
        echo "$kid"
        descendants "$kid"
    done
}
# Records a job and the processes under it now (its ranks), so they are ended at exit.
track() { started+=("$1" $(descendants "$1")); }
# A PID is ended only while its command line still names this test's folder: one that
# ended may have been reused by another process since.
end_started() {
    local pid
    for pid in "${started[@]}"; do
        grep -qF "$WORK/" "/proc/$pid/cmdline" 2> /dev/null && kill -KILL "$pid" 2> /dev/null
    done
    return 0
}
trap 'end_started; rm -rf "$WORK"' EXIT
# --oversubscribe: two ranks may be more than the machine's cores; root is allowed
# because CI containers run as root. mpirun goes in the background so its PID is known.
mpirun2() {
    "$MPIRUN" --allow-run-as-root --oversubscribe -np 2 "$@" &
    local job=$!
    started+=("$job")
    wait "$job"
}
