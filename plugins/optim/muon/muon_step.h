/* What optim/muon's CPU and CUDA versions share: the options, the plan of the tensors that
 * bind_params (ABI 1.8) makes, the state's and the workspace's layout, and the step
 * itself, which queues on the device's compute stream, in order: AdamW over every tensor
 * that is not a hidden matrix, then for each matrix its momentum pass, the device's
 * sum_squares of the update, the normalising pass, five Newton-Schulz iterations as the
 * device's matmuls and copies, and the pass that applies the result. A version supplies
 * the element-wise passes (muon_passes: OpenMP loops queued with gb_device_run_host on
 * the CPU, kernels on CUDA) and the dtype the iteration runs in (f32 on the CPU, bf16 on
 * CUDA). The formulas are kernels/common/muon.h's and adamw.h's. Header-only; compiles as
 * C and as CUDA C++.
 *
 * State layout (position-independent, the same on every device): m (n) f32, the momentum
 * buffer of a matrix's elements and AdamW's first moment of the others', followed by v
 * (n_adamw) f32, AdamW's second moment of the non-matrix tensors, packed in table order.
 * Workspace: the update u (largest matrix) f32, the squared norm, then X and the next X
 * (largest matrix) and A and B (side^2, side the smaller dimension) in the iteration's
 * dtype.
 */
#ifndef GB_PLUGINS_OPTIM_MUON_STEP_H
#define GB_PLUGINS_OPTIM_MUON_STEP_H

#include <stdint.h>
#include <string.h>

#include "adamw_instance.h"
#include "muon.h"
#include "step_args.h"

/* Muon's own keys follow AdamW's (adamw_options.h), which the other tensors use. */
enum {
    MUON_OPT_LR = ADAMW_OPT_WEIGHT_DECAY + 1,
    MUON_OPT_MOMENTUM,
    MUON_OPT_NESTEROV,
    MUON_OPT_NS_STEPS,
    MUON_OPT_WEIGHT_DECAY
};

static const gb_option muon_options[] = {
    ADAMW_OPTION_ROWS,
    {"muon_lr", GB_OPT_FLOAT, "0.02", 0, 10, NULL,
     "learning rate of the hidden matrices at the schedule's peak (scaled by lr / "
     "[train] learning_rate each step), in (0, 10]"},
    {"muon_momentum", GB_OPT_FLOAT, "0.95", 0, 1, NULL,
     "momentum of the hidden matrices, in [0, 1)"},
    {"muon_nesterov", GB_OPT_BOOL, "true", 0, 0, NULL,
     "orthogonalise the Nesterov update (true) or the momentum buffer (false)"},
    {"muon_ns_steps", GB_OPT_INT, "5", 1, 20, NULL,
     "Newton-Schulz iterations per matrix and step, in [1, 20]"},
    {"muon_weight_decay", GB_OPT_FLOAT, "0", 0, 10, NULL,
     "decoupled weight decay of the hidden matrices, in [0, 10]"},
};

typedef struct muon_hparams {
    double lr, momentum, weight_decay;
    int nesterov, ns_steps;
} muon_hparams;

/* One tensor of the plan. */
typedef struct muon_tensor {
    int64_t offset, rows, cols;
    int64_t v_offset;       /* AdamW's: where its second moment starts in v; -1: a matrix */
    int32_t decay;
} muon_tensor;

typedef struct muon_base {
    adamw_base adamw;       /* the head, AdamW's keys and the thread count */
    muon_hparams mh;
    gb_dtype work;          /* the dtype the iteration runs in */
    muon_tensor *tensors;   /* host memory, one per tensor of the table; NULL: not bound */
    int64_t n_tensors, n, n_adamw;
    int64_t max_numel, max_side;  /* the largest matrix and its smaller side */
} muon_base;

static inline int muon_is_matrix(const muon_tensor *t)
{
    return t->v_offset < 0;
}

/* The hyperparameters of Muon's own keys, or 0 with the host told why (the schema's ranges
 * are inclusive, so the open ends are refused here). */
static inline int muon_read_options(const gb_host *host, const gb_value *options,
                                    muon_hparams *out)
{
    if (!(options[MUON_OPT_LR].f > 0.0)) {
        host->set_error(host, "muon_lr must be above 0 (got %g)", options[MUON_OPT_LR].f);
        return 0;
    }
    if (!(options[MUON_OPT_MOMENTUM].f < 1.0)) {
        host->set_error(host, "muon_momentum must be below 1 (got %g)",
                        options[MUON_OPT_MOMENTUM].f);
        return 0;
    }
    out->lr = options[MUON_OPT_LR].f;
    out->momentum = options[MUON_OPT_MOMENTUM].f;
    out->nesterov = (int)options[MUON_OPT_NESTEROV].i;
    out->ns_steps = (int)options[MUON_OPT_NS_STEPS].i;
    out->weight_decay = options[MUON_OPT_WEIGHT_DECAY].f;
    return 1;
}

/* 1 when the device gives the operations the iteration needs (ABI 1.2's gb_device_ctx.ops:
 * matmul, sum_squares, copy); else 0 with the host told why. */
static inline int muon_device_ops_ok(const gb_host *host, const gb_device_ctx *device)
{
    if (device->struct_size >= offsetof(gb_device_ctx, self) + sizeof device->self &&
        device->ops && device->ops->matmul && device->ops->sum_squares && device->ops->copy)
        return 1;
    host->set_error(host, "muon multiplies matrices through the device's matmul, and this "
                    "device context has no device operations (gb_device_ctx.ops, ABI 1.2)");
    return 0;
}

/* create()'s shared part: AdamW's (device check, its keys, the instance), then Muon's keys
 * and the device's operations. */
static inline gb_status muon_base_create(const gb_host *host, const gb_value *options,
                                         const gb_device_ctx *device,
                                         int (*device_ok)(const gb_host *,
                                                          const gb_device_ctx *, const char *),
                                         gb_dtype work, size_t bytes, void **self)
{
    gb_status st = adamw_base_create(host, options, device, device_ok, "muon", bytes, self);
    if (st != GB_OK)
        return st;
    muon_base *mu = (muon_base *)*self;
    mu->work = work;
    if (!muon_read_options(host, options, &mu->mh))
        st = GB_ERR_CONFIG;
    else if (!muon_device_ops_ok(host, &mu->adamw.inst.device))
        st = GB_ERR_UNSUPPORTED;
    if (st == GB_OK)
        return GB_OK;
    gb_plugin_instance_destroy(mu);
    *self = NULL;
    return st;
}

static inline void muon_destroy(void *self)
{
    muon_base *mu = (muon_base *)self;
    if (mu && mu->tensors)
        mu->adamw.inst.host->free(mu->adamw.inst.host, mu->tensors);
    gb_plugin_instance_destroy(self);
}

/* A table entry Muon orthogonalises: a hidden 2-D weight. Any other role (and any role
 * added after 1.8) takes AdamW, the careful choice. */
static inline int muon_takes(const gb_optim_param *p)
{
    return p->role == GB_PARAM_MATRIX && p->rows > 1 && p->cols > 1;
}

/* The plan of `table` into mu (any earlier plan replaced); 0 with the host told why. */
static inline int muon_plan(muon_base *mu, const gb_optim_params *table)
{
    const gb_host *host = mu->adamw.inst.host;
    size_t bytes = (size_t)(table->count > 0 ? table->count : 1) * sizeof(muon_tensor);
    muon_tensor *tensors = (muon_tensor *)host->alloc(host, bytes);
    if (!tensors) {
        host->set_error(host, "out of memory for the plan of %lld tensors",
                        (long long)table->count);
        return 0;
    }
    int64_t n_adamw = 0, max_numel = 0, max_side = 0;
    for (int64_t i = 0; i < table->count; i++) {
        const gb_optim_param *p = gb_optim_param_at(table, i);
        if (p->rows < 1 || p->cols < 1 || p->offset < 0 ||
            p->offset > table->n - p->rows * p->cols) {
            host->set_error(host, "tensor %lld (%s) of (%lld, %lld) at %lld lies outside the "
                            "%lld parameters", (long long)i, p->name ? p->name : "unnamed",
                            (long long)p->rows, (long long)p->cols, (long long)p->offset,
                            (long long)table->n);
            host->free(host, tensors);
            return 0;
        }
        muon_tensor *t = &tensors[i];
        *t = (muon_tensor){p->offset, p->rows, p->cols, -1, p->decay};
        int64_t numel = p->rows * p->cols, side = p->rows < p->cols ? p->rows : p->cols;
        if (!muon_takes(p)) {
            t->v_offset = n_adamw;
            n_adamw += numel;
            continue;
        }
        max_numel = numel > max_numel ? numel : max_numel;
        max_side = side > max_side ? side : max_side;
    }
    if (mu->tensors)
        host->free(host, mu->tensors);
    mu->tensors = tensors;
    mu->n_tensors = table->count;
    mu->n = table->n;
    mu->n_adamw = n_adamw;
    mu->max_numel = max_numel;
    mu->max_side = max_side;
    return 1;
}

/* ---- the workspace ---- */

#define MUON_ALIGN 256

static inline size_t muon_round_up(size_t bytes)
{
    return (bytes + MUON_ALIGN - 1) / MUON_ALIGN * MUON_ALIGN;
}

typedef struct muon_workspace {
    float *u, *norm_sq;
    void *x, *x_next, *a, *b;
} muon_workspace;

/* The workspace's parts from `base` (NULL: all NULL, and *bytes its size). */
static inline muon_workspace muon_workspace_at(const muon_base *mu, void *base, size_t *bytes)
{
    const size_t work = gb_dtype_size(mu->work);
    const size_t sizes[6] = {
        muon_round_up((size_t)mu->max_numel * sizeof(float)), muon_round_up(sizeof(float)),
        muon_round_up((size_t)mu->max_numel * work), muon_round_up((size_t)mu->max_numel * work),
        muon_round_up((size_t)(mu->max_side * mu->max_side) * work),
        muon_round_up((size_t)(mu->max_side * mu->max_side) * work)};
    void *parts[6];
    size_t at = 0;
    for (int i = 0; i < 6; i++) {
        parts[i] = base ? (char *)base + at : NULL;
        at += sizes[i];
    }
    *bytes = mu->max_numel > 0 ? at : 0;
    muon_workspace w = {(float *)parts[0], (float *)parts[1], parts[2], parts[3], parts[4],
                        parts[5]};
    return w;
}

static inline gb_status muon_bind_params(void *self, const gb_optim_params *table,
                                         size_t *workspace_bytes)
{
    muon_base *mu = (muon_base *)self;
    if (!mu || !table || !workspace_bytes || table->count < 0 ||
        (table->count > 0 && !table->params) || table->param_size < sizeof(gb_optim_param))
        return GB_ERR_INVALID_ARG;
    if (!muon_plan(mu, table))
        return GB_ERR_INVALID_ARG;
    muon_workspace_at(mu, NULL, workspace_bytes);
    return GB_OK;
}

/* m (n) then v (n_adamw); 0 before bind_params, which step() then refuses. */
static inline size_t muon_state_bytes(void *self, int64_t n)
{
    const muon_base *mu = (const muon_base *)self;
    if (!mu->tensors || n != mu->n)
        return 0;
    return (size_t)(mu->n + mu->n_adamw) * sizeof(float);
}

/* ---- the step ---- */

/* The element-wise passes of one device; each queues its work on the compute stream. */
typedef struct muon_passes {
    /* AdamW over every tensor that is not a matrix (m of the state's first part, v of its
     * second), params_lowp written too. */
    gb_status (*adamw)(const muon_base *mu, const gb_optim_step_args *args);
    /* Matrix t's momentum (the state's m) moved, and its update into u (numel) f32. */
    gb_status (*momentum)(const muon_base *mu, const gb_optim_step_args *args,
                          const muon_tensor *t, const muon_coeffs *c, float *u);
    /* x (numel) of mu->work = u normalised by the device scalar norm_sq. */
    gb_status (*normalize)(const muon_base *mu, void *x, const float *u, const float *norm_sq,
                           int64_t numel);
    /* Matrix t's parameters (and params_lowp) moved by x (numel of mu->work). */
    gb_status (*apply)(const muon_base *mu, const gb_optim_step_args *args,
                       const muon_tensor *t, const void *x, const muon_apply_coeffs *c);
} muon_passes;

/* The schedule's factor lr / lr_max (ABI 1.8), or 1 from a core that does not say. */
static inline double muon_schedule_factor(const gb_optim_step_args *args)
{
    if (args->struct_size < offsetof(gb_optim_step_args, lr_max) + sizeof args->lr_max ||
        !(args->lr_max > 0.0f))
        return 1.0;
    return (double)args->lr / (double)args->lr_max;
}

/* One matrix product of the iteration, C = alpha op(A) op(B) + beta C, all of mu->work,
 * row-major with rows as wide as they are stored. */
static inline gb_status muon_matmul(const muon_base *mu, int64_t m, int64_t n, int64_t k,
                                    const void *a, int trans_a, const void *b, int trans_b,
                                    void *c, float alpha, float beta)
{
    gb_matmul_args g;
    memset(&g, 0, sizeof g);
    g.struct_size = sizeof g;
    g.m = m, g.n = n, g.k = k;
    g.a = a, g.lda = trans_a ? m : k, g.trans_a = trans_a, g.dtype_a = mu->work;
    g.b = b, g.ldb = trans_b ? k : n, g.trans_b = trans_b, g.dtype_b = mu->work;
    g.c = c, g.ldc = n, g.dtype_c = mu->work;
    g.alpha = alpha, g.beta = beta;
    const gb_device_ctx *d = &mu->adamw.inst.device;
    return d->ops->matmul(d->self, &g);
}

static inline gb_status muon_copy(const muon_base *mu, void *dst, const void *src,
                                  int64_t elems)
{
    const gb_device_ctx *d = &mu->adamw.inst.device;
    return d->ops->copy(d->self, dst, src, (size_t)elems * gb_dtype_size(mu->work),
                        GB_COPY_DEVICE_TO_DEVICE);
}

#define MUON_TRY(call)                   \
    do {                                 \
        gb_status st_ = (call);          \
        if (st_ != GB_OK)                \
            return st_;                  \
    } while (0)

/* One Newton-Schulz iteration on X (rows, cols) into x_next. A wide or square X (rows <=
 * cols) is iterated as published: A = X X^T, X' = a X + B X. A tall one is the iteration
 * on its transpose, written without moving it: A = X^T X, X' = a X + X B^T. */
static inline gb_status muon_ns_iteration(const muon_base *mu, const muon_tensor *t,
                                          const muon_workspace *w, const void *x, void *x_next)
{
    const int64_t r = t->rows, c = t->cols;
    const int tall = r > c;
    const int64_t s = tall ? c : r;
    MUON_TRY(tall ? muon_matmul(mu, s, s, r, x, 1, x, 0, w->a, 1.0f, 0.0f)
                  : muon_matmul(mu, s, s, c, x, 0, x, 1, w->a, 1.0f, 0.0f));
    MUON_TRY(muon_copy(mu, w->b, w->a, s * s));
    MUON_TRY(muon_matmul(mu, s, s, s, w->a, 0, w->a, 0, w->b, MUON_NS_C, MUON_NS_B));
    MUON_TRY(muon_copy(mu, x_next, x, r * c));
    return tall ? muon_matmul(mu, r, c, c, x, 0, w->b, 1, x_next, 1.0f, MUON_NS_A)
                : muon_matmul(mu, r, c, r, w->b, 0, x, 0, x_next, 1.0f, MUON_NS_A);
}

/* Matrix t's whole update: momentum, norm, normalisation, the iteration, the update. */
static inline gb_status muon_matrix_step(const muon_base *mu, const gb_optim_step_args *args,
                                         const muon_passes *passes, const muon_workspace *w,
                                         const muon_tensor *t, const muon_coeffs *c,
                                         double lr)
{
    const gb_device_ctx *d = &mu->adamw.inst.device;
    const int64_t numel = t->rows * t->cols;
    MUON_TRY(passes->momentum(mu, args, t, c, w->u));
    MUON_TRY(d->ops->sum_squares(d->self, w->norm_sq, w->u, numel));
    void *x = w->x, *x_next = w->x_next;
    MUON_TRY(passes->normalize(mu, x, w->u, w->norm_sq, numel));
    for (int k = 0; k < mu->mh.ns_steps; k++) {
        MUON_TRY(muon_ns_iteration(mu, t, w, x, x_next));
        void *done = x_next;
        x_next = x;
        x = done;
    }
    muon_apply_coeffs ac = muon_apply_coeffs_of(lr, mu->mh.weight_decay, t->decay, t->rows,
                                                t->cols);
    return passes->apply(mu, args, t, x, &ac);
}

/* The checks of a step: bound to a table of these n parameters, a workspace when there
 * are matrices, valid arguments and a low-precision copy it can write. */
static inline gb_status muon_check_step(const muon_base *mu, const gb_optim_step_args *args)
{
    const gb_host *host = mu->adamw.inst.host;
    if (!gb_optim_step_args_valid(host, args))
        return GB_ERR_INVALID_ARG;
    if (!mu->tensors || args->n != mu->n) {
        host->set_error(host, "muon needs the model's tensors before its first step (ABI 1.8 "
                        "bind_params, for these %lld parameters); this gearbox did not give "
                        "them", (long long)args->n);
        return GB_ERR_UNSUPPORTED;
    }
    int has_workspace =
        args->struct_size >= offsetof(gb_optim_step_args, workspace) + sizeof args->workspace &&
        args->workspace;
    if (mu->max_numel > 0 && !has_workspace) {
        host->set_error(host, "muon's step needs the workspace bind_params asked for");
        return GB_ERR_INVALID_ARG;
    }
    return gb_optim_lowp_supported(host, args);
}

/* step(): AdamW's tensors, then each matrix, all queued on the compute stream. */
static inline gb_status muon_step_with(const muon_base *mu, const gb_optim_step_args *args,
                                       const muon_passes *passes)
{
    if (!mu)
        return GB_ERR_INVALID_ARG;
    MUON_TRY(muon_check_step(mu, args));
    if (mu->n_adamw > 0)
        MUON_TRY(passes->adamw(mu, args));
    if (mu->max_numel == 0)
        return GB_OK;
    size_t bytes;
    const muon_workspace w = muon_workspace_at(mu, args->workspace, &bytes);
    /* g_scale is the passes' to fill in, in work that reads grad_norm_sq */
    const muon_coeffs c = {1.0f, (float)(1.0 - mu->mh.momentum), mu->mh.nesterov};
    const double lr = mu->mh.lr * muon_schedule_factor(args);
    for (int64_t i = 0; i < mu->n_tensors; i++)
        if (muon_is_matrix(&mu->tensors[i]))
            MUON_TRY(muon_matrix_step(mu, args, passes, &w, &mu->tensors[i], &c, lr));
    return GB_OK;
}

#endif /* GB_PLUGINS_OPTIM_MUON_STEP_H */
