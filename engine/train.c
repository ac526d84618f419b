/* The training loop; see train.h. Only rank 0 of the comm plugin reports and writes;
 * with more than one rank, ddp.h shares out the rows of every batch and averages the
 * gradients and the reported losses.
 *
 * Observability lives here too: the progress line (progress.h), metrics.jsonl with MFU
 * and memory figures per logged step and a summary line at the end, and manifest.json
 * (manifest.h). MFU follows nanoGPT's estimate_mfu and is measured against the peak of
 * the dtype the run's matmuls compute in (f32, TF32, bf16 or f16): the device's stated
 * one, or where it states none (the cpu device) the larger of the CPU's rated and
 * measured peaks (gb_peak_flops).
 */
#include "train.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "autobatch.h"
#include "checkpoint.h"
#include "cpu_share.h"
#include "fsutil.h"
#include "clock.h"
#include "gpu_monitor.h"
#include "data.h"
#include "ddp.h"
#include "machine.h"
#include "manifest.h"
#include "metrics.h"
#include "model.h"
#include "prefetch.h"
#include "progress.h"
#include "report.h"
#include "rng.h"
#include "runtime.h"
#include "threads_auto.h"

struct gb_trainer {
    gb_config *cfg;
    gb_runtime rt;
    gb_settings *s;
    gb_dataset *data;
    gb_model *model;
    gb_ddp *ddp;                 /* NULL in a world of one process */
    int rank, world;
    int64_t rows, first_row;     /* this rank's rows of every batch: [first_row, +rows) */
    int32_t *tokens, *targets;   /* (rows, T) host */
    gb_prefetch *prefetch;       /* training batches sent ahead ([data] prefetch), or NULL */
    gb_gpu_monitor *gpu;         /* NVML's figures of the run's GPU, or NULL */
    char gpu_off[400];           /* why there are none on a GPU run; "" elsewhere */
    gb_profile *profile;         /* --profile: time by phase, or NULL */
    FILE *metrics;               /* rank 0's metrics.jsonl; NULL on the others */
    gb_progress progress;
    int64_t first_step;          /* 0, or the checkpoint's step when resuming */
    double train_loss, val_loss; /* last evaluation; NAN before the first */
    double flops_per_step;       /* nanoGPT's estimate, for MFU */
    double peak_flops;           /* what MFU divides by; 0 when unknown */
    const char *peak_source;     /* "device", "rated CPU" or "measured CPU" */
    gb_compute compute;          /* the dtype of that peak: what the matmuls compute in */
    char last_checkpoint[4200];  /* written or resumed from by this run; "" before any */
    int64_t last_checkpoint_step;
    int auto_threads;            /* [run] threads = auto in a world of one process */
    gb_threads_auto threads;     /* its trials and choice */
    gb_cpu_sample cpu_seen;      /* when it last looked at the cores others keep busy */
    int graphs;                  /* forward and backward run as device graphs */
    char graphs_off[400];        /* why cuda_graphs = auto left them off; "" otherwise */
    int64_t steps_queued;        /* gb_trainer_step calls that queued a whole step */
};

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* The run's account, from rank 0 alone (every rank reports its own errors). */
static void say(const gb_trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const gb_trainer *t, const char *fmt, ...)
{
    if (t->rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    gb_reportv(GB_REPORT_INFO, "train", fmt, ap);
    va_end(ap);
}

/* A JSON number, or null for NaN and infinities (which JSON cannot hold). */
static json_t *json_number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* `v` rounded to `decimals` places: the figures a line needs, not a float's noise. */
static double rounded(double v, int decimals)
{
    double scale = pow(10.0, decimals);
    return round(v * scale) / scale;
}

/* Appends `line` (an object; its reference is taken) to metrics.jsonl as one line, nine
 * significant digits per real (a float's loss exactly), and flushes it so that a killed
 * run keeps every line it logged. */
static void write_metrics_line(gb_trainer *t, json_t *line)
{
    if (!t->metrics) {
        json_decref(line);
        return;
    }
    if (line && json_dumpf(line, t->metrics, JSON_REAL_PRECISION(9)) == 0)
        fputc('\n', t->metrics);
    json_decref(line);
    fflush(t->metrics);
}

/* ---- evaluation ---------------------------------------------------------------------- */

/* This rank's rows of batch `index` of `split` into tokens and targets. */
static int draw_rows(gb_trainer *t, gb_split split, int purpose, uint64_t index,
                     int32_t *tokens, int32_t *targets)
{
    gb_diag diag = {0};
    int rc = gb_data_batch(t->data, split, (uint64_t)t->s->seed, purpose, index, t->first_row,
                           t->first_row + t->rows, t->s->block_size, tokens, targets, &diag);
    gb_diag_report(&diag, "train");
    gb_diag_clear(&diag);
    return rc;
}

static int draw_batch(gb_trainer *t, gb_split split, int purpose, uint64_t index)
{
    return draw_rows(t, split, purpose, index, t->tokens, t->targets);
}

/* The prefetcher's gb_batch_fill_fn: training micro-step `index`. */
static int draw_training_rows(void *ctx, uint64_t index, int32_t *tokens, int32_t *targets)
{
    gb_trainer *t = ctx;
    double start = gb_now_ms();
    int rc = draw_rows(t, GB_SPLIT_TRAIN, GB_RNG_TRAIN_BATCH, index, tokens, targets);
    if (t->profile)
        t->profile->ms[GB_PHASE_DATA] += gb_now_ms() - start;
    return rc;
}

int gb_split_loss(gb_model *m, const gb_dataset *ds, const gb_settings *s, gb_split split,
                  int64_t step, int64_t batches, int64_t first_row, int64_t rows,
                  int32_t *tokens, int32_t *targets, double *out)
{
    int purpose = split == GB_SPLIT_TRAIN ? GB_RNG_EVAL_TRAIN : GB_RNG_VAL_BATCH;
    double sum = 0.0;
    gb_diag diag = {0};
    for (int64_t i = 0; i < batches; i++) {
        uint64_t index = ((uint64_t)step << 20) | (uint64_t)i;
        float loss;
        int rc = gb_data_batch(ds, split, (uint64_t)s->seed, purpose, index, first_row,
                               first_row + rows, s->block_size, tokens, targets, &diag);
        gb_diag_report(&diag, "train");
        gb_diag_clear(&diag);
        if (rc || gb_model_forward(m, tokens, targets, rows, s->block_size, &loss))
            return -1;
        sum += loss;
    }
    *out = sum / (double)batches;
    return 0;
}

static int estimate_loss(gb_trainer *t, gb_split split, int64_t step, double *out)
{
    return gb_split_loss(t->model, t->data, t->s, split, step, t->s->eval_iters, t->first_row,
                         t->rows, t->tokens, t->targets, out);
}

static int evaluate(gb_trainer *t, int64_t step)
{
    double losses[2];
    if (estimate_loss(t, GB_SPLIT_TRAIN, step, &losses[0]) ||
        estimate_loss(t, GB_SPLIT_VAL, step, &losses[1]) || gb_ddp_average(t->ddp, losses, 2))
        return -1;
    t->train_loss = losses[0];
    t->val_loss = losses[1];
    gb_report_metrics m = gb_report_metrics_of(GB_RECORD_EVAL);
    m.step = step;
    m.steps = t->s->steps;
    m.train_loss = t->train_loss;
    m.val_loss = t->val_loss;
    if (t->rank == 0)
        gb_report_record("train", &m, "step %lld: train loss %.4f, val loss %.4f",
                         (long long)step, t->train_loss, t->val_loss);
    write_metrics_line(t, json_pack("{s:I, s:o, s:o}", "step", (json_int_t)step, "train_loss",
                                    json_number(t->train_loss), "val_loss",
                                    json_number(t->val_loss)));
    return 0;
}

/* ---- checkpoints --------------------------------------------------------------------- */

/* The loss scaler's state into ck (nothing for policies without one). */
static int save_scaler_state(gb_trainer *t, gb_checkpoint *ck)
{
    const gb_precision_ops *p = t->rt.precision;
    gb_instance *inst = &t->rt.inst[GB_KIND_PRECISION];
    if (!p->state_bytes)
        return 0;
    if (gb_model_scaler_to_host(t->model))   /* a scaler on the device moved since */
        return -1;
    ck->precision_bytes = p->state_bytes(inst->self);
    ck->precision_state = malloc(ck->precision_bytes ? ck->precision_bytes : 1);
    if (!ck->precision_state)
        return -1;
    GB_CALL(inst, "save_state", p->save_state(inst->self, ck->precision_state));
    return 0;
}

/* Continues the checkpoint's loss scale, so a resumed run scales as the uninterrupted
 * one would. A checkpoint from a policy without a scaler starts the scaler afresh. */
static int load_scaler_state(gb_trainer *t, const gb_checkpoint *ck, const char *path,
                             gb_diag *diag)
{
    const gb_precision_ops *p = t->rt.precision;
    gb_instance *inst = &t->rt.inst[GB_KIND_PRECISION];
    if (!p->load_state)
        return 0;
    if (ck->precision_bytes == 0) {
        say(t, "note: %s holds no loss-scaler state; [precision] plugin = %s starts "
            "from its init_scale", path, t->s->plugin[GB_KIND_PRECISION]);
        return 0;
    }
    if (ck->precision_bytes != p->state_bytes(inst->self)) {
        gb_diag_add(diag, "%s holds %zu bytes of loss-scaler state; [precision] plugin = %s "
                    "keeps %zu: resume with the precision plugin the checkpoint was trained with",
                    path, ck->precision_bytes, t->s->plugin[GB_KIND_PRECISION],
                    p->state_bytes(inst->self));
        return -1;
    }
    gb_status st = p->load_state(inst->self, ck->precision_state);
    if (st != GB_OK) {
        gb_diag_add(diag, "%s: [precision] plugin = %s refused the saved loss-scaler state: %s",
                    path, t->s->plugin[GB_KIND_PRECISION], inst->error);
        return -1;
    }
    return gb_model_scaler_to_device(t->model);
}

static void remember_checkpoint(gb_trainer *t, const char *path, int64_t step)
{
    snprintf(t->last_checkpoint, sizeof t->last_checkpoint, "%s", path);
    t->last_checkpoint_step = step;
}

/* Where the run can be taken up again, for the message of a run stopped on failure. */
static void print_last_good_checkpoint(const gb_trainer *t)
{
    if (t->last_checkpoint[0])
        gb_report(GB_REPORT_ERROR, "train", "gearbox: the last good checkpoint is %s (step "
                  "%lld): resume from it with a lower learning rate or a larger [optim] eps, "
                  "or a fixed config", t->last_checkpoint, (long long)t->last_checkpoint_step);
    else
        gb_report(GB_REPORT_ERROR, "train", "gearbox: no checkpoint of this run was written "
                  "before it; start again with a lower learning rate or a larger [optim] eps, "
                  "or a fixed config");
}

/* 0 when every parameter is finite; else says which is not and returns -1, so no
 * checkpoint that could not be trained on is written. */
static int check_params_finite(const gb_trainer *t, const float *params, int64_t step)
{
    int n;
    const gb_param_tensor *tensors = gb_model_tensors(t->model, &n);
    for (int i = 0; i < n; i++)
        for (int64_t k = 0; k < tensors[i].numel; k++) {
            float v = params[tensors[i].offset + k];
            if (isfinite(v))
                continue;
            gb_report(GB_REPORT_ERROR, "train", "gearbox: error: step %lld: parameter %s[%lld] "
                      "is %g; no checkpoint written, training stopped", (long long)step,
                      tensors[i].name, (long long)k, (double)v);
            print_last_good_checkpoint(t);
            return -1;
        }
    return 0;
}

/* A rank other than 0 writes no checkpoint, but takes its part in gathering a sharded
 * optimizer state (gb_model_get_optim_state is then collective). */
static int gather_for_rank0(gb_trainer *t)
{
    if (!gb_model_optim_state_sharded(t->model))
        return 0; /* every rank holds the same parameters and optimizer state */
    void *state = malloc(gb_model_optim_state_bytes(t->model));
    int rc = !state || gb_model_get_optim_state(t->model, state) ? -1 : 0;
    free(state);
    return rc;
}

static int save_checkpoint(gb_trainer *t, int64_t step)
{
    if (t->rank != 0)
        return gather_for_rank0(t);
    gb_checkpoint ck = {0};
    gb_diag diag = {0};
    ck.config_text = gb_config_text(t->cfg);
    ck.vocab = &t->data->vocab;
    ck.step = step;
    ck.n_params = gb_model_num_params(t->model);
    ck.params = malloc((size_t)ck.n_params * sizeof(float));
    ck.optim_bytes = gb_model_optim_state_bytes(t->model);
    ck.optim_state = malloc(ck.optim_bytes);
    snprintf(ck.optim_name, sizeof ck.optim_name, "%s", t->s->plugin[GB_KIND_OPTIM]);
    int scaler_ok = save_scaler_state(t, &ck) == 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/ckpt-%06lld.gbk", t->s->out_dir, (long long)step);
    int rc = -1;
    if (ck.config_text && ck.params && ck.optim_state && scaler_ok &&
        !gb_model_get_params(t->model, ck.params) &&
        !gb_model_get_optim_state(t->model, ck.optim_state) &&
        !check_params_finite(t, ck.params, step))
        rc = gb_checkpoint_write(path, &ck, &diag);
    if (rc == 0) {
        say(t, "checkpoint: %s", path);
        remember_checkpoint(t, path, step);
        gb_checkpoint_retain(t->s->out_dir, t->s->keep_last, step);
    }
    gb_diag_report(&diag, "train");
    gb_diag_clear(&diag);
    free(ck.config_text);
    free(ck.params);
    free(ck.optim_state);
    free(ck.precision_state);
    return rc;
}

/* A checkpoint read and checked against this run's model (shape, count, finite). */
static int read_for_model(const gb_trainer *t, const char *path, gb_checkpoint *ck,
                          gb_diag *diag)
{
    int rc = gb_checkpoint_read(path, ck, diag);
    return rc ? rc : gb_checkpoint_check_model(ck, path, t->model, t->s, diag);
}

static int resume_from(gb_trainer *t, const char *path)
{
    gb_checkpoint ck;
    gb_diag diag = {0};
    int rc = read_for_model(t, path, &ck, &diag);
    if (rc == 0 && (strcmp(ck.optim_name, t->s->plugin[GB_KIND_OPTIM]) != 0 ||
                    ck.optim_bytes != gb_model_optim_state_bytes(t->model))) {
        if (ck.optim_bytes == 0)
            gb_diag_add(&diag, "%s holds weights without optimizer state (written by gearbox "
                        "import): start from it with [train] init_from instead", path);
        else
            gb_diag_add(&diag, "%s was written by [optim] plugin = %s (%zu bytes of state); "
                        "this run uses %s", path, ck.optim_name, ck.optim_bytes,
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
             gb_model_set_optim_state(t->model, ck.optim_state) ||
             load_scaler_state(t, &ck, path, &diag);
    if (rc == 0) {
        t->first_step = ck.step;
        remember_checkpoint(t, path, ck.step);
        say(t, "resumed from %s at step %lld", path, (long long)ck.step);
    }
    gb_diag_report(&diag, "train");
    gb_diag_clear(&diag);
    gb_checkpoint_free(&ck);
    return rc;
}

/* [train] init_from: the weights of a checkpoint (an imported model, or another run's)
 * start this run at step 0 with a fresh optimizer; its shape must be this config's. */
static int init_from(gb_trainer *t, const char *path)
{
    gb_checkpoint ck;
    gb_diag diag = {0};
    int rc = read_for_model(t, path, &ck, &diag);
    if (rc == 0)
        rc = gb_model_set_params(t->model, ck.params);
    if (rc == 0)
        say(t, "weights from %s ([train] init_from; fresh optimizer, step 0)", path);
    else
        gb_diag_add(&diag, "[train] init_from = %s: not used; fix the checkpoint or the "
                    "[model] section", path);
    gb_diag_report(&diag, "train");
    gb_diag_clear(&diag);
    gb_checkpoint_free(&ck);
    return rc;
}

/* Where the run's weights come from, when not nanoGPT's initialisation. */
static int start_from(gb_trainer *t, const gb_train_options *opts)
{
    if (opts->resume)
        return resume_from(t, opts->resume);
    return t->s->init_from ? init_from(t, t->s->init_from) : 0;
}

/* ---- one step ------------------------------------------------------------------------ */

/* Forward over training micro-step `index`: the batch prefetched for it, or drawn now;
 * dloss is what backward will be given. */
static int forward_training_batch(gb_trainer *t, uint64_t index, float dloss)
{
    int64_t T = t->s->block_size;
    if (t->prefetch)
        return gb_prefetch_load(t->prefetch, index) ||
               gb_model_forward_loaded(t->model, t->rows, T, dloss);
    double start = gb_now_ms();
    if (draw_batch(t, GB_SPLIT_TRAIN, GB_RNG_TRAIN_BATCH, index))
        return -1;
    if (t->profile)
        t->profile->ms[GB_PHASE_DATA] += gb_now_ms() - start;
    return gb_model_load_batch(t->model, t->tokens, t->targets, t->rows, T) ||
           gb_model_forward_loaded(t->model, t->rows, T, dloss);
}

/* With prefetch, micro-step `index` goes out while the one before it computes; none
 * goes out past the run's last. */
static int send_next_batch(gb_trainer *t, uint64_t index)
{
    const gb_settings *s = t->s;
    if (!t->prefetch || index >= (uint64_t)(s->steps * s->gradient_accumulation_steps))
        return 0;
    return gb_prefetch_send(t->prefetch, index);
}

int gb_trainer_step(gb_trainer *t, int64_t it, float *loss)
{
    const gb_settings *s = t->s;
    int64_t accum = s->gradient_accumulation_steps;
    if (gb_model_zero_grads(t->model))
        return -1;
    const float dloss = 1.0f / (float)accum;   /* forward's too, for the fused classifier */
    for (int64_t micro = 0; micro < accum; micro++) {
        uint64_t index = (uint64_t)(it * accum + micro);
        if (micro == accum - 1)
            gb_ddp_arm(t->ddp); /* earlier micro-steps only accumulate (DDP's no_sync) */
        /* [model] dropout's masks: this micro-step's, each rank drawing its own rows' */
        gb_model_set_dropout_step(t->model, index + (uint64_t)t->rank * 0x9e3779b97f4a7c15ull);
        if (forward_training_batch(t, index, dloss) || gb_model_stage_loss(t->model, micro) ||
            gb_model_backward(t->model, dloss) ||
            send_next_batch(t, index + 1))
            return -1;
    }
    double wait_start = gb_now_ms();
    if (gb_ddp_finish(t->ddp))
        return -1;
    if (t->profile && t->ddp) {
        /* a GPU's all_reduce_wait only queues the wait: the profile waits for it here */
        if (gb_trainer_sync(t))
            return -1;
        t->profile->ms[GB_PHASE_ALL_REDUCE] += gb_now_ms() - wait_start;
        t->profile->calls[GB_PHASE_ALL_REDUCE]++;
    }
    int skipped = 0;
    if (gb_model_update(t->model, (float)gb_settings_lr(s, it), (float)s->grad_clip, it + 1,
                        &skipped) ||
        gb_model_stage_step(t->model, it + 1, accum))
        return -1;
    t->steps_queued++;
    if (loss) {
        gb_step_figures fig;
        if (gb_model_step_figures(t->model, 1, &fig) || gb_ddp_average(t->ddp, &fig.loss, 1))
            return -1;
        *loss = (float)fig.loss;
    }
    return 0;
}

int gb_trainer_sync(gb_trainer *t)
{
    gb_instance *dev = &t->rt.inst[GB_KIND_DEVICE];
    GB_CALL(dev, "sync", t->rt.dev->sync(dev->self));
    return 0;
}

int gb_trainer_skipped_steps(gb_trainer *t, int64_t *skipped)
{
    gb_step_figures fig;
    *skipped = 0;
    if (!t->rt.precision->loss_scale || !t->steps_queued)
        return 0;
    if (gb_model_step_figures(t->model, 1, &fig))
        return -1;
    *skipped = fig.skipped_steps;
    return 0;
}

void gb_trainer_set_profile(gb_trainer *t, gb_profile *profile)
{
    t->profile = profile;
    gb_model_set_profile(t->model, profile);
}

const gb_settings *gb_trainer_settings(const gb_trainer *t)
{
    return t->s;
}

double gb_trainer_flops_per_step(const gb_trainer *t)
{
    return t->flops_per_step;
}

double gb_trainer_peak_flops(const gb_trainer *t, const char **source, const char **compute)
{
    if (source)
        *source = t->peak_source;
    if (compute)
        *compute = gb_compute_name(t->compute);
    return t->peak_flops;
}

/* ---- metrics ------------------------------------------------------------------------- */

static double tokens_per_step(const gb_trainer *t)
{
    const gb_settings *s = t->s;
    return (double)(s->batch_size * s->block_size * s->gradient_accumulation_steps);
}

/* nanoGPT's estimate_mfu: 6N + 12 L H Q T FLOPs per token, N the parameters without the
 * position embedding (the token embedding counts: it is also the LM head), times the
 * tokens of an optimizer step. */
static double estimate_flops_per_step(const gb_trainer *t)
{
    const gb_settings *s = t->s;
    double n = (double)(gb_model_num_params(t->model) - s->block_size * s->n_embd);
    double L = (double)s->n_layer, H = (double)s->n_head, Q = (double)(s->n_embd / s->n_head);
    double T = (double)s->block_size;
    return (6.0 * n + 12.0 * L * H * Q * T) * tokens_per_step(t);
}

/* Model FLOPs utilisation of `steps` steps that took `ms`; NAN when the peak is unknown. */
static double mfu(const gb_trainer *t, double steps, double ms)
{
    if (t->peak_flops <= 0 || ms <= 0)
        return NAN;
    return t->flops_per_step * steps / (ms / 1e3) / t->peak_flops;
}

/* The GPU's figures now, into the step's line, its record and the progress line's tail. */
static void log_gpu(gb_trainer *t, json_t *line, gb_report_metrics *m)
{
    gb_gpu_sample g;
    t->progress.tail[0] = '\0';
    if (!t->gpu || gb_gpu_monitor_sample(t->gpu, &g))
        return;
    gb_gpu_sample_text(&g, t->progress.tail, sizeof t->progress.tail);
    if (g.has_memory) {
        json_object_set_new(line, "gpu_memory_used_bytes", json_integer((json_int_t)g.memory_used));
        json_object_set_new(line, "gpu_memory_total_bytes",
                            json_integer((json_int_t)g.memory_total));
        m->gpu_memory_used_bytes = g.memory_used;
        m->gpu_memory_total_bytes = g.memory_total;
    }
    if (g.has_utilization)
        json_object_set_new(line, "gpu_utilization_percent", json_integer(g.utilization));
    if (g.has_power)
        json_object_set_new(line, "gpu_power_watts", json_real(rounded(g.power_watts, 1)));
    if (g.has_temperature)
        json_object_set_new(line, "gpu_temperature_c", json_integer(g.temperature_c));
}

static void log_step(gb_trainer *t, int64_t step, float loss, const gb_step_figures *fig,
                     double lr, double ms)
{
    const gb_settings *s = t->s;
    double tok_s = tokens_per_step(t) / (ms / 1e3);
    uint64_t rss, peak_rss;
    gb_rss_bytes(&rss, &peak_rss);
    gb_report_metrics m = gb_report_metrics_of(GB_RECORD_STEP);
    m.step = step;
    m.steps = s->steps;
    m.loss = loss;
    m.lr = lr;
    m.ms = ms;
    m.tokens_per_s = tok_s;
    m.grad_norm = fig->grad_norm;
    m.mfu = mfu(t, 1.0, ms);
    if (t->rt.precision->loss_scale) {
        m.loss_scale = fig->loss_scale;
        m.skipped_steps = fig->skipped_steps;
    }
    m.rss_bytes = rss;
    m.peak_rss_bytes = peak_rss;
    json_t *line = json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:I}",
                             "step", (json_int_t)step, "loss", json_number(loss),
                             "lr", json_number(lr), "ms", json_number(rounded(ms, 3)),
                             "tokens_per_s", json_number(rounded(tok_s, 1)),
                             "grad_norm", json_number(fig->grad_norm),
                             "mfu", json_number(mfu(t, 1.0, ms)), "rss_bytes", (json_int_t)rss,
                             "peak_rss_bytes", (json_int_t)peak_rss);
    if (line && t->rt.precision->loss_scale) {
        json_object_set_new(line, "loss_scale", json_number(fig->loss_scale));
        json_object_set_new(line, "skipped_steps", json_integer(fig->skipped_steps));
    }
    if (line)
        log_gpu(t, line, &m);
    write_metrics_line(t, line);
    if (t->rank == 0)
        gb_report_record("train", &m, "step %5lld/%lld | loss %.4f | lr %.2e | %.1f ms | %.0f "
                         "tok/s%s", (long long)step, (long long)s->steps, loss, lr, ms, tok_s,
                         t->progress.tail);
}

static void print_prefetch(gb_trainer *t)
{
    if (t->prefetch)
        say(t, "data: prefetch on: the next batch is drawn into pinned memory and "
            "copied on a stream of its own while the current one computes");
    else if (t->s->prefetch)
        say(t, "data: prefetch off: [device] plugin = %s has no pinned memory, "
            "streams and events (ABI 1.2); batches are drawn and copied in line",
            t->s->plugin[GB_KIND_DEVICE]);
}

/* gb_model_print_memory's lines: the plan, what recomputation saves, the fusions. */
static void say_memory_plan(const gb_trainer *t)
{
    gb_report_buffer text;
    FILE *out = t->rank == 0 ? gb_report_buffer_open(&text) : NULL;
    if (!out)
        return;
    gb_model_print_memory(t->model, out, "");
    gb_report_buffer_close(&text, GB_REPORT_INFO, "train");
}

/* What `[run] threads = auto` will do, for the plan line. */
static const char *threads_plan(const gb_trainer *t)
{
    if (!t->s->threads_auto)
        return "";
    return t->auto_threads ? ", or fewer while fewer step faster (threads = auto)"
                           : " (threads = auto stays there in a data-parallel run: each "
                             "rank's trial would time the others' steps)";
}

static void print_plan(gb_trainer *t)
{
    int n;
    gb_model_tensors(t->model, &n);
    say(t, "model: %lld parameters in %d tensors | n_layer %lld, n_head %lld, n_embd %lld, "
        "block_size %lld, vocab %lld", (long long)gb_model_num_params(t->model), n,
        (long long)t->s->n_layer, (long long)t->s->n_head, (long long)t->s->n_embd,
        (long long)t->s->block_size, (long long)t->data->vocab.size);
    say(t, "plugins: device %s, attn %s, optim %s, precision %s, comm %s | %lld threads%s",
        t->s->plugin[1], t->s->plugin[2], t->s->plugin[3], t->s->plugin[4], t->s->plugin[5],
        (long long)t->s->threads, threads_plan(t));
    if (t->ddp && gb_model_optim_state_sharded(t->model))
        say(t, "data parallel: %d ranks x %lld rows of each batch of %lld | %zu bytes "
            "reduce-scattered per step, parameters all-gathered ([optim] shard_state)",
            t->world, (long long)t->rows, (long long)t->s->batch_size,
            gb_ddp_bytes_per_step(t->ddp));
    else if (t->ddp)
        say(t, "data parallel: %d ranks x %lld rows of each batch of %lld | %zu bytes "
            "all-reduced per step in %d buckets ([train] bucket_cap_mb)", t->world,
            (long long)t->rows, (long long)t->s->batch_size, gb_ddp_bytes_per_step(t->ddp),
            gb_ddp_buckets(t->ddp));
    const char *scaler = gb_model_scaler_where(t->model);
    if (scaler)
        say(t, "loss scaler: %s", scaler);
    say_memory_plan(t);
    print_prefetch(t);
    if (t->graphs)
        say(t, "cuda graphs: on%s: each micro-step's forward and backward are recorded "
            "once as graphs and launched from then on; zeroing the gradients, the batch "
            "copies, the figures, the gradient norm and the optimizer step are queued as "
            "calls", t->s->cuda_graphs == GB_GRAPHS_AUTO ? " (auto)" : "");
    else if (t->graphs_off[0])
        say(t, "cuda graphs: off (auto): %s", t->graphs_off);
    if (t->gpu)
        say(t, "gpu monitor: %s (NVML, driver %s): memory, utilisation, power and "
            "temperature in each logged step", gb_gpu_monitor_name(t->gpu),
            gb_gpu_monitor_driver(t->gpu));
    else if (t->gpu_off[0])
        say(t, "gpu monitor: off: %s", t->gpu_off);
    if (t->peak_flops > 0)
        say(t, "mfu: %.3g GFLOP per step (nanoGPT's count) against a %s %s peak of "
            "%.1f GFLOP/s", t->flops_per_step / 1e9, t->peak_source,
            gb_compute_name(t->compute), t->peak_flops / 1e9);
    else
        say(t, "mfu: not reported: the device states no %s peak", gb_compute_name(t->compute));
}

static void write_summary(gb_trainer *t, int64_t steps_done, double total_ms)
{
    gb_memory_plan p = gb_model_memory(t->model);
    uint64_t rss, peak_rss;
    gb_rss_bytes(&rss, &peak_rss);
    double tok_s = (double)steps_done * tokens_per_step(t) / (total_ms / 1e3);
    double run_mfu = mfu(t, (double)steps_done, total_ms);
    char mfu_text[32] = "";
    if (!isnan(run_mfu))
        snprintf(mfu_text, sizeof mfu_text, " | MFU %.1f%%", 100.0 * run_mfu);
    gb_report_metrics m = gb_report_metrics_of(GB_RECORD_DONE);
    m.step = steps_done;
    m.steps = t->s->steps;
    m.ms = total_ms;
    m.tokens_per_s = tok_s;
    m.mfu = run_mfu;
    m.train_loss = t->train_loss;
    m.val_loss = t->val_loss;
    m.rss_bytes = rss;
    m.peak_rss_bytes = peak_rss;
    m.planned_bytes = gb_memory_plan_total(&p);
    if (t->rank == 0)
        gb_report_record("train", &m, "done: %lld steps in %.1f s | train loss %.4f, val loss "
                         "%.4f | %.0f tok/s%s | peak memory: planned %.1f MiB, process RSS "
                         "%.1f MiB", (long long)steps_done, total_ms / 1e3, t->train_loss,
                         t->val_loss, tok_s, mfu_text,
                         (double)gb_memory_plan_total(&p) / (1024.0 * 1024.0),
                         (double)peak_rss / (1024.0 * 1024.0));
    json_t *line = json_pack("{s:b, s:I, s:o, s:o, s:o, s:o, s:o, s:I, "
                             "s:{s:I, s:I, s:I, s:I, s:I}}", "summary", 1, "steps", (json_int_t)steps_done,
                             "seconds", json_number(rounded(total_ms / 1e3, 3)),
                             "tokens_per_s", json_number(rounded(tok_s, 1)),
                             "train_loss", json_number(t->train_loss),
                             "val_loss", json_number(t->val_loss), "mfu", json_number(run_mfu),
                             "peak_rss_bytes", (json_int_t)peak_rss, "planned_bytes",
                             "params", (json_int_t)p.params, "grads", (json_int_t)p.grads,
                             "optimizer", (json_int_t)p.optimizer,
                             "activations", (json_int_t)p.activations,
                             "workspace", (json_int_t)p.workspace);
    if (line && t->graphs) {
        int64_t recorded, launched;
        gb_model_graph_counts(t->model, &recorded, &launched);
        json_object_set_new(line, "graphs", json_pack("{s:I, s:I}", "recorded",
                                                      (json_int_t)recorded, "launched",
                                                      (json_int_t)launched));
    }
    write_metrics_line(t, line);
}

/* ---- the loop ------------------------------------------------------------------------ */

/* A signal reaches the ranks of a job at different steps; all stop at the first step any
 * of them saw it, so they leave the loop together and the checkpoint is consistent. */
/* The guard against training on non-finite values: a step whose loss (when `check_loss`:
 * a loss every rank agrees on) or gradient norm is inf or nan stops the run before it
 * writes a checkpoint. With a loss scaler such steps are the scaler's: it skips them. */
static int stop_if_not_finite(gb_trainer *t, const gb_step_figures *fig, int check_loss)
{
    if (t->rt.precision->update)
        return 0;
    if (isfinite(fig->grad_norm) && (!check_loss || isfinite(fig->loss)))
        return 0;
    gb_report(GB_REPORT_ERROR, "train", "gearbox: error: step %lld: the loss is %g and the "
              "gradient norm %g; training stopped rather than go on with non-finite weights",
              (long long)fig->step, fig->loss, (double)fig->grad_norm);
    print_last_good_checkpoint(t);
    return 1;
}

static int agree_on_interruption(gb_trainer *t)
{
    if (!t->ddp)
        return 0;
    double seen = interrupted ? 1.0 : 0.0;
    if (gb_ddp_average(t->ddp, &seen, 1))
        return -1;
    if (seen > 0.0)
        interrupted = 1;
    return 0;
}

/* Seconds between two looks at the cores other processes keep busy. */
#define CPU_SHARE_EVERY_S 0.25

/* threads = auto: the cores others held (looked at every CPU_SHARE_EVERY_S), the step's
 * time to the trial, and the pool to the count it asks for. */
static void adjust_threads(gb_trainer *t, double step_ms)
{
    if (gb_now_ms() / 1e3 - t->cpu_seen.wall_s >= CPU_SHARE_EVERY_S) {
        gb_cpu_sample now;
        gb_cpu_sample_take(&now);
        t->threads.held = gb_cpu_busy_elsewhere(&t->cpu_seen, &now);
        t->cpu_seen = now;
    }
    if (gb_threads_auto_observe(&t->threads, step_ms)) {
        char line[256];
        gb_threads_auto_describe(&t->threads, line, sizeof line);
        say(t, "%s", line);
    }
    omp_set_num_threads(t->threads.now);
}

static int run_loop(gb_trainer *t)
{
    const gb_settings *s = t->s;
    double start = gb_now_ms();
    int64_t step = t->first_step;
    /* mpirun hands every rank a pseudo-terminal even when its own output goes to a file:
     * plain lines keep such logs readable */
    gb_progress_start(&t->progress, t->rank == 0 && !t->ddp, t->first_step, s->steps);
    if (t->auto_threads) {
        gb_cpu_sample now;
        gb_cpu_sample_take(&now);
        gb_threads_auto_start(&t->threads, (int)s->threads,
                              gb_cpu_busy_elsewhere(&t->cpu_seen, &now));
        t->cpu_seen = now;
    }
    while (step < s->steps && !interrupted) {
        int64_t it = step;
        /* logged steps wait for their own figures (the loss averaged over ranks, which
         * all log the same steps); the others read the newest the device has ready, for
         * the progress line and the guard */
        int logging = (it + 1) % s->log_every == 0 || it == t->first_step || it + 1 == s->steps;
        double t0 = gb_now_ms();
        float loss = NAN;
        gb_step_figures fig;
        if (gb_trainer_step(t, it, logging ? &loss : NULL) ||
            gb_model_step_figures(t->model, logging, &fig)) {
            gb_progress_finish(&t->progress);
            return 1;
        }
        if (logging)
            fig.loss = loss;
        step = it + 1;
        if (agree_on_interruption(t) || stop_if_not_finite(t, &fig, logging || !t->ddp)) {
            gb_progress_finish(&t->progress);
            return 1;
        }
        double ms = gb_now_ms() - t0;
        if (t->auto_threads)
            adjust_threads(t, ms);
        gb_progress_update(&t->progress, step, fig.loss, tokens_per_step(t) / (ms / 1e3));
        if (logging)
            log_step(t, step, loss, &fig, gb_settings_lr(s, it), ms);
        if (((s->eval_every && step % s->eval_every == 0) || step == s->steps) &&
            evaluate(t, step)) {
            gb_progress_finish(&t->progress);
            return 1;
        }
        if (((s->checkpoint_every && step % s->checkpoint_every == 0) || step == s->steps) &&
            save_checkpoint(t, step)) {
            gb_progress_finish(&t->progress);
            return 1;
        }
    }
    gb_progress_finish(&t->progress);
    if (interrupted) {
        gb_report(GB_REPORT_WARNING, "train", "gearbox: interrupted at step %lld; saving a "
                  "checkpoint", (long long)step);
        return save_checkpoint(t, step) ? 1 : 130;
    }
    write_summary(t, step - t->first_step, gb_now_ms() - start);
    return 0;
}

/* metrics.jsonl (appended to on resume) and manifest.json in out_dir, on rank 0 alone. */
static int open_outputs(gb_trainer *t, const gb_train_options *opts, time_t start)
{
    if (t->rank != 0)
        return 0;
    if (gb_make_dirs(t->s->out_dir)) {
        gb_report(GB_REPORT_ERROR, "train", "gearbox: error: [run] out_dir = %s: cannot create "
                  "it: %s", t->s->out_dir, strerror(errno));
        return -1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", t->s->out_dir);
    gb_diag diag = {0};
    if (opts->resume && gb_metrics_rewind(path, t->first_step, &diag)) {
        gb_diag_report(&diag, "train");
        gb_diag_clear(&diag);
        return -1;
    }
    t->metrics = fopen(path, opts->resume ? "a" : "w");
    if (!t->metrics) {
        gb_report(GB_REPORT_ERROR, "train", "gearbox: error: cannot write %s: %s", path,
                  strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/manifest.json", t->s->out_dir);
    char *ini = gb_config_text(t->cfg);
    int rc = ini ? gb_manifest_write(path, &t->rt, ini, start) : -1;
    free(ini);
    return rc;
}

/* ---- set-up -------------------------------------------------------------------------- */

static int prepare(gb_trainer *t, gb_config *cfg, const char *plugin_path, const char *resume)
{
    gb_diag diag = {0};
    /* the model is the checkpoint's the run starts from: --resume's, or init_from's */
    int problems = gb_checkpoint_take_model(cfg, resume, &diag);
    if (!problems)
        problems = gb_runtime_resolve(&t->rt, cfg, plugin_path, &diag);
    t->s = &t->rt.settings;
    if (!problems) {
        t->data = gb_data_open(t->s, &diag);
        problems += !t->data || gb_data_record_tokenizer(t->data, cfg, &diag) != 0;
    }
    if (!problems)
        problems += gb_runtime_start(&t->rt, &diag) != 0;
    gb_diag_report(&diag, "train");
    gb_diag_clear(&diag);
    return problems;
}

/* [data] batch_size is the global batch: each rank trains its own equal share of the rows
 * of every batch, so the ranks together see exactly what one process would. */
static int share_out_rows(gb_trainer *t)
{
    const gb_settings *s = t->s;
    gb_instance *comm = &t->rt.inst[GB_KIND_COMM];
    t->rank = t->rt.comm->rank(comm->self);
    t->world = t->rt.comm->world(comm->self);
    if (t->world > 1 && s->batch_auto) {
        gb_report(GB_REPORT_ERROR, "train", "gearbox: error: [data] batch_size = auto is not "
                  "available for data-parallel runs (%d ranks); set the global batch_size",
                  t->world);
        return -1;
    }
    if (s->batch_size % t->world != 0) {
        gb_report(GB_REPORT_ERROR, "train", "gearbox: error: [data] batch_size = %lld (the "
                  "global batch) does not divide among the %d ranks of [comm] plugin = %s; use "
                  "a multiple of %d", (long long)s->batch_size, t->world,
                  s->plugin[GB_KIND_COMM], t->world);
        return -1;
    }
    t->rows = s->batch_size / t->world;
    t->first_row = (int64_t)t->rank * t->rows;
    return 0;
}

/* NVML's view of the run's GPU (gpu_monitor.h), for a device whose memory is its own and
 * that names an NVIDIA GPU (a CUDA compute capability or a PCI address); a run without it
 * goes on. */
static void open_gpu_monitor(gb_trainer *t)
{
    if (t->rt.device.memory != GB_MEMORY_DEVICE)
        return;
    gb_device_info info = {.struct_size = sizeof info};
    gb_instance *dev = &t->rt.inst[GB_KIND_DEVICE];
    if (t->rt.dev->info(dev->self, &info) != GB_OK) {
        snprintf(t->gpu_off, sizeof t->gpu_off, "[device] plugin = %.80s did not describe its "
                 "GPU: %.200s", t->s->plugin[GB_KIND_DEVICE], dev->error);
        return;
    }
    if (info.cc_major <= 0 && !info.pci_bus_id[0])
        return;
    t->gpu = gb_gpu_monitor_open(info.pci_bus_id, t->rt.ctx.ordinal, t->gpu_off,
                                 sizeof t->gpu_off);
}

/* What keeps [run] cuda_graphs from this run, if anything: `why` follows "[run]
 * cuda_graphs = true" in a sentence ("" when nothing does) and `fix` says what to change. */
static void graphs_refused(const gb_trainer *t, char *why, size_t cap, const char **fix)
{
    const gb_device_ops *ops = t->rt.dev;
    const gb_plugin *dev = t->rt.inst[GB_KIND_DEVICE].plugin;
    why[0] = '\0';
    if (t->s->dropout > 0.0) {
        snprintf(why, cap, " is not available with [model] dropout = %g: each micro-step "
                 "draws its own masks, which a recorded graph would repeat", t->s->dropout);
        *fix = "set dropout = 0 or cuda_graphs = false";
    } else if (!GB_DEVICE_HAS(ops, graph_begin) || !GB_DEVICE_HAS(ops, graph_end) ||
               !GB_DEVICE_HAS(ops, graph_launch) || !GB_DEVICE_HAS(ops, graph_destroy)) {
        snprintf(why, cap, ": [device] plugin = %s (%s) records no graphs (ABI 1.4's "
                 "graph_begin, graph_end, graph_launch and graph_destroy)", dev->desc->name,
                 dev->path);
        *fix = "use [device] plugin = cuda, or set cuda_graphs = false";
    } else if (t->ddp) {
        snprintf(why, cap, " is not available for data-parallel runs (%d ranks): the host "
                 "starts each gradient bucket's all-reduce during backward, which a graph "
                 "cannot record", t->world);
        *fix = "set cuda_graphs = false";
    }
}

/* Why cuda_graphs = auto leaves graphs off on a device that records them, where `true`
 * would record: what a recording cannot hold, or what no test has recorded; NULL: on. */
static const char *graphs_unchecked(const gb_trainer *t)
{
    const char *sync = getenv("GEARBOX_CUDA_SYNC");
    if (sync && strcmp(sync, "1") == 0)
        return "GEARBOX_CUDA_SYNC=1 waits for the device after every launch, which a "
               "recording cannot hold";
    if (strcmp(t->rt.inst[GB_KIND_ATTN].plugin->desc->name, "cudnn") == 0)
        return "attn/cudnn inside a recording has not been checked (the emulated suite has "
               "no cuDNN); cuda_graphs = true records it";
    return NULL;
}

/* [run] cuda_graphs: what the device and the run must allow, then the model's graphs. With
 * auto, what true would refuse leaves them off, said in the plan where the device records
 * graphs (t->graphs_off). */
static int enable_graphs(gb_trainer *t)
{
    char why[400];
    const char *fix = "";
    if (t->s->cuda_graphs == GB_GRAPHS_OFF)
        return 0;
    graphs_refused(t, why, sizeof why, &fix);
    if (t->s->cuda_graphs == GB_GRAPHS_ON && why[0]) {
        gb_report(GB_REPORT_ERROR, "train", "gearbox: error: [run] cuda_graphs = true%s; %s",
                  why, fix);
        return -1;
    }
    const char *unchecked = t->s->cuda_graphs == GB_GRAPHS_AUTO ? graphs_unchecked(t) : NULL;
    if (why[0] && !strstr(why, "records no graphs"))   /* said only where there are graphs */
        snprintf(t->graphs_off, sizeof t->graphs_off, "cuda_graphs = true%s", why);
    else if (!why[0] && unchecked)
        snprintf(t->graphs_off, sizeof t->graphs_off, "%s", unchecked);
    if (why[0] || unchecked)
        return 0;
    gb_model_use_graphs(t->model);
    t->graphs = 1;
    return 0;
}

static int open_prefetch(gb_trainer *t)
{
    if (!t->s->prefetch || !gb_prefetch_possible(&t->rt))
        return 0;
    int32_t *tokens, *targets;
    gb_model_batch_buffers(t->model, &tokens, &targets);
    t->prefetch = gb_prefetch_create(&t->rt, t->rows * t->s->block_size, tokens, targets,
                                     draw_training_rows, t);
    return t->prefetch ? 0 : -1;
}

/* The model for the run's batch (chosen here when batch_size = auto), its batch buffers
 * and the MFU figures. */
static int build_model(gb_trainer *t)
{
    const gb_settings *s = t->s;
    gb_model_config mc = gb_model_config_of(s, t->data->vocab.size);
    gb_diag diag = {0};
    gb_report_buffer choice;
    FILE *out = gb_report_buffer_open(&choice);
    int rc = !out || gb_batch_auto(&t->rt, &mc, out, &diag);
    gb_report_buffer_close(&choice, GB_REPORT_INFO, "train");
    gb_diag_report(&diag, "train");
    gb_diag_clear(&diag);
    if (rc || share_out_rows(t))
        return -1;
    t->model = gb_model_create(&t->rt, &mc, t->rows, 1);
    size_t batch_bytes = (size_t)(t->rows * s->block_size) * sizeof(int32_t);
    t->tokens = malloc(batch_bytes);
    t->targets = malloc(batch_bytes);
    int ddp_failed = 0;
    if (!t->model || !t->tokens || !t->targets || gb_model_init(t->model, (uint64_t)s->seed) ||
        gb_model_enable_figures(t->model, s->gradient_accumulation_steps))
        return -1;
    t->ddp = gb_ddp_create(&t->rt, t->model, s->bucket_bytes, &ddp_failed);
    if (ddp_failed || open_prefetch(t) || enable_graphs(t))
        return -1;
    t->auto_threads = s->threads_auto && !t->ddp;
    open_gpu_monitor(t);
    t->flops_per_step = estimate_flops_per_step(t);
    t->compute = gb_compute_of(t->rt.policy.matmul_dtype, t->rt.policy.tf32);
    t->peak_flops = gb_peak_flops(t->rt.dev, t->rt.inst[GB_KIND_DEVICE].self, &t->rt.device,
                                  t->compute, &t->peak_source);
    return 0;
}

/* gb_trainer_open for a run that will start from `resume` (NULL: from init_from, or
 * from scratch). */
static gb_trainer *open_trainer(gb_config *cfg, const char *plugin_path, const char *resume)
{
    gb_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    *t = (gb_trainer){.cfg = cfg, .train_loss = NAN, .val_loss = NAN};
    gb_cpu_sample_take(&t->cpu_seen);   /* the set-up, to the first trial: who else runs */
    if (prepare(t, cfg, plugin_path, resume) || build_model(t)) {
        gb_trainer_close(t);
        return NULL;
    }
    print_plan(t);
    return t;
}

gb_trainer *gb_trainer_open(gb_config *cfg, const char *plugin_path)
{
    return open_trainer(cfg, plugin_path, NULL);
}

void gb_trainer_close(gb_trainer *t)
{
    if (!t)
        return;
    if (t->metrics != NULL)
        fclose(t->metrics);
    gb_ddp_free(t->ddp);
    gb_prefetch_free(t->prefetch);
    gb_gpu_monitor_close(t->gpu);
    free(t->tokens);
    free(t->targets);
    gb_model_free(t->model);
    gb_data_free(t->data);
    gb_runtime_free(&t->rt);
    free(t);
}

/* A trainer a program steps, not gb_train's loop, records its evaluations and checkpoints
 * as a run does: the run's outputs (metrics.jsonl, manifest.json) opened at the first
 * need, the progress printer's lines plain. */
static int ready_to_record(gb_trainer *t)
{
    if (t->metrics)
        return 0;
    gb_progress_start(&t->progress, 0, t->first_step, t->s->steps);
    return open_outputs(t, &(gb_train_options){0}, time(NULL));
}

int gb_trainer_evaluate(gb_trainer *t, int64_t step, double *train_loss, double *val_loss)
{
    if (ready_to_record(t) || evaluate(t, step))
        return -1;
    if (train_loss)
        *train_loss = t->train_loss;
    if (val_loss)
        *val_loss = t->val_loss;
    return 0;
}

int gb_trainer_save(gb_trainer *t, int64_t step)
{
    return ready_to_record(t) || save_checkpoint(t, step) ? -1 : 0;
}

void gb_train_catch_signals(void)
{
    signal(SIGINT, on_interrupt);
    signal(SIGTERM, on_interrupt);
}

int gb_train(gb_config *cfg, const gb_train_options *opts)
{
    time_t start = time(NULL);
    gb_train_catch_signals();
    gb_trainer *t = open_trainer(cfg, opts->plugin_path, opts->resume);
    if (!t || start_from(t, opts) || gb_ddp_broadcast_params(t->ddp) ||
        open_outputs(t, opts, start)) {
        gb_trainer_close(t);
        return 2;
    }
    int status = run_loop(t);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    gb_trainer_close(t);
    return status;
}
