/* [model] dropout through the real plugins: a tiny GPT with dropout 0.2 trains a
 * micro-step (gb_model_forward_loaded, gb_model_backward) whose gradient must match
 * central finite differences of the same micro-step's loss, which holds only if backward
 * drops the gradient where forward dropped the activations (the embeddings' sum, each
 * attention projection and MLP). Also: the same micro-step drops the same elements every
 * time (the loss's bits repeat), another micro-step drops others, evaluation
 * (gb_model_forward) drops nothing, and a model with dropout 0 is the model without it.
 *
 * The loss of a training forward is read from its logits (the classifier is not fused, so
 * they stay) and computed in double on the host. Finite differences in f32 err by about
 * the loss's rounding over the step, 1e-7 * 3 / 3e-3 = 1e-4; the tolerance is
 * |numeric - analytic| <= 5e-4 + 2e-2 |analytic|, where a mask out of step with forward
 * is off by the size of the gradient itself.
 *
 * The device is device/cpu, its GPU-like mode with GEARBOX_TEST_GPU_LIKE=1, or the device
 * plugin GEARBOX_TEST_DEVICE names (cuda on the emulator: the gpu-emu suite).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model.h"
#include "runtime.h"
#include "test_run.h"

enum { L = 2, H = 2, C = 16, T = 8, B = 2, V = 11 };
#define STEP 3
#define FD_H 3e-3f

static int failures;

static void check(int ok, const char *fmt, const char *detail)
{
    printf("%s: %s%s%s\n", ok ? "ok" : "FAIL", fmt, detail ? ": " : "", detail ? detail : "");
    failures += !ok;
}

static gb_model *build(gb_runtime *rt, gb_config **cfg, double dropout)
{
    char text[1024], device[128];
    snprintf(text, sizeof text,
             "[run]\nthreads = 2\n[model]\nn_layer = %d\nn_head = %d\nn_embd = %d\n"
             "block_size = %d\nvocab_size = %d\ndropout = %g\n[data]\nbatch_size = %d\n"
             "[train]\nfuse_classifier = false\n[precision]\nplugin = fp32\n%s",
             L, H, C, T, V, dropout, B, gb_test_device_section(device, sizeof device));
    if (gb_test_start_runtime(rt, cfg, text, "dropout test config"))
        return NULL;
    gb_model_config mc = gb_model_config_of(&rt->settings, 0);
    gb_model *m = gb_model_create(rt, &mc, B, 1);
    return m && gb_model_init(m, 7) == 0 ? m : NULL;
}

/* Mean cross-entropy of (B, T) logits against targets, in double. */
static double host_loss(const float *logits, const int32_t *targets)
{
    double total = 0.0;
    for (int r = 0; r < B * T; r++) {
        const float *row = logits + r * V;
        double max = row[0], sum = 0.0;
        for (int v = 1; v < V; v++)
            max = fmax(max, row[v]);
        for (int v = 0; v < V; v++)
            sum += exp(row[v] - max);
        total += max + log(sum) - row[targets[r]];
    }
    return total / (B * T);
}

/* The loss of training micro-step `step` (dropout on), or of evaluation (`train` 0). */
static int loss_of(gb_model *m, const int32_t *tokens, const int32_t *targets, int train,
                   uint64_t step, double *loss)
{
    static float logits[B * T * V];
    gb_model_set_dropout_step(m, step);
    int rc = train ? gb_model_load_batch(m, tokens, targets, B, T) ||
                     gb_model_forward_loaded(m, B, T, 1.0f)
                   : gb_model_forward(m, tokens, targets, B, T, NULL);
    if (rc || gb_model_get_logits(m, logits, B, T))
        return -1;
    *loss = host_loss(logits, targets);
    return 0;
}

/* Each tensor's first, middle and last element: numeric against analytic gradient. */
static void check_gradient(gb_model *m, const int32_t *tokens, const int32_t *targets)
{
    int64_t n = gb_model_num_params(m);
    float *params = malloc((size_t)n * sizeof *params), *grads = malloc((size_t)n * sizeof *grads);
    double loss;
    if (!params || !grads || gb_model_get_params(m, params) || gb_model_zero_grads(m) ||
        loss_of(m, tokens, targets, 1, STEP, &loss) || gb_model_backward(m, 1.0f) ||
        gb_model_get_grads(m, grads)) {
        check(0, "the micro-step and its backward run", NULL);
        return;
    }
    int count;
    const gb_param_tensor *t = gb_model_tensors(m, &count);
    double worst = 0.0;
    char detail[200] = "";
    int bad = 0, checked = 0;
    for (int k = 0; k < count; k++) {
        int64_t picks[3] = {0, t[k].numel / 2, t[k].numel - 1};
        for (int j = 0; j < 3; j++) {
            int64_t i = t[k].offset + picks[j];
            double plus = 0.0, minus = 0.0;
            float kept = params[i];
            params[i] = kept + FD_H;
            int rc = gb_model_set_params(m, params) || loss_of(m, tokens, targets, 1, STEP, &plus);
            params[i] = kept - FD_H;
            rc = rc || gb_model_set_params(m, params) ||
                 loss_of(m, tokens, targets, 1, STEP, &minus);
            params[i] = kept;
            double numeric = (plus - minus) / (2.0 * FD_H), analytic = grads[i];
            double err = fabs(numeric - analytic);
            checked++;
            if (rc || err > 5e-4 + 2e-2 * fabs(analytic)) {
                if (!bad++)
                    snprintf(detail, sizeof detail, "%s[%lld]: numeric %.6g, analytic %.6g",
                             t[k].name, (long long)picks[j], numeric, analytic);
            }
            worst = fmax(worst, err);
        }
    }
    gb_model_set_params(m, params);
    char line[320];
    snprintf(line, sizeof line, "%d gradients, worst |numeric - analytic| %.3g%s%s", checked,
             worst, bad ? "; first bad: " : "", bad ? detail : "");
    check(bad == 0, "the gradient of a micro-step with dropout = 0.2 is its finite differences",
          line);
    free(params);
    free(grads);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int32_t tokens[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (i * 7 + 3) % V;
        targets[i] = (i * 5 + 1) % V;
    }
    gb_runtime rt, rt0;
    gb_config *cfg = NULL, *cfg0 = NULL;
    gb_model *m = build(&rt, &cfg, 0.2), *m0 = m ? build(&rt0, &cfg0, 0.0) : NULL;
    double a, b, other, eval, eval0, train0;
    if (!m || !m0 || loss_of(m, tokens, targets, 1, STEP, &a) ||
        loss_of(m, tokens, targets, 1, STEP, &b) ||
        loss_of(m, tokens, targets, 1, STEP + 1, &other) ||
        loss_of(m, tokens, targets, 0, STEP, &eval) ||
        loss_of(m0, tokens, targets, 0, STEP, &eval0) ||
        loss_of(m0, tokens, targets, 1, STEP, &train0)) {
        printf("FAIL: the models did not build or run\n");
        return 1;
    }
    char detail[160];
    snprintf(detail, sizeof detail, "%.9g twice", a);
    check(a == b, "the same micro-step drops the same elements", detail);
    snprintf(detail, sizeof detail, "%.9g, then %.9g", a, other);
    check(a != other, "the next micro-step drops others", detail);
    snprintf(detail, sizeof detail, "dropout 0.2: %.9g, dropout 0: %.9g, training %.9g", eval,
             eval0, a);
    check(eval == eval0 && eval != a, "evaluation drops nothing", detail);
    snprintf(detail, sizeof detail, "training %.9g, evaluation %.9g", train0, eval0);
    check(train0 == eval0, "dropout = 0 trains on the model without dropout", detail);
    check_gradient(m, tokens, targets);
    gb_model_free(m);
    gb_model_free(m0);
    gb_runtime_free(&rt);
    gb_runtime_free(&rt0);
    gb_config_free(cfg);
    gb_config_free(cfg0);
    printf("%s\n", failures ? "FAIL" : "all checks passed");
    return failures ? 1 : 0;
}
