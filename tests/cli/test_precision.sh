#!/usr/bin/env bash
# The 16-bit precision policies end to end: bf16 and fp16 train (the loss falls and stays
# near fp32's), fp16 logs its loss scale and skipped steps, a checkpoint keeps the loss
# scaler's state so a resumed run continues the same scale and losses, the scaler on the
# device logs what it does on the host, bf16's stochastic rounding is reproducible, and
# the combinations that cannot work are refused with a message.
source "$(dirname "$0")/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 10"
lowp=(--set optim.plugin=adamw_fused)
# a small initial scale that grows every 3 clean steps, so the scale moves within 20 steps
scaling=(--set precision.plugin=fp16 --set precision.init_scale=256
         --set precision.growth_interval=3)

final_val() { grep -o '"val_loss": [0-9.]*' "$1/metrics.jsonl" | tail -n 1 | cut -d' ' -f2; }

"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/fp32" > "$WORK/fp32.log" 2>&1 ||
    fail "fp32 run: $(tail -n 3 "$WORK/fp32.log")"
for p in bf16 fp16; do
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/$p" --set precision.plugin=$p \
        "${lowp[@]}" > "$WORK/$p.log" 2>&1 || { fail "$p run: $(tail -n 3 "$WORK/$p.log")"; continue; }
    a=$(final_val "$WORK/fp32") b=$(final_val "$WORK/$p")
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d < 0.05 && d > -0.05) }' &&
        pass "$p: 20 steps end at val loss $b, within 0.05 of fp32's $a" ||
        fail "$p: val loss $b vs fp32 $a"
done
grep -Eq '"loss_scale": [0-9.e+]+, "skipped_steps": [0-9]+' "$WORK/fp16/metrics.jsonl" &&
    pass "fp16 logs its loss scale and skipped steps" || fail "no loss_scale in fp16 metrics"

# resume: steps 11-20 of a resumed run log the same losses and scales as the whole run
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/a" "${lowp[@]}" "${scaling[@]}" \
    > "$WORK/a.log" 2>&1 || fail "scaled run: $(tail -n 3 "$WORK/a.log")"
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/b" "${lowp[@]}" "${scaling[@]}" \
    --resume "$WORK/a/ckpt-000010.gbk" > "$WORK/b.log" 2>&1 ||
    fail "resumed scaled run: $(tail -n 3 "$WORK/b.log")"
after10() { grep -E '"step": (1[1-9]|20), "loss"' "$1" | sed -E 's/, "ms".*"loss_scale"/ scale/'; }
after10 "$WORK/a/metrics.jsonl" > "$WORK/a.steps"
after10 "$WORK/b/metrics.jsonl" | sed -E 's/"skipped_steps": [0-9]+//' > "$WORK/b.cmp"
sed -E 's/"skipped_steps": [0-9]+//' "$WORK/a.steps" > "$WORK/a.cmp"
scales=$(grep -o 'scale: [0-9.e+]*' "$WORK/a.steps" | sort -u | wc -l)
if [ "$(wc -l < "$WORK/a.cmp")" -ne 10 ]; then
    fail "expected 10 logged steps after the checkpoint"
elif [ "$scales" -lt 2 ]; then
    fail "the loss scale did not move in steps 11-20: $(grep -o 'scale: [0-9.e+]*' "$WORK/a.steps" | head -n 3)"
elif cmp -s "$WORK/a.cmp" "$WORK/b.cmp"; then
    pass "fp16 resume continues the loss scale: steps 11-20 identical ($scales scales, last: $(tail -n 1 "$WORK/a.cmp" | cut -c1-120))"
else
    fail "resumed fp16 steps differ:"; diff "$WORK/a.cmp" "$WORK/b.cmp"
fi

# the scaler runs on the device by default (here device/cpu's queued work); on the host
# (device_update = false) every step logs the same loss, scale and skipped steps
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/host" "${lowp[@]}" "${scaling[@]}" \
    --set precision.device_update=false > "$WORK/host.log" 2>&1 ||
    fail "scaled run on the host: $(tail -n 3 "$WORK/host.log")"
figures() { grep -o '"loss": [0-9.]*\|"loss_scale": [0-9.e+]*, "skipped_steps": [0-9]*' "$1"; }
if ! grep -q "^loss scaler: on the device" "$WORK/a.log" ||
    ! grep -q "^loss scaler: on the host" "$WORK/host.log"; then
    fail "loss scaler lines: $(grep -h '^loss scaler' "$WORK/a.log" "$WORK/host.log")"
elif cmp -s <(figures "$WORK/a/metrics.jsonl") <(figures "$WORK/host/metrics.jsonl"); then
    pass "fp16: the scaler on the device and on the host log identical losses and scales"
else
    fail "the scaler on the device and on the host differ:"
    diff <(figures "$WORK/a/metrics.jsonl") <(figures "$WORK/host/metrics.jsonl") | head
fi

# bench step says when the steps it timed skipped their update (a scale of 1e30 overflows
# every one), on the device's scaler and on the host's, and says nothing when none did
for where in true false; do
    "$GEARBOX" bench step "$WORK/run.ini" --steps 2 --warmup 0 "${lowp[@]}" \
        --set precision.plugin=fp16 --set precision.init_scale=1e30 \
        --set precision.device_update=$where > "$WORK/skip-$where.txt" 2>&1 ||
        fail "bench step, device_update = $where: $(tail -n 3 "$WORK/skip-$where.txt")"
    grep -q "^loss scaler: 2 of the 2 timed steps skipped the optimizer's update" \
        "$WORK/skip-$where.txt" &&
        pass "bench step names the timed steps the scaler skipped (device_update = $where)" ||
        fail "no skipped steps said (device_update = $where): $(tail -n 2 "$WORK/skip-$where.txt")"
done
"$GEARBOX" bench step "$WORK/run.ini" --steps 2 --warmup 2 "${lowp[@]}" "${scaling[@]}" \
    > "$WORK/noskip.txt" 2>&1 || fail "bench step: $(tail -n 3 "$WORK/noskip.txt")"
! grep -q "timed steps* skipped" "$WORK/noskip.txt" &&
    pass "bench step says nothing of skips when the scale of 256 skips none" ||
    fail "skips said at scale 256: $(grep 'skipped' "$WORK/noskip.txt")"

# stochastic rounding of the bf16 weight copy: trains near fp32, is reproducible, and is not
# round-to-nearest under another name
for r in 1 2; do
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/sr$r" --set precision.plugin=bf16 \
        --set precision.stochastic_rounding=true "${lowp[@]}" > "$WORK/sr$r.log" 2>&1 ||
        fail "bf16 with stochastic rounding: $(tail -n 3 "$WORK/sr$r.log")"
done
losses() { grep -o '"loss": [0-9.]*' "$1/metrics.jsonl"; }
sr=$(final_val "$WORK/sr1") a=$(final_val "$WORK/fp32")
if ! cmp -s <(losses "$WORK/sr1") <(losses "$WORK/sr2"); then
    fail "two bf16 runs with stochastic rounding differ"
elif cmp -s <(losses "$WORK/sr1") <(losses "$WORK/bf16"); then
    fail "stochastic rounding gave the same losses as round-to-nearest"
elif awk -v a="$a" -v b="$sr" 'BEGIN { d = a - b; exit !(d < 0.05 && d > -0.05) }'; then
    pass "bf16 stochastic rounding: reproducible, not round-to-nearest, val loss $sr vs fp32 $a"
else
    fail "bf16 stochastic rounding: val loss $sr vs fp32 $a"
fi

# refused from the descriptors' capabilities, before any work, naming both plugins
expect_error "check: bf16 with an optimizer that keeps no bf16 copy" 2 \
    "[optim] plugin = adamw cannot write the bf16 weight copy that [precision] plugin = bf16" -- \
    "$GEARBOX" check "$WORK/run.ini" --set precision.plugin=bf16
[ ! -e "$WORK/x" ] || fail "a refused run made its out_dir"
expect_error "train: bf16 with an optimizer that keeps no bf16 copy" 2 \
    "[optim] plugin = adamw cannot write the bf16 weight copy" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/x" --set precision.plugin=bf16
# attn = auto times its candidates in the run's dtype
"$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/auto16" --set precision.plugin=bf16 \
    "${lowp[@]}" --set attn.plugin=auto --set run.steps=5 > "$WORK/auto16.log" 2>&1 &&
    grep -q "^attn auto: chose .*, bf16: " "$WORK/auto16.log" &&
    grep -q "^done: 5 steps" "$WORK/auto16.log" &&
    pass "bf16 with attn = auto trains ($(grep '^attn auto: chose' "$WORK/auto16.log" | cut -c1-60))" ||
    fail "bf16 with attn = auto: $(tail -n 3 "$WORK/auto16.log")"
expect_error "tf32 on the cpu" 2 "tf32 is a CUDA tensor-core matmul mode" -- \
    "$GEARBOX" train "$WORK/run.ini" --set run.out_dir="$WORK/y" --set precision.plugin=tf32
"$GEARBOX" check "$WORK/run.ini" --set precision.plugin=auto > "$WORK/auto.txt" 2>&1 &&
    grep -q "^precision: auto chose \(bf16\|fp16\|fp32\): " "$WORK/auto.txt" &&
    pass "precision = auto says what it chose and why ($(grep '^precision: auto' "$WORK/auto.txt" | cut -c1-150))" ||
    fail "precision = auto: $(head -c 600 "$WORK/auto.txt")"
# auto on CPUs this machine may not be (GEARBOX_CPU_FEATURES injects their features): it
# never picks what the optimizer refuses, and says what it weighed
auto_on() { # FEATURES OPTIM EXPECTED TEXT
    local out="$WORK/auto-$1-$2.txt"
    GEARBOX_CPU_FEATURES=$1 "$GEARBOX" train "$WORK/run.ini" --set precision.plugin=auto \
        --set optim.plugin="$2" --set run.steps=2 --set run.out_dir="$WORK/auto-$1-$2" \
        > "$out" 2>&1 &&
        grep -q "^precision: auto chose $3: .*$4" "$out" && grep -q "^done: 2 steps" "$out" &&
        pass "precision = auto on $1 with $2: $3 ($(grep '^precision: auto' "$out" | cut -c1-160))" ||
        fail "precision = auto on $1 with $2, expected $3: $(head -c 600 "$out")"
}
auto_on avx2,fma,avx512f,avx512_bf16,amx_tile,amx_bf16 adamw fp32 "adamw does not write the bf16 weight copy"
auto_on avx2,fma,avx512f,avx512_bf16,amx_tile,amx_bf16 adamw_fused bf16 "AMX.*amx_bf16 yes.*GEARBOX_CPU_FEATURES"
auto_on avx2,fma,avx512f,avx512_bf16 adamw_fused bf16 "without AMX.*avx512_bf16 yes"
auto_on avx2,fma,avx512f,avx512_fp16 adamw_fused fp32 "f16 matmul is slower.*avx512_fp16 yes"
auto_on avx2,fma adamw_fused fp32 "no bf16 or fp16 arithmetic"
# an AMX CPU with oneDNN held off AMX: its AVX512_BF16 is slower than f32, so fp32
if grep -qw amx_bf16 /proc/cpuinfo; then
    ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 "$GEARBOX" check "$WORK/run.ini" \
        --set precision.plugin=auto --set optim.plugin=adamw_fused > "$WORK/noamx.txt" 2>&1 &&
        grep -q "^precision: auto chose fp32: .*held off AMX" "$WORK/noamx.txt" &&
        pass "precision = auto with oneDNN held off AMX: fp32" ||
        fail "precision = auto with ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16: $(head -c 600 "$WORK/noamx.txt")"
else
    echo "ok: precision = auto with oneDNN held off AMX not checked: this CPU has no AMX (SKIP)"
fi
GEARBOX_CPU_FEATURES=avx2,fma,avx512_bf16 "$GEARBOX" doctor > "$WORK/doctor.txt" 2>&1
grep -q "choices assume.*avx512_bf16 yes.*GEARBOX_CPU_FEATURES=avx2,fma,avx512_bf16" "$WORK/doctor.txt" &&
    pass "doctor shows the injected CPU features" ||
    fail "doctor with GEARBOX_CPU_FEATURES: $(grep -A3 '^cpu' "$WORK/doctor.txt")"
GEARBOX_CPU_FEATURES=avx9 "$GEARBOX" check "$WORK/run.ini" --set precision.plugin=auto \
    > "$WORK/bad.txt" 2>&1
grep -q "GEARBOX_CPU_FEATURES=avx9: unknown feature 'avx9'" "$WORK/bad.txt" &&
    pass "an unknown injected feature is named" || fail "GEARBOX_CPU_FEATURES=avx9: $(head -c 400 "$WORK/bad.txt")"
finish
