/* The tensor-core primitives of sm_80 and later, one PTX instruction each: ldmatrix (8x8
 * matrices of 16-bit elements from shared memory into the fragment registers of a warp)
 * and mma.sync m16n8k16 (bf16 or f16 inputs, f32 accumulators), with the fragment layouts
 * PTX documents, so kernels can keep fragments in registers, index them by lane and feed
 * one product's accumulators into the next as an operand (which WMMA's opaque fragments
 * forbid). Each helper is a warp collective: all 32 lanes call it together. Header-only,
 * for .cu files; the emulator has its own implementation under the same name
 * (cuda_emu/include/mma_sync.cuh), found first on its include path.
 *
 * Fragments (groupID g = lane / 4, t = lane % 4; each uint32_t holds two 16-bit elements,
 * the lower column or k first):
 *   A (16x16, row-major) a[0]: (g, 2t..2t+1), a[1]: (g+8, 2t..), a[2]: (g, 2t+8..),
 *                        a[3]: (g+8, 2t+8..)
 *   B (16x8, k x n)      b[0]: (k 2t..2t+1, n g), b[1]: (k 2t+8.., n g)
 *   C, D (16x8, f32)     d[0..1]: (g, 2t..2t+1), d[2..3]: (g+8, 2t..2t+1)
 * ldmatrix: lanes 8i..8i+7 give the 16-byte, 16-byte aligned shared-memory addresses of
 * rows 0..7 of 8x8 matrix i (x4: i = 0..3; x2: i = 0..1, lanes 0..15 matter); r[i]
 * receives this lane's elements (row g, columns 2t, 2t+1) of matrix i, or of its
 * transpose with _trans.
 */
#ifndef GEARBOX_KERNELS_CUDA_MMA_SYNC_CUH
#define GEARBOX_KERNELS_CUDA_MMA_SYNC_CUH

#include <stdint.h>

#include "mma_pack.cuh"

static __device__ __forceinline__ uint32_t gb_shared_address(const void *smem)
{
    return (uint32_t)__cvta_generic_to_shared(smem);
}

/* ldmatrix of four or two 8x8 matrices; `trans` "" or ".trans". */
#define GB_LDMATRIX_X4(trans, r, smem_row)                                                \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4" trans ".shared.b16 {%0, %1, %2, %3}, [%4];\n" \
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                           \
                 : "r"(gb_shared_address(smem_row))                                         \
                 : "memory")
#define GB_LDMATRIX_X2(trans, r, smem_row)                                                \
    asm volatile("ldmatrix.sync.aligned.m8n8.x2" trans ".shared.b16 {%0, %1}, [%2];\n"       \
                 : "=r"(r[0]), "=r"(r[1])                                                   \
                 : "r"(gb_shared_address(smem_row))                                         \
                 : "memory")

static __device__ __forceinline__ void gb_ldmatrix_x4(uint32_t r[4], const void *smem_row)
{
    GB_LDMATRIX_X4("", r, smem_row);
}

static __device__ __forceinline__ void gb_ldmatrix_x4_trans(uint32_t r[4], const void *smem_row)
{
    GB_LDMATRIX_X4(".trans", r, smem_row);
}

static __device__ __forceinline__ void gb_ldmatrix_x2(uint32_t r[2], const void *smem_row)
{
    GB_LDMATRIX_X2("", r, smem_row);
}

static __device__ __forceinline__ void gb_ldmatrix_x2_trans(uint32_t r[2], const void *smem_row)
{
    GB_LDMATRIX_X2(".trans", r, smem_row);
}

/* mma.sync m16n8k16 with `type` ("bf16", "f16") inputs, d as both C and D. */
#define GB_MMA_M16N8K16(type, d, a, b)                                                    \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." type "." type ".f32 "             \
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"       \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))

static __device__ __forceinline__ void gb_mma_m16n8k16_bf16(float d[4], const uint32_t a[4],
                                                            const uint32_t b[2])
{
    GB_MMA_M16N8K16("bf16", d, a, b);
}

static __device__ __forceinline__ void gb_mma_m16n8k16_f16(float d[4], const uint32_t a[4],
                                                           const uint32_t b[2])
{
    GB_MMA_M16N8K16("f16", d, a, b);
}

#endif /* GEARBOX_KERNELS_CUDA_MMA_SYNC_CUH */
