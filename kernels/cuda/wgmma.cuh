/* sm_90a's warpgroup tensor-core product, wgmma.mma_async, one PTX instruction behind each
 * helper: m64n64k16 with f32 accumulators, A (bf16 or f16) from registers and B from shared
 * memory through a descriptor (wgmma_desc.cuh), m64n32k16 with both from shared memory,
 * and the fences and groups that order them.
 * A warpgroup is four consecutive warps (the first's index a multiple of 4); every helper
 * is called by all 128 threads of it together, in uniform control flow. Header-only, for
 * .cu files; the emulator has its own implementation under the same names
 * (cuda_emu/include/wgmma.cuh), found first on its include path.
 *
 * Fragments (w = warp in the warpgroup, g = lane / 4, t = lane % 4): warp w owns rows
 * 16 w .. 16 w + 15 of A and D, in mma.sync m16n8k16's layouts (mma_sync.cuh):
 *   A a[r]: row 16 w + g + 8 (r % 2), k 2 t + 8 (r / 2) and the next (low half first);
 *   D d[i]: row 16 w + g + 8 (i / 2 % 2), column 8 (i / 4) + 2 t + i % 2,
 * so the accumulators of one product, packed in pairs, are the A fragments of the next:
 * the k16 step kk of A is {d[8 kk] d[8 kk + 1]}, {d[8 kk + 2], ...}, ... .
 *
 * Order (PTX ISA, "wgmma"): gb_wgmma_fence() before the first product and after any other
 * instruction wrote the accumulators or A registers; products chained on the same
 * accumulators need none between them; gb_wgmma_commit() closes a group and
 * gb_wgmma_wait<N>() waits until at most N groups are pending; the accumulators and A
 * registers of a product are not touched before the wait that covers it, nor the shared
 * memory it reads written. gb_wgmma_hold(d) around the asynchronous region keeps the
 * compiler from moving the accumulators' other uses into it (nothing in the asm says the
 * wait writes them). Shared memory written by the threads' own stores or cp.async is
 * published to the products by gb_fence_proxy_async() in each writing thread, then a
 * barrier. GB_HAVE_WGMMA says whether the pass compiling the code has the instruction
 * (nvcc's sm_90a device pass; the emulator's); elsewhere the helpers trap.
 */
#ifndef GEARBOX_KERNELS_CUDA_WGMMA_CUH
#define GEARBOX_KERNELS_CUDA_WGMMA_CUH

#include <stdint.h>

#include "mma_sync.cuh"
#include "wgmma_desc.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GB_HAVE_WGMMA 1
#else
#define GB_HAVE_WGMMA 0
#endif

#if GB_HAVE_WGMMA
#define GB_WGMMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define GB_WGMMA_ASM(...) __trap()
#endif

/* The 128-byte-swizzled operand at `tile` (1024-byte aligned but for a k16 step's offset). */
static __device__ __forceinline__ uint64_t gb_wgmma_desc(const void *tile, uint32_t lbo,
                                                         uint32_t sbo)
{
    return gb_wgmma_desc_sw128(gb_shared_address(tile), lbo, sbo);
}

static __device__ __forceinline__ void gb_wgmma_fence()
{
    GB_WGMMA_ASM("wgmma.fence.sync.aligned;\n" ::: "memory");
}

static __device__ __forceinline__ void gb_wgmma_commit()
{
    GB_WGMMA_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> static __device__ __forceinline__ void gb_wgmma_wait()
{
    GB_WGMMA_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

static __device__ __forceinline__ void gb_fence_proxy_async()
{
    GB_WGMMA_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* A compiler barrier on each accumulator: their uses stay on their side of it. */
template <int N> static __device__ __forceinline__ void gb_wgmma_hold(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

#define GB_WGMMA_D_REGS                                                                    \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "               \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"

/* d (64 x 64, f32) += A (64 x 16, registers) B (16 x 64, shared memory at desc_b: K-major
 * when TRANS_B is 0, N-major when 1), inputs `type` ("bf16", "f16"). */
#define GB_WGMMA_M64N64K16_RS(type, d, a, desc_b, trans_b)                                 \
    GB_WGMMA_ASM("{\n"                                                                     \
                 ".reg .pred accumulate;\n"                                                \
                 "setp.ne.b32 accumulate, %38, 0;\n"                                       \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." type "." type " "           \
                 "{" GB_WGMMA_D_REGS "}, "                                                 \
                 "{%32, %33, %34, %35}, %36, accumulate, 1, 1, %37;\n"                     \
                 "}\n"                                                                     \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),                         \
                   "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),                         \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),                       \
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),                     \
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),                     \
                   "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),                     \
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),                     \
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                      \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(trans_b),  \
                   "r"(1))

template <int TRANS_B>
static __device__ __forceinline__ void gb_wgmma_m64n64k16_bf16(float (&d)[32],
                                                               const uint32_t (&a)[4],
                                                               uint64_t desc_b)
{
    GB_WGMMA_M64N64K16_RS("bf16", d, a, desc_b, TRANS_B);
}

template <int TRANS_B>
static __device__ __forceinline__ void gb_wgmma_m64n64k16_f16(float (&d)[32],
                                                              const uint32_t (&a)[4],
                                                              uint64_t desc_b)
{
    GB_WGMMA_M64N64K16_RS("f16", d, a, desc_b, TRANS_B);
}

#define GB_WGMMA_D16_REGS                                                                  \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"

/* d (64 x 32, f32) += A (64 x 16) B (16 x 32), both from shared memory, K-major (the
 * descriptors' rows are A's rows and B's columns), inputs `type`. */
#define GB_WGMMA_M64N32K16_SS(type, d, desc_a, desc_b)                                     \
    GB_WGMMA_ASM("{\n"                                                                     \
                 ".reg .pred accumulate;\n"                                                \
                 "setp.ne.b32 accumulate, %18, 0;\n"                                       \
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32." type "." type " "           \
                 "{" GB_WGMMA_D16_REGS "}, %16, %17, accumulate, 1, 1, 0, 0;\n"            \
                 "}\n"                                                                     \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),                         \
                   "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),                         \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),                       \
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])                      \
                 : "l"(desc_a), "l"(desc_b), "r"(1))

static __device__ __forceinline__ void gb_wgmma_m64n32k16_ss_bf16(float (&d)[16],
                                                                  uint64_t desc_a,
                                                                  uint64_t desc_b)
{
    GB_WGMMA_M64N32K16_SS("bf16", d, desc_a, desc_b);
}

static __device__ __forceinline__ void gb_wgmma_m64n32k16_ss_f16(float (&d)[16], uint64_t desc_a,
                                                                 uint64_t desc_b)
{
    GB_WGMMA_M64N32K16_SS("f16", d, desc_a, desc_b);
}

#endif /* GEARBOX_KERNELS_CUDA_WGMMA_CUH */
