/* The CPU device plugin's instance and the kernels each source file contributes to its
 * vtable (device_cpu.c assembles them).
 *
 * An instance is used by one thread at a time, like a queue on a GPU: its kernels fan
 * out onto the OpenMP pool but the instance's caches and scratch are not locked.
 */
#ifndef GB_DEVICE_CPU_H
#define GB_DEVICE_CPU_H

#include <omp.h>

#include "cpu_kernels.h"
#include "device_kernels.h"
#include "dtype_rows.h"
#include "gearbox/device.h"
#include "omp_team.h"
#include "queue.h"
#include "reduce_order.h"

typedef struct cpu_matmul_cache cpu_matmul_cache;

typedef struct cpu_device {
    const gb_host *host;
    int threads;                /* host->num_threads, at least 1: the most; cpu_team() */
    cpu_matmul_cache *matmul;   /* oneDNN engine, stream and primitives (matmul.c) */
    const cpu_kernels *kernels; /* the vectorised loops this CPU runs (cpu_kernels.h) */
    double *scratch;            /* per-chunk partial sums of the reductions */
    size_t scratch_count;
    float *rows;                /* (threads, row_floats): 16-bit rows widened to f32 */
    int64_t row_floats;
    cpu_queue queue;            /* streams, events and the GPU-like mode (queue.h) */
} cpu_device;

/* The threads a kernel's parallel region runs on now (kernels/cpu/omp_team.h). */
static inline int cpu_team(const cpu_device *dev)
{
    return gb_omp_team(dev->threads);
}

/* Below this many elements a kernel runs on the calling thread: waking the pool costs
 * more than the work. */
#define CPU_PARALLEL_MIN 16384

/* ---- helpers (calls.c) ---- */
gb_status cpu_fail(cpu_device *dev, gb_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* GB_OK when dtype is f32, bf16 or f16 and both sizes are >= 0; otherwise says which is
 * wrong. */
gb_status cpu_check_call(cpu_device *dev, const char *kernel, gb_dtype dtype, int64_t rows,
                         int64_t cols);
/* `count` doubles of scratch, grown on demand so steady-state calls do not allocate;
 * NULL (with the error set) when out of memory. */
double *cpu_scratch(cpu_device *dev, const char *kernel, size_t count);

/* Scratch rows for a kernel of `dtype`: *rows = NULL for f32, which reads and writes its
 * rows in place; else `floats` per thread (see cpu_thread_rows), kept from call to call
 * and grown by the first call that needs more. */
gb_status cpu_row_scratch(cpu_device *dev, const char *kernel, gb_dtype dtype, int64_t floats,
                          float **rows);
/* cpu_check_call(), then cpu_row_scratch(): the checks and the scratch rows of a kernel
 * over rows x cols. */
gb_status cpu_check_rows(cpu_device *dev, const char *kernel, gb_dtype dtype, int64_t rows,
                         int64_t cols, int64_t floats, float **scratch);
/* Float `offset` of the calling thread's `floats` of the scratch cpu_row_scratch() handed
 * out; NULL for f32. */
static inline float *cpu_thread_rows(float *rows, int64_t floats, int64_t offset)
{
    return rows ? rows + (int64_t)omp_get_thread_num() * floats + offset : NULL;
}

/* ---- reductions with a fixed order (reductions.c) ---- */
/* Sums over rows are cut into gb_chunk_count() chunks of GB_CHUNK_ROWS rows (the sum of
 * squares: GB_CHUNK_ELEMENTS elements), kernels/common/reduce_order.h's order, which
 * depends on the size only, never on the thread count, so the partial sums, and the
 * results, are the same bits whatever the number of threads (and on the CUDA device). */
/* dst[c] += sum over p of partials[p * stride + c], p in increasing order.
 * dst (cols); partials (chunks, stride >= cols). */
void cpu_add_partials(cpu_device *dev, float *dst, const double *partials, int chunks,
                      int64_t stride, int64_t cols);

/* ---- kernels: the gb_device_ops entries ---- */
gb_status cpu_matmul_open(cpu_device *dev);
void cpu_matmul_close(cpu_device *dev);
/* "oneDNN 2.6.3 (git 52b5f107, OpenMP runtime, kernels for avx2)", for gb_device_info's
 * libraries, from dnnl_version() and dnnl_get_effective_cpu_isa(). */
void cpu_matmul_library(char *buf, size_t cap);
GB_DEVICE_KERNELS(cpu);

#endif /* GB_DEVICE_CPU_H */
