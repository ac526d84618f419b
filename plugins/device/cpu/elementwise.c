/* Element-wise kernels on the CPU device: GELU forward and backward in the exact (erf)
 * and the tanh form, and the residual add.
 *
 * Each is one flat range split statically across threads. The exact GELU runs the
 * instance's vectorised loops (cpu_kernels.h) on each thread's slice, the tanh form
 * pointwise.h's plain loops; the per-element math is kernels/common/gelu.h's in every
 * build, the CUDA device's too. Nothing is reduced, so results do not depend on the
 * thread count at all. f32 slices are computed in place in one step; 16-bit slices a
 * block at a time through per-thread f32 rows (dtype_rows.h).
 */
#include "cpu_device.h"
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

typedef void (*gelu_forward_fn)(float *out, const float *x, int64_t n);
typedef void (*gelu_backward_fn)(float *dx, const float *x, const float *dout, int64_t n);

static gb_status gelu_forward(cpu_device *dev, const char *kernel, gelu_forward_fn fn,
                              gb_dtype dtype, void *out_, const void *x_, int64_t n)
{
    gb_status status = cpu_check_call(dev, kernel, dtype, n, 1);
    float *rows;   // (threads, 2 WIDEN_BLOCK) when 16-bit: x, out
    if (status == GB_OK)
        status = cpu_row_scratch(dev, kernel, dtype, 2 * WIDEN_BLOCK, &rows);
    if (status != GB_OK)
        return status;
    // out_, x_ (n) act
    const int parts = n >= CPU_PARALLEL_MIN ? dev->threads : 1;
    #pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
    for (int part = 0; part < parts; part++) {
        int64_t begin, end;
        slice_of(n, part, parts, &begin, &end);
        const int64_t step = step_of(dtype, end - begin);
        for (int64_t i = begin; i < end; i += step) {
            const int64_t len = end - i < step ? end - i : step;
            const float *x = dtype_read_row(x_, dtype, i, len,
                                            cpu_thread_rows(rows, 2 * WIDEN_BLOCK, 0));
            float *out = dtype_write_row(out_, dtype, i,
                                         cpu_thread_rows(rows, 2 * WIDEN_BLOCK, WIDEN_BLOCK));
            fn(out, x, len);
            dtype_store_row(out_, dtype, i, out, len);
        }
    }
    return GB_OK;
}

static gb_status gelu_backward(cpu_device *dev, const char *kernel, gelu_backward_fn fn,
                               gb_dtype dtype, void *dx_, const void *x_, const void *dout_,
                               int64_t n)
{
    gb_status status = cpu_check_call(dev, kernel, dtype, n, 1);
    float *rows;   // (threads, 3 WIDEN_BLOCK) when 16-bit: x, dout, dx
    if (status == GB_OK)
        status = cpu_row_scratch(dev, kernel, dtype, 3 * WIDEN_BLOCK, &rows);
    if (status != GB_OK)
        return status;
    // dx_ (n) act, may alias dout_; x_, dout_ (n) act
    const int parts = n >= CPU_PARALLEL_MIN ? dev->threads : 1;
    #pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
    for (int part = 0; part < parts; part++) {
        int64_t begin, end;
        slice_of(n, part, parts, &begin, &end);
        const int64_t step = step_of(dtype, end - begin);
        for (int64_t i = begin; i < end; i += step) {
            const int64_t len = end - i < step ? end - i : step;
            const float *x = dtype_read_row(x_, dtype, i, len,
                                            cpu_thread_rows(rows, 3 * WIDEN_BLOCK, 0));
            const float *dout = dtype_read_row(dout_, dtype, i, len,
                                               cpu_thread_rows(rows, 3 * WIDEN_BLOCK,
                                                               WIDEN_BLOCK));
            float *dx = dtype_write_row(dx_, dtype, i,
                                        cpu_thread_rows(rows, 3 * WIDEN_BLOCK, 2 * WIDEN_BLOCK));
            fn(dx, x, dout, len);
            dtype_store_row(dx_, dtype, i, dx, len);
        }
    }
    return GB_OK;
}

gb_status cpu_gelu_forward(void *self, gb_dtype dtype, void *out, const void *x, int64_t n)
{
    cpu_device *dev = self;
    return gelu_forward(dev, "gelu_forward", dev->kernels->gelu_forward, dtype, out, x, n);
}

gb_status cpu_gelu_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                            const void *dout, int64_t n)
{
    cpu_device *dev = self;
    return gelu_backward(dev, "gelu_backward", dev->kernels->gelu_backward, dtype, dx, x,
                         dout, n);
}

gb_status cpu_gelu_tanh_forward(void *self, gb_dtype dtype, void *out, const void *x,
                                int64_t n)
{
    return gelu_forward(self, "gelu_tanh_forward", gelu_tanh_forward_loop, dtype, out, x, n);
}

gb_status cpu_gelu_tanh_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                                 const void *dout, int64_t n)
{
    return gelu_backward(self, "gelu_tanh_backward", gelu_tanh_backward_loop, dtype, dx, x,
                         dout, n);
}

gb_status cpu_add(void *self, gb_dtype dtype, void *out_, const void *a_, const void *b_,
                  int64_t n)
{
    cpu_device *dev = self;
    gb_status status = cpu_check_call(dev, "add", dtype, n, 1);
    float *rows;   // (threads, 3 WIDEN_BLOCK) when 16-bit: a, b, out
    if (status == GB_OK)
        status = cpu_row_scratch(dev, "add", dtype, 3 * WIDEN_BLOCK, &rows);
    if (status != GB_OK)
        return status;
    // out_ (n) act, may alias a_ or b_; a_, b_ (n) act
    const int parts = n >= CPU_PARALLEL_MIN ? dev->threads : 1;
    #pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
    for (int part = 0; part < parts; part++) {
        int64_t begin, end;
        slice_of(n, part, parts, &begin, &end);
        const int64_t step = step_of(dtype, end - begin);
        for (int64_t i = begin; i < end; i += step) {
            const int64_t len = end - i < step ? end - i : step;
            const float *a = dtype_read_row(a_, dtype, i, len,
                                            cpu_thread_rows(rows, 3 * WIDEN_BLOCK, 0));
            const float *b = dtype_read_row(b_, dtype, i, len,
                                            cpu_thread_rows(rows, 3 * WIDEN_BLOCK, WIDEN_BLOCK));
            float *out = dtype_write_row(out_, dtype, i,
                                         cpu_thread_rows(rows, 3 * WIDEN_BLOCK, 2 * WIDEN_BLOCK));
            #pragma omp simd
            for (int64_t j = 0; j < len; j++)
                out[j] = a[j] + b[j];
            dtype_store_row(out_, dtype, i, out, len);
        }
    }
    return GB_OK;
}
