/* optim/muon against Muon and AdamW computed here in double precision, step by step.
 *
 * A small model's tensors (a token embedding, a tall, a wide and a square hidden matrix, a
 * LayerNorm weight and a bias) are bound through bind_params (ABI 1.8) and stepped 6 times
 * with random gradients of a changing scale (clipping at max_norm 1 acts on some steps)
 * and a warm-up of the learning rate (lr / lr_max below 1), Muon's weight decay on. Before
 * every step the reference takes the plugin's parameters and state, so each step is
 * compared on its own: Muon's published step (momentum, Nesterov, 5 quintic Newton-Schulz
 * iterations on the transposed matrix when it is tall, the max(1, rows/cols)^0.5 scale)
 * for the matrices, torch.optim.AdamW's for the rest. Errors are relative to the size of
 * the step the reference takes on each tensor (a matrix's largest change):
 * - f32 (optim-muon-cpu): matrices within 1e-4 (they come within about 2e-6);
 * - bf16 (the iteration on CUDA): matrices within 0.05, about 10 of bf16's relative
 *   rounding steps (2^-8) after five iterations;
 * - the AdamW tensors within 1e-4 on both (rounding p itself to f32 is up to 2e-5 of a
 *   step of lr 1e-4 on weights of 0.08);
 * and the state (momentum, m, v) within 1e-5 of its largest element in both.
 *
 * Usage: test_muon DEVICE_PLUGIN MUON_PLUGIN f32|bf16
 * (the device the optimizer runs on: device/cpu for f32, device/cuda for bf16; an
 * emulated CUDA build's objects run it on the CPU)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/device.h"
#include "gearbox/optim.h"
#include "optim_test.h"
#include "test_host.h"

#define STEPS 6
#define N_TENSORS 6
#define MAX_NORM 1.0f
#define LR_MAX 1e-3f
#define MUON_LR 0.02
#define MUON_WD 0.05
#define ADAMW_WD 0.1

static const gb_optim_param tensors[N_TENSORS] = {
    {"wte", 0, 40, 16, GB_PARAM_EMBEDDING, 1, GB_F32, 1},
    {"h.0.attn.c_attn.weight", 640, 48, 16, GB_PARAM_MATRIX, 1, GB_F32, 0},
    {"h.0.ln_1.weight", 1408, 1, 16, GB_PARAM_NORM, 0, GB_F32, 0},
    {"h.0.mlp.c_proj.weight", 1424, 16, 64, GB_PARAM_MATRIX, 1, GB_F32, 0},
    {"h.0.attn.c_proj.weight", 2448, 16, 16, GB_PARAM_MATRIX, 1, GB_F32, 0},
    {"h.0.attn.c_attn.bias", 2704, 1, 48, GB_PARAM_BIAS, 0, GB_F32, 0},
};
#define N 2752

static int failures;

static const gb_plugin_desc *load(const char *path)
{
    void *handle;
    const gb_plugin_desc *desc = gb_test_open_plugin(path, &handle);
    if (!desc)
        exit(1);
    return desc;
}

static void open_device(const char *path, test_device *d)
{
    const gb_plugin_desc *desc = load(path);
    gb_value values[64];
    gb_test_default_values(desc, values);
    d->ops = desc->ops;
    if (d->ops->create(gb_test_host(), values, &d->self) != GB_OK) {
        printf("FAIL: %s could not start: %s\n", path, gb_test_last_error());
        exit(1);
    }
    d->ctx.struct_size = sizeof d->ctx;
    if (d->ops->context(d->self, &d->ctx) != GB_OK) {
        printf("FAIL: %s context: %s\n", path, gb_test_last_error());
        exit(1);
    }
}

/* ---- the reference, in double ---- */

/* c (m, n) = a (m, k) @ b (k, n), or with b given as (n, k) when bt. */
static void matmul(double *c, const double *a, const double *b, int m, int n, int k, int bt)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int l = 0; l < k; l++)
                s += a[i * k + l] * (bt ? b[j * k + l] : b[l * n + j]);
            c[i * n + j] = s;
        }
}

/* Muon's orthogonalisation of u (rows, cols) into x, as published: normalised, transposed
 * when tall, five quintic iterations, transposed back. */
static void newton_schulz(double *x, const double *u, int rows, int cols)
{
    const int tall = rows > cols, r = tall ? cols : rows, c = tall ? rows : cols;
    double norm = 0.0;
    for (int i = 0; i < rows * cols; i++)
        norm += u[i] * u[i];
    norm = sqrt(norm) + 1e-7;
    double *X = malloc(sizeof(double) * (size_t)(r * c)), *Y = malloc(sizeof(double) * (size_t)(r * c));
    double *A = malloc(sizeof(double) * (size_t)(r * r)), *B = malloc(sizeof(double) * (size_t)(r * r));
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            X[tall ? j * rows + i : i * cols + j] = u[i * cols + j] / norm;
    for (int it = 0; it < 5; it++) {
        matmul(A, X, X, r, r, c, 1);
        matmul(B, A, A, r, r, r, 0);
        for (int i = 0; i < r * r; i++)
            B[i] = -4.7750 * A[i] + 2.0315 * B[i];
        matmul(Y, B, X, r, c, r, 0);
        for (int i = 0; i < r * c; i++)
            X[i] = 3.4445 * X[i] + Y[i];
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            x[i * cols + j] = X[tall ? j * rows + i : i * cols + j];
    free(X), free(Y), free(A), free(B);
}

/* The whole model's state as the plugin lays it out: m (N), then v of the AdamW tensors. */
typedef struct model {
    double p[N], m[N], v[N];
} model;

static void reference_step(model *s, const float *grads, double g_scale, int64_t t, double lr)
{
    const double factor = lr / LR_MAX, mlr = MUON_LR * factor;
    for (int k = 0; k < N_TENSORS; k++) {
        const gb_optim_param *pt = &tensors[k];
        const int off = (int)pt->offset, n = (int)(pt->rows * pt->cols);
        double *p = s->p + off, *m = s->m + off, *v = s->v + off;
        if (pt->role != GB_PARAM_MATRIX) {
            for (int i = 0; i < n; i++) {
                double g = grads[off + i] * g_scale;
                if (pt->decay)
                    p[i] *= 1.0 - lr * ADAMW_WD;
                m[i] = 0.9 * m[i] + 0.1 * g;
                v[i] = 0.95 * v[i] + 0.05 * g * g;
                double denom = sqrt(v[i]) / sqrt(1.0 - pow(0.95, (double)t)) + 1e-8;
                p[i] -= lr / (1.0 - pow(0.9, (double)t)) * m[i] / denom;
            }
            continue;
        }
        double *u = malloc(sizeof(double) * (size_t)n), *x = malloc(sizeof(double) * (size_t)n);
        for (int i = 0; i < n; i++) {
            double g = grads[off + i] * g_scale;
            m[i] += 0.05 * (g - m[i]);
            u[i] = g + 0.95 * (m[i] - g);
        }
        newton_schulz(x, u, (int)pt->rows, (int)pt->cols);
        double ratio = (double)pt->rows / (double)pt->cols, scale = sqrt(ratio > 1 ? ratio : 1);
        for (int i = 0; i < n; i++)
            p[i] = p[i] * (1.0 - mlr * MUON_WD) - mlr * scale * x[i];
        free(u), free(x);
    }
}

/* ---- the comparison ---- */

typedef struct plugin_run {
    test_device *d;
    test_optim opt;
    float *params, *grads, *state, *norm_sq;
    void *workspace;
    int64_t n_adamw;
} plugin_run;

/* The plugin's parameters and state into s (v unpacked to the AdamW tensors' offsets). */
static void read_back(plugin_run *r, model *s)
{
    static float p[N], st[2 * N];
    test_device_copy(r->d, p, r->params, sizeof(float) * N, GB_COPY_DEVICE_TO_HOST);
    test_device_copy(r->d, st, r->state, sizeof(float) * (size_t)(N + r->n_adamw),
                     GB_COPY_DEVICE_TO_HOST);
    int64_t v_at = N;
    memset(s->v, 0, sizeof s->v);
    for (int i = 0; i < N; i++)
        s->p[i] = p[i], s->m[i] = st[i];
    for (int k = 0; k < N_TENSORS; k++) {
        if (tensors[k].role == GB_PARAM_MATRIX)
            continue;
        for (int64_t i = 0; i < tensors[k].rows * tensors[k].cols; i++)
            s->v[tensors[k].offset + i] = st[v_at++];
    }
}

/* max |got - want| over tensor k's elements of x, against `scale`. */
static double worst(const double *got, const double *want, int k, double scale)
{
    double w = 0.0;
    for (int64_t i = tensors[k].offset; i < tensors[k].offset + tensors[k].rows * tensors[k].cols; i++)
        w = fmax(w, fabs(got[i] - want[i]));
    return scale > 0 ? w / scale : w;
}

static double largest(const double *x, const double *base, int k)
{
    double w = 0.0;
    for (int64_t i = tensors[k].offset; i < tensors[k].offset + tensors[k].rows * tensors[k].cols; i++)
        w = fmax(w, fabs(x[i] - (base ? base[i] : 0.0)));
    return w;
}

static void compare(int64_t t, const model *got, const model *want, const model *before,
                    double matrix_tol)
{
    for (int k = 0; k < N_TENSORS; k++) {
        const int matrix = tensors[k].role == GB_PARAM_MATRIX;
        const double tol = matrix ? matrix_tol : 1e-4;
        double e = worst(got->p, want->p, k, largest(want->p, before->p, k));
        double em = worst(got->m, want->m, k, largest(want->m, NULL, k));
        double ev = matrix ? 0.0 : worst(got->v, want->v, k, largest(want->v, NULL, k));
        GB_TEST_CHECK(failures, e <= tol, "step %lld, %s: params %.3g of the step away from "
                      "the double reference (tolerance %.0e)", (long long)t, tensors[k].name,
                      e, tol);
        GB_TEST_CHECK(failures, em <= 1e-5 && ev <= 1e-5, "step %lld, %s: state %.3g / %.3g "
                      "away (tolerance 1e-5)", (long long)t, tensors[k].name, em, ev);
        printf("step %lld %-24s params %.2e  state %.2e %.2e\n", (long long)t, tensors[k].name,
               e, em, ev);
    }
}

static void start(plugin_run *r, test_device *d, const gb_plugin_desc *desc, gb_dtype work,
                  const float *init)
{
    r->d = d;
    gb_value values[16];
    gb_test_default_values(desc, values);
    values[gb_test_option_index(desc, "weight_decay")].f = ADAMW_WD;
    values[gb_test_option_index(desc, "muon_weight_decay")].f = MUON_WD;
    r->opt.ops = desc->ops;
    if (r->opt.ops->create(gb_test_host(), values, &d->ctx, &r->opt.self) != GB_OK) {
        printf("FAIL: create: %s\n", gb_test_last_error());
        exit(1);
    }
    gb_optim_param table[N_TENSORS];
    memcpy(table, tensors, sizeof table);
    for (int k = 0; k < N_TENSORS; k++)
        table[k].dtype = work;
    gb_optim_params params = {sizeof params, table, N_TENSORS, sizeof table[0], N};
    size_t workspace = 0;
    gb_status st = r->opt.ops->bind_params(r->opt.self, &params, &workspace);
    size_t state = r->opt.ops->state_bytes(r->opt.self, N);
    r->n_adamw = (int64_t)(state / sizeof(float)) - N;
    GB_TEST_CHECK(failures, st == GB_OK && workspace > 0 && r->n_adamw == 640 + 16 + 48,
                  "bind_params: status %d, workspace %zu bytes, state %zu bytes (want m for "
                  "all %d and v for the 704 AdamW elements)", st, workspace, state, N);
    r->params = test_device_alloc(d, sizeof(float) * N);
    r->grads = test_device_alloc(d, sizeof(float) * N);
    r->norm_sq = test_device_alloc(d, sizeof(float));
    r->state = test_device_alloc(d, state);
    r->workspace = test_device_alloc(d, workspace);
    float *zeros = calloc(state, 1);
    test_device_copy(d, r->state, zeros, state, GB_COPY_HOST_TO_DEVICE);
    test_device_copy(d, r->params, init, sizeof(float) * N, GB_COPY_HOST_TO_DEVICE);
    free(zeros);
}

static void plugin_step(plugin_run *r, const float *grads, float norm_sq, int64_t t, float lr)
{
    static gb_param_group groups[N_TENSORS];
    for (int k = 0; k < N_TENSORS; k++)
        groups[k] = (gb_param_group){tensors[k].offset, tensors[k].rows * tensors[k].cols,
                                     tensors[k].decay};
    test_device_copy(r->d, r->grads, grads, sizeof(float) * N, GB_COPY_HOST_TO_DEVICE);
    test_device_copy(r->d, r->norm_sq, &norm_sq, sizeof norm_sq, GB_COPY_HOST_TO_DEVICE);
    gb_optim_step_args args = test_step_args(r->params, r->grads, r->state, N, groups,
                                             N_TENSORS, t, lr);
    args.grad_norm_sq = r->norm_sq;
    args.max_norm = MAX_NORM;
    args.workspace = r->workspace;
    args.lr_max = LR_MAX;
    gb_status st = r->opt.ops->step(r->opt.self, &args);
    GB_TEST_CHECK(failures, st == GB_OK, "step %lld returned %d: %s", (long long)t, st,
                  gb_test_last_error());
}

int main(int argc, char **argv)
{
    gb_test_usage_unless(argc == 4 && (!strcmp(argv[3], "f32") || !strcmp(argv[3], "bf16")),
                         argv[0], "DEVICE_PLUGIN MUON_PLUGIN f32|bf16");
    const gb_dtype work = strcmp(argv[3], "f32") ? GB_BF16 : GB_F32;
    const double matrix_tol = work == GB_F32 ? 1e-4 : 0.05;
    test_device d;
    open_device(argv[1], &d);
    const gb_plugin_desc *desc = load(argv[2]);
    static float init[N], grads[N];
    uint64_t rng = 39;
    for (int i = 0; i < N; i++)
        init[i] = 0.02f * test_normal(&rng);
    plugin_run r;
    start(&r, &d, desc, work, init);
    static model before, want, got;
    for (int64_t t = 1; t <= STEPS; t++) {
        const float scale = (t % 3 == 0) ? 0.1f : 0.005f; /* a norm of about 5 or 0.26 */
        double sum = 0.0;
        for (int i = 0; i < N; i++) {
            grads[i] = scale * test_normal(&rng);
            sum += (double)grads[i] * grads[i];
        }
        const float norm_sq = (float)sum;
        const double g_scale = fmin(1.0, MAX_NORM / (sqrt((double)norm_sq) + 1e-6));
        const float lr = LR_MAX * (float)t / (STEPS + 1);
        read_back(&r, &before);
        want = before;
        reference_step(&want, grads, g_scale, t, lr);
        plugin_step(&r, grads, norm_sq, t, lr);
        read_back(&r, &got);
        compare(t, &got, &want, &before, matrix_tol);
    }
    r.opt.ops->destroy(r.opt.self);
    printf("%s: %d steps of optim/muon (%s iteration) against the double reference\n",
           failures ? "FAIL" : "ok", STEPS, argv[3]);
    return failures ? 1 : 0;
}
