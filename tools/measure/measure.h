/* What `gearbox doctor` and `gearbox bench` measure: wall-time statistics, matmuls timed
 * through a device plugin, the CPU's FMA limits per dtype and STREAM's triad bandwidth.
 * The engine measures nothing of this; it only reads the CPU peaks recorded here in its
 * cache (gb_cpu_cached_peak, gearbox/engine/machine.h) for MFU.
 *
 * Measurements are quick (well under a second each) and therefore approximate; they are
 * limits to print figures against, not benchmarks in their own right. */
#ifndef GB_TOOLS_MEASURE_H
#define GB_TOOLS_MEASURE_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/device.h"
#include "gearbox/engine/machine.h"

/* Best, median and worst wall time of repeated calls. */
typedef struct gb_timing {
    double best_ms, median_ms, worst_ms;
} gb_timing;

/* The timing of `n` >= 1 measurements in ms (sorts them in place). */
gb_timing gb_timing_of(double *ms, int n);

/* A device buffer of `count` elements of `dtype` (f32, bf16 or f16) holding a small
 * repeating pattern (no zeros, no subnormals, so no kernel takes a shortcut); NULL when
 * the device refused. The caller frees it with ops->free. */
void *gb_device_pattern(const gb_device_ops *ops, void *dev, gb_dtype dtype, size_t count);
/* Times the matmul `call` as given (pointers, dtypes and epilogue set by the caller) on
 * the device instance `dev`: one warm-up call, then `reps` calls each followed by sync.
 * 0, or -1 when the device refused (its message is in its instance's error). */
int gb_time_matmul_call(const gb_device_ops *ops, void *dev, const gb_matmul_args *call,
                        int reps, gb_timing *out);
/* Times `shape` (its m, n, k, trans_a, trans_b, alpha and beta; the pointers and leading
 * dimensions are filled here) as f32 on the device instance `dev`: one warm-up call, then
 * `reps` calls each followed by sync. Buffers are allocated on the device and freed
 * again. 0, or -1 when the device refused (its message is in its instance's error). */
int gb_time_matmul(const gb_device_ops *ops, void *dev, gb_matmul_args shape, int reps,
                   gb_timing *out);
/* GFLOP/s of an m x n x k matmul that took `ms`. */
double gb_matmul_gflops(int64_t m, int64_t n, int64_t k, double ms);

/* What the device's own matmul reaches: the best of GB_PEAK_CALLS 1024^3 f32 matmuls
 * (after a warm-up), measured once per process and remembered; for `gearbox doctor` and
 * `gearbox bench` to print beside the stated peak. 0 when the device refused. */
#define GB_PEAK_CALLS 3
double gb_measured_sgemm_flops(const gb_device_ops *ops, void *dev);

/* The f32 FMA limit of this CPU, measured: every thread (`threads`, 0: the pool's default)
 * runs independent chains of vector FMAs of the widest unit it has (AVX-512, else AVX2)
 * with no memory traffic; the best of GB_FMA_RUNS passes of about 50 ms, in FLOP/s
 * counting 2 per FMA lane. No matmul can run faster, so it is the honest denominator for
 * the FLOPs a step executes. `isa` (may be NULL) names the unit measured. 0 on a CPU
 * without AVX2 and FMA. */
#define GB_FMA_RUNS 5
double gb_measure_fma_flops(int threads, const char **isa);
/* The same limit for `c`: bf16 with AVX512_BF16's dot products (vdpbf16ps, two products
 * and two sums per f32 lane: twice the f32 rate), f16 with AVX512_FP16's 32-lane FMAs;
 * a dtype the CPU has no instructions for is computed as f32 and gets the f32 loop.
 * AMX is not measured (its rated figure stands). `per_cpu_s` (may be NULL) gets the rate
 * per second of CPU time each thread spent, times the threads: on a machine shared with
 * other programs the wall rate falls with the time they take, this one far less, so it
 * compares with work timed the same way (`gearbox bench step`'s CPU time per step). */
double gb_measure_compute_flops(gb_compute c, int threads, const char **isa,
                                double *per_cpu_s);
/* The measured peak MFU weighs: a short pass of gb_measure_compute_flops's loop (a few
 * ms), raised to the best measured so far for this compute, thread count and CPU model in
 * the engine's cache file (gb_cpu_cached_peak), which every measurement here raises
 * (gb_cpu_record_peak) and training reads. Each measurement counts as the larger of its
 * wall and CPU-time rates, and the cache keeps a run on a busy machine from reading a low
 * peak. 0 where gb_measure_compute_flops is. */
double gb_cpu_measured_peak(gb_compute c, int threads, const char **isa);

/* STREAM's triad a[i] = b[i] + s * c[i] over three f32 arrays of GB_TRIAD_ELEMENTS
 * (128 MiB each, far beyond any cache) with `threads` OpenMP threads (0: the pool's
 * default); pages are first touched by the threads that use them. The best of
 * GB_TRIAD_RUNS passes, counting 12 bytes per element as STREAM does (write-allocate
 * traffic not counted). In GB/s (1e9 bytes); 0 when the arrays cannot be allocated. */
#define GB_TRIAD_ELEMENTS ((int64_t)1 << 25)
#define GB_TRIAD_RUNS 10
double gb_measure_triad_gbs(int threads);

#endif
