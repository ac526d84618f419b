/* optim/adamw_fused against optim/adamw on random data, and its grad_norm_sq against a
 * double-precision sum.
 *
 * 20 steps over 300,007 parameters in seven groups of odd sizes, listed out of order,
 * some decaying and some not; gradient scales that vary from step to step around
 * max_norm so clipping is active on some steps only; a loss scale of 512 on every third
 * step (gradients multiplied, inv_loss_scale = 1/512). Both plugins get the same squared
 * norm (from adamw_fused's grad_norm_sq) and must produce bit-identical parameters and
 * state after every step; the maximum absolute difference is printed either way.
 *
 * grad_norm_sq must be within one f32 ulp (relative 2^-23) of the long double sum of
 * squares at every step, and bit-identical whatever the thread count (1, the default,
 * and 3 threads).
 *
 * Usage: test_fused_vs_adamw optim-adamw-cpu.so optim-adamw_fused-cpu.so
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_test.h"
#include "test_host.h"

#define N TEST_GROUPS_N
#define STEPS 20

typedef struct run {
    test_optim opt;
    float *params, *state;
} run;

static int start_run(const gb_plugin_desc *desc, const gb_host *host, const float *init, run *r)
{
    r->params = malloc(N * sizeof(float));
    r->state = calloc(2 * N, sizeof(float));
    memcpy(r->params, init, N * sizeof(float));
    return test_optim_create(desc, host, 0.9, 0.99, 1e-8, 0.1, &r->opt);
}

static void end_run(run *r)
{
    r->opt.ops->destroy(r->opt.self);
    free(r->params), free(r->state);
}

static gb_status step_run(run *r, const float *grads, int64_t step, float lr, float max_norm,
                          float loss_scale, const float *norm_sq)
{
    gb_optim_step_args args =
        test_groups_step_args(r->params, grads, r->state, step, lr);
    args.grad_norm_sq = norm_sq;
    args.max_norm = max_norm;
    args.inv_loss_scale = 1.0f / loss_scale;
    return r->opt.ops->step(r->opt.self, &args);
}

static long double sum_squares_ref(const float *x, int64_t n)
{
    long double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (long double)x[i] * x[i];
    return s;
}

int main(int argc, char **argv)
{
    gb_test_usage_unless(argc == 3, argv[0], "optim-adamw-cpu.so optim-adamw_fused-cpu.so");
    const gb_plugin_desc *adamw = gb_test_load_plugin(argv[1]);
    const gb_plugin_desc *fused = gb_test_load_plugin(argv[2]);
    int failures = 0;

    gb_host one_thread = *gb_test_host(), three_threads = *gb_test_host();
    one_thread.num_threads = 1;
    three_threads.num_threads = 3;
    float *init = malloc(N * sizeof(float)), *grads = malloc(N * sizeof(float));
    uint64_t rng = 2024;
    for (int i = 0; i < N; i++)
        init[i] = 0.02f * test_normal(&rng);
    run ref, fast, fast1, fast3;
    if (!start_run(adamw, gb_test_host(), init, &ref) ||
        !start_run(fused, gb_test_host(), init, &fast) ||
        !start_run(fused, &one_thread, init, &fast1) ||
        !start_run(fused, &three_threads, init, &fast3))
        return 1;

    const float max_norm = sqrtf((float)N) * 1e-3f;  /* about the median step's norm */
    int clipped = 0, steps_identical = 0;
    double worst_norm = 0;
    for (int64_t step = 1; step <= STEPS; step++) {
        float loss_scale;
        const float lr = test_schedule_step(step, &rng, grads, N, &loss_scale);

        float sq = -1, sq1 = -1, sq3 = -1;
        GB_TEST_CHECK(failures, fast.opt.ops->grad_norm_sq(fast.opt.self, &sq, grads, N) == GB_OK &&
                      fast1.opt.ops->grad_norm_sq(fast1.opt.self, &sq1, grads, N) == GB_OK &&
                      fast3.opt.ops->grad_norm_sq(fast3.opt.self, &sq3, grads, N) == GB_OK,
                      "grad_norm_sq failed: %s", gb_test_last_error());
        long double want = sum_squares_ref(grads, N);
        double rel = fabs((double)(((long double)sq - want) / want));
        worst_norm = rel > worst_norm ? rel : worst_norm;
        GB_TEST_CHECK(failures, rel <= 0x1p-23, "step %lld: grad_norm_sq %.9g, long double "
                      "sum %.12Lg (rel diff %.3g)", (long long)step, sq, want, rel);
        GB_TEST_CHECK(failures, memcmp(&sq, &sq1, sizeof sq) == 0 &&
                      memcmp(&sq, &sq3, sizeof sq) == 0, "step %lld: grad_norm_sq %.9g with "
                      "the default threads, %.9g with 1, %.9g with 3", (long long)step, sq, sq1,
                      sq3);
        clipped += sqrtf(sq) / loss_scale > max_norm;

        run *const runs[] = {&ref, &fast, &fast1, &fast3};
        for (int k = 0; k < 4; k++) {
            gb_status st = step_run(runs[k], grads, step, lr, max_norm, loss_scale, &sq);
            GB_TEST_CHECK(failures, st == GB_OK, "step %lld of run %d returned %d: %s",
                          (long long)step, k, st, gb_test_last_error());
        }
        int same = !memcmp(ref.params, fast.params, N * sizeof(float)) &&
                   !memcmp(ref.state, fast.state, 2 * N * sizeof(float));
        steps_identical += same;
        if (!same || step == STEPS) {
            char what[96];
            snprintf(what, sizeof what, "step %lld: adamw_fused vs adamw params", (long long)step);
            failures += test_compare_bits(what, fast.params, ref.params, N);
            snprintf(what, sizeof what, "step %lld: adamw_fused vs adamw state (m, v)",
                     (long long)step);
            failures += test_compare_bits(what, fast.state, ref.state, 2 * N);
        }
    }
    printf("adamw_fused vs adamw: bit-identical after %d of %d steps (clipping active on %d)\n",
           steps_identical, STEPS, clipped);
    printf("grad_norm_sq vs long double sum: max rel diff %.3g over %d steps\n", worst_norm,
           STEPS);
    GB_TEST_CHECK(failures, clipped > 0 && clipped < STEPS,
                  "clipping active on %d of %d steps: only one branch covered", clipped, STEPS);
    failures += test_compare_bits("after 20 steps: 1 thread vs default params", fast1.params,
                                  fast.params, N);
    failures += test_compare_bits("after 20 steps: 3 threads vs default params", fast3.params,
                                  fast.params, N);
    end_run(&ref), end_run(&fast), end_run(&fast1), end_run(&fast3);
    free(init), free(grads);
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
