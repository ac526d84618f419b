/* The CUDA optimizers against the CPU ones on random data (suite gpu).
 *
 * 12 steps over 300,007 parameters in seven groups of odd sizes, out of order, some
 * decaying and some not; gradient scales around max_norm so clipping acts on some steps
 * only, and a loss scale of 512 on every third step. Both sides get the same squared norm
 * (computed on the CPU, uploaded as the device scalar). After every step:
 * - optim-adamw-cuda against optim-adamw-cpu: params and state (m, v) bit-identical;
 * - optim-adamw_fused-cuda against optim-adamw_fused-cpu, three times: without a
 *   low-precision copy, with a bf16 copy rounded stochastically, and with an f16 copy:
 *   params, state and every bit of the copy identical (the same rounding decisions);
 * - adamw_fused-cuda's grad_norm_sq within one f32 ulp (relative 2^-23) of the CPU
 *   plugin's, and bit-identical when run twice.
 * Then the whole fused run again from the same start: every bit the same (run-twice
 * determinism).
 *
 * Skips (exit 77) when device/cuda is not built, or when it cannot start and no GPU
 * answers `nvidia-smi -L`; fails when a GPU answers but device/cuda cannot start.
 *
 * Usage: test_optim_cuda PLUGINS_BUILD_DIR [CUDA_PLUGINS_DIR]
 * (CUDA_PLUGINS_DIR: a folder of CUDA objects, such as the emulated build/cuda_emu/plugins,
 * that the CUDA device and optimizers are taken from instead)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "optim_test.h"
#include "test_host.h"

#define N TEST_GROUPS_N
#define STEPS 12
#define SKIP 77

static int failures;

/* One optimizer's run: its buffers on the host (CPU) or the device (CUDA). */
typedef struct run {
    test_optim opt;
    float *params, *grads, *state, *norm_sq;
    uint16_t *lowp;
    gb_dtype lowp_dtype;   /* GB_F32: no copy */
    int stochastic;
} run;

static void start(run *r, const gb_plugin_desc *desc, test_device *d, const float *init,
                  gb_dtype lowp_dtype, int stochastic)
{
    memset(r, 0, sizeof *r);
    r->lowp_dtype = lowp_dtype;
    r->stochastic = stochastic;
    const size_t n = N * sizeof(float);
    float *zeros = calloc(2 * N, sizeof(float));
    if (!test_optim_create_on(desc, gb_test_host(), d ? &d->ctx : gb_test_cpu_ctx(), 0.9,
                              0.95, 1e-8, 0.1, &r->opt))
        exit(1);
    if (d) {
        r->params = test_device_alloc(d, n), r->grads = test_device_alloc(d, n);
        r->state = test_device_alloc(d, 2 * n);
        r->norm_sq = test_device_alloc(d, sizeof(float));
        r->lowp = test_device_alloc(d, N * sizeof(uint16_t));
        test_device_copy(d, r->params, init, n, GB_COPY_HOST_TO_DEVICE);
        test_device_copy(d, r->state, zeros, 2 * n, GB_COPY_HOST_TO_DEVICE);
    } else {
        r->params = malloc(n), r->grads = malloc(n), r->state = calloc(2 * N, sizeof(float));
        r->norm_sq = malloc(sizeof(float)), r->lowp = malloc(N * sizeof(uint16_t));
        memcpy(r->params, init, n);
    }
    free(zeros);
}

static void step(run *r, test_device *d, const float *grads, float norm_sq, int64_t t,
                 float lr, float max_norm, float loss_scale)
{
    if (d) {
        test_device_copy(d, r->grads, grads, N * sizeof(float), GB_COPY_HOST_TO_DEVICE);
        test_device_copy(d, r->norm_sq, &norm_sq, sizeof norm_sq, GB_COPY_HOST_TO_DEVICE);
    } else {
        memcpy(r->grads, grads, N * sizeof(float));
        *r->norm_sq = norm_sq;
    }
    gb_optim_step_args args =
        test_groups_step_args(r->params, r->grads, r->state, t, lr);
    args.grad_norm_sq = r->norm_sq;
    args.max_norm = max_norm;
    args.inv_loss_scale = 1.0f / loss_scale;
    if (r->lowp_dtype != GB_F32) {
        args.params_lowp = r->lowp;
        args.lowp_dtype = r->lowp_dtype;
        args.lowp_stochastic = r->stochastic;
        args.lowp_seed = 1337;
    }
    gb_status st = r->opt.ops->step(r->opt.self, &args);
    GB_TEST_CHECK(failures, st == GB_OK, "%s step %lld returned %d: %s", d ? "cuda" : "cpu",
                  (long long)t, st, gb_test_last_error());
}

/* What a run holds, on the host: params, m, v, and the low-precision copy. */
typedef struct snapshot {
    float params[N], state[2 * N];
    uint16_t lowp[N];
} snapshot;

static void take(const run *r, test_device *d, snapshot *s)
{
    if (d) {
        test_device_copy(d, s->params, r->params, sizeof s->params, GB_COPY_DEVICE_TO_HOST);
        test_device_copy(d, s->state, r->state, sizeof s->state, GB_COPY_DEVICE_TO_HOST);
        test_device_copy(d, s->lowp, r->lowp, sizeof s->lowp, GB_COPY_DEVICE_TO_HOST);
    } else {
        memcpy(s->params, r->params, sizeof s->params);
        memcpy(s->state, r->state, sizeof s->state);
        memcpy(s->lowp, r->lowp, sizeof s->lowp);
    }
}

static void compare(const char *what, int64_t t, const snapshot *got, const snapshot *want,
                    int with_lowp)
{
    char label[128];
    snprintf(label, sizeof label, "step %lld: %s params", (long long)t, what);
    failures += test_compare_bits(label, got->params, want->params, N);
    snprintf(label, sizeof label, "step %lld: %s state (m, v)", (long long)t, what);
    failures += test_compare_bits(label, got->state, want->state, 2 * N);
    if (!with_lowp)
        return;
    int64_t differ = 0;
    for (int64_t i = 0; i < N; i++)
        differ += got->lowp[i] != want->lowp[i];
    GB_TEST_CHECK(failures, differ == 0, "step %lld: %s low-precision copy: %lld of %d "
                  "patterns differ", (long long)t, what, (long long)differ, N);
}

/* A GPU answers nvidia-smi: then device/cuda failing to start is a failure. */
static int gpu_present(void)
{
    return system("nvidia-smi -L > /dev/null 2>&1") == 0;
}

/* A plugin's file: in `flat` (the emulated plugins' folder) when given, else in the build
 * tree's KIND/NAME/ folder of `dir`. */
static void plugin_file(char *path, size_t cap, const char *dir, const char *flat,
                        const char *kind, const char *name, const char *device)
{
    char file[256];
    snprintf(file, sizeof file, "%s-%s%s%s.so", kind, name, device ? "-" : "",
             device ? device : "");
    if (flat)
        snprintf(path, cap, "%s/%s", flat, file);
    else
        snprintf(path, cap, "%s/%s/%s/%s", dir, kind, name, file);
}

static int open_device(const char *dir, const char *flat, test_device *d)
{
    char path[4096];
    plugin_file(path, sizeof path, dir, flat, "device", "cuda", NULL);
    if (access(path, R_OK) != 0) {
        printf("SKIP: %s is not built\n", path);
        return SKIP;
    }
    void *handle;
    const gb_plugin_desc *desc = gb_test_open_plugin(path, &handle);
    if (!desc)
        return 1;
    d->ops = desc->ops;
    gb_value values[64];
    gb_test_default_values(desc, values);
    gb_status st = d->ops->create(gb_test_host(), values, &d->self);
    if (st != GB_OK) {
        int gpu = gpu_present();
        printf("%s: device/cuda could not start (%d): %s\n", gpu ? "FAIL" : "SKIP", st,
               gb_test_last_error());
        return gpu ? 1 : SKIP;
    }
    d->ctx.struct_size = sizeof d->ctx;
    if (d->ops->context(d->self, &d->ctx) != GB_OK) {
        printf("FAIL: device/cuda context: %s\n", gb_test_last_error());
        return 1;
    }
    return 0;
}

static const gb_plugin_desc *open_optim(const char *dir, const char *flat, const char *name,
                                        const char *device)
{
    char path[4096];
    void *handle;
    plugin_file(path, sizeof path, dir, flat, "optim", name, device);
    const gb_plugin_desc *desc = gb_test_open_plugin(path, &handle);
    if (!desc)
        exit(1);
    return desc;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s PLUGINS_BUILD_DIR [CUDA_PLUGINS_DIR]\n", argv[0]);
        return 2;
    }
    const char *flat = argc == 3 ? argv[2] : NULL;
    test_device dev;
    int rc = open_device(argv[1], flat, &dev);
    if (rc)
        return rc;
    const gb_plugin_desc *adamw_cpu = open_optim(argv[1], NULL, "adamw", "cpu");
    const gb_plugin_desc *adamw_cuda = open_optim(argv[1], flat, "adamw", "cuda");
    const gb_plugin_desc *fused_cpu = open_optim(argv[1], NULL, "adamw_fused", "cpu");
    const gb_plugin_desc *fused_cuda = open_optim(argv[1], flat, "adamw_fused", "cuda");

    float *init = malloc(N * sizeof(float)), *grads = malloc(N * sizeof(float));
    uint64_t rng = 2025;
    for (int i = 0; i < N; i++)
        init[i] = 0.02f * test_normal(&rng);
    // pairs (cpu, cuda): adamw; fused without a copy, with stochastic bf16, with f16; and
    // a second fused-with-bf16 CUDA run for run-twice determinism
    enum { PAIRS = 4 };
    const gb_dtype lowp[PAIRS] = {GB_F32, GB_F32, GB_BF16, GB_F16};
    const char *names[PAIRS] = {"adamw cuda vs cpu", "adamw_fused cuda vs cpu",
                                "adamw_fused (stochastic bf16 copy) cuda vs cpu",
                                "adamw_fused (f16 copy) cuda vs cpu"};
    run cpu[PAIRS], gpu[PAIRS], again;
    for (int k = 0; k < PAIRS; k++) {
        start(&cpu[k], k ? fused_cpu : adamw_cpu, NULL, init, lowp[k], k == 2);
        start(&gpu[k], k ? fused_cuda : adamw_cuda, &dev, init, lowp[k], k == 2);
    }
    start(&again, fused_cuda, &dev, init, GB_BF16, 1);

    static snapshot got, want;
    const float max_norm = sqrtf((float)N) * 1e-3f;
    float *dgrads = test_device_alloc(&dev, N * sizeof(float));
    float *dnorm = test_device_alloc(&dev, 4);
    int clipped = 0;
    for (int64_t t = 1; t <= STEPS; t++) {
        float loss_scale;
        const float lr = test_schedule_step(t, &rng, grads, N, &loss_scale);

        // the squared norm: the CPU plugin's for both sides; the CUDA one's checked
        float sq = -1, dsq[2] = {-1, -1};
        GB_TEST_CHECK(failures, cpu[1].opt.ops->grad_norm_sq(cpu[1].opt.self, &sq, grads, N) ==
                      GB_OK, "cpu grad_norm_sq: %s", gb_test_last_error());
        test_device_copy(&dev, dgrads, grads, N * sizeof(float), GB_COPY_HOST_TO_DEVICE);
        for (int k = 0; k < 2; k++) {
            GB_TEST_CHECK(failures, gpu[1].opt.ops->grad_norm_sq(gpu[1].opt.self, dnorm, dgrads,
                          N) == GB_OK, "cuda grad_norm_sq: %s", gb_test_last_error());
            test_device_copy(&dev, &dsq[k], dnorm, sizeof(float), GB_COPY_DEVICE_TO_HOST);
        }
        double rel = fabs(((double)dsq[0] - sq) / sq);
        GB_TEST_CHECK(failures, rel <= 0x1p-23, "step %lld: cuda grad_norm_sq %.9g, cpu %.9g "
                      "(rel diff %.3g)", (long long)t, dsq[0], sq, rel);
        GB_TEST_CHECK(failures, memcmp(&dsq[0], &dsq[1], sizeof(float)) == 0, "step %lld: "
                      "cuda grad_norm_sq not deterministic: %.9g then %.9g", (long long)t,
                      dsq[0], dsq[1]);
        clipped += sqrtf(sq) / loss_scale > max_norm;

        for (int k = 0; k < PAIRS; k++) {
            step(&cpu[k], NULL, grads, sq, t, lr, max_norm, loss_scale);
            step(&gpu[k], &dev, grads, sq, t, lr, max_norm, loss_scale);
            take(&cpu[k], NULL, &want);
            take(&gpu[k], &dev, &got);
            compare(names[k], t, &got, &want, lowp[k] != GB_F32);
        }
        step(&again, &dev, grads, sq, t, lr, max_norm, loss_scale);
    }
    take(&gpu[2], &dev, &want);
    take(&again, &dev, &got);
    compare("adamw_fused cuda run twice", STEPS, &got, &want, 1);
    GB_TEST_CHECK(failures, clipped > 0 && clipped < STEPS, "clipping acted on %d of %d steps; "
                  "the test needs some of each", clipped, STEPS);
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("ok: %d steps, %d clipped: adamw and adamw_fused (no copy, stochastic bf16, f16) "
           "bit-identical on CUDA and the CPU; grad_norm_sq within 1 ulp and deterministic\n",
           STEPS, clipped);
    return 0;
}
