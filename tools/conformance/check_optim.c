/* Conformance checks of optimizer plugins: the properties the core relies on, on a small
 * problem laid out as the core lays out a model.
 *
 * 4099 parameters in three groups (decay, no decay, decay), a few steps of seeded
 * gradients; a plugin with bind_params (ABI 1.8) sees them as a (32, 64) hidden matrix, a
 * bias and a (38, 53) embedding, and gets the workspace it asks for. The checks: the state buffer is everything (saved after step 3, loaded into
 * a fresh instance at another address, the run continues bit-identically, as a resumed
 * run must); a learning rate of 0 with weight decay 0 moves nothing; weight decay touches
 * only groups that decay; loss-scale removal and clipping are folded into the step
 * exactly as optim.h's formula says (checked against the same steps fed gradients that
 * were unscaled and clipped beforehand, with the scale and the clip changing from step to
 * step); the optional low-precision copy and grad_norm_sq entries, when offered, agree
 * with the f32 values. A plugin whose name starts with "adamw" must also match
 * optim/adamw step for step within 1e-7 abs + 1e-6 rel.
 *
 * Left out: convergence, speed, and any mathematics beyond the identities above, since
 * an optimizer is free to update parameters however it likes.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/optim.h"
#include "kit.h"

#define N 4099
#define N_GROUPS 3

static const gb_param_group groups[N_GROUPS] = {{0, 2048, 1}, {2048, 37, 0}, {2085, 2014, 1}};
/* The same ranges as tensors, for an optimizer with bind_params (ABI 1.8): a hidden matrix,
 * a bias and an embedding (which decays as a matrix does, but is no hidden matrix). */
static const gb_optim_param tensors[N_GROUPS] = {
    {"h.0.attn.c_proj.weight", 0, 32, 64, GB_PARAM_MATRIX, 1, GB_F32, 0},
    {"h.0.attn.c_proj.bias", 2048, 1, 37, GB_PARAM_BIAS, 0, GB_F32, 0},
    {"wte", 2085, 38, 53, GB_PARAM_EMBEDDING, 1, GB_F32, 1},
};
/* The schedule's peak the steps report (lr_max): the largest lr a check runs at. */
#define LR_MAX 1e-2f

/* How the steps of a run are fed. */
typedef struct plan {
    float lr;
    int vary_scale;        /* the loss scale and the clip threshold change every step */
    int fold;              /* 1: the step removes the scale and clips (the core's way);
                              0: gradients arrive unscaled and clipped, done here */
    uint32_t zero_groups;  /* bit k: group k gets zero gradients */
    gb_dtype lowp;         /* GB_BF16 or GB_F16: also write params_lowp; GB_F32: no copy */
} plan;

/* One optimizer instance and its buffers: device memory for the plugin under test, host
 * memory for the reference. */
typedef struct optim_run {
    gb_kit *kit;
    const gb_kit_instance *ki;
    int on_device;
    float *params, *grads, *norm_sq;
    void *state, *lowp, *workspace;
    size_t state_bytes, workspace_bytes;
    float *host_grads;   /* (N) scratch */
} optim_run;

static int put(optim_run *r, void *dst, const void *src, size_t bytes)
{
    if (r->on_device)
        return gb_kit_upload(r->kit, dst, src, bytes);
    memcpy(dst, src, bytes);
    return 0;
}

static int get(optim_run *r, void *dst, const void *src, size_t bytes)
{
    if (r->on_device)
        return gb_kit_download(r->kit, dst, src, bytes);
    memcpy(dst, src, bytes);
    return 0;
}

static void *take(optim_run *r, size_t bytes)
{
    return r->on_device ? gb_kit_device_alloc(r->kit, bytes) : gb_kit_host_alloc(r->kit, bytes);
}

/* The parameters every run starts from. */
static const float *initial_params(gb_kit *kit)
{
    float *p = gb_kit_host_alloc(kit, N * sizeof(float));
    if (p) {
        gb_rng rng = gb_rng_stream(13, 0, 0, 0);
        gb_kit_fill(&rng, p, N, -1, 1);
    }
    return p;
}

/* The tensors handed to bind_params, whose workspace size lands in r. */
static gb_status bind_tensors(optim_run *r)
{
    const gb_optim_ops *ops = r->ki->ops;
    gb_optim_params table = {sizeof table, tensors, N_GROUPS, sizeof tensors[0], N};
    return ops->bind_params(r->ki->inst.self, &table, &r->workspace_bytes);
}

/* Buffers for a run of `ki` from `params` with zeroed state (as the core zeroes it before
 * step 1). 0, or -1 after a failed allocation or copy. */
static int start_run(gb_kit *kit, optim_run *r, const gb_kit_instance *ki, int on_device,
                     const float *params)
{
    const gb_optim_ops *ops = ki->ops;
    *r = (optim_run){.kit = kit, .ki = ki, .on_device = on_device};
    if (GB_OPTIM_HAS(ops, bind_params) && bind_tensors(r) != GB_OK)
        return -1;
    r->state_bytes = ops->state_bytes(ki->inst.self, N);
    void *zeros = gb_kit_host_alloc(kit, r->state_bytes);
    r->params = take(r, N * sizeof(float));
    r->grads = take(r, N * sizeof(float));
    r->norm_sq = take(r, sizeof(float));
    r->state = take(r, r->state_bytes);
    r->lowp = take(r, N * sizeof(uint16_t));
    r->host_grads = gb_kit_host_alloc(kit, N * sizeof(float));
    if (!zeros || !r->params || !r->grads || !r->norm_sq || !r->state || !r->lowp ||
        !r->host_grads || (r->workspace_bytes && !(r->workspace = take(r, r->workspace_bytes))))
        return -1;
    memset(zeros, 0, r->state_bytes);
    return put(r, r->params, params, N * sizeof(float)) ||
                   put(r, r->state, zeros, r->state_bytes)
               ? -1
               : 0;
}

/* Step s (from 1) of `pl`. */
static gb_status run_step(optim_run *r, const plan *pl, int64_t s)
{
    static const float scales[4] = {1024, 256, 4096, 1};
    static const double clip_fractions[4] = {0.5, 2.0, 0.1, 0.7};  /* >= 1: no clipping */
    float *g = r->host_grads;
    gb_rng rng = gb_rng_stream(11, (uint64_t)s, 0, 0);
    gb_kit_fill(&rng, g, N, -1, 1);
    for (int k = 0; k < N_GROUPS; k++)
        if (pl->zero_groups & (1u << k))
            memset(g + groups[k].offset, 0, (size_t)groups[k].count * sizeof(float));
    double raw_sq = 0.0;
    for (int i = 0; i < N; i++)
        raw_sq += (double)g[i] * g[i];
    float scale = pl->vary_scale ? scales[s % 4] : 1.0f;
    float max_norm = pl->vary_scale ? (float)(clip_fractions[s % 4] * sqrt(raw_sq)) : 0.0f;
    gb_optim_step_args a = {
        .struct_size = sizeof a,
        .params = r->params,
        .grads = r->grads,
        .state = r->state,
        .n = N,
        .groups = groups,
        .n_groups = N_GROUPS,
        .step = s,
        .lr = pl->lr,
        .inv_loss_scale = 1.0f,
        .params_lowp = pl->lowp != GB_F32 ? r->lowp : NULL,
        .lowp_dtype = pl->lowp,
        .workspace = r->workspace,
        .lr_max = LR_MAX,
    };
    if (pl->fold) {
        /* powers of two: scaling is exact, so both ways see the same gradients */
        for (int i = 0; i < N; i++)
            g[i] *= scale;
        float norm_sq = (float)(raw_sq * scale * scale);
        if (put(r, r->norm_sq, &norm_sq, sizeof norm_sq))
            return r->kit->memory_status;
        a.grad_norm_sq = r->norm_sq;
        a.max_norm = max_norm;
        a.inv_loss_scale = 1.0f / scale;
    } else if (max_norm > 0) {
        double clip = fmin(1.0, (double)max_norm / (sqrt(raw_sq) + 1e-6));
        for (int i = 0; i < N; i++)
            g[i] = (float)(g[i] * clip);
    }
    if (put(r, r->grads, g, N * sizeof(float)))
        return r->kit->memory_status;
    const gb_optim_ops *ops = r->ki->ops;
    return ops->step(r->ki->inst.self, &a);
}

/* Steps first..last; on failure reports `check` and returns -1. */
static int run_steps(optim_run *r, const plan *pl, int64_t first, int64_t last,
                     const char *check)
{
    for (int64_t s = first; s <= last; s++) {
        gb_status st = run_step(r, pl, s);
        if (st == GB_OK)
            continue;
        if (r->kit->memory_error[0])
            gb_kit_report_memory(r->kit, check);
        else if (!r->on_device)
            gb_kit_report(r->kit, check, GB_KIT_FAIL, "the reference optim/adamw failed at "
                          "step %lld (%s): %s", (long long)s, gb_status_name(st),
                          r->ki->inst.error);
        else
            gb_kit_report_call(r->kit, check, r->ki, "step", st);
        return -1;
    }
    return 0;
}

/* Runs `ki` from `params` and `state` (NULL: zeroed) through steps first..last and returns
 * the parameters it ends with, on the host; NULL after reporting `check`. */
static float *run_from(gb_kit *kit, optim_run *r, const gb_kit_instance *ki, int on_device,
                       const float *params, const void *state, int64_t first, int64_t last,
                       const plan *pl, const char *check)
{
    float *end = gb_kit_host_alloc(kit, N * sizeof(float));
    if (!end || start_run(kit, r, ki, on_device, params) ||
        (state && put(r, r->state, state, r->state_bytes))) {
        gb_kit_report_memory(kit, check);
        return NULL;
    }
    if (run_steps(r, pl, first, last, check))
        return NULL;
    if (get(r, end, r->params, N * sizeof(float))) {
        gb_kit_report_memory(kit, check);
        return NULL;
    }
    return end;
}

/* run_from on a new instance of the plugin under test (with `overrides`), on the device,
 * destroyed after: the parameters it ends with, NULL after reporting `check`. */
static float *run_tested(gb_kit *kit, optim_run *r, const char *check,
                         const char *const *overrides, int n_overrides, const float *params,
                         const void *state, int64_t first, int64_t last, const plan *pl)
{
    gb_kit_instance ki;
    if (gb_kit_create_tested(kit, &ki, check, overrides, n_overrides))
        return NULL;
    float *end = run_from(kit, r, &ki, 1, params, state, first, last, pl, check);
    gb_kit_destroy(&ki);
    return end;
}

/* "key=value" for the plugin under test's float `key` when it has one and `value` lies in
 * its range; returns how many overrides were written (0 or 1). */
static int override(const gb_kit *kit, const char *key, double value, char *buf, size_t cap)
{
    int i = gb_kit_option(kit, key);
    if (i < 0)
        return 0;
    const gb_option *o = &kit->plugin->desc->options[i];
    if (o->type != GB_OPT_FLOAT || value < o->min || value > o->max)
        return 0;
    snprintf(buf, cap, "%s=%g", key, value);
    return 1;
}

/* Steps 1..3 of run_tested from `start` with weight_decay = `decay` where the plugin has
 * that key (*has_key says whether it did). */
static float *run_with_decay(gb_kit *kit, optim_run *r, const char *check, double decay,
                             const float *start, const plan *pl, int *has_key)
{
    char wd[64];
    const char *overrides[] = {wd};
    *has_key = override(kit, "weight_decay", decay, wd, sizeof wd);
    return run_tested(kit, r, check, overrides, *has_key, start, NULL, 1, 3, pl);
}

/* The first half of a run, whose state is copied out after step 3 before the instance
 * goes and its buffers turn to NaN (a plugin that kept a pointer to them shows). Returns
 * the parameters after step 3 and sets *state; NULL after reporting `check`. */
static float *first_half(gb_kit *kit, const float *start, const plan *pl, const char *check,
                         void **state)
{
    optim_run r;
    float *params = run_tested(kit, &r, check, NULL, 0, start, NULL, 1, 3, pl);
    if (!params)
        return NULL;
    size_t poison = r.state_bytes / sizeof(float) > N ? r.state_bytes / sizeof(float) : N;
    float *nan = gb_kit_host_alloc(kit, poison * sizeof(float));
    *state = gb_kit_host_alloc(kit, r.state_bytes);
    if (!nan || !*state || get(&r, *state, r.state, r.state_bytes)) {
        gb_kit_report_memory(kit, check);
        return NULL;
    }
    gb_kit_fill_nan(nan, poison);
    if (put(&r, r.state, nan, r.state_bytes) || put(&r, r.params, nan, N * sizeof(float))) {
        gb_kit_report_memory(kit, check);
        return NULL;
    }
    return params;
}

/* Saved after step 3 and loaded into a fresh instance with buffers elsewhere, the run goes
 * on as if nothing happened: what checkpoints and --resume rely on. */
static void check_state_round_trip(gb_kit *kit, const float *start)
{
    const char *check = "state save/load round trip (resume)";
    const plan pl = {.lr = 1e-2f, .fold = 1, .lowp = GB_F32};
    optim_run a, c;
    float *want = run_tested(kit, &a, check, NULL, 0, start, NULL, 1, 6, &pl);
    void *state = NULL;
    float *middle = want ? first_half(kit, start, &pl, check, &state) : NULL;
    float *got = middle ? run_tested(kit, &c, check, NULL, 0, middle, state, 4, 6, &pl) : NULL;
    if (!got)
        return;
    size_t differ = gb_kit_bits_differ(got, want, N);
    if (differ)
        gb_kit_report(kit, check, GB_KIT_FAIL, "after loading the state saved at step 3 into a "
                      "new instance, steps 4-6 end with %zu of %d parameters different from "
                      "an uninterrupted run: the state buffer must hold everything, as plain "
                      "position-independent data", differ, N);
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "%zu bytes of state for %d parameters; resumed "
                      "at step 4 bit-identically", a.state_bytes, N);
}

static void check_zero_lr(gb_kit *kit, const float *start)
{
    const char *check = "lr 0, weight decay 0: params unchanged";
    optim_run r;
    const plan pl = {.lr = 0.0f, .fold = 1, .lowp = GB_F32};
    int n;
    float *got = run_with_decay(kit, &r, check, 0.0, start, &pl, &n);
    if (!got)
        return;
    size_t moved = gb_kit_bits_differ(got, start, N);
    if (moved)
        gb_kit_report(kit, check, GB_KIT_FAIL, "%zu of %d parameters moved in 3 steps", moved,
                      N);
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "3 steps, nothing moved%s",
                      n ? "" : " (no weight_decay key)");
}

/* Group 1 (no decay) and group 2 (decay) get zero gradients: group 1 must keep its bits,
 * and with a weight decay group 2 must shrink. */
static void check_decay_groups(gb_kit *kit, const float *start)
{
    const char *check = "weight decay only where group.decay";
    optim_run r;
    const plan pl = {.lr = 1e-2f, .fold = 1, .zero_groups = 1u << 1 | 1u << 2, .lowp = GB_F32};
    int n;
    float *got = run_with_decay(kit, &r, check, 0.1, start, &pl, &n);
    if (!got)
        return;
    const gb_param_group *keep = &groups[1], *shrink = &groups[2];
    size_t moved = gb_kit_bits_differ(got + keep->offset, start + keep->offset,
                                      (size_t)keep->count);
    int64_t kept = 0;
    for (int64_t i = shrink->offset; i < shrink->offset + shrink->count; i++)
        kept += start[i] != 0.0f && !(fabsf(got[i]) < fabsf(start[i]));
    if (moved)
        gb_kit_report(kit, check, GB_KIT_FAIL, "%zu of the %lld parameters of a group with "
                      "decay = 0 and zero gradients moved", moved, (long long)keep->count);
    else if (n && kept)
        gb_kit_report(kit, check, GB_KIT_FAIL, "with weight_decay 0.1, %lld of the %lld "
                      "parameters of a decaying group with zero gradients did not shrink",
                      (long long)kept, (long long)shrink->count);
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "%s",
                      n ? "decay = 0 group kept its bits; decay = 1 group shrank"
                        : "decay = 0 group kept its bits (no weight_decay key)");
}

/* The same gradients two ways: scaled and clipped inside the step from grad_norm_sq,
 * max_norm and inv_loss_scale, or unscaled and clipped before it. */
static void check_scale_and_clip(gb_kit *kit, const float *start)
{
    const char *check = "loss scale and clipping folded into step";
    const plan fold = {.lr = 1e-2f, .vary_scale = 1, .fold = 1, .lowp = GB_F32};
    const plan before = {.lr = 1e-2f, .vary_scale = 1, .fold = 0, .lowp = GB_F32};
    optim_run a, b;
    float *got = run_tested(kit, &a, check, NULL, 0, start, NULL, 1, 4, &fold);
    float *want = got ? run_tested(kit, &b, check, NULL, 0, start, NULL, 1, 4, &before) : NULL;
    if (!want)
        return;
    char detail[256];
    if (gb_kit_close(got, want, N, 1e-6, 1e-5, detail, sizeof detail))
        gb_kit_report(kit, check, GB_KIT_PASS, "4 steps, loss scale 1024/256/4096/1, clipped "
                      "to 0.5/-/0.1/0.7 of the norm: %s", detail);
    else
        gb_kit_report(kit, check, GB_KIT_FAIL, "g_scale = inv_loss_scale * min(1, max_norm / "
                      "(sqrt(norm_sq) * inv_loss_scale + 1e-6)) is not what the step applies: "
                      "%s", detail);
}

/* Both plugins with the same values for the keys they share, on every kind of step. */
static void check_against_adamw(gb_kit *kit, const float *start)
{
    const char *check = "matches optim/adamw";
    static const char *const adamw_keys[] = {"beta1", "beta2", "eps", "weight_decay"};
    const gb_plugin_desc *d = kit->plugin->desc;
    char texts[4][128];
    const char *overrides[4];
    int n = 0;
    for (size_t k = 0; k < 4; k++) {
        int i = gb_kit_option(kit, adamw_keys[k]);
        if (i >= 0) {
            snprintf(texts[n], sizeof texts[n], "%s=%s", adamw_keys[k],
                     d->options[i].default_value);
            overrides[n] = texts[n];
            n++;
        }
    }
    const plan pl = {.lr = 1e-2f, .vary_scale = 1, .fold = 1, .lowp = GB_F32};
    gb_kit_instance ref;
    optim_run a, b;
    float *got = run_tested(kit, &a, check, NULL, 0, start, NULL, 1, 8, &pl);
    if (!got ||
        gb_kit_create_reference(kit, &ref, GB_KIND_OPTIM, "adamw", check, overrides, n))
        return;
    float *want = run_from(kit, &b, &ref, 0, start, NULL, 1, 8, &pl, check);
    gb_kit_destroy(&ref);
    if (!want)
        return;
    char detail[256];
    if (!gb_kit_close(got, want, N, 1e-7, 1e-6, detail, sizeof detail))
        gb_kit_report(kit, check, GB_KIT_FAIL, "after 8 steps: %s", detail);
    else if (gb_kit_bits_differ(got, want, N) == 0)
        gb_kit_report(kit, check, GB_KIT_PASS, "8 steps with its defaults, bit-identical");
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "8 steps with its defaults: %s", detail);
}

static float from_bf16(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float from_f16(uint16_t h)
{
    int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    float magnitude = exponent == 0    ? ldexpf((float)mantissa, -24)
                      : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                       : ldexpf((float)(mantissa | 0x400), exponent - 25);
    return (h & 0x8000) ? -magnitude : magnitude;
}

/* With params_lowp set, the f32 parameters are those of a step without it, and the copy
 * holds them rounded to the low-precision dtype. */
static void check_lowp(gb_kit *kit, const float *start, gb_dtype dtype)
{
    char check[64];
    snprintf(check, sizeof check, "params_lowp (%s copy in the same pass)",
             gb_dtype_name(dtype));
    const plan lowp = {.lr = 1e-2f, .fold = 1, .lowp = dtype};
    const plan f32 = {.lr = 1e-2f, .fold = 1, .lowp = GB_F32};
    optim_run a, b;
    float *got = run_tested(kit, &a, check, NULL, 0, start, NULL, 1, 1, &lowp);
    uint16_t *copy = gb_kit_host_alloc(kit, N * sizeof(uint16_t));
    if (!got)
        return;
    if (!copy || get(&a, copy, a.lowp, N * sizeof(uint16_t))) {
        gb_kit_report_memory(kit, check);
        return;
    }
    float *want = run_tested(kit, &b, check, NULL, 0, start, NULL, 1, 1, &f32);
    if (!want)
        return;
    /* half an ulp is the rounding error; a whole one leaves room for truncation */
    double rel = dtype == GB_BF16 ? 0x1p-8 : 0x1p-10, abs = dtype == GB_BF16 ? 0 : 0x1p-24;
    int64_t off = 0;
    for (int i = 0; i < N; i++) {
        float low = dtype == GB_BF16 ? from_bf16(copy[i]) : from_f16(copy[i]);
        off += !(fabs((double)low - got[i]) <= abs + rel * fabs((double)got[i]));
    }
    size_t differ = gb_kit_bits_differ(got, want, N);
    if (differ)
        gb_kit_report(kit, check, GB_KIT_FAIL, "the f32 parameters differ in %zu values from "
                      "a step without params_lowp", differ);
    else if (off)
        gb_kit_report(kit, check, GB_KIT_FAIL, "%lld of %d %s values are not the f32 "
                      "parameters rounded", (long long)off, N, gb_dtype_name(dtype));
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "f32 parameters as without it; the copy is "
                      "within one %s ulp", gb_dtype_name(dtype));
}

static void check_grad_norm_sq(gb_kit *kit)
{
    const char *check = "grad_norm_sq (optional entry)";
    const gb_optim_ops *ops = kit->plugin->desc->ops;
    if (!ops->grad_norm_sq) {
        gb_kit_report(kit, check, GB_KIT_UNSUPPORTED, "not provided (NULL): the core uses the "
                      "device's sum_squares");
        return;
    }
    gb_kit_instance ki;
    if (gb_kit_create_tested(kit, &ki, check, NULL, 0))
        return;
    float *g = gb_kit_host_alloc(kit, N * sizeof(float));
    float *dg = gb_kit_device_alloc(kit, N * sizeof(float));
    float *dout = gb_kit_device_alloc(kit, sizeof(float));
    float got = NAN;
    if (!g || !dg || !dout) {
        gb_kit_report_memory(kit, check);
        gb_kit_destroy(&ki);
        return;
    }
    gb_rng rng = gb_rng_stream(17, 0, 0, 0);
    gb_kit_fill(&rng, g, N, -3, 3);
    double want = 0.0;
    for (int i = 0; i < N; i++)
        want += (double)g[i] * g[i];
    gb_status st = GB_ERR_NO_MEMORY;
    if (gb_kit_upload(kit, dg, g, N * sizeof(float)) == 0 &&
        (st = ops->grad_norm_sq(ki.inst.self, dout, dg, N)) == GB_OK &&
        gb_kit_download(kit, &got, dout, sizeof got) != 0)
        st = kit->memory_status;
    if (kit->memory_error[0])
        gb_kit_report_memory(kit, check);
    else if (st != GB_OK)
        gb_kit_report_call(kit, check, &ki, "grad_norm_sq", st);
    else if (!(fabs(got - want) <= 1e-5 * want))
        gb_kit_report(kit, check, GB_KIT_FAIL, "%.9g for %d gradients whose squares sum to "
                      "%.9g", (double)got, N, want);
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "within 1e-5 rel of the sum in double");
    gb_kit_destroy(&ki);
}

void gb_kit_check_optim(gb_kit *kit)
{
    const float *start = initial_params(kit);
    if (!start) {
        gb_kit_report_memory(kit, "optim: initial parameters");
        return;
    }
    check_state_round_trip(kit, start);
    check_zero_lr(kit, start);
    check_decay_groups(kit, start);
    check_scale_and_clip(kit, start);
    if (strncmp(kit->plugin->desc->name, "adamw", 5) == 0)
        check_against_adamw(kit, start);
    check_lowp(kit, start, GB_BF16);
    check_lowp(kit, start, GB_F16);
    check_grad_norm_sq(kit);
}
