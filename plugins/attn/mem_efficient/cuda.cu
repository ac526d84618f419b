/* attn/mem_efficient on CUDA: a refusal. It declares the cuda device so that a run that
 * names it there, and `attn = auto`, hear why not and what to use, instead of being told
 * that no such plugin exists.
 *
 * Why, argued from the kernel's structure (no GPU has timed it): it was a warp per query
 * row, every row re-reading all K and V rows of its head (2 T^2 D elements per head from
 * L2, against attn/math's few passes over the T^2 scores), with every product on CUDA
 * cores, which an H100 runs about 15x slower than bf16 tensor cores run attn/math's
 * cuBLASLt matmuls. At T = 8192 both costs grow as T^2, so no T makes it worth choosing
 * over attn/math; making it so would mean tensor-core tiles, which attn/flash already is.
 * The CPU object (cpu.c) is unchanged.
 *
 * Memory linear in T on CUDA: attn/flash (f32, bf16, f16, head_dim up to 128) or
 * attn/cudnn (bf16, f16); any shape: attn/math.
 */
#include <stdio.h>

#include "gearbox/toolkit/attn_checks.h"
#include "gearbox/attn.h"

#define PLUGIN "attn/mem_efficient"
#define REFUSAL PLUGIN " does not run on cuda: its CUDA-core kernel cannot beat attn/math " \
                "at any T; use attn/flash (f32, bf16, f16, head_dim up to 128) " \
                "or attn/cudnn (bf16, f16) for memory linear in T, or attn/math for any shape"

static gb_status mem_efficient_create(const gb_host *host, const gb_value *options,
                                      const gb_device_ctx *device, void **self)
{
    (void)options;
    return gb_attn_cuda_instance_new(host, device, PLUGIN, sizeof(gb_plugin_instance), self);
}

static int mem_efficient_eligible(void *self, const gb_attn_problem *p, char *reason,
                                  size_t reason_cap)
{
    (void)self;
    (void)p;
    snprintf(reason, reason_cap, "%s", REFUSAL);
    return 0;
}

static gb_status mem_efficient_memory(void *self, const gb_attn_problem *p, size_t *saved_bytes,
                                      size_t *workspace_bytes)
{
    (void)self;
    (void)p;
    *saved_bytes = 0;
    *workspace_bytes = 0;
    return GB_OK;
}

static gb_status refuse(void *self, const char *call)
{
    const gb_plugin_instance *attn = (const gb_plugin_instance *)self;
    attn->host->set_error(attn->host, "%s: %s", call, REFUSAL);
    return GB_ERR_UNSUPPORTED;
}

static gb_status mem_efficient_forward(void *self, const gb_attn_problem *p, gb_tensor out,
                                       gb_tensor q, gb_tensor k, gb_tensor v, void *saved,
                                       void *workspace)
{
    (void)p, (void)out, (void)q, (void)k, (void)v, (void)saved, (void)workspace;
    return refuse(self, "forward");
}

static gb_status mem_efficient_backward(void *self, const gb_attn_problem *p, gb_tensor dq,
                                        gb_tensor dk, gb_tensor dv, gb_tensor dout, gb_tensor q,
                                        gb_tensor k, gb_tensor v, gb_tensor out,
                                        const void *saved, void *workspace)
{
    (void)p, (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)out;
    (void)saved, (void)workspace;
    return refuse(self, "backward");
}

/* C linkage: the loader looks the entry up by its plain name. */
extern "C" {
GB_ATTN_PLUGIN("mem_efficient", "1.1.0",
               "refuses every problem on cuda (it cannot beat attn/math at any T): "
               "use attn/flash or attn/cudnn",
               GB_DEVICE_CUDA, GB_ATTN_DTYPES, GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY,
               GB_NO_OPTIONS, mem_efficient_create, gb_plugin_instance_destroy,
               mem_efficient_eligible, mem_efficient_memory, mem_efficient_forward,
               mem_efficient_backward, NULL)
}
