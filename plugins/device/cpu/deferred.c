/* The vtable's kernel entries: each runs its kernel at once, or, in the GPU-like mode
 * (queue.h), queues it with a copy of its arguments, as a GPU queues a launch.
 *
 * One argument struct and one runner per kernel; the kernels themselves (matmul.c,
 * embed.c, ...) know nothing of queues.
 */
#include "cpu_device.h"
#include "deferred.h"

#include <string.h>

#include "loss_scale.h"

typedef struct matmul_work {
    cpu_device *dev;
    gb_matmul_args args;
} matmul_work;

static gb_status run_matmul(void *arg)
{
    matmul_work *w = arg;
    return cpu_matmul(w->dev, &w->args);
}

gb_status cpu_q_matmul(void *self, const gb_matmul_args *args)
{
    if (!cpu_deferring(self))
        return cpu_matmul(self, args);
    matmul_work w = {self, {0}};
    /* a caller built for an older ABI passes a shorter struct: copy what it has */
    memcpy(&w.args, args, args->struct_size < sizeof w.args ? args->struct_size
                                                             : sizeof w.args);
    return cpu_submit(self, NULL, run_matmul, &w, sizeof w);
}

typedef struct embed_work {
    cpu_device *dev;
    gb_dtype dtype;
    void *out;
    float *dwte, *dwpe;
    const void *dout;
    const int32_t *tokens;
    const float *wte, *wpe;
    int64_t B, T, C;
} embed_work;

static gb_status run_embed_forward(void *arg)
{
    embed_work *w = arg;
    return cpu_embed_forward(w->dev, w->dtype, w->out, w->tokens, w->wte, w->wpe, w->B, w->T,
                             w->C);
}

gb_status cpu_q_embed_forward(void *self, gb_dtype dtype, void *out, const int32_t *tokens,
                              const float *wte, const float *wpe, int64_t B, int64_t T,
                              int64_t C)
{
    embed_work w = {.dev = self, .dtype = dtype, .out = out, .tokens = tokens, .wte = wte,
                    .wpe = wpe, .B = B, .T = T, .C = C};
    return cpu_submit(self, NULL, run_embed_forward, &w, sizeof w);
}

static gb_status run_embed_backward(void *arg)
{
    embed_work *w = arg;
    return cpu_embed_backward(w->dev, w->dtype, w->dwte, w->dwpe, w->dout, w->tokens, w->B,
                              w->T, w->C);
}

gb_status cpu_q_embed_backward(void *self, gb_dtype dtype, float *dwte, float *dwpe,
                               const void *dout, const int32_t *tokens, int64_t B, int64_t T,
                               int64_t C)
{
    embed_work w = {.dev = self, .dtype = dtype, .dwte = dwte, .dwpe = dwpe, .dout = dout,
                    .tokens = tokens, .B = B, .T = T, .C = C};
    return cpu_submit(self, NULL, run_embed_backward, &w, sizeof w);
}

typedef struct layernorm_work {
    cpu_device *dev;
    gb_dtype dtype;
    void *out;            /* forward: out; backward: dx */
    float *mean, *rstd;   /* forward writes them */
    const float *saved_mean, *saved_rstd;
    float *dweight, *dbias;
    const void *x, *dout;
    const float *weight, *bias;
    int64_t N, C;
    float eps;
} layernorm_work;

static gb_status run_layernorm_forward(void *arg)
{
    layernorm_work *w = arg;
    return cpu_layernorm_forward(w->dev, w->dtype, w->out, w->mean, w->rstd, w->x, w->weight,
                                 w->bias, w->N, w->C, w->eps);
}

gb_status cpu_q_layernorm_forward(void *self, gb_dtype dtype, void *out, float *mean,
                                  float *rstd, const void *x, const float *weight,
                                  const float *bias, int64_t N, int64_t C, float eps)
{
    layernorm_work w = {.dev = self, .dtype = dtype, .out = out, .mean = mean, .rstd = rstd,
                        .x = x, .weight = weight, .bias = bias, .N = N, .C = C, .eps = eps};
    return cpu_submit(self, NULL, run_layernorm_forward, &w, sizeof w);
}

static gb_status run_layernorm_backward(void *arg)
{
    layernorm_work *w = arg;
    return cpu_layernorm_backward(w->dev, w->dtype, w->out, w->dweight, w->dbias, w->dout,
                                  w->x, w->weight, w->saved_mean, w->saved_rstd, w->N, w->C);
}

gb_status cpu_q_layernorm_backward(void *self, gb_dtype dtype, void *dx, float *dweight,
                                   float *dbias, const void *dout, const void *x,
                                   const float *weight, const float *mean, const float *rstd,
                                   int64_t N, int64_t C)
{
    layernorm_work w = {.dev = self, .dtype = dtype, .out = dx, .dweight = dweight,
                        .dbias = dbias, .dout = dout, .x = x, .weight = weight,
                        .saved_mean = mean, .saved_rstd = rstd, .N = N, .C = C};
    return cpu_submit(self, NULL, run_layernorm_backward, &w, sizeof w);
}

/* GELU forward and backward (both forms), add and dropout: elementwise over n, out =
 * unary(a), binary(a, b), or without either kernel dropout(a) with p and seed. */
typedef gb_status (*unary_kernel)(void *self, gb_dtype dtype, void *out, const void *a,
                                  int64_t n);
typedef gb_status (*binary_kernel)(void *self, gb_dtype dtype, void *out, const void *a,
                                   const void *b, int64_t n);
typedef struct pointwise_work {
    cpu_device *dev;
    gb_dtype dtype;
    void *out;
    const void *a, *b;
    int64_t n;
    unary_kernel unary;
    binary_kernel binary;
    float p;            /* dropout's */
    uint64_t seed;
} pointwise_work;

static gb_status run_pointwise(void *arg)
{
    pointwise_work *w = arg;
    if (w->binary)
        return w->binary(w->dev, w->dtype, w->out, w->a, w->b, w->n);
    return w->unary ? w->unary(w->dev, w->dtype, w->out, w->a, w->n)
                    : cpu_dropout(w->dev, w->dtype, w->out, w->a, w->n, w->p, w->seed);
}

static gb_status submit_pointwise(pointwise_work w)
{
    return cpu_submit(w.dev, NULL, run_pointwise, &w, sizeof w);
}

static gb_status submit_unary(void *self, gb_dtype dtype, void *out, const void *a, int64_t n,
                              unary_kernel kernel)
{
    return submit_pointwise((pointwise_work){self, dtype, out, a, NULL, n, kernel, NULL, 0, 0});
}

static gb_status submit_binary(void *self, gb_dtype dtype, void *out, const void *a,
                               const void *b, int64_t n, binary_kernel kernel)
{
    return submit_pointwise((pointwise_work){self, dtype, out, a, b, n, NULL, kernel, 0, 0});
}

gb_status cpu_q_gelu_forward(void *self, gb_dtype dtype, void *out, const void *x, int64_t n)
{
    return submit_unary(self, dtype, out, x, n, cpu_gelu_forward);
}

gb_status cpu_q_gelu_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                              const void *dout, int64_t n)
{
    return submit_binary(self, dtype, dx, x, dout, n, cpu_gelu_backward);
}

gb_status cpu_q_gelu_tanh_forward(void *self, gb_dtype dtype, void *out, const void *x,
                                  int64_t n)
{
    return submit_unary(self, dtype, out, x, n, cpu_gelu_tanh_forward);
}

gb_status cpu_q_gelu_tanh_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                                   const void *dout, int64_t n)
{
    return submit_binary(self, dtype, dx, x, dout, n, cpu_gelu_tanh_backward);
}

gb_status cpu_q_add(void *self, gb_dtype dtype, void *out, const void *a, const void *b,
                    int64_t n)
{
    return submit_binary(self, dtype, out, a, b, n, cpu_add);
}

gb_status cpu_q_dropout(void *self, gb_dtype dtype, void *out, const void *in, int64_t n,
                        float p, uint64_t seed)
{
    return submit_pointwise(
        (pointwise_work){self, dtype, out, in, NULL, n, NULL, NULL, p, seed});
}

typedef struct reduce_work {
    cpu_device *dev;
    gb_dtype dtype;
    float *out;
    const void *x;
    int64_t rows, cols;
} reduce_work;

static gb_status run_bias_backward(void *arg)
{
    reduce_work *w = arg;
    return cpu_bias_backward(w->dev, w->dtype, w->out, w->x, w->rows, w->cols);
}

gb_status cpu_q_bias_backward(void *self, gb_dtype dtype, float *dbias, const void *dout,
                              int64_t N, int64_t C)
{
    reduce_work w = {self, dtype, dbias, dout, N, C};
    return cpu_submit(self, NULL, run_bias_backward, &w, sizeof w);
}

static gb_status run_sum_squares(void *arg)
{
    reduce_work *w = arg;
    return cpu_sum_squares(w->dev, w->out, w->x, w->rows);
}

gb_status cpu_q_sum_squares(void *self, float *out, const float *x, int64_t n)
{
    reduce_work w = {self, GB_F32, out, x, n, 1};
    return cpu_submit(self, NULL, run_sum_squares, &w, sizeof w);
}

typedef struct cross_entropy_work {
    cpu_device *dev;
    gb_dtype dtype;
    float *losses;
    void *dlogits;
    const void *logits;
    int64_t ld;
    const int32_t *targets;
    int64_t N, V;
    float dloss;
    const float *dloss_scale;   /* NULL, or a device scalar dloss is multiplied by */
} cross_entropy_work;

static gb_status run_cross_entropy(void *arg)
{
    cross_entropy_work *w = arg;
    float dloss = w->dloss_scale ? w->dloss * *w->dloss_scale : w->dloss;
    return cpu_cross_entropy_ld(w->dev, w->dtype, w->losses, w->dlogits, w->logits, w->ld,
                                w->targets, w->N, w->V, dloss);
}

gb_status cpu_q_cross_entropy(void *self, gb_dtype dtype, float *losses, void *dlogits,
                              const void *logits, const int32_t *targets, int64_t N,
                              int64_t V, float dloss)
{
    return cpu_q_cross_entropy_ld(self, dtype, losses, dlogits, logits, V, targets, N, V,
                                  dloss);
}

gb_status cpu_q_cross_entropy_ld(void *self, gb_dtype dtype, float *losses, void *dlogits,
                                 const void *logits, int64_t ld, const int32_t *targets,
                                 int64_t N, int64_t V, float dloss)
{
    cross_entropy_work w = {self, dtype, losses, dlogits, logits, ld, targets, N, V, dloss, NULL};
    return cpu_submit(self, NULL, run_cross_entropy, &w, sizeof w);
}

gb_status cpu_q_cross_entropy_scaled(void *self, gb_dtype dtype, float *losses, void *dlogits,
                                     const void *logits, int64_t ld, const int32_t *targets,
                                     int64_t N, int64_t V, float dloss, const float *dloss_scale)
{
    if (!dloss_scale)
        return cpu_fail(self, GB_ERR_INVALID_ARG, "cross_entropy_scaled: dloss_scale is NULL");
    cross_entropy_work w = {self,    dtype, losses, dlogits, logits, ld,
                            targets, N,     V,      dloss,   dloss_scale};
    return cpu_submit(self, NULL, run_cross_entropy, &w, sizeof w);
}

typedef struct loss_scaler_work {
    gb_loss_scaler *scaler;
    const float *norm_sq;
} loss_scaler_work;

static gb_status run_loss_scaler_update(void *arg)
{
    loss_scaler_work *w = arg;
    gb_loss_scaler_step(w->scaler, gb_loss_scale_found_inf(*w->norm_sq));
    return GB_OK;
}

gb_status cpu_q_loss_scaler_update(void *self, gb_loss_scaler *scaler, const float *norm_sq)
{
    if (!scaler || !norm_sq)
        return cpu_fail(self, GB_ERR_INVALID_ARG, "loss_scaler_update: scaler and norm_sq "
                        "must not be NULL");
    loss_scaler_work w = {scaler, norm_sq};
    return cpu_submit(self, NULL, run_loss_scaler_update, &w, sizeof w);
}
