/* The dynamic loss scaler of loss_scaler.h: PyTorch GradScaler's update rule on an f32
 * scale, a floor at min_scale, and its state as a fixed 40-byte blob.
 *
 * Products are computed in double and rounded to f32 once, as torch._amp_update_scale_
 * does with its double factors, so a scale sequence matches PyTorch's step for step
 * (until min_scale, which PyTorch lacks, stops a fall). The step is loss_scale.h's, the
 * devices' too.
 */
#include "loss_scaler.h"

#include <math.h>
#include <string.h>

#include "loss_scale.h"

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
    s->s = (gb_loss_scaler){
        .growth_factor = config->growth_factor,
        .backoff_factor = config->backoff_factor,
        .growth_interval = config->growth_interval,
        .min_scale = min_scale,
        .enabled = config->enabled,
        .scale = init_scale,
    };
    return GB_OK;
}

float loss_scaler_scale(const loss_scaler *s)
{
    return s->s.enabled ? s->s.scale : 1.0f;
}

void loss_scaler_update(loss_scaler *s, int found_inf, int *skip_step)
{
    *skip_step = gb_loss_scaler_step(&s->s, found_inf);
}

void loss_scaler_save(const loss_scaler *s, void *buf)
{
    loss_scaler_state st = {
        .version = LOSS_SCALER_VERSION,
        .scale = s->s.scale,
        .growth_tracker = s->s.growth_tracker,
        .skipped_steps = s->s.skipped_steps,
        .total_steps = s->s.total_steps,
    };
    memcpy(st.magic, LOSS_SCALER_MAGIC, sizeof st.magic);
    memcpy(buf, &st, sizeof st);
}

/* Whether a scale and counters make sense; says why not through host->set_error(). */
static int state_sane(float scale, int64_t growth_tracker, int64_t skipped_steps,
                      int64_t total_steps, uint32_t reserved, const gb_host *host)
{
    if (reserved == 0 && isfinite(scale) && scale > 0.0f && growth_tracker >= 0 &&
        skipped_steps >= 0 && total_steps >= skipped_steps)
        return 1;
    host->set_error(host, "damaged loss-scaler state: scale %g, growth tracker %lld, %lld "
                    "skipped of %lld steps, reserved field %u", (double)scale,
                    (long long)growth_tracker, (long long)skipped_steps, (long long)total_steps,
                    reserved);
    return 0;
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
    if (!state_sane(st.scale, st.growth_tracker, st.skipped_steps, st.total_steps, st.reserved,
                    host))
        return GB_ERR_INVALID_ARG;
    if (st.scale < s->s.min_scale) {
        host->set_error(host, "the saved loss scale %g is below min_scale %g; set min_scale "
                        "to at most %g to resume from this state", (double)st.scale,
                        (double)s->s.min_scale, (double)st.scale);
        return GB_ERR_CONFIG;
    }
    s->s.scale = st.scale;
    s->s.growth_tracker = st.growth_tracker;
    s->s.skipped_steps = st.skipped_steps;
    s->s.total_steps = st.total_steps;
    return GB_OK;
}

void loss_scaler_get(const loss_scaler *s, gb_loss_scaler *out)
{
    *out = s->s;
}

gb_status loss_scaler_set(loss_scaler *s, const gb_loss_scaler *in, const gb_host *host)
{
    const gb_loss_scaler *r = &s->s;
    if (in->growth_factor != r->growth_factor || in->backoff_factor != r->backoff_factor ||
        in->growth_interval != r->growth_interval || in->min_scale != r->min_scale ||
        in->enabled != r->enabled) {
        host->set_error(host, "scaler_set: the rule differs from the one scaler_get gave "
                        "(growth_factor %g, backoff_factor %g, growth_interval %lld, min_scale "
                        "%g, enabled %d); only the state may change", in->growth_factor,
                        in->backoff_factor, (long long)in->growth_interval,
                        (double)in->min_scale, (int)in->enabled);
        return GB_ERR_INVALID_ARG;
    }
    if (!state_sane(in->scale, in->growth_tracker, in->skipped_steps, in->total_steps,
                    in->reserved, host))
        return GB_ERR_INVALID_ARG;
    s->s = *in;
    return GB_OK;
}
