/* The tools' measurements; see measure.h. The CPU's limits are chains of vector FMAs
 * built once per instruction set (target attributes), so a portable build measures the
 * widest unit the CPU has; every limit measured raises the engine's peak cache. */
#include "measure.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "gearbox/convert.h"
#include "gearbox/engine/clock.h"

/* ---- timings -------------------------------------------------------------------- */

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

gb_timing gb_timing_of(double *ms, int n)
{
    qsort(ms, (size_t)n, sizeof *ms, compare_doubles);
    return (gb_timing){ms[0], n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]), ms[n - 1]};
}

void *gb_device_pattern(const gb_device_ops *ops, void *dev, gb_dtype dtype, size_t count)
{
    size_t size = gb_dtype_size(dtype);
    unsigned char *host = malloc(count * size);
    void *buf = NULL;
    if (host) {
        for (size_t i = 0; i < count; i++) {
            float v = 0.25f + (float)(i % 61) / 128.0f;
            uint16_t half = dtype == GB_BF16 ? gb_bf16_from_f32(v) : gb_f16_from_f32(v);
            memcpy(host + i * size, dtype == GB_F32 ? (const void *)&v : (const void *)&half,
                   size);
        }
        if (ops->alloc(dev, count * size, &buf) != GB_OK ||
            ops->copy(dev, buf, host, count * size, GB_COPY_HOST_TO_DEVICE) != GB_OK) {
            if (buf)
                ops->free(dev, buf);
            buf = NULL;
        }
    }
    free(host);
    return buf;
}

int gb_time_matmul_call(const gb_device_ops *ops, void *dev, const gb_matmul_args *call,
                        int reps, gb_timing *out)
{
    double *ms = calloc((size_t)reps + 1, sizeof *ms);
    int rc = ms && reps > 0 ? 0 : -1;
    for (int i = 0; rc == 0 && i <= reps; i++) {
        double t0 = gb_now_ms();
        if (ops->matmul(dev, call) != GB_OK || ops->sync(dev) != GB_OK)
            rc = -1;
        if (i > 0)
            ms[i - 1] = gb_now_ms() - t0;
    }
    if (rc == 0)
        *out = gb_timing_of(ms, reps);
    free(ms);
    return rc;
}

int gb_time_matmul(const gb_device_ops *ops, void *dev, gb_matmul_args shape, int reps,
                   gb_timing *out)
{
    void *a = gb_device_pattern(ops, dev, GB_F32, (size_t)(shape.m * shape.k));
    void *b = gb_device_pattern(ops, dev, GB_F32, (size_t)(shape.k * shape.n));
    void *c = gb_device_pattern(ops, dev, GB_F32, (size_t)(shape.m * shape.n));
    shape.struct_size = sizeof shape;
    shape.a = a;
    shape.lda = shape.trans_a ? shape.m : shape.k;
    shape.b = b;
    shape.ldb = shape.trans_b ? shape.k : shape.n;
    shape.c = c;
    shape.ldc = shape.n;
    shape.dtype_a = shape.dtype_b = shape.dtype_c = GB_F32;
    int rc = a && b && c ? gb_time_matmul_call(ops, dev, &shape, reps, out) : -1;
    if (a)
        ops->free(dev, a);
    if (b)
        ops->free(dev, b);
    if (c)
        ops->free(dev, c);
    return rc;
}

double gb_matmul_gflops(int64_t m, int64_t n, int64_t k, double ms)
{
    return ms > 0 ? 2.0 * (double)m * (double)n * (double)k / (ms * 1e6) : 0.0;
}

double gb_measured_sgemm_flops(const gb_device_ops *ops, void *dev)
{
    static double measured;   /* per process: the device does not change under a run */
    if (measured == 0) {
        gb_matmul_args shape = {.m = 1024, .n = 1024, .k = 1024, .alpha = 1.0f};
        gb_timing t;
        if (gb_time_matmul(ops, dev, shape, GB_PEAK_CALLS, &t) == 0)
            measured = gb_matmul_gflops(shape.m, shape.n, shape.k, t.best_ms) * 1e9;
    }
    return measured;
}

/* ---- the CPU's measured limits -------------------------------------------------------------- */

/* Each thread runs chains of vector FMAs (or dot products) into independent accumulators,
 * more chains than latency x units (4 x 2 on the CPUs seen), so the units never wait on a
 * result: the loop then runs at the instruction's throughput and nothing else (no loads,
 * no stores). Built for each unit with target attributes, so a portable build measures it
 * too. */
#define FMA_ITERS ((int64_t)1 << 24)
/* The quick measurement of gb_cpu_measured_peak is shorter: a few ms per pass. */
#define QUICK_ITERS ((int64_t)1 << 21)
#define QUICK_RUNS 3

typedef float (*chain_loop)(int64_t iters, float seed);

#if defined(__x86_64__)
#define FMA_CHAINS 12

/* One chain loop, built for the unit `isa` names: FMA_CHAINS accumulators of vector type
 * V start at SET1(j), each iteration applies STEP(acc) to every one (`consts` declares the
 * operands STEP uses, from the seed), and the sum of the chains is reduced to a float by
 * REDUCE, so nothing is optimised away. */
#define CHAIN_LOOP(name, isa, V, consts, SET1, STEP, ADD, REDUCE)                     \
    __attribute__((target(isa))) static float name(int64_t iters, float seed)         \
    {                                                                                 \
        consts;                                                                       \
        V acc[FMA_CHAINS];                                                            \
        for (int j = 0; j < FMA_CHAINS; j++)                                          \
            acc[j] = SET1((float)j);                                                  \
        for (int64_t i = 0; i < iters; i++) {                                         \
            _Pragma("GCC unroll 12")                                                  \
            for (int j = 0; j < FMA_CHAINS; j++)                                      \
                acc[j] = STEP(acc[j]);                                                \
        }                                                                             \
        V sum = acc[0];                                                               \
        for (int j = 1; j < FMA_CHAINS; j++)                                          \
            sum = ADD(sum, acc[j]);                                                   \
        return REDUCE(sum);                                                           \
    }

__attribute__((target("avx2"))) static float reduce_avx2(__m256 sum)
{
    float lanes[8];
    _mm256_storeu_ps(lanes, sum);
    return lanes[0];
}

/* f32 FMAs on 8 and 16 lanes. */
#define FMA_256(acc) _mm256_fmadd_ps(acc, mul, add)
CHAIN_LOOP(fma_chains_avx2, "avx2,fma", __m256,
           const __m256 mul = _mm256_set1_ps(0.9999999f); const __m256 add = _mm256_set1_ps(seed),
           _mm256_set1_ps, FMA_256, _mm256_add_ps, reduce_avx2)
#define FMA_512(acc) _mm512_fmadd_ps(acc, mul, add)
CHAIN_LOOP(fma_chains_avx512, "avx512f", __m512,
           const __m512 mul = _mm512_set1_ps(0.9999999f); const __m512 add = _mm512_set1_ps(seed),
           _mm512_set1_ps, FMA_512, _mm512_add_ps, _mm512_reduce_add_ps)

/* vdpbf16ps: each f32 lane adds two bf16 products, 4 FLOP. The operands are small, so the
 * sums stay finite and normal over any number of iterations. */
#define DPBF16(acc) _mm512_dpbf16_ps(acc, a, b)
CHAIN_LOOP(dpbf16_chains, "avx512f,avx512bf16", __m512,
           const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(seed), _mm512_set1_ps(1e-3f));
           const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(seed)),
           _mm512_set1_ps, DPBF16, _mm512_add_ps, _mm512_reduce_add_ps)

/* vfmadd on 32 f16 lanes; the chains settle at add / (1 - mul), well inside f16's range. */
#define SET1_PH(x) _mm512_set1_ph((_Float16)(x))
#define FMA_PH(acc) _mm512_fmadd_ph(acc, mul, add)
#define REDUCE_PH(sum) ((float)_mm512_reduce_add_ph(sum))
CHAIN_LOOP(fma_chains_fp16, "avx512f,avx512fp16", __m512h,
           const __m512h mul = SET1_PH(0.5f); const __m512h add = SET1_PH(seed),
           SET1_PH, FMA_PH, _mm512_add_ph, REDUCE_PH)
#endif

/* The loop that measures `c` on a CPU with features `f`, its FLOP per iteration and the
 * unit's name; NULL (and "not measured") where there is none. A 16-bit dtype without
 * instructions of its own is computed as f32, so it gets the f32 loop. */
static chain_loop limit_loop(const gb_cpu_features *f, gb_compute c, double *flop_per_iter,
                             const char **isa)
{
    *isa = "not measured";
#if defined(__x86_64__)
    if (c == GB_COMPUTE_BF16 && f->avx512_bf16) {
        *flop_per_iter = FMA_CHAINS * 16 * 4.0;
        *isa = "AVX512_BF16 dot products";
        return dpbf16_chains;
    }
    if (c == GB_COMPUTE_F16 && f->avx512_fp16) {
        *flop_per_iter = FMA_CHAINS * 32 * 2.0;
        *isa = "AVX512_FP16 FMA";
        return fma_chains_fp16;
    }
    if (f->avx512f) {
        *flop_per_iter = FMA_CHAINS * 16 * 2.0;
        *isa = "AVX-512 FMA";
        return fma_chains_avx512;
    }
    if (f->avx2 && f->fma) {
        *flop_per_iter = FMA_CHAINS * 8 * 2.0;
        *isa = "AVX2 FMA";
        return fma_chains_avx2;
    }
#else
    (void)f;
    (void)c;
    (void)flop_per_iter;
#endif
    return NULL;
}

/* The best of `runs` passes of `loop` on `threads` threads (0: the pool's default), in
 * FLOP/s of wall time; *per_cpu_s gets the best in FLOP per second of the process's CPU
 * time, times the team (what each thread does while it runs, whatever else the machine
 * runs). */
static double time_loop(chain_loop loop, double flop_per_iter, int threads, int runs,
                        int64_t iters, double *per_cpu_s)
{
    int team = threads > 0 ? threads : omp_get_max_threads();
    double best = 0.0;
    volatile float sink = 0.0f;   /* keeps the chains' results alive */
    const double flops = (double)team * (double)iters * flop_per_iter;
    *per_cpu_s = 0.0;
    for (int run = 0; run < runs; run++) {
        double t0 = gb_now_ms(), cpu0 = gb_cpu_ms();
#pragma omp parallel num_threads(team)
        {
            float r = loop(iters, 1e-7f * (float)(omp_get_thread_num() + 1));
#pragma omp atomic
            sink += r;
        }
        double rate = flops / ((gb_now_ms() - t0) * 1e-3);
        double cpu_ms = gb_cpu_ms() - cpu0;
        double per_cpu = cpu_ms > 0 ? flops * team / (cpu_ms * 1e-3) : 0.0;
        best = rate > best ? rate : best;
        *per_cpu_s = per_cpu > *per_cpu_s ? per_cpu : *per_cpu_s;
    }
    return best;
}

static double measure_limit(gb_compute c, int threads, int runs, int64_t iters,
                            const char **isa, double *per_cpu_s)
{
    gb_cpu_features f;
    gb_cpu_detect_hardware(&f);
    double flop_per_iter = 0.0;
    const char *name;
    chain_loop loop = limit_loop(&f, c, &flop_per_iter, &name);
    if (isa)
        *isa = name;
    double cpu_rate = 0.0;
    if (per_cpu_s)
        *per_cpu_s = 0.0;
    if (!loop)
        return 0.0;
    double *cpu = per_cpu_s ? per_cpu_s : &cpu_rate;
    double rate = time_loop(loop, flop_per_iter, threads, runs, iters, cpu);
    /* the CPU-time rate is what the hardware did while it ran: on a busy machine it is
     * the better estimate of the peak, and no step can beat it either */
    gb_cpu_record_peak(c, threads, rate > *cpu ? rate : *cpu);
    return rate;
}

double gb_measure_compute_flops(gb_compute c, int threads, const char **isa,
                                double *per_cpu_s)
{
    return measure_limit(c, threads, GB_FMA_RUNS, FMA_ITERS, isa, per_cpu_s);
}

double gb_measure_fma_flops(int threads, const char **isa)
{
    return gb_measure_compute_flops(GB_COMPUTE_F32, threads, isa, NULL);
}

double gb_cpu_measured_peak(gb_compute c, int threads, const char **isa)
{
    double now = measure_limit(c, threads, QUICK_RUNS, QUICK_ITERS, isa, NULL);
    if (now <= 0)
        return 0.0;
    double cached = gb_cpu_cached_peak(c, threads);
    return cached > now ? cached : now;
}

double gb_measure_triad_gbs(int threads)
{
    const int64_t n = GB_TRIAD_ELEMENTS;
    int team = threads > 0 ? threads : omp_get_max_threads();
    float *a = aligned_alloc(64, (size_t)n * sizeof *a);
    float *b = aligned_alloc(64, (size_t)n * sizeof *b);
    float *c = aligned_alloc(64, (size_t)n * sizeof *c);
    double best = 0.0;
    if (a && b && c) {
#pragma omp parallel for schedule(static) num_threads(team)
        for (int64_t i = 0; i < n; i++) {
            a[i] = 0.0f;
            b[i] = 1.0f;
            c[i] = 2.0f;
        }
        const float s = 3.0f;
        for (int run = 0; run < GB_TRIAD_RUNS; run++) {
            double t0 = gb_now_ms();
#pragma omp parallel for schedule(static) num_threads(team)
            for (int64_t i = 0; i < n; i++)
                a[i] = b[i] + s * c[i];
            double gbs = 3.0 * sizeof(float) * (double)n / ((gb_now_ms() - t0) * 1e6);
            best = gbs > best ? gbs : best;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}
