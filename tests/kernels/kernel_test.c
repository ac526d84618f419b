/* Shared scaffolding of the kernel tests; see kernel_test.h. */
#include "kernel_test.h"

#include "test_host.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void **allocations;
static size_t n_allocations, cap_allocations;

int kt_expect(int ok, const char *fmt, ...)
{
    if (ok)
        return 1;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    failures++;
    return 0;
}

void kt_section(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("-- ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

int kt_exit_code(void)
{
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("all checks passed\n");
    kt_free_all();
    return failures ? 1 : 0;
}

const gb_plugin_desc *kt_load_plugin(const char *path, gb_kind kind, const char *name,
                                     size_t ops_size)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   // keeps results and FAIL lines in order in logs
    const gb_plugin_desc *d = gb_test_load_plugin(path);
    if (!d->ops)
        exit(1);
    kt_section("descriptor of %s", path);
    /* the CPU plugins of other kinds run on any host-memory device (ABI 1.6) */
    uint32_t devices = GB_DEVICE_CPU | (kind == GB_KIND_DEVICE ? 0u : GB_DEVICE_ANY_HOST);
    failures += gb_test_check_descriptor(d, kind, name, devices, ops_size);
    printf("  %s %s: %s\n", d->name, d->version, d->description);
    return d;
}

const gb_plugin_desc *kt_load_arg(int argc, char **argv, const char *file, gb_kind kind,
                                  const char *name, size_t ops_size)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/%s\n", argv[0], file);
        exit(2);
    }
    return kt_load_plugin(argv[1], kind, name, ops_size);
}

void *kt_cpu_device(const gb_device_ops *ops, const gb_host *host)
{
    const gb_value plain[] = {{.i = 0}};
    void *dev = NULL;
    if (ops->create(host, plain, &dev) != GB_OK) {
        fprintf(stderr, "FAIL: create: %s\n", kt_last_error());
        exit(1);
    }
    return dev;
}

gb_host kt_host(int num_threads)
{
    gb_host host = *gb_test_host();
    host.num_threads = num_threads;
    return host;
}

const char *kt_last_error(void)
{
    return gb_test_last_error();
}

void kt_clear_error(void)
{
    gb_test_clear_error();
}

static void *tracked_alloc(size_t bytes)
{
    if (n_allocations == cap_allocations) {
        cap_allocations = cap_allocations ? 2 * cap_allocations : 64;
        allocations = realloc(allocations, cap_allocations * sizeof *allocations);
    }
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (!allocations || !p) {
        fprintf(stderr, "FAIL: test out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    allocations[n_allocations++] = p;
    return p;
}

float *kt_floats(size_t n)
{
    return tracked_alloc(n * sizeof(float));
}

double *kt_doubles(size_t n)
{
    return tracked_alloc(n * sizeof(double));
}

int32_t *kt_ints(size_t n)
{
    return tracked_alloc(n * sizeof(int32_t));
}

float *kt_copy(const float *x, size_t n)
{
    float *y = kt_floats(n);
    memcpy(y, x, n * sizeof(float));
    return y;
}

double *kt_widen(const float *x, size_t n)
{
    double *y = kt_doubles(n);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

void kt_free_all(void)
{
    for (size_t i = 0; i < n_allocations; i++)
        free(allocations[i]);
    free(allocations);
    allocations = NULL;
    n_allocations = cap_allocations = 0;
}

kt_rng kt_seed(uint64_t seed)
{
    return (kt_rng){.state = seed * 0x9E3779B97F4A7C15ull + 1};
}

static uint64_t next_u64(kt_rng *rng)
{
    rng->state ^= rng->state >> 12;
    rng->state ^= rng->state << 25;
    rng->state ^= rng->state >> 27;
    return rng->state * 0x2545F4914F6CDD1Dull;
}

double kt_uniform(kt_rng *rng, double lo, double hi)
{
    return lo + (hi - lo) * (double)(next_u64(rng) >> 11) * 0x1.0p-53;
}

double kt_gelu_tanh(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

double kt_gelu_tanh_grad(double x)
{
    double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * sqrt(2.0 / M_PI) *
           (1.0 + 3.0 * 0.044715 * x * x);
}

void kt_attn_reference(const kt_head *h, double *out, double *dq, double *dk, double *dv)
{
    const int64_t T = h->T, D = h->D;
    const double scale = 1.0 / sqrt((double)D);
    double *p = kt_doubles((size_t)T), *dp = kt_doubles((size_t)T);
    for (int64_t i = 0; i < T * D; i++)
        out[i] = dq[i] = dk[i] = dv[i] = 0.0;
    for (int64_t t = 0; t < T; t++) {
        double top = -INFINITY, sum = 0.0, pdp = 0.0;
        for (int64_t j = 0; j < T; j++) {
            p[j] = -INFINITY;
            if (h->causal && j > t)
                continue;
            double s = 0.0;
            for (int64_t d = 0; d < D; d++)
                s += (double)h->q[t * D + d] * h->k[j * D + d];
            p[j] = s * scale;
            top = fmax(top, p[j]);
        }
        for (int64_t j = 0; j < T; j++)
            sum += p[j] = exp(p[j] - top);
        for (int64_t j = 0; j < T; j++) {
            p[j] /= sum;
            dp[j] = 0.0;
            for (int64_t d = 0; d < D; d++) {
                out[t * D + d] += p[j] * h->v[j * D + d];
                dp[j] += (double)h->dout[t * D + d] * h->v[j * D + d];
            }
            pdp += p[j] * dp[j];
        }
        for (int64_t j = 0; j < T; j++)
            for (int64_t d = 0; d < D; d++) {
                const double ds = p[j] * (dp[j] - pdp);
                dq[t * D + d] += scale * ds * h->k[j * D + d];
                dk[j * D + d] += scale * ds * h->q[t * D + d];
                dv[j * D + d] += p[j] * h->dout[t * D + d];
            }
    }
}

void kt_fill(kt_rng *rng, float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)kt_uniform(rng, lo, hi);
}

int32_t kt_below(kt_rng *rng, int32_t n)
{
    return (int32_t)(next_u64(rng) % (uint64_t)n);
}

int kt_compare(const char *what, const float *got, const double *want, size_t n, double atol,
               double rtol)
{
    double max_abs = 0.0, max_rel = 0.0, worst_excess = 0.0;
    size_t worst = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - want[i]);
        if (isnan(got[i]) != isnan(want[i]))
            diff = INFINITY;
        else if (isnan(want[i]))
            diff = 0.0;
        double rel = diff / (fabs(want[i]) > 1e-30 ? fabs(want[i]) : 1e-30);
        max_abs = diff > max_abs ? diff : max_abs;
        max_rel = rel > max_rel ? rel : max_rel;
        double excess = diff - (atol + rtol * fabs(want[i]));
        if (excess > 0 && (ok || excess > worst_excess)) {
            ok = 0;
            worst = i;
            worst_excess = excess;
        }
    }
    printf("  %-44s max abs %.3g, max rel %.3g over %zu values%s\n", what, max_abs, max_rel, n,
           ok ? "" : "  <-- FAIL");
    return kt_expect(ok, "%s: element %zu is %.9g, want %.9g (tolerance %.3g abs + %.3g rel)",
                     what, worst, n ? (double)got[worst] : 0.0, n ? want[worst] : 0.0, atol,
                     rtol);
}

int kt_same_bits(const char *what, const float *a, const float *b, size_t n)
{
    size_t i = 0;
    while (i < n && memcmp(&a[i], &b[i], sizeof(float)) == 0)
        i++;
    printf("  %-44s %s\n", what, i == n ? "bit-identical" : "differs  <-- FAIL");
    return kt_expect(i == n, "%s: element %zu differs between runs (%.9g vs %.9g)", what, i,
                     i < n ? (double)a[i] : 0.0, i < n ? (double)b[i] : 0.0);
}
