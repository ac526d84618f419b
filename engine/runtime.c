/* The run's plugins: resolution, precision = auto, creation and teardown; see runtime.h. */
#include "runtime.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_auto.h"
#include "machine.h"
#include "report.h"
#include "shard.h"

int32_t gb_runtime_device_ordinal(const gb_runtime *rt)
{
    const gb_instance *dev = &rt->inst[GB_KIND_DEVICE];
    if (dev->values && dev->values[1].i >= 0)
        return (int32_t)dev->values[1].i;
    const char *local = getenv("LOCAL_RANK");
    if (!local)
        local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    return local ? (int32_t)atoi(local) : 0;
}

/* Why the run's optimizer or device cannot take a 16-bit policy (NULL when they can):
 * bf16 and fp16 keep f32 master weights beside a 16-bit copy that the optimizer writes
 * (GB_CAP_LOWP_COPY), and the device must compute in that dtype. */
static const char *lowp_refused(const gb_runtime *rt, gb_dtype dtype, char *why, size_t cap)
{
    const gb_plugin_desc *opt = rt->inst[GB_KIND_OPTIM].plugin->desc;
    const gb_plugin_desc *dev = rt->inst[GB_KIND_DEVICE].plugin->desc;
    if (!(gb_plugin_caps(opt) & (GB_CAP_LOWP_COPY | GB_CAPS_UNDECLARED))) {
        snprintf(why, cap, "[optim] plugin = %s does not write the %s weight copy that a "
                 "16-bit policy keeps (adamw_fused does)", opt->name, gb_dtype_name(dtype));
        return why;
    }
    if (!(gb_plugin_caps(dev) & GB_CAPS_UNDECLARED) &&
        !(gb_plugin_dtypes(dev) & GB_DTYPE_BIT(dtype))) {
        snprintf(why, cap, "[device] plugin = %s does not compute in %s", dev->name,
                 gb_dtype_name(dtype));
        return why;
    }
    return NULL;
}

/* `[precision] plugin = auto`: the precision the device prefers (gb_device_desc), unless
 * the optimizer or the device would refuse that 16-bit policy, then fp32. The choice and
 * the device's reason are reported (stdout by default). */
static const char *choose_precision(const gb_runtime *rt)
{
    const char *choice = rt->device.preferred_precision, *why = rt->device.preferred_why;
    char refused[256];
    gb_dtype dtype = strcmp(choice, "bf16") == 0   ? GB_BF16
                     : strcmp(choice, "fp16") == 0 ? GB_F16
                                                   : GB_F32;
    if (dtype != GB_F32 && lowp_refused(rt, dtype, refused, sizeof refused)) {
        gb_report(GB_REPORT_INFO, "runtime",
                  "precision: auto chose fp32: the %s device prefers %s (%s), but %s",
                  rt->device.family, choice, why, refused);
        return "fp32";
    }
    gb_report(GB_REPORT_INFO, "runtime", "precision: auto chose %s: the %s device prefers it: %s",
              choice, rt->device.family, why);
    return choice;
}

/* Whether a description is data the core can decide from; 0, or 1 with the reason. */
static int check_description(const gb_runtime *rt, gb_diag *diag)
{
    const gb_plugin *p = rt->inst[GB_KIND_DEVICE].plugin;
    const gb_device_desc *d = &rt->device;
    size_t family = strlen(d->family);
    if (family && strspn(d->family, "abcdefghijklmnopqrstuvwxyz0123456789_") == family &&
        (d->memory == GB_MEMORY_HOST || d->memory == GB_MEMORY_DEVICE) &&
        d->preferred_precision[0])
        return 0;
    gb_diag_add(diag, "[device] plugin = %s (%s): describe() gave family '%s', memory %u and "
                "preferred precision '%s'; it must give a lower-case family name, "
                "GB_MEMORY_HOST or GB_MEMORY_DEVICE, and a precision plugin name",
                p->desc->name, p->path, d->family, d->memory, d->preferred_precision);
    return 1;
}

/* Asks the device what it is (describe(), ABI 1.6; a device built before is known by its
 * fixed bit), and builds the vtable the core calls it through. */
static int describe_device(gb_runtime *rt, gb_diag *diag)
{
    gb_instance *inst = &rt->inst[GB_KIND_DEVICE];
    const gb_plugin_desc *d = inst->plugin->desc;
    rt->device.struct_size = sizeof rt->device;
    char bad[256];  /* a device on this CPU may read the injected feature list */
    if (!gb_cpu_features_override(bad, sizeof bad) && bad[0])
        gb_report(GB_REPORT_WARNING, "runtime", "gearbox: warning: %s", bad);
    if (d->abi_minor < 6) {
        gb_device_describe_fixed(d->devices, &rt->device);
        rt->device.asynchronous = d->abi_minor >= 2; /* 1.0 and 1.1 knew no queues */
    } else {
        gb_status st = ((const gb_device_ops *)d->ops)->describe(&inst->host, &rt->device);
        if (st != GB_OK) {
            gb_diag_add(diag, "[device] plugin = %s (%s): describe() failed (%s): %s", d->name,
                        inst->plugin->path, gb_status_name(st),
                        inst->error[0] ? inst->error : "the plugin gave no message");
            return 1;
        }
        rt->device.family[sizeof rt->device.family - 1] = '\0';
        rt->device.preferred_precision[sizeof rt->device.preferred_precision - 1] = '\0';
        rt->device.preferred_why[sizeof rt->device.preferred_why - 1] = '\0';
        if (check_description(rt, diag))
            return 1;
    }
    rt->device_bits = gb_device_match_bits(d->devices, &rt->device);
    rt->dev_core = gb_device_ops_for_core(inst->plugin, &rt->device, diag);
    return rt->dev_core ? 0 : 1;
}

static int resolve_plugin(gb_runtime *rt, gb_config *cfg, gb_kind kind, gb_diag *diag)
{
    const char *name = rt->settings.plugin[kind];
    if (kind == GB_KIND_ATTN && strcmp(name, "auto") == 0)
        return 0; /* chosen at start, when the device can measure the candidates */
    if (kind == GB_KIND_PRECISION && strcmp(name, "auto") == 0) {
        const gb_plugin *p = gb_loader_find_for(rt->loader, kind, choose_precision(rt),
                                                rt->device.family, rt->device_bits, diag);
        return !p || gb_instance_bind(&rt->inst[kind], p, cfg, "auto", (int)rt->settings.threads,
                                      diag);
    }
    const gb_plugin *p = gb_loader_find_for(rt->loader, kind, name, rt->device.family,
                                            rt->device_bits, diag);
    if (!p)
        return 1;
    return gb_instance_bind(&rt->inst[kind], p, cfg, name, (int)rt->settings.threads, diag);
}

int gb_runtime_resolve(gb_runtime *rt, gb_config *cfg, const char *cli_plugin_path,
                       gb_diag *diag)
{
    memset(rt, 0, sizeof *rt);
    rt->cfg = cfg;
    int problems = gb_settings_resolve(cfg, &rt->settings, diag);
    rt->loader = gb_loader_new();
    if (!rt->loader) {
        gb_diag_add(diag, "out of memory");
        return problems + 1;
    }
    gb_loader_allow_writable(rt->loader, rt->settings.allow_writable_plugins);
    gb_loader_add_path(rt->loader, cli_plugin_path);
    gb_loader_add_path(rt->loader, getenv("GEARBOX_PLUGIN_PATH"));
    if (!problems)
        gb_loader_add_path(rt->loader, rt->settings.plugin_path);
    gb_loader_add_default_path(rt->loader);
    if (problems)
        return problems;
    problems += resolve_plugin(rt, cfg, GB_KIND_DEVICE, diag);
    if (!problems)
        problems += describe_device(rt, diag);
    if (problems)
        return problems; /* the other kinds are chosen per device */
    for (int k = GB_KIND_ATTN; k <= GB_KIND_COMM; k++)
        problems += resolve_plugin(rt, cfg, (gb_kind)k, diag);
    if (problems)
        return problems;
    rt->dev = rt->dev_core;
    rt->attn = rt->inst[GB_KIND_ATTN].plugin ? rt->inst[GB_KIND_ATTN].plugin->desc->ops : NULL;
    rt->optim = rt->inst[GB_KIND_OPTIM].plugin->desc->ops;
    rt->precision = rt->precision_core = gb_loader_vtable(rt->inst[GB_KIND_PRECISION].plugin);
    if (!rt->precision) {
        gb_diag_add(diag, "out of memory");
        return 1;
    }
    rt->comm = rt->inst[GB_KIND_COMM].plugin->desc->ops;
    return 0;
}

/* Reports a failed create() into diag; returns -1. */
static int create_failed(gb_instance *inst, gb_status st, gb_diag *diag)
{
    const gb_plugin_desc *d = inst->plugin->desc;
    gb_diag_add(diag, "[%s] plugin = %s (%s): could not start (%s): %s", gb_kind_name(d->kind),
                d->name, inst->plugin->path, gb_status_name(st),
                inst->error[0] ? inst->error : "the plugin gave no message");
    return -1;
}

/* What the policy asks of the optimizer, checked against what it declares (descriptor
 * capabilities, ABI 1.2). An optimizer that declared nothing (built before 1.2, or with
 * GB_PLUGIN_DEFINE) is asked at step time, as before; one built for 1.0 has no field for
 * stochastic rounding, so it would silently round to nearest and is refused. */
static int check_optimizer_caps(gb_runtime *rt, gb_instance *p, gb_diag *diag)
{
    const gb_plugin_desc *opt = rt->inst[GB_KIND_OPTIM].plugin->desc;
    uint32_t caps = gb_plugin_caps(opt);
    const char *dtype = gb_dtype_name(rt->policy.activation_dtype);
    if (rt->policy.master_weights && !(caps & (GB_CAP_LOWP_COPY | GB_CAPS_UNDECLARED))) {
        gb_diag_add(diag, "[optim] plugin = %s cannot write the %s weight copy that [precision] "
                    "plugin = %s keeps beside f32 master weights; use an optimizer that "
                    "writes it (adamw_fused), or [precision] plugin = fp32", opt->name, dtype,
                    p->plugin->desc->name);
        return -1;
    }
    if (!rt->policy.stochastic_rounding)
        return 0;
    if (rt->policy.activation_dtype != GB_BF16) {
        gb_diag_add(diag, "[precision] plugin = %s asks for stochastic rounding of a %s weight "
                    "copy; gearbox rounds only bf16 copies stochastically", p->plugin->desc->name,
                    dtype);
        return -1;
    }
    int can_round = (caps & GB_CAPS_UNDECLARED) ? opt->abi_minor >= 1
                                                : (caps & GB_CAP_STOCHASTIC_ROUNDING) != 0;
    if (!can_round) {
        gb_diag_add(diag, "[precision] stochastic_rounding = true: [optim] plugin = %s (ABI "
                    "%d.%d) does not round its bf16 copy stochastically; use adamw_fused or "
                    "set stochastic_rounding = false", opt->name, opt->abi_major,
                    opt->abi_minor);
        return -1;
    }
    return 0;
}

/* Every kind that declared its dtypes computes in the run's activation dtype. */
static int check_dtypes(gb_runtime *rt, gb_instance *p, gb_diag *diag)
{
    int problems = 0;
    gb_dtype d = rt->policy.activation_dtype;
    const gb_kind kinds[] = {GB_KIND_DEVICE, GB_KIND_ATTN};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const gb_plugin *plugin = rt->inst[kinds[i]].plugin;
        if (!plugin || (gb_plugin_caps(plugin->desc) & GB_CAPS_UNDECLARED) ||
            (gb_plugin_dtypes(plugin->desc) & GB_DTYPE_BIT(d)))
            continue; /* attn = auto: the candidates answer eligible() themselves */
        gb_diag_add(diag, "[%s] plugin = %s does not compute in %s, which [precision] plugin = "
                    "%s asks for", gb_kind_name(kinds[i]), plugin->desc->name, gb_dtype_name(d),
                    p->plugin->desc->name);
        problems++;
    }
    return problems ? -1 : 0;
}

/* The policies the model can run: one compute dtype for activations, matmul inputs and the
 * weights' working copy (f32, bf16 or f16), with f32 master weights beside a 16-bit copy. */
static int check_policy(gb_runtime *rt, gb_instance *p, gb_diag *diag)
{
    const gb_precision_policy *pol = &rt->policy;
    gb_dtype d = pol->activation_dtype;
    int one_dtype = pol->matmul_dtype == d && pol->param_dtype == d;
    int known = d == GB_F32 || d == GB_BF16 || d == GB_F16;
    if (one_dtype && known && (d == GB_F32 || pol->master_weights))
        return check_optimizer_caps(rt, p, diag) | check_dtypes(rt, p, diag);
    gb_diag_add(diag, "[precision] plugin = %s asks for %s activations, %s matmuls and %s "
                "weights%s; gearbox runs one of f32, bf16 or f16 for all three, with f32 master "
                "weights for the 16-bit ones", p->plugin->desc->name, gb_dtype_name(d),
                gb_dtype_name(pol->matmul_dtype), gb_dtype_name(pol->param_dtype),
                pol->master_weights ? " (master weights)" : " (no master weights)");
    return -1;
}

/* The precision policy comes before the other kinds: it decides their dtypes. */
static int start_precision(gb_runtime *rt, gb_diag *diag)
{
    gb_instance *p = &rt->inst[GB_KIND_PRECISION];
    gb_status st = rt->precision->create(&p->host, gb_instance_options(p), &rt->ctx, &p->self);
    if (st != GB_OK)
        return create_failed(p, st, diag);
    char reason[512] = "";
    if (!rt->precision->eligible(p->self, &rt->ctx, reason, sizeof reason)) {
        gb_diag_add(diag, "[precision] plugin = %s cannot run here: %s", p->plugin->desc->name,
                    reason);
        return -1;
    }
    rt->policy.struct_size = sizeof rt->policy;
    if ((st = rt->precision->policy(p->self, &rt->policy)) != GB_OK)
        return create_failed(p, st, diag);
    return check_policy(rt, p, diag);
}

int gb_runtime_start(gb_runtime *rt, gb_diag *diag)
{
    omp_set_num_threads((int)rt->settings.threads);
    gb_instance *dev = &rt->inst[GB_KIND_DEVICE];
    dev->host.device_ordinal = gb_runtime_device_ordinal(rt);
    gb_status st = rt->dev->create(&dev->host, gb_instance_options(dev), &dev->self);
    if (st != GB_OK)
        return create_failed(dev, st, diag);
    rt->ctx.struct_size = sizeof rt->ctx;
    if ((st = rt->dev->context(dev->self, &rt->ctx)) != GB_OK)
        return create_failed(dev, st, diag);
    /* the other kinds see the device as the core does: its memory kind and whole vtable */
    rt->ctx.memory = rt->device.memory;
    rt->ctx.ops = rt->dev;
    rt->ctx.self = dev->self;

    if (start_precision(rt, diag))
        return -1;
    /* comm before attention: `auto` takes rank 0's choice on every rank */
    gb_instance *a = &rt->inst[GB_KIND_ATTN], *o = &rt->inst[GB_KIND_OPTIM],
                *c = &rt->inst[GB_KIND_COMM];
    if ((st = rt->comm->create(&c->host, gb_instance_options(c), &rt->ctx, &c->self)) != GB_OK)
        return create_failed(c, st, diag);
    if (!rt->attn && gb_attn_auto(rt, diag))
        return -1;
    if ((st = rt->attn->create(&a->host, gb_instance_options(a), &rt->ctx, &a->self)) != GB_OK)
        return create_failed(a, st, diag);
    if ((st = rt->optim->create(&o->host, gb_instance_options(o), &rt->ctx, &o->self)) != GB_OK)
        return create_failed(o, st, diag);
    if (gb_shard_check(rt, diag))
        return -1;
    gb_instance_forget_errors();
    return 0;
}

void gb_runtime_free(gb_runtime *rt)
{
    /* the device goes last, after everything using it */
    for (int k = GB_KIND_COMM; k >= GB_KIND_DEVICE; k--) {
        gb_instance *inst = &rt->inst[k];
        if (inst->self) {
            void (*destroy)(void *) = NULL;
            switch ((gb_kind)k) {
            case GB_KIND_DEVICE: destroy = rt->dev->destroy; break;
            case GB_KIND_ATTN: destroy = rt->attn->destroy; break;
            case GB_KIND_OPTIM: destroy = rt->optim->destroy; break;
            case GB_KIND_PRECISION: destroy = rt->precision->destroy; break;
            case GB_KIND_COMM: destroy = rt->comm->destroy; break;
            }
            destroy(inst->self);
        }
        gb_instance_unbind(inst);
    }
    gb_loader_free(rt->loader);
    gb_settings_free(&rt->settings);
    free(rt->dev_core);
    free(rt->precision_core);
    memset(rt, 0, sizeof *rt);
}
