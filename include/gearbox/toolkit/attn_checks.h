/* gearbox/toolkit/attn_checks.h: what every attention plugin of gearbox checks the same
 * way, on any device: the problem checks behind eligible(), the view checks that make
 * forward(), backward() and forward_cached() refuse what eligible() would, and the start
 * of a CUDA plugin's create(). Instances start with gb_plugin_instance
 * (gearbox/toolkit/instance.h). Part of the plugin toolkit (docs/plugin-guide.md):
 * header-only, outside the ABI, compiled into each plugin; it compiles as C and as CUDA
 * C++. Nothing here allocates or prints: reasons go into the caller's buffer or through
 * set_error().
 */
#ifndef GEARBOX_TOOLKIT_ATTN_CHECKS_H
#define GEARBOX_TOOLKIT_ATTN_CHECKS_H

#include <stdio.h>
#include <string.h>

#include "gearbox/attn.h"
#include "gearbox/toolkit/instance.h"

/* GB_OK when `device` is the CUDA device; else GB_ERR_UNSUPPORTED, saying that the CUDA
 * object of `plugin` was given another device. */
static inline gb_status gb_attn_require_cuda(const gb_host *host, const char *plugin,
                                             const gb_device_ctx *device)
{
    if (device && device->device == GB_DEVICE_CUDA)
        return GB_OK;
    host->set_error(host, "%s-cuda runs on the cuda device only; this run's device is %s (use "
                    "the plugin built for it)", plugin,
                    device && device->device == GB_DEVICE_CPU ? "cpu" : "not CUDA");
    return GB_ERR_UNSUPPORTED;
}

/* gb_attn_require_cuda, then the instance (gb_plugin_instance_new): create()'s start for a
 * CUDA plugin that checks nothing else of the device before allocating. */
static inline gb_status gb_attn_cuda_instance_new(const gb_host *host, const gb_device_ctx *device,
                                                  const char *plugin, size_t bytes, void **self)
{
    gb_status st = gb_attn_require_cuda(host, plugin, device);
    return st == GB_OK ? gb_plugin_instance_new(host, device, plugin, bytes, self) : st;
}

/* The dtypes gb_attn_problem_ok_on() accepts, as the descriptor declares them. */
#define GB_ATTN_DTYPES (GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16))

/* 1 when `p` is a problem of f32, bf16 or f16 views of sensible sizes; else 0 with a
 * reason that names `plugin` on `device` and what to change. */
static inline int gb_attn_problem_ok_on(const char *plugin, const char *device,
                                        const gb_attn_problem *p, char *reason, size_t reason_cap)
{
    if (p->struct_size < sizeof(gb_attn_problem))
        snprintf(reason, reason_cap, "problem.struct_size %zu is smaller than ABI 1.0's %zu",
                 p->struct_size, sizeof(gb_attn_problem));
    else if (p->dtype != GB_F32 && p->dtype != GB_BF16 && p->dtype != GB_F16)
        snprintf(reason, reason_cap, "%s on %s takes f32, bf16 or f16; this run asks for %s",
                 plugin, device, gb_dtype_name(p->dtype));
    else if (p->causal != 0 && p->causal != 1)
        snprintf(reason, reason_cap, "causal must be 0 or 1; this run asks for %d",
                 (int)p->causal);
    else if (p->batch < 1 || p->heads < 1 || p->seq_len < 1 || p->head_dim < 1)
        snprintf(reason, reason_cap, "batch, heads, seq_len and head_dim must all be >= 1; "
                 "this run asks for (B, H, T, D) = (%lld, %lld, %lld, %lld)",
                 (long long)p->batch, (long long)p->heads, (long long)p->seq_len,
                 (long long)p->head_dim);
    else
        return 1;
    return 0;
}

static inline gb_status gb_attn_check_view(const gb_host *host, const char *plugin,
                                           const char *call, const char *name, const gb_tensor *t,
                                           const gb_attn_problem *p)
{
    const int64_t want[4] = {p->batch, p->heads, p->seq_len, p->head_dim};
    if (t->ndim != 4 || t->shape[0] != want[0] || t->shape[1] != want[1] ||
        t->shape[2] != want[2] || t->shape[3] != want[3]) {
        host->set_error(host, "%s: %s must be a 4-d view (B, H, T, D) = (%lld, %lld, %lld, "
                        "%lld); got ndim %d, shape (%lld, %lld, %lld, %lld)", call, name,
                        (long long)want[0], (long long)want[1], (long long)want[2],
                        (long long)want[3], (int)t->ndim, (long long)t->shape[0],
                        (long long)t->shape[1], (long long)t->shape[2], (long long)t->shape[3]);
        return GB_ERR_INVALID_ARG;
    }
    if (t->dtype != p->dtype) {
        host->set_error(host, "%s: %s is %s but the problem says %s", call, name,
                        gb_dtype_name(t->dtype), gb_dtype_name(p->dtype));
        return GB_ERR_INVALID_ARG;
    }
    if (t->stride[3] != 1) {
        host->set_error(host, "%s: %s needs head_dim contiguous (stride[3] == 1); %s has "
                        "stride[3] = %lld", call, plugin, name, (long long)t->stride[3]);
        return GB_ERR_UNSUPPORTED;
    }
    return GB_OK;
}

/* Refuses an ineligible problem (with eligible()'s reason) or a malformed view. */
static inline gb_status gb_attn_check_call(const gb_host *host, const char *plugin,
                                           const char *call, int eligible, const char *reason,
                                           const gb_attn_problem *p, const char *const *names,
                                           const gb_tensor *const *views, int n)
{
    if (!eligible) {
        host->set_error(host, "%s: %s", call, reason);
        return GB_ERR_UNSUPPORTED;
    }
    gb_status status = GB_OK;
    for (int i = 0; i < n && status == GB_OK; i++)
        status = gb_attn_check_view(host, plugin, call, names[i], views[i], p);
    return status;
}

typedef int (*gb_attn_eligible_fn)(void *self, const gb_attn_problem *p, char *reason,
                                   size_t reason_cap);

/* gb_attn_check_call with the answer and reason of the plugin's own eligible(). */
static inline gb_status gb_attn_check_eligible_call(const gb_plugin_instance *a, const char *plugin,
                                                    const char *call, gb_attn_eligible_fn eligible,
                                                    const gb_attn_problem *p,
                                                    const char *const *names,
                                                    const gb_tensor *const *views, int n)
{
    char reason[256];
    int ok = eligible((void *)a, p, reason, sizeof reason);
    return gb_attn_check_call(a->host, plugin, call, ok, reason, p, names, views, n);
}

/* forward_cached's checks (ABI 1.7): `past` not negative, the whole window (seq_len
 * past + T) one the plugin's eligible() accepts, and the views: out, q, k, v (B, H, T, D)
 * and the caches (B, H, past + T, D), in that order in `views`. */
static inline gb_status gb_attn_check_cached_call(const gb_plugin_instance *a, const char *plugin,
                                                  gb_attn_eligible_fn eligible,
                                                  const gb_attn_problem *p, int64_t past,
                                                  const gb_tensor *const views[6])
{
    static const char *const names[] = {"out", "q", "k", "v", "k_cache", "v_cache"};
    if (past < 0) {
        a->host->set_error(a->host, "forward_cached: past = %lld; it counts the cached "
                           "positions and cannot be negative", (long long)past);
        return GB_ERR_INVALID_ARG;
    }
    gb_attn_problem whole = *p;
    whole.seq_len = p->seq_len + past;
    gb_status status = gb_attn_check_eligible_call(a, plugin, "forward_cached", eligible, &whole,
                                                   names + 4, views + 4, 2);
    return status != GB_OK ? status
                           : gb_attn_check_call(a->host, plugin, "forward_cached", 1, "", p,
                                                names, views, 4);
}

#endif /* GEARBOX_TOOLKIT_ATTN_CHECKS_H */
