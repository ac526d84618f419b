/* The lifetime and queueing every CPU attention plugin (attn/math, attn/mem_efficient,
 * attn/flash) shares, so each plugin writes only its options, memory() and the compute of
 * each direction.
 *
 * An instance starts with an attn_cpu (its own fields follow): create() takes it from
 * attn_cpu_create(), and the ops table points destroy at gb_plugin_instance_destroy and
 * eligible, forward, backward and forward_cached at the functions below. Each refuses
 * what eligible() would, then queues its compute on the device's stream
 * (gb_device_run_host) with the problem and every view copied, and return without
 * waiting for it: everything the compute touches is device memory. Header-only, like the
 * rest of plugins/attn/common/.
 */
#ifndef GB_ATTN_CPU_H
#define GB_ATTN_CPU_H

#include "attn_cached_cpu.h"
#include "attn_views.h"
#include "gearbox/attn.h"

typedef struct attn_call attn_call;

/* One direction's compute, run in stream order. */
typedef gb_status (*attn_compute_fn)(const attn_call *call);

/* A CPU attention plugin as the shared code sees it. */
typedef struct attn_cpu_kind {
    const char *plugin;          /* "attn/NAME", for messages */
    attn_compute_fn forward, backward;
    int backward_reads_out;      /* 0: backward ignores out: its view is neither checked nor
                                    widened */
} attn_cpu_kind;

/* The head of every CPU attention instance. */
typedef struct attn_cpu {
    gb_plugin_instance base;
    const attn_cpu_kind *kind;
    int threads;                 /* host->num_threads, at least 1: one set of tiles each */
} attn_cpu;

/* What forward and backward queue: the instance, a copy of the problem and the views by
 * value. forward fills out, q, k, v; backward all of them. */
struct attn_call {
    void *self;
    gb_attn_problem p;
    gb_tensor dq, dk, dv, dout, q, k, v, out;
    void *saved;       /* forward writes it; backward only reads it */
    void *workspace;
    int backward;
};

/* Makes the instance a copy of `init` (`bytes`: an attn_cpu, then the plugin's fields) with its
 * head filled; GB_ERR_UNSUPPORTED when `device` does not keep its buffers in host memory. */
static inline gb_status attn_cpu_create(const gb_host *host, const gb_device_ctx *device,
                                        const attn_cpu_kind *kind, const void *init,
                                        size_t bytes, void **self)
{
    if (!device || !gb_device_memory_is_host(device)) {
        host->set_error(host, "%s-cpu runs on devices whose buffers are host memory; this "
                        "run's device has memory of its own (use the plugin built for it)",
                        kind->plugin);
        return GB_ERR_UNSUPPORTED;
    }
    gb_status status = gb_plugin_instance_new(host, device, kind->plugin, bytes, self);
    if (status != GB_OK)
        return status;
    attn_cpu *a = *self;
    const gb_plugin_instance base = a->base;
    memcpy(a, init, bytes);
    a->base = base;
    a->kind = kind;
    a->threads = host->num_threads > 0 ? host->num_threads : 1;
    return GB_OK;
}

static inline int attn_cpu_eligible(void *self, const gb_attn_problem *p, char *reason,
                                    size_t reason_cap)
{
    const attn_cpu *a = self;
    return attn_problem_ok(a->kind->plugin, p, reason, reason_cap);
}

/* The views of `call` as the kernels take them (attn_views.h): for a 16-bit problem, f32
 * copies taken from the workspace at *wide on, the inputs widened into them; for f32 the
 * views themselves. attn_cpu_store() rounds the outputs back. */
static inline attn_call attn_cpu_f32(const attn_call *call, float **wide)
{
    const attn_cpu *a = call->self;
    const gb_attn_problem *p = &call->p;
    attn_call f32 = *call;
    f32.q = attn_read_f32(&call->q, p, wide, a->threads);
    f32.k = attn_read_f32(&call->k, p, wide, a->threads);
    f32.v = attn_read_f32(&call->v, p, wide, a->threads);
    if (!call->backward) {
        f32.out = attn_write_f32(&call->out, p, wide);
        return f32;
    }
    if (a->kind->backward_reads_out)
        f32.out = attn_read_f32(&call->out, p, wide, a->threads);
    f32.dout = attn_read_f32(&call->dout, p, wide, a->threads);
    f32.dq = attn_write_f32(&call->dq, p, wide);
    f32.dk = attn_write_f32(&call->dk, p, wide);
    f32.dv = attn_write_f32(&call->dv, p, wide);
    return f32;
}

/* Rounds the outputs of `call` from their f32 copies in `f32` (attn_cpu_f32). */
static inline void attn_cpu_store(const attn_call *call, const attn_call *f32)
{
    const attn_cpu *a = call->self;
    if (!call->backward) {
        attn_store_f32(&call->out, &f32->out, a->threads);
        return;
    }
    attn_store_f32(&call->dq, &f32->dq, a->threads);
    attn_store_f32(&call->dk, &f32->dk, a->threads);
    attn_store_f32(&call->dv, &f32->dv, a->threads);
}

static inline gb_status attn_cpu_run(void *arg)
{
    const attn_call *call = arg;
    const attn_cpu *a = call->self;
    return (call->backward ? a->kind->backward : a->kind->forward)(call);
}

/* Refuses what eligible() would or a malformed view (the first n of names/views), then
 * queues `call`. */
static inline gb_status attn_cpu_queue(attn_cpu *a, const char *direction, attn_call *call,
                                       const char *const *names, const gb_tensor *const *views,
                                       int n)
{
    gb_status status = gb_attn_check_eligible_call(&a->base, a->kind->plugin, direction,
                                                   attn_cpu_eligible, &call->p, names, views, n);
    if (status != GB_OK)
        return status;
    return gb_device_run_host(&a->base.device, attn_cpu_run, call, sizeof *call);
}

static inline gb_status attn_cpu_forward(void *self, const gb_attn_problem *p, gb_tensor out,
                                         gb_tensor q, gb_tensor k, gb_tensor v, void *saved,
                                         void *workspace)
{
    attn_cpu *a = self;
    attn_call call = {.self = self, .p = *p, .out = out, .q = q, .k = k, .v = v,
                      .saved = saved, .workspace = workspace};
    const char *names[] = {"out", "q", "k", "v"};
    const gb_tensor *views[] = {&out, &q, &k, &v};
    return attn_cpu_queue(a, "forward", &call, names, views, 4);
}

static inline gb_status attn_cpu_backward(void *self, const gb_attn_problem *p, gb_tensor dq,
                                          gb_tensor dk, gb_tensor dv, gb_tensor dout,
                                          gb_tensor q, gb_tensor k, gb_tensor v,
                                          gb_tensor out, const void *saved, void *workspace)
{
    attn_cpu *a = self;
    attn_call call = {.self = self, .p = *p, .dq = dq, .dk = dk, .dv = dv, .dout = dout,
                      .q = q, .k = k, .v = v, .out = out, .saved = (void *)saved,
                      .workspace = workspace, .backward = 1};
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out"};
    const gb_tensor *views[] = {&dq, &dk, &dv, &dout, &q, &k, &v, &out};
    return attn_cpu_queue(a, "backward", &call, names, views,
                          a->kind->backward_reads_out ? 8 : 7);
}

/* forward_cached (ABI 1.7): refuses what forward would for the whole window, then queues
 * attn_cached_cpu.h's compute. */
static inline gb_status attn_cpu_forward_cached(void *self, const gb_attn_problem *p,
                                                int64_t past, gb_tensor out, gb_tensor q,
                                                gb_tensor k, gb_tensor v, gb_tensor k_cache,
                                                gb_tensor v_cache)
{
    attn_cpu *a = self;
    const gb_tensor *views[] = {&out, &q, &k, &v, &k_cache, &v_cache};
    gb_status status = gb_attn_check_cached_call(&a->base, a->kind->plugin, attn_cpu_eligible, p,
                                                 past, views);
    if (status != GB_OK)
        return status;
    attn_cached_call call = {.p = *p, .past = past, .out = out, .q = q, .k = k, .v = v,
                             .k_cache = k_cache, .v_cache = v_cache, .threads = a->threads};
    return gb_device_run_host(&a->base.device, attn_cached_compute, &call, sizeof call);
}

/* What every CPU attention plugin declares alike in its GB_ATTN_PLUGIN: the host devices,
 * the dtypes and capabilities of the queue above, and its entries. */
#define ATTN_CPU_DEVICES_DTYPES_CAPS                                                           \
    GB_DEVICE_CPU | GB_DEVICE_ANY_HOST, GB_ATTN_DTYPES,                                        \
        GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY
#define ATTN_CPU_ENTRIES                                                                       \
    .destroy = gb_plugin_instance_destroy, .eligible = attn_cpu_eligible,                      \
    .forward = attn_cpu_forward, .backward = attn_cpu_backward,                                \
    .forward_cached = attn_cpu_forward_cached

#endif /* GB_ATTN_CPU_H */
