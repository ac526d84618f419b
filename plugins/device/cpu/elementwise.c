/* Element-wise kernels on the CPU device: GELU forward and backward in the exact (erf)
 * and the tanh form, the residual add, and dropout (kernels/common/dropout.h's mask).
 *
 * Each is one flat range cut into pieces that the threads take in turn (omp_team.h). The exact GELU runs the
 * instance's vectorised loops (cpu_kernels.h) on each thread's slice, the tanh form
 * pointwise.h's plain loops; the per-element math is kernels/common/gelu.h's in every
 * build, the CUDA device's too. Nothing is reduced, so results do not depend on the
 * thread count at all. f32 slices are computed in place in one step; 16-bit slices a
 * block at a time through per-thread f32 rows (dtype_rows.h).
 */
#include "cpu_device.h"
#include "dropout.h"
#include "pointwise.h"

/* Slice `part` of `parts` of n elements: [begin, end), cut on multiples of CPU_VEC so
 * that vector loops see whole vectors everywhere but at the very end. */
static void slice_of(int64_t n, int part, int parts, int64_t *begin, int64_t *end)
{
    *begin = n * part / parts / CPU_VEC * CPU_VEC;
    *end = part + 1 == parts ? n : n * (part + 1) / parts / CPU_VEC * CPU_VEC;
}

/* Elements per block of a 16-bit slice (a multiple of CPU_VEC): each thread holds three
 * f32 rows of this many. */
#define WIDEN_BLOCK 2048

/* Elements one step through a slice of `n` takes: all of them for f32, read and written
 * in place, else a block of the scratch rows. */
static int64_t step_of(gb_dtype dtype, int64_t n)
{
    return dtype != GB_F32 ? WIDEN_BLOCK : n > 0 ? n : 1;
}

typedef void (*unary_fn)(float *out, const float *x, int64_t n);
typedef void (*binary_fn)(float *out, const float *a, const float *b, int64_t n);
/* A unary function of each element and its index: elements [first, first + n). */
typedef struct indexed_fn {
    void (*run)(float *out, const float *x, int64_t first, int64_t n, const void *ctx);
    const void *ctx;
} indexed_fn;

/* out = unary(a), binary(a, b) when `binary` is given, or indexed.run over a when that
 * is, over n elements of `dtype`. 16-bit blocks go through the thread's f32 rows: a, then
 * b, then out. */
static gb_status elementwise_indexed(cpu_device *dev, const char *kernel, gb_dtype dtype,
                                     unary_fn unary, binary_fn binary, indexed_fn indexed,
                                     void *out_, const void *a_, const void *b_, int64_t n)
{
    const int inputs = binary ? 2 : 1;
    const int64_t floats = (inputs + 1) * WIDEN_BLOCK;
    float *rows;   // (threads, floats) when 16-bit
    gb_status status = cpu_check_rows(dev, kernel, dtype, n, 1, floats, &rows);
    if (status != GB_OK)
        return status;
    // out_ (n) act, may alias a_ or b_; a_, b_ (n) act
    const int team = cpu_team(dev);
    const int parts = n >= CPU_PARALLEL_MIN ? team * GB_OMP_PIECES_PER_THREAD : 1;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (parts > 1)
    for (int part = 0; part < parts; part++) {
        int64_t begin, end;
        slice_of(n, part, parts, &begin, &end);
        const int64_t step = step_of(dtype, end - begin);
        for (int64_t i = begin; i < end; i += step) {
            const int64_t len = end - i < step ? end - i : step;
            const float *a = dtype_read_row(a_, dtype, i, len, cpu_thread_rows(rows, floats, 0));
            float *out = dtype_write_row(out_, dtype, i,
                                         cpu_thread_rows(rows, floats, inputs * WIDEN_BLOCK));
            if (indexed.run)
                indexed.run(out, a, i, len, indexed.ctx);
            else if (binary)
                binary(out, a,
                       dtype_read_row(b_, dtype, i, len,
                                      cpu_thread_rows(rows, floats, WIDEN_BLOCK)),
                       len);
            else
                unary(out, a, len);
            dtype_store_row(out_, dtype, i, out, len);
        }
    }
    return GB_OK;
}

static gb_status elementwise(cpu_device *dev, const char *kernel, gb_dtype dtype,
                             unary_fn unary, binary_fn binary, void *out, const void *a,
                             const void *b, int64_t n)
{
    return elementwise_indexed(dev, kernel, dtype, unary, binary, (indexed_fn){NULL, NULL},
                               out, a, b, n);
}

gb_status cpu_gelu_forward(void *self, gb_dtype dtype, void *out, const void *x, int64_t n)
{
    cpu_device *dev = self;
    return elementwise(dev, "gelu_forward", dtype, dev->kernels->gelu_forward, NULL, out, x,
                       NULL, n);
}

gb_status cpu_gelu_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                            const void *dout, int64_t n)
{
    cpu_device *dev = self;
    return elementwise(dev, "gelu_backward", dtype, NULL, dev->kernels->gelu_backward, dx, x,
                       dout, n);
}

gb_status cpu_gelu_tanh_forward(void *self, gb_dtype dtype, void *out, const void *x,
                                int64_t n)
{
    return elementwise(self, "gelu_tanh_forward", dtype, gelu_tanh_forward_loop, NULL, out, x,
                       NULL, n);
}

gb_status cpu_gelu_tanh_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                                 const void *dout, int64_t n)
{
    return elementwise(self, "gelu_tanh_backward", dtype, NULL, gelu_tanh_backward_loop, dx, x,
                       dout, n);
}

// out, a, b (n); out may alias a or b
static void add_loop(float *out, const float *a, const float *b, int64_t n)
{
    #pragma omp simd
    for (int64_t j = 0; j < n; j++)
        out[j] = a[j] + b[j];
}

gb_status cpu_add(void *self, gb_dtype dtype, void *out, const void *a, const void *b,
                  int64_t n)
{
    return elementwise(self, "add", dtype, NULL, add_loop, out, a, b, n);
}

typedef struct dropout_mask {
    uint64_t seed, threshold;
    float scale;
} dropout_mask;

// out, x (n): elements first .. first + n - 1 of the tensor; out may alias x
static void dropout_loop(float *out, const float *x, int64_t first, int64_t n, const void *ctx)
{
    const dropout_mask *m = ctx;
    for (int64_t j = 0; j < n; j++)
        out[j] = gb_dropout_apply(x[j], m->seed, (uint64_t)(first + j), m->threshold, m->scale);
}

gb_status cpu_dropout(void *self, gb_dtype dtype, void *out, const void *in, int64_t n,
                      float p, uint64_t seed)
{
    if (!(p >= 0.0f && p < 1.0f))
        return cpu_fail(self, GB_ERR_INVALID_ARG, "dropout: p = %g is outside [0, 1)",
                        (double)p);
    dropout_mask mask = {seed, gb_dropout_threshold(p), gb_dropout_scale(p)};
    return elementwise_indexed(self, "dropout", dtype, NULL, NULL,
                               (indexed_fn){dropout_loop, &mask}, out, in, NULL, n);
}
