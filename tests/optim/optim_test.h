/* What the optimizer tests share: creating an optimizer with chosen hyperparameters,
 * the buffers of one that runs on a device plugin, step arguments, reproducible random
 * numbers, bit-exact comparison, and the exact reference for f32 -> bf16 / f16
 * conversion.
 *
 * The reference conversion does not reuse the plugin's bit tricks: it decodes every
 * non-negative bf16 or f16 pattern to a double (the pattern of infinity standing for the
 * power of two just past the largest finite value) and picks the nearest one by binary
 * search, an exact tie going to the even pattern. Everything is exact in double, so a
 * disagreement is the plugin's error. Single-threaded test code.
 */
#ifndef GEARBOX_TESTS_OPTIM_TEST_H
#define GEARBOX_TESTS_OPTIM_TEST_H

#include <stdint.h>

#include "gearbox/device.h"
#include "gearbox/optim.h"

typedef struct test_optim {
    const gb_optim_ops *ops;
    void *self;
} test_optim;

/* Creates the optimizer of `desc` on `host` with the given keys; prints why and returns 0
 * on failure. */
int test_optim_create(const gb_plugin_desc *desc, const gb_host *host, double beta1,
                      double beta2, double eps, double weight_decay, test_optim *opt);

/* The same on the device of `ctx` (test_optim_create: the CPU). */
int test_optim_create_on(const gb_plugin_desc *desc, const gb_host *host,
                         const gb_device_ctx *ctx, double beta1, double beta2, double eps,
                         double weight_decay, test_optim *opt);

/* A device plugin a test has started: its entries, its instance and its context. */
typedef struct test_device {
    const gb_device_ops *ops;
    void *self;
    gb_device_ctx ctx;
} test_device;

/* `bytes` of the device's memory (64 when bytes is 0, so an empty buffer still has an
 * address); prints FAIL and exits on failure. */
void *test_device_alloc(test_device *d, size_t bytes);

/* A copy through the device's copy entry; prints FAIL and exits on failure. */
void test_device_copy(test_device *d, void *dst, const void *src, size_t bytes,
                      gb_copy_kind kind);

/* Step arguments without clipping, loss scale or low-precision copy. */
gb_optim_step_args test_step_args(float *params, const float *grads, void *state, int64_t n,
                                  const gb_param_group *groups, int64_t n_groups,
                                  int64_t step, float lr);

/* The same over TEST_GROUPS_N parameters in seven groups of odd sizes, listed out of order,
 * one of a single element, some with weight decay and some without. */
#define TEST_GROUPS_N 300007
gb_optim_step_args test_groups_step_args(float *params, const float *grads, void *state,
                                         int64_t step, float lr);

/* Step t of the comparisons' schedule: gradients of a random scale, times the loss scale
 * (512 every third step, else 1, into *loss_scale), and the learning rate it returns
 * (warm-up over 5 steps, then a slow decay). */
float test_schedule_step(int64_t t, uint64_t *rng, float *grads, int64_t n,
                         float *loss_scale);

/* xorshift64*: uniform in [0, 1) and a rough standard normal (sum of four uniforms). */
double test_uniform(uint64_t *state);
float test_normal(uint64_t *state);

/* Prints "what: max abs diff X, N of n elements differ in bits" and returns 1 when any
 * element's bits differ (two NaNs count as equal). */
int test_compare_bits(const char *what, const float *got, const float *want, int64_t n);

/* The exactly rounded (nearest, ties to even, overflow to infinity) bf16 or f16 pattern
 * of a non-NaN x. */
uint16_t test_ref_lowp(gb_dtype dtype, float x);

/* Checks a converted pattern against the reference: for a NaN input, a quiet NaN of the
 * same sign; otherwise the reference pattern. Prints the first mismatches (up to 8) and
 * returns the number of bad elements. */
int64_t test_check_lowp(const char *what, gb_dtype dtype, const float *x, const uint16_t *got,
                        int64_t n);

/* Fills x with the hard cases for `dtype`: zeros, every pattern's exact value, the exact
 * midpoints between neighbours (ties) and one f32 ulp on either side of them, f32
 * subnormals, the largest finite values and the overflow threshold, infinities and NaNs
 * with payloads, all with both signs. Returns how many it wrote when cap is large enough
 * (test_hard_cases(dtype, NULL, 0) gives the count). */
int64_t test_hard_cases(gb_dtype dtype, float *x, int64_t cap);

#endif
