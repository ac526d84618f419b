/* Each training step's figures (per-token losses, squared gradient norm, the device's
 * loss scaler) copied behind the step's work into two host slots, so the host reads one
 * step's figures while the device runs the next. */
#include "model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whether the device has ABI 1.2's pinned memory, asynchronous copies and events; an
 * older device runs every call before returning, so plain copies cost no stall there. */
static int device_queues(const gb_model *m)
{
    const gb_device_ops *ops = m->rt->dev;
    return ops->struct_size >= offsetof(gb_device_ops, event_sync) + sizeof ops->event_sync;
}

void gb_model_release_figures(gb_model *m)
{
    const gb_device_ops *ops = m->rt->dev;
    for (int i = 0; i < 2; i++)
        if (m->figures[i].event)
            ops->event_destroy(m->dev, m->figures[i].event);
    if (m->figures_host && device_queues(m))
        ops->free_host(m->dev, m->figures_host);
    else
        free(m->figures_host);
    memset(m->figures, 0, sizeof m->figures);
    m->figures_host = NULL;
    m->figures_micro = 0;
}

int gb_model_enable_figures(gb_model *m, int64_t max_micro)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    const gb_device_ops *ops = m->rt->dev;
    /* each slot: the losses, then norm_sq and a gb_loss_scaler, 64-byte aligned */
    int64_t stride = (max_micro * m->B * m->cfg.block_size + 15) / 16 * 16 + 32;
    size_t bytes = 2 * (size_t)stride * sizeof(float);
    gb_model_release_figures(m);
    if (device_queues(m))
        GB_CALL(dev, "alloc_host", ops->alloc_host(m->dev, bytes, (void **)&m->figures_host));
    else if (!(m->figures_host = malloc(bytes)))
        return -1;
    m->figures_micro = max_micro;
    for (int i = 0; i < 2; i++) {
        figure_slot *f = &m->figures[i];
        f->losses = m->figures_host + (size_t)i * (size_t)stride;
        f->norm_sq = f->losses + stride - 32;
        f->scaler = f->losses + stride - 16;
        if (device_queues(m))
            GB_CALL(dev, "event_create", ops->event_create(m->dev, &f->event));
    }
    return 0;
}

/* Queues a copy of device memory into the host memory of a figure slot. */
static int stage(gb_model *m, void *host, const void *src, size_t bytes)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    if (device_queues(m))
        GB_CALL(dev, "copy_async", m->rt->dev->copy_async(m->dev, host, src, bytes,
                                                           GB_COPY_DEVICE_TO_HOST, NULL));
    else
        GB_CALL(dev, "copy to host", m->rt->dev->copy(m->dev, host, src, bytes,
                                                       GB_COPY_DEVICE_TO_HOST));
    return 0;
}

int gb_model_stage_loss(gb_model *m, int64_t micro)
{
    figure_slot *f = &m->figures[m->next_figures];
    int64_t n = m->last_B * m->last_T;
    if (micro >= m->figures_micro || !m->last_has_targets) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: internal error: the loss of micro-step "
                  "%lld staged without room or targets", (long long)micro);
        return -1;
    }
    f->n_tokens = n;
    return stage(m, f->losses + micro * n, m->losses, (size_t)n * sizeof(float));
}

int gb_model_stage_step(gb_model *m, int64_t step, int64_t n_micro)
{
    figure_slot *f = &m->figures[m->next_figures];
    if (stage(m, f->norm_sq, m->norm_sq, sizeof(float)) ||
        (m->scaler && stage(m, f->scaler, m->scaler, sizeof *m->scaler)))
        return -1;
    if (f->event)
        GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "event_record",
                m->rt->dev->event_record(m->dev, f->event, NULL));
    f->step = step;
    f->n_micro = n_micro;
    m->next_figures ^= 1;
    return 0;
}

/* Each micro-step's mean in double, rounded to f32, then their mean: the arithmetic of
 * the synchronous read this replaced, so reported losses keep their bits. */
static double mean_staged_loss(const figure_slot *f)
{
    double micro_sum = 0.0;
    for (int64_t k = 0; k < f->n_micro; k++) {
        const float *losses = f->losses + k * f->n_tokens;
        double sum = 0.0;
        for (int64_t i = 0; i < f->n_tokens; i++)
            sum += losses[i];
        micro_sum += (float)(sum / (double)f->n_tokens);
    }
    return micro_sum / (double)f->n_micro;
}

int gb_model_step_figures(gb_model *m, int newest, gb_step_figures *out)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    const figure_slot *f = &m->figures[m->next_figures ^ 1];
    const figure_slot *older = &m->figures[m->next_figures];
    /* a device with a queue may still be running the newest step: the one before it is
     * what can be read without stalling (it also waits, but behind no queued work) */
    if (!newest && f->event && !m->rt->ctx.host_access && older->step)
        f = older;
    if (!f->step) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: internal error: step figures read before "
                  "any step");
        return -1;
    }
    if (f->event)
        GB_CALL(dev, "event_sync", m->rt->dev->event_sync(m->dev, f->event));
    out->step = f->step;
    out->loss = mean_staged_loss(f);
    out->grad_norm = sqrtf(*f->norm_sq);
    out->loss_scale = gb_model_loss_scale(m);
    out->skipped_steps = m->skipped_steps;
    if (m->scaler) {   /* the device's scaler as that step's update left it */
        gb_loss_scaler s;
        memcpy(&s, f->scaler, sizeof s);
        out->loss_scale = s.scale;
        out->skipped_steps = s.skipped_steps - m->scaler_skipped_base;
    }
    return 0;
}
