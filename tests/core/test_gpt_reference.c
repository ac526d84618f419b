/* The GPT against PyTorch: loads a reference file written by
 * tests/reference/make_gpt_reference.py, builds the same model through the real plugins
 * (device/cpu, attn/math, optim/adamw, precision/fp32, comm/single, found on
 * GEARBOX_PLUGIN_PATH), and compares the logits, the loss, every parameter's gradient,
 * and every parameter after three AdamW steps with clipping.
 *
 * Metric, per tensor: an element fails when |got - want| > atol + rtol * |want| with
 * rtol = TOL and atol = TOL * max|want| over that tensor (gradients of different
 * tensors differ by orders of magnitude, so the absolute floor scales with each one).
 * The loss must agree within TOL / 10 relative.
 *
 * With PRECISION bf16 or fp16 the same model runs that policy (16-bit activations and
 * matmul inputs, f32 master weights written by optim/adamw_fused, which is bit-identical
 * to adamw; fp16 with its loss scaler at a fixed scale of 1024, growth never reached)
 * against the same f32 reference, with the looser tolerance a 16-bit format allows:
 *     fp32 1e-4 | fp16 (11-bit significand) 1e-2 | bf16 (8-bit significand) 5e-2
 * Gradients are compared after dividing out the loss scale. After the three AdamW steps a
 * 16-bit run may also differ by up to the sum of the three learning rates: a gradient
 * near zero can change sign when its inputs are rounded, and Adam moves a weight by about
 * the learning rate whatever its gradient's size. tf32 (f32 activations, matmul inputs
 * rounded to 10 bits where the device honours it) takes fp16's tolerance.
 *
 * The device is device/cpu, its GPU-like mode with GEARBOX_TEST_GPU_LIKE=1, or the device
 * plugin GEARBOX_TEST_DEVICE names (cuda: the gpu suite, tests/gpu).
 *
 * usage: test-gpt-reference FILE.gbt [fp32|bf16|fp16|tf32]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gbt.h"
#include "model.h"
#include "runtime.h"
#include "test_run.h"

static double tolerance = 1e-4;
static double adam_allowance;   /* added to the absolute floor after the AdamW steps */

static int compare_tensor(const char *what, const float *got, const float *want, int64_t n,
                          double extra_atol)
{
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    return gbt_compare(what, got, want, n, tolerance * scale + extra_atol, tolerance);
}

/* Compares every parameter-shaped slice of `flat` with the file's PREFIX.NAME tensors. */
static int compare_params(const gbt_file *f, gb_model *m, const float *flat, const char *prefix,
                          double extra_atol)
{
    int n, failures = 0;
    const gb_param_tensor *t = gb_model_tensors(m, &n);
    for (int i = 0; i < n; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s.%s", prefix, t[i].name);
        const gbt_tensor *want = gbt_require(f, name, GB_F32, t[i].numel);
        failures += !want || compare_tensor(name, flat + t[i].offset, want->data, t[i].numel,
                                            extra_atol);
    }
    return failures;
}

/* The [precision] section (and the optimizer) for `precision`. */
static const char *precision_section(const char *precision)
{
    if (strcmp(precision, "fp16") == 0)
        return "[precision]\nplugin = fp16\ninit_scale = 1024\ngrowth_interval = 1000000\n";
    if (strcmp(precision, "bf16") == 0)
        return "[precision]\nplugin = bf16\n";
    if (strcmp(precision, "tf32") == 0)
        return "[precision]\nplugin = tf32\n";
    return "[precision]\nplugin = fp32\n";
}

static gb_model *build_model(gb_runtime *rt, gb_config **cfg, const int32_t *c,
                             const char *precision)
{
    char text[1024], device[128];
    int lowp = strcmp(precision, "fp32") != 0;
    snprintf(text, sizeof text,
             "[run]\nthreads = 2\n"
             "[model]\nn_layer = %d\nn_head = %d\nn_embd = %d\nblock_size = %d\n"
             "vocab_size = %d\nbias = %s\n"
             "[data]\nbatch_size = %d\n"
             "[optim]\nplugin = %s\nbeta1 = 0.9\nbeta2 = 0.99\neps = 1e-8\n"
             "weight_decay = 0.1\n%s%s",
             c[0], c[1], c[2], c[3], c[5], c[6] ? "true" : "false", c[4],
             lowp ? "adamw_fused" : "adamw", precision_section(precision),
             gb_test_device_section(device, sizeof device));
    if (gb_test_start_runtime(rt, cfg, text, "reference config"))
        return NULL;
    gb_model_config mc = gb_model_config_of(&rt->settings, 0);
    return gb_model_create(rt, &mc, c[4], 1);
}

/* The file's initial parameters, laid out as the model's flat buffer. */
static float *initial_params(const gbt_file *f, gb_model *m)
{
    int n;
    const gb_param_tensor *t = gb_model_tensors(m, &n);
    float *flat = calloc((size_t)gb_model_num_params(m), sizeof *flat);
    for (int i = 0; flat && i < n; i++) {
        char name[128];
        snprintf(name, sizeof name, "param.%s", t[i].name);
        const gbt_tensor *src = gbt_require(f, name, GB_F32, t[i].numel);
        if (!src) {
            free(flat);
            return NULL;
        }
        memcpy(flat + t[i].offset, src->data, (size_t)t[i].numel * sizeof *flat);
    }
    return flat;
}

static int check_step0(const gbt_file *f, gb_model *m, const int32_t *c, const int32_t *tokens,
                       const int32_t *targets, float *scratch)
{
    int64_t B = c[4], T = c[3], V = c[5];
    const gbt_tensor *logits = gbt_require(f, "logits", GB_F32, B * T * V);
    const gbt_tensor *loss = gbt_require(f, "loss", GB_F32, 1);
    float got_loss;
    if (!logits || !loss || gb_model_zero_grads(m) ||
        gb_model_forward(m, tokens, targets, B, T, &got_loss))
        return 1;
    float *got_logits = malloc((size_t)(B * T * V) * sizeof *got_logits);
    int failures = !got_logits || gb_model_get_logits(m, got_logits, B, T) ||
                   compare_tensor("logits", got_logits, logits->data, B * T * V, 0.0);
    free(got_logits);
    failures += gbt_compare("loss", &got_loss, loss->data, 1, 0.0, tolerance / 10);
    if (gb_model_backward(m, 1.0f) || gb_model_get_grads(m, scratch))
        return failures + 1;
    float inv_scale = 1.0f / gb_model_loss_scale(m);
    for (int64_t i = 0; i < gb_model_num_params(m); i++)
        scratch[i] *= inv_scale;
    return failures + compare_params(f, m, scratch, "grad", 0.0);
}

static int check_three_steps(const gbt_file *f, gb_model *m, const int32_t *c,
                             const int32_t *tokens, const int32_t *targets, float *scratch)
{
    const gbt_tensor *hp = gbt_require(f, "hparams", GB_F32, 8);
    if (!hp)
        return 1;
    const float *h = hp->data;
    int skipped = 0;
    for (int step = 1; step <= 3; step++) {
        if (gb_model_zero_grads(m) ||
            gb_model_forward(m, tokens, targets, c[4], c[3], NULL) ||
            gb_model_backward(m, 1.0f) || gb_model_update(m, h[step - 1], h[7], step, &skipped))
            return 1;
    }
    if (gb_model_get_params(m, scratch))
        return 1;
    if (tolerance > 1e-4)
        adam_allowance = (double)h[0] + h[1] + h[2];
    return compare_params(f, m, scratch, "step3", adam_allowance);
}

int main(int argc, char **argv)
{
    const char *precision = argc == 3 ? argv[2] : "fp32";
    if (argc < 2 || argc > 3 ||
        (strcmp(precision, "fp32") != 0 && strcmp(precision, "bf16") != 0 &&
         strcmp(precision, "fp16") != 0 && strcmp(precision, "tf32") != 0)) {
        fprintf(stderr, "usage: %s FILE.gbt [fp32|bf16|fp16|tf32]\n", argv[0]);
        return 2;
    }
    tolerance = strcmp(precision, "bf16") == 0 ? 5e-2
                : strcmp(precision, "fp32") == 0 ? 1e-4 : 1e-2;
    char err[512];
    gbt_file *f = gbt_open(argv[1], err, sizeof err);
    if (!f) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const gbt_tensor *config = gbt_require(f, "config", GB_I32, 7);
    if (!config)
        return 1;
    const int32_t *c = config->data;
    const gbt_tensor *tokens = gbt_require(f, "tokens", GB_I32, (int64_t)c[4] * c[3]);
    const gbt_tensor *targets = gbt_require(f, "targets", GB_I32, (int64_t)c[4] * c[3]);
    gb_runtime rt;
    gb_config *cfg = NULL;
    gb_model *m = tokens && targets ? build_model(&rt, &cfg, c, precision) : NULL;
    float *init = m ? initial_params(f, m) : NULL;
    float *scratch = m ? malloc((size_t)gb_model_num_params(m) * sizeof *scratch) : NULL;
    int failures = 1;
    if (init && scratch && !gb_model_set_params(m, init)) {
        printf("model L=%d H=%d C=%d T=%d B=%d V=%d bias=%d, %lld parameters, %s, tolerance "
               "%g\n", c[0], c[1], c[2], c[3], c[4], c[5], c[6],
               (long long)gb_model_num_params(m), precision, tolerance);
        failures = check_step0(f, m, c, tokens->data, targets->data, scratch);
        failures += check_three_steps(f, m, c, tokens->data, targets->data, scratch);
    }
    printf("%s: %s\n", argv[1], failures ? "FAIL" : "ok");
    free(init);
    free(scratch);
    gb_model_free(m);
    if (cfg)
        gb_runtime_free(&rt);
    gb_config_free(cfg);
    gbt_close(f);
    return failures ? 1 : 0;
}
