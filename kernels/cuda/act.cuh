/* Activations of f32, bf16 or f16 seen as f32 by CUDA kernels: one load and one store per
 * element, with the dtype a run-time argument (it is the same for every thread of a
 * launch, so the branch costs next to nothing in kernels that wait on memory).
 *
 * Conversions are gearbox/convert.h's, bit for bit the CPU kernels' (widening exact,
 * narrowing to nearest even, NaN kept quiet), rather than the CUDA intrinsics, so a CUDA
 * kernel that computes an element the way the CPU does stores the same 16 bits. No
 * vectorised (128-bit) access here: vec16.cuh reads and writes 16-byte units of
 * activations, rows.cuh moves whole rows in them.
 */
#ifndef GEARBOX_KERNELS_CUDA_ACT_CUH
#define GEARBOX_KERNELS_CUDA_ACT_CUH

#include <stdint.h>

#include "gearbox/convert.h"
#include "gearbox/tensor.h"

/* Bytes per element of an activation dtype (f32, bf16 or f16), on either side. */
static __host__ __device__ __forceinline__ int64_t gb_act_size(gb_dtype dtype)
{
    return dtype == GB_F32 ? 4 : 2;
}

/* Element i of the activation buffer p, as f32. */
static __device__ __forceinline__ float gb_act_load(const void *p, gb_dtype dtype, int64_t i)
{
    if (dtype == GB_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dtype == GB_BF16 ? gb_f32_from_bf16(h) : gb_f32_from_f16(h);
}

/* Element i of the activation buffer p = v, rounded to nearest even for 16-bit types. */
static __device__ __forceinline__ void gb_act_store(void *p, gb_dtype dtype, int64_t i, float v)
{
    if (dtype == GB_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = dtype == GB_BF16 ? gb_bf16_from_f32(v) : gb_f16_from_f32(v);
}

/* v as an element of dtype holds it: what gb_act_load returns after gb_act_store(v). */
static __device__ __forceinline__ float gb_act_round(gb_dtype dtype, float v)
{
    if (dtype == GB_F32)
        return v;
    return dtype == GB_BF16 ? gb_f32_from_bf16(gb_bf16_from_f32(v))
                            : gb_f32_from_f16(gb_f16_from_f32(v));
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
