/* Rows of a matrix moved between global and shared memory by a whole thread block, in
 * 16-byte units where both sides allow it, so that a memory-bound kernel reads each byte
 * of its tile from DRAM once, in as few requests as the hardware takes, and then works on
 * the tile in shared memory in whatever order its sums need (reduce_order.h's lanes).
 *
 * A copy moves `rows` segments of `row_bytes` bytes; segment r starts at r * stride on
 * each side. Threads take consecutive units, so a warp's 32 units are 512 consecutive
 * bytes of a segment. When every address, stride and length is a multiple of 16 the unit
 * is a uint4; otherwise it is two bytes, which every activation dtype is a multiple of
 * (the scalar path, for odd widths and offsets). Header-only, for .cu files.
 */
#ifndef GEARBOX_KERNELS_CUDA_ROWS_CUH
#define GEARBOX_KERNELS_CUDA_ROWS_CUH

#include <stdint.h>

#include "hostdevice.h"

/* Every thread of the block calls it with the same arguments. One side of every copy is
 * the block's shared memory, so its units number far below 2^31: 32-bit indices (a
 * 64-bit division by the units a row costs tens of instructions a unit). */
template <typename Unit>
static __device__ void gb_copy_row_units(void *dst, int64_t dst_stride, const void *src,
                                         int64_t src_stride, int64_t rows, int64_t row_bytes)
{
    const int per_row = (int)(row_bytes / (int64_t)sizeof(Unit)), units = (int)rows * per_row;
    for (int u = (int)threadIdx.x; u < units; u += (int)blockDim.x) {
        const int r = u / per_row, k = u % per_row;
        ((Unit *)((char *)dst + r * dst_stride))[k] =
            ((const Unit *)((const char *)src + r * src_stride))[k];
    }
}

/* dst rows = src rows (one side global, the other shared); the caller synchronises the
 * block before reading what it copied to shared memory. */
static __device__ void gb_block_copy_rows(void *dst, int64_t dst_stride, const void *src,
                                          int64_t src_stride, int64_t rows, int64_t row_bytes)
{
    const uint64_t layout = (uint64_t)(uintptr_t)dst | (uint64_t)(uintptr_t)src |
                            (uint64_t)dst_stride | (uint64_t)src_stride | (uint64_t)row_bytes;
    if (layout % 16 == 0)
        gb_copy_row_units<uint4>(dst, dst_stride, src, src_stride, rows, row_bytes);
    else
        gb_copy_row_units<uint16_t>(dst, dst_stride, src, src_stride, rows, row_bytes);
}

/* The bytes between rows of a tile in shared memory that 16-lane groups read across (lane
 * j at element j + 16 k, the two halves of a warp on neighbouring rows): the row's bytes
 * rounded up to 16, then to 64 past a multiple of 128, so the two rows of a warp start 16
 * banks apart and 16 lanes of 4-byte elements (or of 2-byte ones) never share a bank. */
GB_HD_FN int64_t gb_lane_tile_stride(int64_t row_bytes)
{
    const int64_t padded = (row_bytes + 15) / 16 * 16;
    return padded + (64 - padded % 128 + 128) % 128;
}

#endif /* GEARBOX_KERNELS_CUDA_ROWS_CUH */
