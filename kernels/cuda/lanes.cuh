/* kernels/common/reduce_order.h's row sum on a GPU: 16 threads of a warp are the 16 lanes
 * of the CPU's vector register. Lane j sums elements j, j + 16, j + 32, ... in order, then
 * the lanes fold as a tree with shuffles (lane j adds lane j ^ 8, then j ^ 4, j ^ 2,
 * j ^ 1), which for lane 0 is exactly the CPU's fold (lane j += lane j + w, w = 8, 4, 2, 1)
 * and, float addition being commutative, gives every lane of the group the same bits.
 *
 * A warp holds two such groups; each group must be converged (all 16 threads call the
 * fold), which is what gb_lanes_mask() names, so the two halves of a warp may work on
 * different rows and stop at different times. Header-only, for .cu files.
 */
#ifndef GEARBOX_KERNELS_CUDA_LANES_CUH
#define GEARBOX_KERNELS_CUDA_LANES_CUH

#include "reduce_order.h"

static_assert(GB_ROW_LANES == 16, "a group of lanes is half a warp");

/* The calling thread's lane within its group of GB_ROW_LANES. */
static __device__ __forceinline__ int gb_lane(void)
{
    return (int)(threadIdx.x % GB_ROW_LANES);
}

/* The shuffle mask of the calling thread's group: its half of the warp. */
static __device__ __forceinline__ unsigned gb_lanes_mask(void)
{
    return 0xffffu << (threadIdx.x & 16u);
}

static __device__ __forceinline__ float gb_lanes_fold_f32(float v)
{
    const unsigned mask = gb_lanes_mask();
    for (int width = GB_ROW_LANES / 2; width > 0; width /= 2)
        v += __shfl_xor_sync(mask, v, width, GB_ROW_LANES);
    return v;
}

static __device__ __forceinline__ double gb_lanes_fold_f64(double v)
{
    const unsigned mask = gb_lanes_mask();
    for (int width = GB_ROW_LANES / 2; width > 0; width /= 2)
        v += __shfl_xor_sync(mask, v, width, GB_ROW_LANES);
    return v;
}

#endif /* GEARBOX_KERNELS_CUDA_LANES_CUH */
