/* The loss scaler of a precision policy that has one: placed on the device when the
 * policy, device and optimizer allow it (ABI 1.4), else kept by the precision plugin on
 * the host and told, after each step's gradient norm is read back, whether it overflowed. */
#include "model_internal.h"

#include <math.h>

/* Why the precision policy's loss scaler cannot run on the device, or NULL when it can:
 * the policy gives itself as a gb_loss_scaler, enabled (into *out), the device has the
 * kernels and the optimizer reads the scale there (all ABI 1.4). */
static const char *device_scaler_refusal(gb_runtime *rt, gb_loss_scaler *out)
{
    const gb_precision_ops *p = rt->precision;
    gb_instance *prec = &rt->inst[GB_KIND_PRECISION];
    const gb_plugin_desc *optim = rt->inst[GB_KIND_OPTIM].plugin->desc;
    if (p->struct_size < offsetof(gb_precision_ops, scaler_set) + sizeof p->scaler_set ||
        !p->scaler_get || !p->scaler_set)
        return "the precision plugin does not hand its scaler to the device (ABI 1.4)";
    if (!GB_DEVICE_HAS(rt->dev, cross_entropy_scaled) ||
        !GB_DEVICE_HAS(rt->dev, loss_scaler_update))
        return "the device has no cross_entropy_scaled and loss_scaler_update (ABI 1.4)";
    if (!(gb_plugin_caps(optim) & GB_CAP_DEVICE_LOSS_SCALE))
        return "the optimizer does not read the loss scale on the device "
               "(GB_CAP_DEVICE_LOSS_SCALE)";
    gb_status st = p->scaler_get(prec->self, out);
    gb_instance_forget_errors();   /* a refusal here is a choice, not a failure */
    if (st != GB_OK)
        return prec->error[0] ? prec->error : "the precision plugin keeps it";
    return out->enabled ? NULL : "the scaler is disabled";
}

/* Decides where the loss scaler runs, as gb_model_scaler_where says: 1 on the device, 0
 * on the host. */
int gb_model_place_scaler(gb_model *m)
{
    gb_loss_scaler s;
    const char *why = device_scaler_refusal(m->rt, &s);
    if (why)
        snprintf(m->scaler_where, sizeof m->scaler_where, "on the host, after reading the "
                 "gradient norm back: %.160s", why);
    else
        snprintf(m->scaler_where, sizeof m->scaler_where, "on the device (overflow check, "
                 "skip and scale update queued with each step)");
    return why == NULL;
}

const char *gb_model_scaler_where(const gb_model *m)
{
    return m->scaler_where[0] ? m->scaler_where : NULL;
}

int gb_model_scaler_to_device(gb_model *m)
{
    if (!m->scaler)
        return 0;
    gb_instance *prec = &m->rt->inst[GB_KIND_PRECISION];
    gb_loss_scaler s;
    GB_CALL(prec, "scaler_get", m->rt->precision->scaler_get(prec->self, &s));
    m->scaler_skipped_base = s.skipped_steps;
    GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "copy to device",
            m->rt->dev->copy(m->dev, m->scaler, &s, sizeof s, GB_COPY_HOST_TO_DEVICE));
    return 0;
}

int gb_model_scaler_to_host(gb_model *m)
{
    if (!m->scaler)
        return 0;
    gb_instance *prec = &m->rt->inst[GB_KIND_PRECISION];
    gb_loss_scaler s;
    GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "copy to host",
            m->rt->dev->copy(m->dev, &s, m->scaler, sizeof s, GB_COPY_DEVICE_TO_HOST));
    GB_CALL(prec, "scaler_set", m->rt->precision->scaler_set(prec->self, &s));
    return 0;
}

/* With a loss scaler: whether any gradient is inf/nan (the squared norm then is not
 * finite), told to the scaler, which decides whether the update is skipped. */
int gb_model_consult_scaler(gb_model *m, int *skip)
{
    gb_runtime *rt = m->rt;
    *skip = 0;
    if (!rt->precision->update || m->scaler)
        return 0;
    float norm_sq = 0.0f;
    if (gb_model_copy_to_host(m, &norm_sq, m->norm_sq, sizeof norm_sq))
        return -1;
    GB_CALL(&rt->inst[GB_KIND_PRECISION], "update",
            rt->precision->update(rt->inst[GB_KIND_PRECISION].self, !isfinite(norm_sq), skip));
    m->skipped_steps += *skip;
    return 0;
}

float gb_model_loss_scale(const gb_model *m)
{
    const gb_precision_ops *p = m->rt->precision;
    return p->loss_scale ? p->loss_scale(m->rt->inst[GB_KIND_PRECISION].self) : 1.0f;
}
