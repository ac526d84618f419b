/* Tests for optim-adamw-cpu: descriptor and schema, a replay of torch.optim.AdamW, argument
 * validation, and the identities the core relies on.
 *
 * The replay feeds adamw.gbt (tests/reference/make_adamw_reference.py) through the plugin:
 * three tensors in one flat buffer, one group each (weight decays, bias and gain do not),
 * ten steps of recorded gradients, the recorded learning rates, clipping to the recorded
 * max_norm with the squared norm computed here in double. After every step the parameters
 * must match PyTorch's with |got - want| <= 1e-6*|want| + 1e-7 per element.
 *
 * Usage: test_optim_adamw PLUGIN.so adamw.gbt
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gbt.h"
#include "gearbox/optim.h"
#include "test_host.h"

#define ATOL 1e-7
#define RTOL 1e-6
#define N_TENSORS 3

static const char *const tensor_names[N_TENSORS] = {"weight", "bias", "gain"};

/* adamw.gbt, laid out the way the core lays out a model: one flat buffer. */
typedef struct replay {
    int64_t n, steps;
    gb_param_group groups[N_TENSORS];
    const float *hparams;        /* beta1, beta2, eps, weight_decay, max_norm */
    const float *lr;             /* (steps) */
    const float *grad_norm;      /* (steps), as clip_grad_norm_ returned it */
    const gbt_tensor *init[N_TENSORS], *grads[N_TENSORS], *after[N_TENSORS];
} replay;

typedef struct optimizer {
    const gb_optim_ops *ops;
    void *self;
} optimizer;

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

static double sum_squares(const float *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return s;
}

static int create_optimizer(const gb_plugin_desc *desc, double beta1, double beta2, double eps,
                            double weight_decay, optimizer *opt)
{
    gb_value values[8];
    gb_test_default_values(desc, values);
    values[gb_test_option_index(desc, "beta1")].f = beta1;
    values[gb_test_option_index(desc, "beta2")].f = beta2;
    values[gb_test_option_index(desc, "eps")].f = eps;
    values[gb_test_option_index(desc, "weight_decay")].f = weight_decay;
    opt->ops = desc->ops;
    gb_status st = opt->ops->create(gb_test_host(), values, gb_test_cpu_ctx(), &opt->self);
    if (st != GB_OK)
        printf("FAIL: create returned %d: %s\n", st, gb_test_last_error());
    return st == GB_OK;
}

static gb_optim_step_args step_args(float *params, const float *grads, void *state, int64_t n,
                                    const gb_param_group *groups, int64_t n_groups,
                                    int64_t step, float lr)
{
    return (gb_optim_step_args){
        .struct_size = sizeof(gb_optim_step_args),
        .params = params,
        .grads = grads,
        .state = state,
        .n = n,
        .groups = groups,
        .n_groups = n_groups,
        .step = step,
        .lr = lr,
        .grad_norm_sq = NULL,
        .max_norm = 0,
        .inv_loss_scale = 1,
    };
}

static int check_schema(const gb_plugin_desc *desc)
{
    int failures = gb_test_check_descriptor(desc, GB_KIND_OPTIM, "adamw", GB_DEVICE_CPU,
                                            sizeof(gb_optim_ops));
    failures += gb_test_check_option(desc, "beta1", GB_OPT_FLOAT, "0.9");
    failures += gb_test_check_option(desc, "beta2", GB_OPT_FLOAT, "0.95");
    failures += gb_test_check_option(desc, "eps", GB_OPT_FLOAT, "1e-8");
    failures += gb_test_check_option(desc, "weight_decay", GB_OPT_FLOAT, "0.1");
    GB_TEST_CHECK(failures, desc->n_options == 4, "%zu options, expected 4", desc->n_options);
    const gb_optim_ops *ops = desc->ops;
    GB_TEST_CHECK(failures, ops->create && ops->destroy && ops->state_bytes && ops->step,
                  "vtable has NULL entries");
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
        gb_value values[8];
        gb_test_default_values(desc, values);
        values[gb_test_option_index(desc, "beta1")].f = cases[c].beta1;
        values[gb_test_option_index(desc, "beta2")].f = cases[c].beta2;
        values[gb_test_option_index(desc, "eps")].f = cases[c].eps;
        void *self = NULL;
        gb_test_clear_error();
        const gb_optim_ops *ops = desc->ops;
        gb_status st = ops->create(gb_test_host(), values, gb_test_cpu_ctx(), &self);
        GB_TEST_CHECK(failures, st == GB_ERR_CONFIG && gb_test_last_error()[0],
                      "create with %s returned %d, message \"%s\"", cases[c].what, st,
                      gb_test_last_error());
        if (st == GB_OK)
            ops->destroy(self);
    }
    return failures;
}

static int check_replay(const gb_plugin_desc *desc, const replay *r)
{
    int failures = 0;
    const float *hp = r->hparams;
    optimizer opt;
    if (!create_optimizer(desc, hp[0], hp[1], hp[2], hp[3], &opt))
        return 1;
    size_t state_bytes = opt.ops->state_bytes(opt.self, r->n);
    GB_TEST_CHECK(failures, state_bytes == 8 * (size_t)r->n, "state_bytes(%lld) = %zu",
                  (long long)r->n, state_bytes);
    float *params = malloc((size_t)r->n * sizeof(float));
    float *grads = malloc((size_t)r->n * sizeof(float));
    float *want = malloc((size_t)r->n * sizeof(float));
    float *norms = malloc((size_t)r->steps * sizeof(float));
    void *state = calloc(1, state_bytes);
    for (int k = 0; k < N_TENSORS; k++)
        memcpy(params + r->groups[k].offset, r->init[k]->data,
               (size_t)r->groups[k].count * sizeof(float));

    int clipped = 0;
    for (int64_t s = 0; s < r->steps; s++) {
        gather_step(r, r->grads, s, grads);
        float norm_sq = (float)sum_squares(grads, r->n);
        norms[s] = sqrtf(norm_sq);
        clipped += norms[s] > hp[4];
        gb_optim_step_args args =
            step_args(params, grads, state, r->n, r->groups, N_TENSORS, s + 1, r->lr[s]);
        args.grad_norm_sq = &norm_sq;
        args.max_norm = hp[4];
        gb_status st = opt.ops->step(opt.self, &args);
        GB_TEST_CHECK(failures, st == GB_OK, "step %lld returned %d: %s", (long long)s + 1, st,
                      gb_test_last_error());
        gather_step(r, r->after, s, want);
        char what[64];
        snprintf(what, sizeof what, "adamw step %lld params", (long long)s + 1);
        failures += gbt_compare(what, params, want, r->n, ATOL, RTOL);
    }
    failures += gbt_compare("adamw grad norms vs clip_grad_norm_", norms, r->grad_norm,
                            r->steps, 0, 1e-6);
    GB_TEST_CHECK(failures, clipped > 0 && clipped < r->steps,
                  "clipping active on %d of %lld steps: the reference covers only one branch",
                  clipped, (long long)r->steps);
    opt.ops->destroy(opt.self);
    free(params), free(grads), free(want), free(norms), free(state);
    return failures;
}

/* Step 1 with gradients multiplied by 1024 and inv_loss_scale 1/1024 must give the same
 * parameters as the unscaled reference: the scale leaves both the clip and the update. */
static int check_loss_scale_removed(const gb_plugin_desc *desc, const replay *r)
{
    int failures = 0;
    const float *hp = r->hparams;
    optimizer opt;
    if (!create_optimizer(desc, hp[0], hp[1], hp[2], hp[3], &opt))
        return 1;
    float *params = malloc((size_t)r->n * sizeof(float));
    float *grads = malloc((size_t)r->n * sizeof(float));
    float *want = malloc((size_t)r->n * sizeof(float));
    void *state = calloc(1, opt.ops->state_bytes(opt.self, r->n));
    gather_step(r, r->init, 0, params);
    gather_step(r, r->grads, 0, grads);
    for (int64_t i = 0; i < r->n; i++)
        grads[i] *= 1024.0f;
    float norm_sq = (float)sum_squares(grads, r->n);
    gb_optim_step_args args = step_args(params, grads, state, r->n, r->groups, N_TENSORS, 1,
                                        r->lr[0]);
    args.grad_norm_sq = &norm_sq;
    args.max_norm = hp[4];
    args.inv_loss_scale = 1.0f / 1024.0f;
    gb_status st = opt.ops->step(opt.self, &args);
    GB_TEST_CHECK(failures, st == GB_OK, "scaled step returned %d", st);
    gather_step(r, r->after, 0, want);
    failures += gbt_compare("adamw step 1 with loss scale 1024", params, want, r->n, ATOL, RTOL);
    opt.ops->destroy(opt.self);
    free(params), free(grads), free(want), free(state);
    return failures;
}

/* Every malformed call is refused with a message and leaves the parameters untouched;
 * well-formed groups in any order are accepted. */
static int check_validation(const gb_plugin_desc *desc)
{
    enum { N = 10 };
    int failures = 0;
    optimizer opt;
    if (!create_optimizer(desc, 0.9, 0.95, 1e-8, 0.1, &opt))
        return 1;
    float params[N], saved[N], grads[N];
    float state[2 * N] = {0};
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
        gb_optim_step_args args = step_args(params, grads, state, N, bad_groups[c].groups,
                                            bad_groups[c].n_groups, 1, 1e-3f);
        gb_test_clear_error();
        gb_status st = opt.ops->step(opt.self, &args);
        GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                      "groups with %s: status %d, message \"%s\"", bad_groups[c].what, st,
                      gb_test_last_error());
        printf("groups with %s refused: %s\n", bad_groups[c].what, gb_test_last_error());
    }

    const gb_param_group ok_groups[2] = {{0, 6, 1}, {6, 4, 0}};
    const char *const bad_args[] = {"NULL params", "NULL grads", "NULL state", "NULL groups",
                                    "n = -1", "step 0", "struct_size too small"};
    for (size_t c = 0; c < sizeof bad_args / sizeof bad_args[0]; c++) {
        gb_optim_step_args args = step_args(params, grads, state, N, ok_groups, 2, 1, 1e-3f);
        switch (c) {
        case 0: args.params = NULL; break;
        case 1: args.grads = NULL; break;
        case 2: args.state = NULL; break;
        case 3: args.groups = NULL; break;
        case 4: args.n = -1; break;
        case 5: args.step = 0; break;
        case 6: args.struct_size = sizeof(size_t); break;
        }
        gb_test_clear_error();
        gb_status st = opt.ops->step(opt.self, &args);
        GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                      "%s: status %d, message \"%s\"", bad_args[c], st, gb_test_last_error());
    }
    GB_TEST_CHECK(failures, memcmp(params, saved, sizeof params) == 0,
                  "a refused step changed the parameters");

    const gb_param_group reversed[2] = {{6, 4, 0}, {0, 6, 1}};
    gb_optim_step_args args = step_args(params, grads, state, N, reversed, 2, 1, 1e-3f);
    gb_status st = opt.ops->step(opt.self, &args);
    GB_TEST_CHECK(failures, st == GB_OK, "groups out of order refused: %s",
                  gb_test_last_error());
    GB_TEST_CHECK(failures, opt.ops->step(opt.self, &(gb_optim_step_args){
                                              .struct_size = sizeof(gb_optim_step_args),
                                              .step = 1, .inv_loss_scale = 1}) == GB_OK,
                  "an empty model (n = 0, no groups) refused: %s", gb_test_last_error());
    opt.ops->destroy(opt.self);
    return failures;
}

/* lr = 0 and weight_decay = 0 must leave every parameter bit-identical, decayed or not. */
static int check_zero_lr_is_identity(const gb_plugin_desc *desc)
{
    enum { N = 64 };
    int failures = 0;
    optimizer opt;
    if (!create_optimizer(desc, 0.9, 0.95, 1e-8, 0.0, &opt))
        return 1;
    float params[N], saved[N], grads[N];
    float state[2 * N] = {0};
    for (int i = 0; i < N; i++) {
        params[i] = saved[i] = sinf((float)i);
        grads[i] = cosf(3.0f * (float)i);
    }
    const gb_param_group groups[2] = {{0, 40, 1}, {40, 24, 0}};
    for (int64_t step = 1; step <= 3; step++) {
        gb_optim_step_args args = step_args(params, grads, state, N, groups, 2, step, 0.0f);
        GB_TEST_CHECK(failures, opt.ops->step(opt.self, &args) == GB_OK, "step %lld failed",
                      (long long)step);
    }
    GB_TEST_CHECK(failures, memcmp(params, saved, sizeof params) == 0,
                  "lr = 0, weight_decay = 0 changed the parameters");
    opt.ops->destroy(opt.self);
    return failures;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s optim-adamw-cpu.so adamw.gbt\n", argv[0]);
        return 2;
    }
    void *handle;
    const gb_plugin_desc *desc = gb_test_open_plugin(argv[1], &handle);
    if (!desc)
        return 1;
    char err[512];
    gbt_file *file = gbt_open(argv[2], err, sizeof err);
    if (!file) {
        printf("FAIL: %s\n", err);
        return 1;
    }
    int failures = check_schema(desc);
    if (failures == 0) {
        replay r;
        if (!load_replay(file, &r))
            return 1;
        failures += check_create_refuses_open_ends(desc);
        failures += check_replay(desc, &r);
        failures += check_loss_scale_removed(desc, &r);
        failures += check_validation(desc);
        failures += check_zero_lr_is_identity(desc);
    }
    gbt_close(file);
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
