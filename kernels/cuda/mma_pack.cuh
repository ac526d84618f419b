/* Two floats rounded to nearest even into one register of two 16-bit halves, the low half
 * first, as the fragments of mma.sync (mma_sync.cuh) hold their elements. Shared by the
 * real helpers and the emulator's (cuda_emu/include/mma_sync.cuh), so both round the same
 * way. Header-only, for .cu files.
 */
#ifndef GEARBOX_KERNELS_CUDA_MMA_PACK_CUH
#define GEARBOX_KERNELS_CUDA_MMA_PACK_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

static __host__ __device__ __forceinline__ uint32_t gb_pack_bf16x2(float lo, float hi)
{
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);   /* .x, the low half: lo */
    uint32_t bits;
    memcpy(&bits, &pair, sizeof bits);
    return bits;
}

static __host__ __device__ __forceinline__ uint32_t gb_pack_f16x2(float lo, float hi)
{
    const __half2 pair = __floats2half2_rn(lo, hi);
    uint32_t bits;
    memcpy(&bits, &pair, sizeof bits);
    return bits;
}

#endif /* GEARBOX_KERNELS_CUDA_MMA_PACK_CUH */
