/* The training loop; see train.h. Only rank 0 of the comm plugin prints and writes. */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "clock.h"
#include "data.h"
#include "model.h"
#include "rng.h"
#include "runtime.h"

typedef struct trainer {
    gb_config *cfg;
    gb_runtime rt;
    gb_settings *s;
    gb_dataset *data;
    gb_model *model;
    int32_t *tokens, *targets;   /* (B, T) host */
    FILE *metrics;
    int64_t first_step;          /* 0, or the checkpoint's step when resuming */
    double train_loss, val_loss; /* last evaluation; NAN before the first */
} trainer;

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int make_dirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return (mkdir(buf, 0777) != 0 && errno != EEXIST) ? -1 : 0;
}

static char *effective_config(const gb_config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    gb_config_write(cfg, f);
    fclose(f);
    return text;
}

/* ---- evaluation ---------------------------------------------------------------------- */

static int estimate_loss(trainer *t, gb_split split, int64_t step, double *out)
{
    const gb_settings *s = t->s;
    int purpose = split == GB_SPLIT_TRAIN ? GB_RNG_EVAL_TRAIN : GB_RNG_VAL_BATCH;
    double sum = 0.0;
    for (int64_t i = 0; i < s->eval_iters; i++) {
        uint64_t index = ((uint64_t)step << 20) | (uint64_t)i;
        gb_data_batch(t->data, split, (uint64_t)s->seed, purpose, index, 0, s->batch_size,
                      s->block_size, t->tokens, t->targets);
        float loss;
        if (gb_model_forward(t->model, t->tokens, t->targets, s->batch_size, s->block_size,
                             &loss))
            return -1;
        sum += loss;
    }
    *out = sum / (double)s->eval_iters;
    return 0;
}

static int evaluate(trainer *t, int64_t step)
{
    if (estimate_loss(t, GB_SPLIT_TRAIN, step, &t->train_loss) ||
        estimate_loss(t, GB_SPLIT_VAL, step, &t->val_loss))
        return -1;
    printf("step %lld: train loss %.4f, val loss %.4f\n", (long long)step, t->train_loss,
           t->val_loss);
    fprintf(t->metrics, "{\"step\": %lld, \"train_loss\": %.9g, \"val_loss\": %.9g}\n",
            (long long)step, t->train_loss, t->val_loss);
    fflush(stdout);
    fflush(t->metrics);
    return 0;
}

/* ---- checkpoints --------------------------------------------------------------------- */

static int save_checkpoint(trainer *t, int64_t step)
{
    gb_checkpoint ck = {0};
    gb_diag diag = {0};
    ck.config_text = effective_config(t->cfg);
    ck.vocab = &t->data->vocab;
    ck.step = step;
    ck.n_params = gb_model_num_params(t->model);
    ck.params = malloc((size_t)ck.n_params * sizeof(float));
    ck.optim_bytes = gb_model_optim_state_bytes(t->model);
    ck.optim_state = malloc(ck.optim_bytes);
    snprintf(ck.optim_name, sizeof ck.optim_name, "%s", t->s->plugin[GB_KIND_OPTIM]);
    char path[4200];
    snprintf(path, sizeof path, "%s/ckpt-%06lld.gbk", t->s->out_dir, (long long)step);
    int rc = -1;
    if (ck.config_text && ck.params && ck.optim_state &&
        !gb_model_get_params(t->model, ck.params) &&
        !gb_model_get_optim_state(t->model, ck.optim_state))
        rc = gb_checkpoint_write(path, &ck, &diag);
    if (rc == 0)
        printf("checkpoint: %s\n", path);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    free(ck.config_text);
    free(ck.params);
    free(ck.optim_state);
    return rc;
}

static int resume_from(trainer *t, const char *path)
{
    gb_checkpoint ck;
    gb_diag diag = {0};
    int rc = gb_checkpoint_read(path, &ck, &diag);
    if (rc == 0 && ck.n_params != gb_model_num_params(t->model)) {
        gb_diag_add(&diag, "%s holds %lld parameters but this config's model has %lld; resume "
                    "with the config the checkpoint was trained with", path,
                    (long long)ck.n_params, (long long)gb_model_num_params(t->model));
        rc = -1;
    }
    if (rc == 0 && (strcmp(ck.optim_name, t->s->plugin[GB_KIND_OPTIM]) != 0 ||
                    ck.optim_bytes != gb_model_optim_state_bytes(t->model))) {
        gb_diag_add(&diag, "%s was written by [optim] plugin = %s (%zu bytes of state); this "
                    "run uses %s", path, ck.optim_name, ck.optim_bytes,
                    t->s->plugin[GB_KIND_OPTIM]);
        rc = -1;
    }
    if (rc == 0 && ck.step >= t->s->steps) {
        gb_diag_add(&diag, "%s is at step %lld; [run] steps = %lld leaves nothing to train", path,
                    (long long)ck.step, (long long)t->s->steps);
        rc = -1;
    }
    if (rc == 0)
        rc = gb_model_set_params(t->model, ck.params) ||
             gb_model_set_optim_state(t->model, ck.optim_state);
    if (rc == 0) {
        t->first_step = ck.step;
        printf("resumed from %s at step %lld\n", path, (long long)ck.step);
    }
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    gb_checkpoint_free(&ck);
    return rc;
}

/* ---- the loop ------------------------------------------------------------------------ */

static int train_step(trainer *t, int64_t it, int want_loss, float *loss)
{
    const gb_settings *s = t->s;
    int64_t accum = s->gradient_accumulation_steps;
    double loss_sum = 0.0;
    if (gb_model_zero_grads(t->model))
        return -1;
    for (int64_t micro = 0; micro < accum; micro++) {
        gb_data_batch(t->data, GB_SPLIT_TRAIN, (uint64_t)s->seed, GB_RNG_TRAIN_BATCH,
                      (uint64_t)(it * accum + micro), 0, s->batch_size, s->block_size,
                      t->tokens, t->targets);
        float micro_loss = 0.0f;
        if (gb_model_forward(t->model, t->tokens, t->targets, s->batch_size, s->block_size,
                             want_loss ? &micro_loss : NULL) ||
            gb_model_backward(t->model, 1.0f / (float)accum))
            return -1;
        loss_sum += micro_loss;
    }
    *loss = (float)(loss_sum / (double)accum);
    return gb_model_update(t->model, (float)gb_settings_lr(s, it), (float)s->grad_clip, it + 1);
}

static void log_step(trainer *t, int64_t step, float loss, double lr, double ms)
{
    const gb_settings *s = t->s;
    double tokens = (double)(s->batch_size * s->block_size * s->gradient_accumulation_steps);
    double tok_s = tokens / (ms / 1e3);
    float norm = 0.0f;
    gb_model_grad_norm(t->model, &norm);
    printf("step %5lld/%lld | loss %.4f | lr %.2e | %.1f ms | %.0f tok/s\n", (long long)step,
           (long long)s->steps, loss, lr, ms, tok_s);
    fprintf(t->metrics, "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"ms\": %.3f, "
            "\"tokens_per_s\": %.1f, \"grad_norm\": %.9g}\n", (long long)step, loss, lr, ms,
            tok_s, norm);
    fflush(stdout);
    fflush(t->metrics);
}

static void print_plan(trainer *t)
{
    int n;
    gb_model_tensors(t->model, &n);
    printf("model: %lld parameters in %d tensors | n_layer %lld, n_head %lld, n_embd %lld, "
           "block_size %lld, vocab %lld\n", (long long)gb_model_num_params(t->model), n,
           (long long)t->s->n_layer, (long long)t->s->n_head, (long long)t->s->n_embd,
           (long long)t->s->block_size, (long long)t->data->vocab.size);
    printf("plugins: device %s, attn %s, optim %s, precision %s, comm %s | %lld threads\n",
           t->s->plugin[1], t->s->plugin[2], t->s->plugin[3], t->s->plugin[4], t->s->plugin[5],
           (long long)t->s->threads);
    gb_model_print_memory(t->model, stdout);
}

static void print_summary(trainer *t, int64_t steps_done, double total_ms)
{
    const gb_settings *s = t->s;
    gb_memory_plan p = gb_model_memory(t->model);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double tokens = (double)(steps_done * s->batch_size * s->block_size *
                             s->gradient_accumulation_steps);
    double planned = (double)(p.params + p.grads + p.optimizer + p.activations + p.workspace);
    printf("done: %lld steps in %.1f s | train loss %.4f, val loss %.4f | %.0f tok/s | "
           "peak memory: planned %.1f MiB, process RSS %.1f MiB\n", (long long)steps_done,
           total_ms / 1e3, t->train_loss, t->val_loss, tokens / (total_ms / 1e3),
           planned / (1024.0 * 1024.0), (double)ru.ru_maxrss / 1024.0);
}

static int run_loop(trainer *t)
{
    const gb_settings *s = t->s;
    double start = gb_now_ms();
    int64_t step = t->first_step;
    while (step < s->steps && !interrupted) {
        int64_t it = step;
        int logging = (it + 1) % s->log_every == 0 || it == t->first_step || it + 1 == s->steps;
        double t0 = gb_now_ms();
        float loss;
        if (train_step(t, it, logging, &loss))
            return 1;
        step = it + 1;
        if (logging)
            log_step(t, step, loss, gb_settings_lr(s, it), gb_now_ms() - t0);
        if ((s->eval_every && step % s->eval_every == 0) || step == s->steps)
            if (evaluate(t, step))
                return 1;
        if ((s->checkpoint_every && step % s->checkpoint_every == 0) || step == s->steps)
            if (save_checkpoint(t, step))
                return 1;
    }
    if (interrupted) {
        fprintf(stderr, "gearbox: interrupted at step %lld; saving a checkpoint\n",
                (long long)step);
        return save_checkpoint(t, step) ? 1 : 130;
    }
    print_summary(t, step - t->first_step, gb_now_ms() - start);
    return 0;
}

static int open_outputs(trainer *t, const gb_train_options *opts)
{
    if (make_dirs(t->s->out_dir)) {
        fprintf(stderr, "gearbox: error: [run] out_dir = %s: cannot create it: %s\n",
                t->s->out_dir, strerror(errno));
        return -1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", t->s->out_dir);
    t->metrics = fopen(path, opts->resume ? "a" : "w");
    if (!t->metrics) {
        fprintf(stderr, "gearbox: error: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int prepare(trainer *t, gb_config *cfg, const gb_train_options *opts)
{
    gb_diag diag = {0};
    int problems = gb_runtime_resolve(&t->rt, cfg, opts->plugin_path, &diag);
    t->s = &t->rt.settings;
    if (!problems) {
        t->data = gb_data_open(t->s->data_dir, t->s->vocab_size, t->s->block_size, &diag);
        problems += !t->data;
    }
    if (!problems)
        problems += gb_runtime_start(&t->rt, &diag) != 0;
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    return problems;
}

int gb_train(gb_config *cfg, const gb_train_options *opts)
{
    trainer t = {.cfg = cfg, .train_loss = NAN, .val_loss = NAN};
    int status = 2;
    if (prepare(&t, cfg, opts))
        goto done;
    gb_model_config mc = {t.s->n_layer, t.s->n_head, t.s->n_embd, t.s->block_size,
                          t.s->vocab_size ? t.s->vocab_size : t.data->vocab.size, t.s->bias};
    t.model = gb_model_create(&t.rt, &mc, t.s->batch_size, 1);
    size_t batch_bytes = (size_t)(t.s->batch_size * t.s->block_size) * sizeof(int32_t);
    t.tokens = malloc(batch_bytes);
    t.targets = malloc(batch_bytes);
    if (!t.model || !t.tokens || !t.targets || gb_model_init(t.model, (uint64_t)t.s->seed) ||
        (opts->resume && resume_from(&t, opts->resume)) || open_outputs(&t, opts))
        goto done;
    print_plan(&t);
    signal(SIGINT, on_interrupt);
    signal(SIGTERM, on_interrupt);
    status = run_loop(&t);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
done:
    if (t.metrics)
        fclose(t.metrics);
    free(t.tokens);
    free(t.targets);
    gb_model_free(t.model);
    gb_data_free(t.data);
    gb_runtime_free(&t.rt);
    return status;
}
