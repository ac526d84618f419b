/* The dynamic loss scaler of loss_scaler.h: PyTorch GradScaler's update rule on an f32
 * scale, a floor at min_scale, and its state as a fixed 40-byte blob.
 *
 * Products are computed in double and rounded to f32 once, as torch._amp_update_scale_
 * does with its double factors, so a scale sequence matches PyTorch's step for step
 * (until min_scale, which PyTorch lacks, stops a fall).
 */
#include "loss_scaler.h"

#include <math.h>
#include <string.h>

gb_status loss_scaler_init(loss_scaler *s, const loss_scaler_config *config,
                           const gb_host *host)
{
    /* The schema's ranges are inclusive; the open ends and the pair are checked here. */
    if (!(config->growth_factor > 1.0)) {
        host->set_error(host, "growth_factor must be above 1 (got %g): the scale could "
                        "never grow back after an overflow", config->growth_factor);
        return GB_ERR_CONFIG;
    }
    if (!(config->backoff_factor > 0.0 && config->backoff_factor < 1.0)) {
        host->set_error(host, "backoff_factor must lie strictly between 0 and 1 (got %g)",
                        config->backoff_factor);
        return GB_ERR_CONFIG;
    }
    float init_scale = (float)config->init_scale, min_scale = (float)config->min_scale;
    if (init_scale < min_scale) {
        host->set_error(host, "init_scale %g is below min_scale %g; raise init_scale or "
                        "lower min_scale", config->init_scale, config->min_scale);
        return GB_ERR_CONFIG;
    }
    *s = (loss_scaler){
        .growth_factor = config->growth_factor,
        .backoff_factor = config->backoff_factor,
        .growth_interval = config->growth_interval,
        .min_scale = min_scale,
        .enabled = config->enabled,
        .state = {.version = LOSS_SCALER_VERSION, .scale = init_scale},
    };
    memcpy(s->state.magic, LOSS_SCALER_MAGIC, sizeof s->state.magic);
    return GB_OK;
}

float loss_scaler_scale(const loss_scaler *s)
{
    return s->enabled ? s->state.scale : 1.0f;
}

/* After an overflow: scale *= backoff_factor, but never below min_scale. */
static void back_off(loss_scaler *s)
{
    float lowered = (float)((double)s->state.scale * s->backoff_factor);
    s->state.scale = lowered > s->min_scale ? lowered : s->min_scale;
}

/* After growth_interval clean steps: scale *= growth_factor, unless the product rounds
 * to inf in f32, in which case the scale saturates where it is (PyTorch's "do not grow
 * past fp32 bounds to inf"). */
static void grow(loss_scaler *s)
{
    float grown = (float)((double)s->state.scale * s->growth_factor);
    if (isfinite(grown))
        s->state.scale = grown;
}

void loss_scaler_update(loss_scaler *s, int found_inf, int *skip_step)
{
    loss_scaler_state *st = &s->state;
    st->total_steps++;
    *skip_step = s->enabled && found_inf;
    if (!s->enabled)
        return;
    if (found_inf) {
        st->skipped_steps++;
        st->growth_tracker = 0;
        back_off(s);
        return;
    }
    if (++st->growth_tracker >= s->growth_interval) {
        st->growth_tracker = 0;
        grow(s);
    }
}

void loss_scaler_save(const loss_scaler *s, void *buf)
{
    memcpy(buf, &s->state, sizeof s->state);
}

gb_status loss_scaler_load(loss_scaler *s, const void *buf, const gb_host *host)
{
    loss_scaler_state st;
    memcpy(&st, buf, sizeof st);
    if (memcmp(st.magic, LOSS_SCALER_MAGIC, sizeof st.magic) != 0) {
        const unsigned char *b = buf;
        host->set_error(host, "not a loss-scaler state: it starts with bytes %02x %02x %02x "
                        "%02x, not \"%s\" (the saved precision state belongs to another "
                        "precision plugin, or is damaged)", b[0], b[1], b[2], b[3],
                        LOSS_SCALER_MAGIC);
        return GB_ERR_INVALID_ARG;
    }
    if (st.version != LOSS_SCALER_VERSION) {
        host->set_error(host, "loss-scaler state version %u; this plugin reads version %u "
                        "(was it saved by a newer gearbox?)", st.version, LOSS_SCALER_VERSION);
        return GB_ERR_INVALID_ARG;
    }
    if (st.reserved != 0 || !isfinite(st.scale) || !(st.scale > 0.0f) ||
        st.growth_tracker < 0 || st.skipped_steps < 0 || st.total_steps < st.skipped_steps) {
        host->set_error(host, "damaged loss-scaler state: scale %g, growth tracker %lld, %lld "
                        "skipped of %lld steps, reserved field %u", (double)st.scale,
                        (long long)st.growth_tracker, (long long)st.skipped_steps,
                        (long long)st.total_steps, st.reserved);
        return GB_ERR_INVALID_ARG;
    }
    if (st.scale < s->min_scale) {
        host->set_error(host, "the saved loss scale %g is below min_scale %g; set min_scale "
                        "to at most %g to resume from this state", (double)st.scale,
                        (double)s->min_scale, (double)st.scale);
        return GB_ERR_CONFIG;
    }
    s->state = st;
    return GB_OK;
}
