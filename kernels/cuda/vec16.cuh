/* 16-byte accesses of activations: 4 f32 or 8 bf16/f16 elements in one load or store,
 * the unit a GPU moves at its full rate per instruction.
 *
 * A unit is loaded and stored as what it is in memory (a uint4: one 16-byte access) and
 * copied to and from gb_vec16 for its elements. Reading the union straight from memory
 * lets a compiler split the access into one per element (g++ did, for the emulator), and
 * reaching the elements through a pointer cast to another type breaks C++'s aliasing
 * rules, which an optimiser exploits once the dtype is a constant. Conversions are the
 * hardware's, as act.cuh's, two elements an instruction when narrowing (mma_pack.cuh's
 * pairs), so a unit holds the bits gb_act_store would have written element by element.
 */
#ifndef GEARBOX_KERNELS_CUDA_VEC16_CUH
#define GEARBOX_KERNELS_CUDA_VEC16_CUH

#include <stdint.h>
#include <string.h>

#include "act.cuh"
#include "mma_pack.cuh"

/* Bytes of one unit, the alignment its address needs. */
#define GB_VEC16_BYTES 16

union alignas(GB_VEC16_BYTES) gb_vec16 {
    float f[4];
    uint16_t h[8];
    uint32_t pair[4];   /* two 16-bit elements, the first in the low half */
};

/* Elements of Dtype (an act.cuh tag) in one unit: a compile-time count, so that a unit's
 * values stay in registers (a count known only at run time puts them in local memory). */
template <typename Dtype>
struct gb_vec16_len {
    static constexpr int n = Dtype::dtype == GB_F32 ? 4 : 8;
};

/* The unit at p (16-byte aligned). */
static __device__ __forceinline__ gb_vec16 gb_vec16_load(const void *p)
{
    const uint4 unit = *(const uint4 *)p;
    gb_vec16 v;
    memcpy(&v, &unit, sizeof v);
    return v;
}

static __device__ __forceinline__ void gb_vec16_store(void *p, const gb_vec16 &v)
{
    uint4 unit;
    memcpy(&unit, &v, sizeof unit);
    *(uint4 *)p = unit;
}

/* The n = gb_vec16_len<Dtype>::n elements of the activations p from element i (a multiple
 * of n, p 16-byte aligned) as f32. */
template <typename Dtype>
static __device__ __forceinline__ void gb_vec16_load_act(const void *p, int64_t i, float *out)
{
    constexpr int n = gb_vec16_len<Dtype>::n;
    const gb_vec16 v = gb_vec16_load((const gb_vec16 *)p + i / n);
#pragma unroll
    for (int k = 0; k < n; k++)
        out[k] = Dtype::dtype == GB_F32 ? v.f[k] : gb_act_widen(Dtype::dtype, v.h[k]);
}

/* gb_vec16_load_act's inverse: the n values of in stored from element i of p, rounded to
 * Dtype. */
template <typename Dtype>
static __device__ __forceinline__ void gb_vec16_store_act(void *p, int64_t i, const float *in)
{
    constexpr int n = gb_vec16_len<Dtype>::n;
    gb_vec16 v = {{0.0f}};   // every element is set below; the compiler cannot see it
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (Dtype::dtype == GB_F32)
            v.f[k] = in[k];
        else
            v.pair[k] = Dtype::dtype == GB_BF16 ? gb_pack_bf16x2(in[2 * k], in[2 * k + 1])
                                                : gb_pack_f16x2(in[2 * k], in[2 * k + 1]);
    }
    gb_vec16_store((gb_vec16 *)p + i / n, v);
}

/* dst[0 .. n) += src[0 .. n): f32 on both sides, n a multiple of 4, both 16-byte aligned;
 * each element's one addition, as a scalar loop would do it. */
template <int n>
static __device__ __forceinline__ void gb_vec16_add_f32(float *dst, const float *src)
{
#pragma unroll
    for (int j = 0; j < n; j += 4) {
        gb_vec16 v = gb_vec16_load(dst + j);
#pragma unroll
        for (int k = 0; k < 4; k++)
            v.f[k] += src[j + k];
        gb_vec16_store(dst + j, v);
    }
}

/* The n f32 at p (n a multiple of 4, p 16-byte aligned) into `out`, n / 4 units; and
 * back from `in`. */
template <int n>
static __device__ __forceinline__ void gb_vec16_load_f32(const float *p, float *out)
{
    static_assert(n % 4 == 0, "whole 16-byte units of f32");
#pragma unroll
    for (int j = 0; j < n; j += 4)
        gb_vec16_load_act<gb_act_f32>(p, j, out + j);
}

template <int n>
static __device__ __forceinline__ void gb_vec16_store_f32(float *p, const float *in)
{
    static_assert(n % 4 == 0, "whole 16-byte units of f32");
#pragma unroll
    for (int j = 0; j < n; j += 4)
        gb_vec16_store_act<gb_act_f32>(p, j, in + j);
}

#endif /* GEARBOX_KERNELS_CUDA_VEC16_CUH */
