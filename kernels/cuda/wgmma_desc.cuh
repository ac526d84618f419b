/* The 64-bit shared-memory matrix descriptor of sm_90a's wgmma.mma_async (PTX ISA, "Matrix
 * Descriptor Format"), and where a descriptor puts each 16-bit element of an operand:
 * written once for the kernels' helpers (wgmma.cuh) and the emulator's (cuda_emu/include/
 * wgmma.cuh), which reads operands through gb_wgmma_element_offset. Header-only, for .cu
 * files.
 *
 * Bits: 0-13 the start address, 16-29 the leading-dimension byte offset (LBO), 32-45 the
 * stride-dimension byte offset (SBO), each as (bytes & 0x3ffff) >> 4; 49-51 the base
 * offset (always 0 here: every swizzled tile starts on 1024 bytes); 62-63 the layout, of
 * which the tree uses the 128-byte swizzle (1).
 *
 * The 128-byte swizzle: rows of 128 bytes (64 16-bit elements), and in each the 16-byte
 * chunk c of row r stored at chunk c ^ (r % 8), on the absolute shared-memory address
 * (bits 4-6 XOR bits 7-9), so that the eight rows a core matrix (8 rows x 16 bytes) reads
 * fall in eight different groups of four banks. Canonical layouts (PTX's table), element
 * (mn, k) of one k16 step, bytes before the swizzle:
 *   K-major (k contiguous; trans 0):  start + (mn % 8) 128 + (mn / 8) SBO + 2 k
 *   MN-major (mn contiguous; trans 1): start + 2 (mn % 64) + (mn / 64) LBO + (k % 8) 128
 *                                      + (k / 8) SBO
 * so a tile of rows of 64 elements, row-major, 1024-byte aligned, is K-major with SBO 1024
 * (its rows are the M or N index) and MN-major with SBO 1024 (its rows are the k index),
 * the k16 step kk starting 32 kk bytes in (K-major) or 2048 kk (MN-major).
 */
#ifndef GEARBOX_KERNELS_CUDA_WGMMA_DESC_CUH
#define GEARBOX_KERNELS_CUDA_WGMMA_DESC_CUH

#include <stdint.h>

#define GB_WGMMA_SWIZZLE_128B 1

static __host__ __device__ __forceinline__ uint64_t gb_wgmma_desc_field(uint32_t bytes)
{
    return (uint64_t)((bytes & 0x3ffffu) >> 4);
}

/* The descriptor of an operand at shared address `start` with the 128-byte swizzle. */
static __host__ __device__ __forceinline__ uint64_t gb_wgmma_desc_sw128(uint32_t start,
                                                                        uint32_t lbo,
                                                                        uint32_t sbo)
{
    return gb_wgmma_desc_field(start) | gb_wgmma_desc_field(lbo) << 16 |
           gb_wgmma_desc_field(sbo) << 32 | (uint64_t)GB_WGMMA_SWIZZLE_128B << 62;
}

/* The descriptor of the operand `bytes` further on (a k16 step, another tile): its start
 * address field plus bytes / 16, as long as the address stays in the 256 KiB the field
 * spans (shared memory does); no other field changes. */
static __host__ __device__ __forceinline__ uint64_t gb_wgmma_desc_advance(uint64_t desc,
                                                                          uint32_t bytes)
{
    return desc + (bytes >> 4);
}

struct gb_wgmma_desc_fields {
    uint32_t start, lbo, sbo, base_offset, layout;
};

static __host__ __device__ __forceinline__ gb_wgmma_desc_fields gb_wgmma_desc_decode(uint64_t d)
{
    gb_wgmma_desc_fields f;
    f.start = (uint32_t)(d & 0x3fffu) << 4;
    f.lbo = (uint32_t)(d >> 16 & 0x3fffu) << 4;
    f.sbo = (uint32_t)(d >> 32 & 0x3fffu) << 4;
    f.base_offset = (uint32_t)(d >> 49 & 7u);
    f.layout = (uint32_t)(d >> 62);
    return f;
}

/* The shared address of element (mn, k), k < 16, of a 128-byte-swizzled operand. */
static __host__ __device__ __forceinline__ uint32_t gb_wgmma_element_offset(
    const gb_wgmma_desc_fields &f, int mn_major, int mn, int k)
{
    const uint32_t linear =
        mn_major ? f.start + 2u * (uint32_t)(mn % 64) + (uint32_t)(mn / 64) * f.lbo +
                       (uint32_t)(k % 8) * 128u + (uint32_t)(k / 8) * f.sbo
                 : f.start + (uint32_t)(mn % 8) * 128u + (uint32_t)(mn / 8) * f.sbo +
                       2u * (uint32_t)k;
    return linear ^ ((linear >> 7 & 7u) << 4);
}

/* Element c (of 64) of row r in a 128-byte-swizzled tile of rows of 64 16-bit elements,
 * the tile starting on 1024 bytes: where the kernels' own loads and stores put it. */
static __host__ __device__ __forceinline__ int gb_sw128_index(int r, int c)
{
    return r * 64 + ((c / 8) ^ (r % 8)) * 8 + c % 8;
}

#endif /* GEARBOX_KERNELS_CUDA_WGMMA_DESC_CUH */
