# Shared by the sharded-state tests of tests/ddp: same_params REFERENCE NAME TOLERANCE
# [STEP]: the parameters of $WORK/NAME's checkpoint at STEP (20 by default) are
# $WORK/REFERENCE's within TOLERANCE (compare-params, the test's $COMPARE).
same_params() {
    local step out
    step=$(printf '%06d' "${4:-20}")
    if out=$("$COMPARE" "$WORK/$1/ckpt-$step.gbk" "$WORK/$2/ckpt-$step.gbk" "$3"); then
        pass "$2: parameters = $1's within $3 ($out)"
    else
        fail "$2: parameters differ from $1's: $out"
    fi
}
