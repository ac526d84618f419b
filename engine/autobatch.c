/* The batch_size = auto search; see autobatch.h. The planned bytes grow with the batch,
 * so the largest fitting batch is found by doubling and then bisecting: about
 * 2 log2(batch) plans, each a few host allocations and one question to the attention
 * plugin. */
#include "autobatch.h"

#include <stdio.h>

#include "runtime.h"

#define MIB (1024.0 * 1024.0)

/* The share of a device's free memory batch_size = auto plans for; the rest covers what
 * the plan does not count: a GPU allocator's rounding (cudaMalloc hands out whole pages)
 * and workspaces libraries allocate on first use. */
#define FREE_SHARE 0.95

/* The bytes batch_size = auto may plan for, and where that figure came from (written to
 * source, source_size bytes). */
static int memory_budget(gb_runtime *rt, uint64_t *budget, char *source, size_t source_size,
                         gb_diag *diag)
{
    if (rt->settings.memory_budget) {
        *budget = rt->settings.memory_budget;
        snprintf(source, source_size, "[run] memory_budget");
        return 0;
    }
    gb_device_info info = {.struct_size = sizeof info};
    gb_instance *dev = &rt->inst[GB_KIND_DEVICE];
    if (rt->dev->info(dev->self, &info) != GB_OK || info.memory_bytes == 0) {
        gb_diag_add(diag, "[data] batch_size = auto: the %s device does not say how much "
                    "memory it has; set [run] memory_budget", rt->device.family);
        return -1;
    }
    if (rt->device.memory == GB_MEMORY_HOST) { /* the host's RAM is no device's own */
        gb_diag_add(diag, "[data] batch_size = auto on the %s device needs [run] "
                    "memory_budget (e.g. 2GiB): its buffers are host memory, all %.1f GiB of "
                    "RAM, shared with everything else", rt->device.family,
                    (double)info.memory_bytes / (MIB * 1024));
        return -1;
    }
    if (info.free_bytes > 0) {   /* what is free now, after the plugins' own allocations */
        *budget = (uint64_t)((double)info.free_bytes * FREE_SHARE);
        snprintf(source, source_size, "%.0f%% of the %.2f MiB the device has free",
                 FREE_SHARE * 100, (double)info.free_bytes / MIB);
        return 0;
    }
    *budget = info.memory_bytes;
    snprintf(source, source_size, "the device's memory");
    return 0;
}

/* Planned bytes for `batch`; 0 when the model cannot be planned at that batch. */
static size_t planned_bytes(gb_runtime *rt, const gb_model_config *mc, int64_t batch)
{
    gb_memory_plan plan;
    return gb_model_plan(rt, mc, batch, 1, &plan) == 0 ? gb_memory_plan_total(&plan) : 0;
}

static int fits(size_t bytes, uint64_t budget)
{
    return bytes > 0 && bytes <= budget;
}

/* The largest batch in [1, cap] whose plan fits, given that batch 1 fits. */
static int64_t largest_fitting(gb_runtime *rt, const gb_model_config *mc, uint64_t budget,
                               int64_t cap)
{
    int64_t lo = 1, hi = 2;   /* lo fits; hi, when <= cap, is the next candidate */
    while (hi <= cap && fits(planned_bytes(rt, mc, hi), budget)) {
        lo = hi;
        hi = hi * 2;
    }
    if (hi > cap)
        hi = cap + 1;
    while (hi - lo > 1) {     /* lo fits; hi does not, or is past the cap */
        int64_t mid = lo + (hi - lo) / 2;
        if (fits(planned_bytes(rt, mc, mid), budget))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int64_t largest_divisor_at_most(int64_t n, int64_t limit)
{
    for (int64_t d = limit < n ? limit : n; d > 1; d--)
        if (n % d == 0)
            return d;
    return 1;
}

/* A fixed batch's plan against the device's memory: a plan beyond it would pass every
 * allocation (memory is handed out lazily) and get the run killed by the kernel later. */
static int check_fixed_batch_fits(gb_runtime *rt, const gb_model_config *mc, gb_diag *diag)
{
    gb_device_info info = {.struct_size = sizeof info};
    gb_instance *dev = &rt->inst[GB_KIND_DEVICE];
    if (rt->dev->info(dev->self, &info) != GB_OK || info.memory_bytes == 0)
        return 0; /* the device does not say; nothing to check against */
    int world = rt->comm->world(rt->inst[GB_KIND_COMM].self);
    int64_t rows = (rt->settings.batch_size + world - 1) / (world > 0 ? world : 1);
    size_t bytes = planned_bytes(rt, mc, rows);
    if (bytes == 0 || bytes <= info.memory_bytes)
        return 0; /* a plan that fails is reported when the model is made */
    gb_diag_add(diag, "the memory plan needs %.2f GiB for [data] batch_size = %lld%s, but the %s "
                "device has %.2f GiB: lower batch_size or block_size, or shrink the model "
                "(`gearbox check` with a smaller batch prints the plan by category)",
                (double)bytes / (MIB * 1024), (long long)rt->settings.batch_size,
                world > 1 ? " (this rank's share)" : "", rt->device.family,
                (double)info.memory_bytes / (MIB * 1024));
    return -1;
}

int gb_batch_auto(gb_runtime *rt, const gb_model_config *mc, FILE *out, gb_diag *diag)
{
    gb_settings *s = &rt->settings;
    if (!s->batch_auto)
        return check_fixed_batch_fits(rt, mc, diag);
    uint64_t budget;
    char source[96];
    if (memory_budget(rt, &budget, source, sizeof source, diag))
        return -1;
    size_t one = planned_bytes(rt, mc, 1);
    if (!fits(one, budget)) {
        gb_diag_add(diag, "[data] batch_size = auto: %s", one == 0
                    ? "the model cannot be planned even at batch 1 (see above)"
                    : "even batch 1 does not fit");
        if (one > 0)
            gb_diag_add(diag, "  batch 1 plans %zu bytes (%.2f MiB); the budget is %llu bytes "
                        "(%.2f MiB, %s): raise it or shrink the model", one, one / MIB,
                        (unsigned long long)budget, (double)budget / MIB, source);
        return -1;
    }
    int64_t sequences = s->tokens_per_step / s->block_size;   /* 0 when not set */
    int64_t cap = sequences ? sequences : GB_MAX_BATCH;
    int64_t batch = largest_fitting(rt, mc, budget, cap);
    size_t bytes = planned_bytes(rt, mc, batch);
    fprintf(out, "batch_size = auto: budget %llu bytes (%.2f MiB, %s); batch %lld plans %zu "
            "bytes (%.2f MiB)", (unsigned long long)budget, (double)budget / MIB, source,
            (long long)batch, bytes, bytes / MIB);
    if (batch < cap) {
        size_t next = planned_bytes(rt, mc, batch + 1);
        fprintf(out, ", batch %lld would plan %zu bytes (%.2f MiB)\n", (long long)batch + 1,
                next, next / MIB);
    } else {
        fprintf(out, ", the most %s allows\n",
                sequences ? "[data] tokens_per_step" : "[data] batch_size");
    }
    s->batch_size = batch;
    if (sequences) {
        s->batch_size = largest_divisor_at_most(sequences, batch);
        s->gradient_accumulation_steps = sequences / s->batch_size;
        if (s->gradient_accumulation_steps > GB_MAX_ACCUMULATION) {
            gb_diag_add(diag, "[data] tokens_per_step = %lld: the largest fitting batch that "
                        "divides its %lld sequences is %lld, which makes %lld micro-steps, more "
                        "than the %d gradient accumulation allows; lower tokens_per_step",
                        (long long)s->tokens_per_step, (long long)sequences,
                        (long long)s->batch_size, (long long)s->gradient_accumulation_steps,
                        GB_MAX_ACCUMULATION);
            return -1;
        }
    }
    fprintf(out, "batch_size = auto: batch_size %lld, gradient_accumulation_steps %lld: %lld "
            "tokens per optimizer step", (long long)s->batch_size,
            (long long)s->gradient_accumulation_steps,
            (long long)(s->batch_size * s->gradient_accumulation_steps * s->block_size));
    if (sequences)
        fprintf(out, " ([data] tokens_per_step%s)", s->batch_size < batch
                ? "; the largest fitting batch that divides its sequences" : "");
    fputc('\n', out);
    return 0;
}
