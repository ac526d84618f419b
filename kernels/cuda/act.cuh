/* Activations of f32, bf16 or f16 seen as f32 by CUDA kernels: one load and one store per
 * element, with the dtype a run-time argument (it is the same for every thread of a
 * launch, so the branch costs next to nothing in kernels that wait on memory).
 *
 * Conversions are the hardware's (cvt): narrowing rounds to nearest even, as
 * gearbox/convert.h does for the CPU kernels, so every number a CUDA kernel stores has the
 * CPU's 16 bits; a NaN becomes the canonical one (0x7fff), where convert.h keeps its
 * payload. convert.h's f16 conversions in software took tens of instructions an element,
 * which made the f16 LayerNorm and cross-entropy issue-bound. No vectorised (128-bit)
 * access here: vec16.cuh reads and writes 16-byte units of activations, rows.cuh moves
 * whole rows in them.
 */
#ifndef GEARBOX_KERNELS_CUDA_ACT_CUH
#define GEARBOX_KERNELS_CUDA_ACT_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "gearbox/convert.h"
#include "gearbox/tensor.h"

/* Bytes per element of an activation dtype (f32, bf16 or f16), on either side. */
static __host__ __device__ __forceinline__ int64_t gb_act_size(gb_dtype dtype)
{
    return dtype == GB_F32 ? 4 : 2;
}

/* The 16 bits of v rounded to bf16 or f16 (dtype), and back: one cvt each way (bf16
 * widens by a shift, which is what its cvt does). */
static __device__ __forceinline__ uint16_t gb_act_narrow(gb_dtype dtype, float v)
{
    if (dtype == GB_BF16) {
        const __nv_bfloat16_raw r = __float2bfloat16_rn(v);
        return r.x;
    }
    const __half_raw r = __float2half_rn(v);
    return r.x;
}

static __device__ __forceinline__ float gb_act_widen(gb_dtype dtype, uint16_t h)
{
    if (dtype == GB_BF16)
        return gb_f32_from_bf16(h);
    __half_raw r;
    r.x = h;
    return __half2float(__half(r));
}

/* Element i of the activation buffer p, as f32. */
static __device__ __forceinline__ float gb_act_load(const void *p, gb_dtype dtype, int64_t i)
{
    if (dtype == GB_F32)
        return ((const float *)p)[i];
    return gb_act_widen(dtype, ((const uint16_t *)p)[i]);
}

/* Element i of the activation buffer p = v, rounded to nearest even for 16-bit types. */
static __device__ __forceinline__ void gb_act_store(void *p, gb_dtype dtype, int64_t i, float v)
{
    if (dtype == GB_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = gb_act_narrow(dtype, v);
}

/* v as an element of dtype holds it: what gb_act_load returns after gb_act_store(v). */
static __device__ __forceinline__ float gb_act_round(gb_dtype dtype, float v)
{
    return dtype == GB_F32 ? v : gb_act_widen(dtype, gb_act_narrow(dtype, v));
}

/* An activation dtype as a type, for kernels instantiated per dtype: with the dtype a
 * compile-time constant, the loops of kernel<gb_act_bf16> hold the bf16 loads and stores
 * alone. A GPU branches past the untaken cases of a run-time dtype for next to nothing,
 * but the time model estimates a kernel's instructions from its PTX and charges every
 * case it finds in the loops (docs/gpu.md, "The time of a kernel"). */
struct gb_act_f32 {
    static constexpr gb_dtype dtype = GB_F32;
};
struct gb_act_bf16 {
    static constexpr gb_dtype dtype = GB_BF16;
};
struct gb_act_f16 {
    static constexpr gb_dtype dtype = GB_F16;
};

/* fn<the tag of dtype>(...): a host function template instantiated for each tag. */
#define GB_ACT_DISPATCH(dtype, fn, ...)                                                   \
    ((dtype) == GB_F32    ? fn<gb_act_f32>(__VA_ARGS__)                                    \
     : (dtype) == GB_BF16 ? fn<gb_act_bf16>(__VA_ARGS__)                                   \
                          : fn<gb_act_f16>(__VA_ARGS__))

#endif /* GEARBOX_KERNELS_CUDA_ACT_CUH */
