/* Conformance checks of precision plugins: the policy and, where there is one, the loss
 * scaler.
 *
 * The policy must name floating dtypes, leave struct_size alone, keep master weights only
 * for low-precision parameters, and say the same thing every time it is asked. The
 * scaler (precision.h: PyTorch GradScaler semantics) is checked as the core drives it:
 * an inf/nan step is skipped and lowers the scale, a clean step is never skipped and never
 * lowers it, enough clean steps raise it (within a million updates), and its state saved
 * into a buffer and loaded into a fresh instance continues exactly as the original.
 * Everything runs with the plugin's defaults.
 *
 * Left out: what the dtypes do to training, which the core and the device plugins decide.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/precision.h"
#include "kit.h"

#define GROWTH_LIMIT 1000000

static int is_float_dtype(gb_dtype d)
{
    return d == GB_F32 || d == GB_BF16 || d == GB_F16;
}

static void check_eligible(gb_kit *kit, const gb_kit_instance *ki)
{
    const char *check = "eligible on the checks' device";
    const gb_precision_ops *ops = ki->ops;
    char reason[512] = "";
    if (ops->eligible(ki->inst.self, &kit->ctx, reason, sizeof reason)) {
        gb_kit_report(kit, check, GB_KIT_PASS, "runs on %s", gb_device_name(kit->ctx.device));
        return;
    }
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    ops->eligible(ki->inst.self, &kit->ctx, tiny, sizeof tiny);
    if (!reason[0])
        gb_kit_report(kit, check, GB_KIT_FAIL, "eligible() said no without a reason");
    else if (!memchr(tiny, '\0', sizeof tiny))
        gb_kit_report(kit, check, GB_KIT_FAIL, "the reason overran an 8-byte buffer");
    else
        gb_kit_report(kit, check, GB_KIT_UNSUPPORTED, "not eligible on %s: %s",
                      gb_device_name(kit->ctx.device), reason);
}

static void check_policy(gb_kit *kit, const gb_kit_instance *ki)
{
    const char *check = "policy";
    const gb_precision_ops *ops = ki->ops;
    gb_precision_policy p, again;
    /* invalid values everywhere, so a field the plugin never writes shows */
    memset(&p, 0xff, sizeof p);
    p.struct_size = sizeof p;
    gb_status st = ops->policy(ki->inst.self, &p);
    if (st != GB_OK) {
        gb_kit_report_call(kit, check, ki, "policy", st);
        return;
    }
    memset(&again, 0xff, sizeof again);
    again.struct_size = sizeof again;
    ops->policy(ki->inst.self, &again);
    char problems[512] = "";
    if (p.struct_size != sizeof p)
        gb_kit_append(problems, sizeof problems, "policy() changed struct_size to %zu",
                      p.struct_size);
    const struct { const char *name; gb_dtype dtype; } fields[] = {
        {"activation_dtype", p.activation_dtype},
        {"matmul_dtype", p.matmul_dtype},
        {"param_dtype", p.param_dtype},
    };
    for (int i = 0; i < 3; i++)
        if (!is_float_dtype(fields[i].dtype))
            gb_kit_append(problems, sizeof problems, "%s is %d, not f32, bf16 or f16 (left "
                          "unwritten?)", fields[i].name, (int)fields[i].dtype);
    if (p.master_weights != 0 && p.master_weights != 1)
        gb_kit_append(problems, sizeof problems, "master_weights is %d, not 0 or 1",
                      p.master_weights);
    else if (p.master_weights && p.param_dtype == GB_F32)
        gb_kit_append(problems, sizeof problems, "master weights with f32 parameters: there "
                      "is no low-precision copy to keep them for");
    if (memcmp(&p, &again, sizeof p) != 0)
        gb_kit_append(problems, sizeof problems, "a second call answered differently");
    if (problems[0])
        gb_kit_report(kit, check, GB_KIT_FAIL, "%s", problems);
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "activations %s, matmuls %s, params %s, %s",
                      gb_dtype_name(p.activation_dtype), gb_dtype_name(p.matmul_dtype),
                      gb_dtype_name(p.param_dtype),
                      p.master_weights ? "f32 master weights" : "no master weights");
}

/* 1 when the scaler is there to check; its entries come all or none (precision.h). */
static int has_scaler(gb_kit *kit, const gb_precision_ops *ops)
{
    const char *check = "loss scaler entries";
    const struct { const char *name; int set; } entries[] = {
        {"loss_scale", ops->loss_scale != NULL},   {"update", ops->update != NULL},
        {"state_bytes", ops->state_bytes != NULL}, {"save_state", ops->save_state != NULL},
        {"load_state", ops->load_state != NULL},
    };
    int set = 0;
    char missing[128] = "";
    for (int i = 0; i < 5; i++) {
        set += entries[i].set;
        if (!entries[i].set)
            gb_kit_append(missing, sizeof missing, "%s", entries[i].name);
    }
    if (set == 0)
        gb_kit_report(kit, check, GB_KIT_UNSUPPORTED, "no loss scaler (all entries NULL): "
                      "scale 1, no step ever skipped");
    else if (set < 5)
        gb_kit_report(kit, check, GB_KIT_FAIL, "a scaler needs all five entries; NULL: %s",
                      missing);
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "loss_scale, update, state_bytes, save_state, "
                      "load_state");
    return set == 5;
}

/* One update; on failure reports `check` and returns -1. */
static int update(gb_kit *kit, const gb_kit_instance *ki, int found_inf, int *skip,
                  const char *check)
{
    const gb_precision_ops *ops = ki->ops;
    *skip = -1;
    gb_status st = ops->update(ki->inst.self, found_inf, skip);
    if (st != GB_OK) {
        gb_kit_report_call(kit, check, ki, "update", st);
        return -1;
    }
    return 0;
}

static void check_backoff(gb_kit *kit, const gb_kit_instance *ki, const char *check)
{
    const gb_precision_ops *ops = ki->ops;
    float before = ops->loss_scale(ki->inst.self);
    int skip_inf, skip_clean;
    if (update(kit, ki, 1, &skip_inf, check) == 0) {
        float after_inf = ops->loss_scale(ki->inst.self);
        if (update(kit, ki, 0, &skip_clean, check) == 0) {
            float after_clean = ops->loss_scale(ki->inst.self);
            char problems[512] = "";
            if (!(before > 0) || !isfinite(before))
                gb_kit_append(problems, sizeof problems, "initial scale %g", (double)before);
            if (skip_inf != 1)
                gb_kit_append(problems, sizeof problems, "found_inf = 1 gave skip_step %d",
                              skip_inf);
            if (!(after_inf < before))
                gb_kit_append(problems, sizeof problems, "scale %g after an inf, %g before",
                              (double)after_inf, (double)before);
            if (skip_clean != 0)
                gb_kit_append(problems, sizeof problems, "a clean step gave skip_step %d",
                              skip_clean);
            if (!(after_clean >= after_inf))
                gb_kit_append(problems, sizeof problems, "a clean step lowered the scale");
            if (problems[0])
                gb_kit_report(kit, check, GB_KIT_FAIL, "%s", problems);
            else
                gb_kit_report(kit, check, GB_KIT_PASS, "scale %g -> %g after an inf", (double)before,
                              (double)after_inf);
        }
    }
}

static void check_growth(gb_kit *kit, const gb_kit_instance *ki, const char *check)
{
    const gb_precision_ops *ops = ki->ops;
    float start = ops->loss_scale(ki->inst.self), scale = start;
    int64_t steps = 0;
    int skip = 0;
    while (steps < GROWTH_LIMIT && scale <= start) {
        if (update(kit, ki, 0, &skip, check))
            return;
        steps++;
        float now = ops->loss_scale(ki->inst.self);
        if (skip != 0 || now < scale) {
            gb_kit_report(kit, check, GB_KIT_FAIL, "clean step %lld %s", (long long)steps,
                          skip != 0 ? "was skipped" : "lowered the scale");
            return;
        }
        scale = now;
    }
    if (scale > start)
        gb_kit_report(kit, check, GB_KIT_PASS, "%g -> %g after %lld clean steps", (double)start,
                      (double)scale, (long long)steps);
    else
        gb_kit_report(kit, check, GB_KIT_FAIL, "the scale stayed at %g for %d clean steps",
                      (double)start, GROWTH_LIMIT);
}

/* Step i of a fixed sequence of clean and inf/nan steps. */
static int found_inf_at(int i)
{
    return i % 13 == 5 || i % 29 == 0;
}

/* Updates `ki` over steps first..last, recording the scale and skip of each. */
static int replay(gb_kit *kit, const gb_kit_instance *ki, int first, int last, float *scales,
                  int *skips, const char *check)
{
    const gb_precision_ops *ops = ki->ops;
    for (int i = first; i <= last; i++) {
        if (update(kit, ki, found_inf_at(i), &skips[i - first], check))
            return -1;
        scales[i - first] = ops->loss_scale(ki->inst.self);
    }
    return 0;
}

static void check_state(gb_kit *kit)
{
    enum { HALF = 40, STEPS = 60 };
    const char *check = "scaler: state save/load round trip";
    gb_kit_instance a, b;
    if (gb_kit_create_tested(kit, &a, check, NULL, 0))
        return;
    const gb_precision_ops *ops = a.ops;
    float scales[HALF], want_scales[STEPS], got_scales[STEPS];
    int skips[HALF], want_skips[STEPS], got_skips[STEPS];
    size_t bytes = ops->state_bytes(a.inst.self);
    void *saved = gb_kit_host_alloc(kit, bytes);
    gb_status st = GB_OK;
    if (!saved) {
        gb_kit_report_memory(kit, check);
    } else if (bytes == 0) {
        gb_kit_report(kit, check, GB_KIT_FAIL, "state_bytes() is 0: the scale could not be "
                      "saved in checkpoints");
    } else if (replay(kit, &a, 0, HALF - 1, scales, skips, check) == 0) {
        if ((st = ops->save_state(a.inst.self, saved)) != GB_OK)
            gb_kit_report_call(kit, check, &a, "save_state", st);
        else if (replay(kit, &a, HALF, HALF + STEPS - 1, want_scales, want_skips, check) == 0 &&
                 gb_kit_create_tested(kit, &b, check, NULL, 0) == 0) {
            if ((st = ops->load_state(b.inst.self, saved)) != GB_OK)
                gb_kit_report_call(kit, check, &b, "load_state", st);
            else if (replay(kit, &b, HALF, HALF + STEPS - 1, got_scales, got_skips, check) == 0) {
                int differ = 0;
                for (int i = 0; i < STEPS; i++)
                    differ += got_scales[i] != want_scales[i] || got_skips[i] != want_skips[i];
                if (differ)
                    gb_kit_report(kit, check, GB_KIT_FAIL, "loaded into a new instance, %d of "
                                  "the next %d updates differ from the original's", differ,
                                  STEPS);
                else
                    gb_kit_report(kit, check, GB_KIT_PASS, "%zu bytes; %d updates after "
                                  "loading match the original's", bytes, STEPS);
            }
            gb_kit_destroy(&b);
        }
    }
    gb_kit_destroy(&a);
}

/* check(kit, ki, name) on a new instance of the plugin under test, destroyed after; one
 * that cannot be created is reported as `name`. */
static void on_new_instance(gb_kit *kit, const char *name,
                            void (*check)(gb_kit *, const gb_kit_instance *, const char *))
{
    gb_kit_instance ki;
    if (gb_kit_create_tested(kit, &ki, name, NULL, 0))
        return;
    check(kit, &ki, name);
    gb_kit_destroy(&ki);
}

void gb_kit_check_precision(gb_kit *kit)
{
    gb_kit_instance ki;
    if (gb_kit_create_tested(kit, &ki, "precision: create", NULL, 0))
        return;
    check_eligible(kit, &ki);
    check_policy(kit, &ki);
    gb_kit_destroy(&ki);
    if (has_scaler(kit, kit->plugin->desc->ops)) {
        on_new_instance(kit, "scaler: an inf skips the step, scale drops", check_backoff);
        on_new_instance(kit, "scaler: grows after clean steps", check_growth);
        check_state(kit);
    }
}
