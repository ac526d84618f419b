/* Shared scaffolding of the kernel tests: load a plugin from the path on the command
 * line and check its descriptor, a minimal host table, seeded random data, and
 * comparisons that print the largest absolute and relative difference per tensor.
 *
 * Failures are counted, not fatal, so one run reports every kernel that is wrong;
 * kt_exit_code() turns the count into the test's exit status. The reference math that
 * several tests check against (GELU, one head's attention) lives here, in double precision;
 * the rest each test writes beside its checks.
 */
#ifndef GB_TESTS_KERNEL_TEST_H
#define GB_TESTS_KERNEL_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/device.h"
#include "gearbox/plugin.h"

/* The descriptor of the plugin at `path`, after the shared descriptor checks
 * (gb_test_check_descriptor: ABI, sizes, kind, name, cpu only, schema); `ops_size` is the
 * expected vtable size. Exits with status 1 when the plugin cannot be loaded at all. */
const gb_plugin_desc *kt_load_plugin(const char *path, gb_kind kind, const char *name,
                                     size_t ops_size);

/* kt_load_plugin() of the test's only argument, the path of `file`; prints "usage: PROG
 * path/to/FILE" and exits with status 2 when the test has not exactly one argument. */
const gb_plugin_desc *kt_load_arg(int argc, char **argv, const char *file, gb_kind kind,
                                  const char *name, size_t ops_size);

/* device/cpu created with emulate_gpu = false on `host`; exits with status 1, saying why,
 * when it is refused. */
void *kt_cpu_device(const gb_device_ops *ops, const gb_host *host);

/* The shared test host (tests/common/test_host.h) with `num_threads` threads; its
 * set_error remembers the message (kt_last_error) so tests can check that a refusal was
 * explained. */
gb_host kt_host(int num_threads);
const char *kt_last_error(void);
void kt_clear_error(void);

/* 64-byte aligned buffers that the test never frees one by one: kt_free_all() at exit. */
float *kt_floats(size_t n);
double *kt_doubles(size_t n);
int32_t *kt_ints(size_t n);
void kt_free_all(void);
/* A kt_floats() copy of x; x widened to a kt_doubles() buffer. */
float *kt_copy(const float *x, size_t n);
double *kt_widen(const float *x, size_t n);

/* xorshift64*, seeded per test case so failures reproduce. */
typedef struct kt_rng {
    uint64_t state;
} kt_rng;
kt_rng kt_seed(uint64_t seed);
double kt_uniform(kt_rng *rng, double lo, double hi);
void kt_fill(kt_rng *rng, float *x, size_t n, double lo, double hi);
int32_t kt_below(kt_rng *rng, int32_t n);

/* GPT-2's GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) as published, and its
 * derivative, in double: what both devices' tanh kernels are checked against. */
double kt_gelu_tanh(double x);
double kt_gelu_tanh_grad(double x);

/* A problem of one attention head: q, k, v, dout (T, D), contiguous. */
typedef struct kt_head {
    int64_t T, D;
    int causal;
    float *q, *k, *v, *dout;
} kt_head;
/* Its softmax attention in double precision, the textbook way, with scale 1/sqrt(D) and,
 * when causal, query t seeing keys 0..t: out, dq, dk, dv (T, D). */
void kt_attn_reference(const kt_head *h, double *out, double *dq, double *dk, double *dv);

/* Passes when |got - want| <= atol + rtol * |want| everywhere. Prints
 * "  what: max abs X, max rel Y over n values" and, on failure, the worst element. */
int kt_compare(const char *what, const float *got, const double *want, size_t n, double atol,
               double rtol);
/* Passes when the two buffers hold the same bits. */
int kt_same_bits(const char *what, const float *a, const float *b, size_t n);
/* Records a failure with a message when `ok` is 0; returns ok. */
int kt_expect(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints a section heading. */
void kt_section(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 0 when nothing failed, else 1, with a summary line. */
int kt_exit_code(void);

#endif /* GB_TESTS_KERNEL_TEST_H */
