/* Tests for the CPU AdamW plugins, optim/adamw and optim/adamw_fused, through their plugin
 * interface: descriptor and schema, a replay of torch.optim.AdamW, argument validation,
 * the identities the core relies on, and (adamw_fused) the low-precision copy.
 *
 * The replay feeds adamw.gbt (tests/reference/make_adamw_reference.py) through the plugin
 * as the core would: three tensors in one flat buffer, one group each (the weight
 * decays, bias and gain do not), the squared norm from the plugin's own grad_norm_sq
 * (computed here in double for a plugin without one), clipping to the recorded max_norm
 * and the recorded learning rates, once as recorded and once with the gradients scaled by
 * 1024 and the inverse scale in the step, which must leave the result unchanged. After
 * every one of the ten steps each parameter must satisfy |got - want| <= 1e-6*|want| +
 * 1e-7, and the norms must match clip_grad_norm_'s to 1e-6 relative.
 *
 * The low-precision copy: with lr = 0 and zero gradients a step leaves p exactly as it
 * is, so the bf16 / f16 copy it writes is the conversion of the values put in p, which
 * are the hard cases of optim_test.h (ties, subnormals, overflow, inf, NaN), checked
 * against the exact reference. On an ordinary step the copy must be the reference
 * conversion of the updated p, and writing it must not change p.
 *
 * Usage: test_adamw adamw|adamw_fused PLUGIN.so adamw.gbt
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gbt.h"
#include "optim_test.h"
#include "test_host.h"

#define ATOL 1e-7
#define RTOL 1e-6
#define N_TENSORS 3

static const char *const tensor_names[N_TENSORS] = {"weight", "bias", "gain"};

/* What each plugin offers beyond AdamW's step. */
typedef struct expected {
    const char *name;
    int grad_norm_sq;   /* has its own squared-norm entry */
    int lowp_copy;      /* writes a bf16 / f16 copy in its step (GB_CAP_LOWP_COPY) */
} expected;

static const expected plugins[] = {
    {"adamw", 0, 0},
    {"adamw_fused", 1, 1},
};

/* adamw.gbt, laid out the way the core lays out a model: one flat buffer. */
typedef struct replay {
    int64_t n, steps;
    gb_param_group groups[N_TENSORS];
    const float *hparams;        /* beta1, beta2, eps, weight_decay, max_norm */
    const float *lr;             /* (steps) */
    const float *grad_norm;      /* (steps), as clip_grad_norm_ returned it */
    const gbt_tensor *init[N_TENSORS], *grads[N_TENSORS], *after[N_TENSORS];
} replay;

static int load_replay(const gbt_file *file, replay *r)
{
    const gbt_tensor *hp = gbt_require(file, "hparams", GB_F32, 5);
    const gbt_tensor *lr = gbt_find(file, "lr");
    const gbt_tensor *decay = gbt_require(file, "decay", GB_I32, N_TENSORS);
    if (!hp || !lr || !decay)
        return 0;
    r->steps = lr->numel;
    r->hparams = hp->data;
    r->lr = lr->data;
    const gbt_tensor *norms = gbt_require(file, "grad_norm", GB_F32, r->steps);
    if (!norms)
        return 0;
    r->grad_norm = norms->data;
    r->n = 0;
    for (int k = 0; k < N_TENSORS; k++) {
        char name[64];
        snprintf(name, sizeof name, "init.%s", tensor_names[k]);
        const gbt_tensor *init = gbt_find(file, name);
        if (!init || init->dtype != GB_F32) {
            printf("FAIL: reference tensor %s missing\n", name);
            return 0;
        }
        int64_t count = init->numel;
        r->init[k] = init;
        snprintf(name, sizeof name, "grads.%s", tensor_names[k]);
        r->grads[k] = gbt_require(file, name, GB_F32, r->steps * count);
        snprintf(name, sizeof name, "params.%s", tensor_names[k]);
        r->after[k] = gbt_require(file, name, GB_F32, r->steps * count);
        if (!r->grads[k] || !r->after[k])
            return 0;
        r->groups[k] = (gb_param_group){r->n, count, ((const int32_t *)decay->data)[k]};
        r->n += count;
    }
    return 1;
}

/* dst (n) = the given step's slice of each per-tensor reference, concatenated. */
static void gather_step(const replay *r, const gbt_tensor *const per_tensor[N_TENSORS],
                        int64_t step, float *dst)
{
    for (int k = 0; k < N_TENSORS; k++) {
        int64_t count = r->groups[k].count;
        memcpy(dst + r->groups[k].offset, (const float *)per_tensor[k]->data + step * count,
               (size_t)count * sizeof(float));
    }
}

static int create_default(const gb_plugin_desc *desc, double weight_decay, test_optim *opt)
{
    return test_optim_create(desc, gb_test_host(), 0.9, 0.95, 1e-8, weight_decay, opt);
}

static int check_schema(const expected *e, const gb_plugin_desc *desc)
{
    int failures = gb_test_check_descriptor(desc, GB_KIND_OPTIM, e->name,
                                            GB_DEVICE_CPU | GB_DEVICE_ANY_HOST,
                                            sizeof(gb_optim_ops));
    failures += gb_test_check_option(desc, "beta1", GB_OPT_FLOAT, "0.9");
    failures += gb_test_check_option(desc, "beta2", GB_OPT_FLOAT, "0.95");
    failures += gb_test_check_option(desc, "eps", GB_OPT_FLOAT, "1e-8");
    failures += gb_test_check_option(desc, "weight_decay", GB_OPT_FLOAT, "0.1");
    GB_TEST_CHECK(failures, desc->n_options == 4, "%zu options, expected 4", desc->n_options);
    const gb_optim_ops *ops = desc->ops;
    GB_TEST_CHECK(failures, ops->create && ops->destroy && ops->state_bytes && ops->step &&
                  (ops->grad_norm_sq || !e->grad_norm_sq), "vtable has NULL entries");
    return failures;
}

static int check_create_refuses_open_ends(const gb_plugin_desc *desc)
{
    int failures = 0;
    const struct {
        double beta1, beta2, eps;
        const char *what;
    } cases[] = {
        {1.0, 0.95, 1e-8, "beta1 = 1"},
        {0.9, 1.0, 1e-8, "beta2 = 1"},
        {0.9, 0.95, 0.0, "eps = 0"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        test_optim opt = {desc->ops, NULL};
        gb_test_clear_error();
        gb_value values[8];
        gb_test_default_values(desc, values);
        values[gb_test_option_index(desc, "beta1")].f = cases[c].beta1;
        values[gb_test_option_index(desc, "beta2")].f = cases[c].beta2;
        values[gb_test_option_index(desc, "eps")].f = cases[c].eps;
        gb_status st = opt.ops->create(gb_test_host(), values, gb_test_cpu_ctx(), &opt.self);
        GB_TEST_CHECK(failures, st == GB_ERR_CONFIG && gb_test_last_error()[0],
                      "create with %s returned %d, message \"%s\"", cases[c].what, st,
                      gb_test_last_error());
        if (st == GB_OK)
            opt.ops->destroy(opt.self);
    }
    return failures;
}

/* The squared norm the core would pass: the plugin's own, else the device's (here, in
 * double). */
static float norm_sq_of(const test_optim *opt, const float *grads, int64_t n, int *failures)
{
    if (!opt->ops->grad_norm_sq) {
        double s = 0;
        for (int64_t i = 0; i < n; i++)
            s += (double)grads[i] * grads[i];
        return (float)s;
    }
    float norm_sq = -1;
    gb_status st = opt->ops->grad_norm_sq(opt->self, &norm_sq, grads, n);
    GB_TEST_CHECK(*failures, st == GB_OK, "grad_norm_sq returned %d: %s", st,
                  gb_test_last_error());
    return norm_sq;
}

/* Runs the replay; `loss_scale` multiplies the gradients and its inverse goes in the
 * step, which must leave the result unchanged (1 for the plain replay). */
static int check_replay(const gb_plugin_desc *desc, const replay *r, float loss_scale)
{
    int failures = 0;
    const float *hp = r->hparams;
    test_optim opt;
    if (!test_optim_create(desc, gb_test_host(), hp[0], hp[1], hp[2], hp[3], &opt))
        return 1;
    size_t state_bytes = opt.ops->state_bytes(opt.self, r->n);
    GB_TEST_CHECK(failures, state_bytes == 8 * (size_t)r->n, "state_bytes(%lld) = %zu",
                  (long long)r->n, state_bytes);
    float *params = malloc((size_t)r->n * sizeof(float));
    float *grads = malloc((size_t)r->n * sizeof(float));
    float *want = malloc((size_t)r->n * sizeof(float));
    float *norms = malloc((size_t)r->steps * sizeof(float));
    void *state = calloc(1, state_bytes);
    gather_step(r, r->init, 0, params);

    int clipped = 0;
    for (int64_t s = 0; s < r->steps; s++) {
        gather_step(r, r->grads, s, grads);
        for (int64_t i = 0; i < r->n; i++)
            grads[i] *= loss_scale;
        float norm_sq = norm_sq_of(&opt, grads, r->n, &failures);
        norms[s] = sqrtf(norm_sq) / loss_scale;
        clipped += norms[s] > hp[4];
        gb_optim_step_args args =
            test_step_args(params, grads, state, r->n, r->groups, N_TENSORS, s + 1, r->lr[s]);
        args.grad_norm_sq = &norm_sq;
        args.max_norm = hp[4];
        args.inv_loss_scale = 1.0f / loss_scale;
        gb_status st = opt.ops->step(opt.self, &args);
        GB_TEST_CHECK(failures, st == GB_OK, "step %lld returned %d: %s", (long long)s + 1, st,
                      gb_test_last_error());
        gather_step(r, r->after, s, want);
        char what[96];
        snprintf(what, sizeof what, "%s step %lld params (loss scale %g)", desc->name,
                 (long long)s + 1, loss_scale);
        failures += gbt_compare(what, params, want, r->n, ATOL, RTOL);
    }
    char what[96];
    snprintf(what, sizeof what, "%s grad norms vs clip_grad_norm_", desc->name);
    failures += gbt_compare(what, norms, r->grad_norm, r->steps, 0, 1e-6);
    GB_TEST_CHECK(failures, clipped > 0 && clipped < r->steps,
                  "clipping active on %d of %lld steps: the reference covers only one branch",
                  clipped, (long long)r->steps);
    opt.ops->destroy(opt.self);
    free(params), free(grads), free(want), free(norms), free(state);
    return failures;
}

static int check_grad_norm_validation(const test_optim *opt, const float *grads, int64_t n)
{
    int failures = 0;
    float norm_sq;
    gb_test_clear_error();
    GB_TEST_CHECK(failures, opt->ops->grad_norm_sq(opt->self, NULL, grads, n) ==
                  GB_ERR_INVALID_ARG && gb_test_last_error()[0], "grad_norm_sq into NULL");
    GB_TEST_CHECK(failures, opt->ops->grad_norm_sq(opt->self, &norm_sq, grads, -1) ==
                  GB_ERR_INVALID_ARG, "grad_norm_sq of n = -1");
    GB_TEST_CHECK(failures, opt->ops->grad_norm_sq(opt->self, &norm_sq, NULL, 0) == GB_OK &&
                  norm_sq == 0.0f, "grad_norm_sq of nothing is not 0");
    return failures;
}

/* Every malformed call is refused with a message and leaves the parameters untouched;
 * well-formed groups in any order are accepted. */
static int check_validation(const expected *e, const gb_plugin_desc *desc)
{
    enum { N = 10 };
    int failures = 0;
    test_optim opt;
    if (!create_default(desc, 0.1, &opt))
        return 1;
    float params[N], saved[N], grads[N];
    float state[2 * N] = {0};
    uint16_t lowp[N];
    for (int i = 0; i < N; i++)
        params[i] = saved[i] = 0.5f + (float)i, grads[i] = 0.25f - 0.05f * (float)i;

    const struct {
        gb_param_group groups[2];
        int n_groups;
        const char *what;
    } bad_groups[] = {
        {{{0, 5, 1}, {6, 4, 0}}, 2, "a gap"},
        {{{0, 6, 1}, {4, 4, 0}}, 2, "an overlap with the right total"},
        {{{0, 6, 1}, {6, 5, 0}}, 2, "a group past n"},
        {{{-1, 1, 1}, {0, 10, 0}}, 2, "a negative offset"},
        {{{0, 10, 1}, {10, -1, 0}}, 2, "a negative count"},
        {{{0, 10, 1}}, 0, "no groups"},
    };
    for (size_t c = 0; c < sizeof bad_groups / sizeof bad_groups[0]; c++) {
        gb_optim_step_args args = test_step_args(params, grads, state, N, bad_groups[c].groups,
                                                 bad_groups[c].n_groups, 1, 1e-3f);
        gb_test_clear_error();
        gb_status st = opt.ops->step(opt.self, &args);
        GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                      "groups with %s: status %d, message \"%s\"", bad_groups[c].what, st,
                      gb_test_last_error());
    }

    const gb_param_group ok_groups[2] = {{0, 6, 1}, {6, 4, 0}};
    const char *const bad_args[] = {"NULL params", "NULL grads", "NULL state", "NULL groups",
                                    "n = -1", "step 0", "struct_size too small",
                                    "an f32 low-precision copy (or any, without the cap)"};
    for (size_t c = 0; c < sizeof bad_args / sizeof bad_args[0]; c++) {
        gb_optim_step_args args = test_step_args(params, grads, state, N, ok_groups, 2, 1, 1e-3f);
        gb_status want = GB_ERR_INVALID_ARG;
        switch (c) {
        case 0: args.params = NULL; break;
        case 1: args.grads = NULL; break;
        case 2: args.state = NULL; break;
        case 3: args.groups = NULL; break;
        case 4: args.n = -1; break;
        case 5: args.step = 0; break;
        case 6: args.struct_size = sizeof(size_t); break;
        case 7: args.params_lowp = lowp, args.lowp_dtype = GB_F32, want = GB_ERR_UNSUPPORTED;
                break;
        }
        gb_test_clear_error();
        gb_status st = opt.ops->step(opt.self, &args);
        GB_TEST_CHECK(failures, st == want && gb_test_last_error()[0],
                      "%s: status %d (expected %d), message \"%s\"", bad_args[c], st, want,
                      gb_test_last_error());
    }
    GB_TEST_CHECK(failures, memcmp(params, saved, sizeof params) == 0,
                  "a refused step changed the parameters");

    if (e->grad_norm_sq)
        failures += check_grad_norm_validation(&opt, grads, N);

    const gb_param_group reversed[2] = {{6, 4, 0}, {0, 6, 1}};
    gb_optim_step_args args = test_step_args(params, grads, state, N, reversed, 2, 1, 1e-3f);
    GB_TEST_CHECK(failures, opt.ops->step(opt.self, &args) == GB_OK,
                  "groups out of order refused: %s", gb_test_last_error());
    GB_TEST_CHECK(failures, opt.ops->step(opt.self, &(gb_optim_step_args){
                                              .struct_size = sizeof(gb_optim_step_args),
                                              .step = 1, .inv_loss_scale = 1}) == GB_OK,
                  "an empty model (n = 0, no groups) refused: %s", gb_test_last_error());
    opt.ops->destroy(opt.self);
    printf("validation: %d failure(s)\n", failures);
    return failures;
}

/* lr = 0 and weight_decay = 0 must leave every parameter bit-identical, decayed or not. */
static int check_zero_lr_is_identity(const gb_plugin_desc *desc)
{
    enum { N = 64 };
    int failures = 0;
    test_optim opt;
    if (!create_default(desc, 0.0, &opt))
        return 1;
    float params[N], saved[N], grads[N];
    float state[2 * N] = {0};
    for (int i = 0; i < N; i++) {
        params[i] = saved[i] = sinf((float)i);
        grads[i] = cosf(3.0f * (float)i);
    }
    const gb_param_group groups[2] = {{0, 40, 1}, {40, 24, 0}};
    for (int64_t step = 1; step <= 3; step++) {
        gb_optim_step_args args = test_step_args(params, grads, state, N, groups, 2, step, 0.0f);
        GB_TEST_CHECK(failures, opt.ops->step(opt.self, &args) == GB_OK, "step %lld failed",
                      (long long)step);
    }
    failures += test_compare_bits("lr = 0, weight_decay = 0: params", params, saved, N);
    opt.ops->destroy(opt.self);
    return failures;
}

/* The hard cases through a step that leaves p as it is (lr = 0, zero gradients). Large
 * enough (over 250,000 elements) to run on every thread. */
static int check_lowp_hard_cases(const gb_plugin_desc *desc, gb_dtype dtype)
{
    int failures = 0;
    test_optim opt;
    if (!create_default(desc, 0.1, &opt))
        return 1;
    int64_t n = test_hard_cases(dtype, NULL, 0);
    float *params = malloc((size_t)n * sizeof *params), *saved = malloc((size_t)n * sizeof *saved);
    float *grads = calloc((size_t)n, sizeof *grads);
    void *state = calloc((size_t)n, 2 * sizeof(float));
    uint16_t *lowp = malloc((size_t)n * sizeof *lowp);
    test_hard_cases(dtype, params, n);
    memcpy(saved, params, (size_t)n * sizeof *params);
    const gb_param_group groups[2] = {{0, n / 3, 1}, {n / 3, n - n / 3, 0}};
    gb_optim_step_args args = test_step_args(params, grads, state, n, groups, 2, 1, 0.0f);
    args.params_lowp = lowp;
    args.lowp_dtype = dtype;
    gb_status st = opt.ops->step(opt.self, &args);
    GB_TEST_CHECK(failures, st == GB_OK, "step with a %s copy returned %d: %s",
                  gb_dtype_name(dtype), st, gb_test_last_error());
    failures += test_compare_bits("lr = 0 step over the hard cases: params", params, saved, n);
    failures += test_check_lowp("lowp copy of the hard cases", dtype, saved, lowp, n) != 0;
    opt.ops->destroy(opt.self);
    free(params), free(saved), free(grads), free(state), free(lowp);
    return failures;
}

/* Three ordinary steps with and without the copy: p, m, v agree bit for bit and the copy
 * is the reference conversion of the new p. */
static int check_lowp_on_real_steps(const gb_plugin_desc *desc, gb_dtype dtype)
{
    enum { N = 100003 };
    int failures = 0;
    test_optim with, without;
    if (!create_default(desc, 0.1, &with) || !create_default(desc, 0.1, &without))
        return 1;
    float *p1 = malloc(N * sizeof(float)), *p2 = malloc(N * sizeof(float));
    float *grads = malloc(N * sizeof(float));
    float *s1 = calloc(2 * N, sizeof(float)), *s2 = calloc(2 * N, sizeof(float));
    uint16_t *lowp = malloc(N * sizeof(uint16_t));
    uint64_t rng = 99;
    for (int i = 0; i < N; i++)
        p1[i] = p2[i] = test_normal(&rng);
    const gb_param_group groups[2] = {{0, 77777, 1}, {77777, N - 77777, 0}};
    for (int64_t step = 1; step <= 3; step++) {
        for (int i = 0; i < N; i++)
            grads[i] = 0.01f * test_normal(&rng);
        gb_optim_step_args a1 = test_step_args(p1, grads, s1, N, groups, 2, step, 1e-2f);
        gb_optim_step_args a2 = test_step_args(p2, grads, s2, N, groups, 2, step, 1e-2f);
        a1.params_lowp = lowp;
        a1.lowp_dtype = dtype;
        GB_TEST_CHECK(failures, with.ops->step(with.self, &a1) == GB_OK &&
                      without.ops->step(without.self, &a2) == GB_OK, "step %lld failed: %s",
                      (long long)step, gb_test_last_error());
    }
    failures += test_compare_bits("params written with vs without a lowp copy", p1, p2, N);
    failures += test_compare_bits("state written with vs without a lowp copy", s1, s2, 2 * N);
    failures += test_check_lowp("lowp copy after 3 steps", dtype, p1, lowp, N) != 0;
    with.ops->destroy(with.self), without.ops->destroy(without.self);
    free(p1), free(p2), free(grads), free(s1), free(s2), free(lowp);
    return failures;
}

int main(int argc, char **argv)
{
    const gb_plugin_desc *desc;
    const expected *e = &plugins[GB_TEST_NAMED_PLUGIN(
        argc, argv, 4, plugins, "adamw|adamw_fused optim-NAME-cpu.so adamw.gbt", &desc)];
    char err[512];
    gbt_file *file = gbt_open(argv[3], err, sizeof err);
    if (!file) {
        printf("FAIL: %s\n", err);
        return 1;
    }
    int failures = check_schema(e, desc);
    replay r;
    if (failures == 0 && !load_replay(file, &r))
        failures++;
    if (failures == 0) {
        failures += check_create_refuses_open_ends(desc);
        failures += check_replay(desc, &r, 1.0f);
        failures += check_replay(desc, &r, 1024.0f);
        failures += check_validation(e, desc);
        failures += check_zero_lr_is_identity(desc);
    }
    if (failures == 0 && e->lowp_copy) {
        failures += check_lowp_hard_cases(desc, GB_BF16);
        failures += check_lowp_hard_cases(desc, GB_F16);
        failures += check_lowp_on_real_steps(desc, GB_BF16);
        failures += check_lowp_on_real_steps(desc, GB_F16);
    }
    gbt_close(file);
    printf("%s %s: %d failure(s)\n", argv[0], e->name, failures);
    return failures ? 1 : 0;
}
