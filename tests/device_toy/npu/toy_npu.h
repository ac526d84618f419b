/* The toy NPU's runtime as the plugins of its family see it: a test device whose memory
 * the host cannot read (tests/device_toy: device_toy.c built with TOY_NPU).
 *
 * The addresses alloc() hands out lie in a range reserved without access (PROT_NONE), so
 * host code that dereferences one faults at once; the bytes live at the same offset in a
 * second mapping, reached only through toy_npu_at(), which the device's kernels and the
 * kernels of the plugins written for the family ("toy_npu") call, as a GPU's kernels
 * reach its memory. gb_device_ctx.stream points at the runtime: a plugin of the family
 * takes it from the context it gets at create(), as a CUDA plugin takes its stream.
 */
#ifndef TOY_NPU_H
#define TOY_NPU_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/device.h"

#define TOY_NPU_FAMILY "toy_npu"
#define TOY_NPU_MAGIC 0x55504e5f594f54ull /* "TOY_NPU" */

typedef struct toy_npu_runtime {
    uint64_t magic;  /* TOY_NPU_MAGIC */
    char *fence;     /* the device addresses: reserved, no access */
    char *store;     /* their bytes, at the same offsets */
    size_t size;     /* of each range */
} toy_npu_runtime;

/* The runtime of the device of `ctx`, or NULL when it is not a toy NPU. */
static inline const toy_npu_runtime *toy_npu_of(const gb_device_ctx *ctx)
{
    if (!ctx || ctx->struct_size < offsetof(gb_device_ctx, memory) + sizeof ctx->memory ||
        ctx->memory != GB_MEMORY_DEVICE || !ctx->stream)
        return NULL;
    const toy_npu_runtime *rt = (const toy_npu_runtime *)ctx->stream;
    return rt->magic == TOY_NPU_MAGIC ? rt : NULL;
}

/* Where the bytes of device address `p` are, for a kernel of the NPU; NULL stays NULL. */
static inline void *toy_npu_at(const toy_npu_runtime *rt, const void *p)
{
    return p ? rt->store + ((const char *)p - rt->fence) : NULL;
}

#endif /* TOY_NPU_H */
