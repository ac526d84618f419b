#!/usr/bin/env bash
# Steps and training time until a run's validation loss first reaches a target, from the
# metrics.jsonl of a `gearbox train` run with [run] log_every = 1 and eval_every = K: the
# first evaluation at or below TARGET, and the sum of the logged step times up to and
# including its step (evaluations not counted). Prints the final validation loss too.
# usage: steps_to_target.sh METRICS_JSONL TARGET
set -u
if [ $# -ne 2 ] || [ ! -r "$1" ]; then
    echo "usage: steps_to_target.sh METRICS_JSONL TARGET" >&2
    exit 2
fi
awk -v target="$2" '
function field(name,    at) {
    if (!match($0, "\"" name "\": [-0-9.e+]+"))
        return ""
    at = substr($0, RSTART, RLENGTH)
    return substr(at, index(at, ":") + 2)
}
/"summary"/ { next }
/"ms":/ { ms += field("ms") }
/"val_loss":/ {
    last = field("val_loss")
    if (!found && last + 0 <= target + 0) {
        found = sprintf("%d steps, %.1f s of steps (val %s)", field("step"), ms / 1000, last)
    }
}
END {
    printf "target %s: %s; final val loss %s\n", target, found ? found : "not reached", last
}' "$1"
