/* The lifetime and queueing every CPU attention plugin (attn/math, attn/mem_efficient,
 * attn/flash) shares, so each plugin writes only its options, memory() and the compute of
 * each direction.
 *
 * An instance starts with an attn_cpu (its own fields follow): create() takes it from
 * attn_cpu_create(), and the ops table points destroy at attn_instance_destroy and
 * eligible, forward and backward at the functions below. forward() and backward() refuse
 * what eligible() would, then queue the plugin's compute on the device's stream
 * (gb_device_run_host) with the problem and every view copied, and return without
 * waiting for it: everything the compute touches is device memory. Header-only, like the
 * rest of plugins/attn/common/.
 */
#ifndef GB_ATTN_CPU_H
#define GB_ATTN_CPU_H

#include "attn_views.h"
#include "gearbox/attn.h"

typedef struct attn_call attn_call;

/* One direction's compute, run in stream order. */
typedef gb_status (*attn_compute_fn)(const attn_call *call);

/* The head of every CPU attention instance. */
typedef struct attn_cpu {
    attn_instance base;
    int threads;            /* host->num_threads, at least 1: one set of tiles each */
    const char *plugin;     /* "attn/NAME", for messages */
    attn_compute_fn forward, backward;
    int backward_reads_out; /* 0: backward ignores out, so its view is not checked */
} attn_cpu;

/* What forward and backward queue: the instance, a copy of the problem and the views by
 * value. forward fills out, q, k, v; backward all of them. */
struct attn_call {
    void *self;
    gb_attn_problem p;
    gb_tensor dq, dk, dv, dout, q, k, v, out;
    void *saved;       /* forward writes it; backward only reads it */
    void *workspace;
    attn_compute_fn compute;
};

/* Allocates a zeroed instance of `bytes` (at least an attn_cpu) for `plugin` and fills
 * its head; GB_ERR_UNSUPPORTED when `device` is not the CPU. */
static inline gb_status attn_cpu_create(const gb_host *host, const gb_device_ctx *device,
                                        const char *plugin, size_t bytes,
                                        attn_compute_fn forward, attn_compute_fn backward,
                                        int backward_reads_out, void **self)
{
    if (!device || device->device != GB_DEVICE_CPU) {
        host->set_error(host, "%s-cpu runs on the cpu device only; this run's device is not "
                        "the cpu (use the plugin built for it)", plugin);
        return GB_ERR_UNSUPPORTED;
    }
    gb_status status = attn_instance_new(host, device, plugin, bytes, self);
    if (status != GB_OK)
        return status;
    attn_cpu *a = *self;
    a->threads = host->num_threads > 0 ? host->num_threads : 1;
    a->plugin = plugin;
    a->forward = forward;
    a->backward = backward;
    a->backward_reads_out = backward_reads_out;
    return GB_OK;
}

static inline int attn_cpu_eligible(void *self, const gb_attn_problem *p, char *reason,
                                    size_t reason_cap)
{
    const attn_cpu *a = self;
    return attn_problem_ok(a->plugin, p, reason, reason_cap);
}

static inline gb_status attn_cpu_run(void *arg)
{
    const attn_call *call = arg;
    return call->compute(call);
}

/* Refuses what eligible() would or a malformed view (the first n of names/views), then
 * queues `call`. */
static inline gb_status attn_cpu_queue(attn_cpu *a, const char *direction, attn_call *call,
                                       const char *const *names, const gb_tensor *const *views,
                                       int n)
{
    gb_status status = attn_check_eligible_call(&a->base, a->plugin, direction,
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
                      .saved = saved, .workspace = workspace, .compute = a->forward};
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
                      .workspace = workspace, .compute = a->backward};
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out"};
    const gb_tensor *views[] = {&dq, &dk, &dv, &dout, &q, &k, &v, &out};
    return attn_cpu_queue(a, "backward", &call, names, views, a->backward_reads_out ? 8 : 7);
}

#endif /* GB_ATTN_CPU_H */
