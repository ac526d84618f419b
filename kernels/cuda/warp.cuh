/* Sums, maxima and ballots across the 32 lanes of a warp by a fixed xor butterfly: every
 * lane ends with the same bits (float addition is commutative, and each stage pairs the
 * same partners), run after run. Header-only, for .cu files.
 */
#ifndef GEARBOX_KERNELS_CUDA_WARP_CUH
#define GEARBOX_KERNELS_CUDA_WARP_CUH

#define GB_WARP 32

static __device__ __forceinline__ float gb_warp_sum(float x)
{
    for (int offset = GB_WARP / 2; offset > 0; offset /= 2)
        x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

static __device__ __forceinline__ float gb_warp_max(float x)
{
    for (int offset = GB_WARP / 2; offset > 0; offset /= 2)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
    return x;
}

#endif /* GEARBOX_KERNELS_CUDA_WARP_CUH */
