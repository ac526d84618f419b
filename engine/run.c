/* The public handle of gearbox/engine/run.h over the engine's struct gb_runtime. */
#include <stdlib.h>

#include "runtime.h"

gb_runtime *gb_runtime_open(gb_config *cfg, const char *cli_plugin_path, gb_diag *diag)
{
    gb_runtime *rt = calloc(1, sizeof *rt);
    if (rt && gb_runtime_resolve(rt, cfg, cli_plugin_path, diag) == 0)
        return rt;
    if (!rt)
        gb_diag_add(diag, "out of memory for the runtime of %s", gb_config_dir(cfg));
    gb_runtime_close(rt);
    return NULL;
}

void gb_runtime_close(gb_runtime *rt)
{
    if (!rt)
        return;
    gb_runtime_free(rt);
    free(rt);
}

const gb_settings *gb_runtime_settings(const gb_runtime *rt) { return &rt->settings; }
gb_loader *gb_runtime_loader(const gb_runtime *rt) { return rt->loader; }
gb_instance *gb_runtime_instance(gb_runtime *rt, gb_kind kind) { return &rt->inst[kind]; }
const gb_device_ops *gb_runtime_device_ops(const gb_runtime *rt) { return rt->dev; }
const gb_attn_ops *gb_runtime_attn_ops(const gb_runtime *rt) { return rt->attn; }
const gb_optim_ops *gb_runtime_optim_ops(const gb_runtime *rt) { return rt->optim; }
const gb_device_ctx *gb_runtime_device_ctx(const gb_runtime *rt) { return &rt->ctx; }
const gb_precision_policy *gb_runtime_policy(const gb_runtime *rt) { return &rt->policy; }
uint32_t gb_runtime_device_bit(const gb_runtime *rt) { return rt->device_bit; }
