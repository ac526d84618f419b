/* kernels/cuda/wgmma.cuh on the emulator: wgmma.mma_async m64n64k16 with A from registers
 * and B through a 128-byte-swizzled shared-memory descriptor, its fences and groups, with
 * the layouts that header states, found before the real one on the emulated build's
 * include path.
 *
 * The hardware runs a product on the four warps of a warpgroup at once; here each warp
 * computes its own 16 rows (a warp collective: all 32 lanes arrive, or the emulator stops
 * with the .cu line), which is the same arithmetic, since warp w's rows of D read only its
 * rows of A and the whole of B. The warpgroup's agreement is checked on the side: every
 * warp of it must issue the same sequence of products, with the same descriptors
 * (gb_emu::wgmma_warp_issued). B's rows must lie in the block's shared memory, written and
 * published as for ldmatrix (gb_emu::shared_read); descriptors other than the 128-byte
 * swizzle with base offset 0 stop the kernel (the tree writes no other).
 *
 * Asynchrony as PTX orders it, more strictly (gb_emu::wgmma_issue): a product's result is
 * computed at the issue but lands in its accumulators only at the wgmma.wait_group that
 * retires it (they read as NaN until then); a product issued on accumulators still pending
 * chains on their pending values, as the hardware chains same-shape products; a product
 * needs a gb_wgmma_fence() since the thread's last wait; the shared memory it read must be
 * unchanged when it retires; a thread may not end with a product unretired. D is C plus
 * the 16 products over k in order, in f32 (the tensor cores' order and rounding are
 * unspecified; 16-bit products are exact in f32). gb_fence_proxy_async() is accepted and
 * not modelled: the emulator has one proxy.
 *
 * With GEARBOX_CUDA_EMU_COUNT, each product is counted once per warpgroup, by its first
 * warp: one tensor-core operation of shape m64n64k16.{bf16,f16}.f32, and B's 16 core
 * matrices (8 rows of 16 bytes each) as four shared load requests of 32 16-byte rows,
 * whose wavefronts are those of ldmatrix's phases (gb_emu::count_ldmatrix). The warps'
 * element loops are not counted.
 */
#ifndef GB_EMU_WGMMA_CUH
#define GB_EMU_WGMMA_CUH

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cuda_runtime.h"
#include "mma_sync.cuh"
#include "wgmma_desc.cuh"

#define GB_HAVE_WGMMA 1

namespace gb_emu_wgmma {

constexpr int N = 64, K = 16, ACC = N / 2;

struct lane_operands {
    const float *c;   /* the accumulators' values before the product (chained) */
    const uint32_t *a;
    float *result;
    uintptr_t lo, hi;   /* the shared bytes B's rows span */
};

inline int linear_thread()
{
    return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

/* B (K x N) from the descriptor, each element's address checked; the rows' lowest and
 * highest bytes into [*lo, *hi). Counted, by the warpgroup's first warp, as 16 core
 * matrices of 8 rows of 16 bytes. */
inline void read_b(const char *file, int line, const char *call, uint64_t desc, bool mn_major,
                   uint16_t (&b)[K][N], uintptr_t *lo, uintptr_t *hi)
{
    const gb_wgmma_desc_fields f = gb_wgmma_desc_decode(desc);
    if (f.layout != GB_WGMMA_SWIZZLE_128B || f.base_offset != 0)
        ::gb_emu::device_violation(file, line, "%s: descriptor 0x%016llx has layout %u and base "
                                   "offset %u; the emulator implements the 128-byte swizzle "
                                   "(1) with base offset 0", call, (unsigned long long)desc,
                                   f.layout, f.base_offset);
    *lo = UINTPTR_MAX;
    *hi = 0;
    uintptr_t rows[4][32];
    for (int n8 = 0; n8 < N / 8; n8++)
        for (int k8 = 0; k8 < K / 8; k8++)
            for (int r = 0; r < 8; r++) {
                /* the core matrix's row r: 8 elements contiguous along k (K-major) or n */
                const int n = 8 * n8 + (mn_major ? 0 : r), k = 8 * k8 + (mn_major ? r : 0);
                const void *row = ::gb_emu::shared_window_pointer(
                    gb_wgmma_element_offset(f, mn_major, n, k));
                if ((uintptr_t)row % 16 || !::gb_emu::shared_holds(row))
                    ::gb_emu::device_violation(file, line, "%s: B's row (n %d, k %d) at %p is "
                                               "not a 16-byte aligned address in the block's "
                                               "shared memory (descriptor 0x%016llx)", call, n,
                                               k, row, (unsigned long long)desc);
                ::gb_emu::shared_read(file, line, call, row, 16);
                const int matrix = 2 * n8 + k8;
                rows[matrix / 4][8 * (matrix % 4) + r] = (uintptr_t)row;
                *lo = std::min(*lo, (uintptr_t)row);
                *hi = std::max(*hi, (uintptr_t)row + 16);
                for (int e = 0; e < 8; e++) {
                    uint16_t v;
                    std::memcpy(&v, (const char *)row + 2 * e, sizeof v);
                    b[mn_major ? k : k + e][mn_major ? n + e : n] = v;
                }
            }
    if (::gb_emu::counting_on() && linear_thread() / 32 % 4 == 0)
        for (auto &request : rows)
            ::gb_emu::count_ldmatrix(request, 32);
}

/* d (this warp's 16 rows x 64) = C + A B, each element's 16 products over k in order. */
inline void mma(const char *file, int line, const char *call, float (&d)[ACC],
                const uint32_t (&a)[4], uint64_t desc_b, bool mn_major, bool bf16)
{
    float c[ACC], result[ACC];
    ::gb_emu::wgmma_chain_input(d, ACC, c);
    lane_operands mine{c, a, result, 0, 0};
    const ::gb_emu::collective_key key{(const void *)desc_b, (unsigned)mn_major, bf16};
    ::gb_emu::warp_collective(file, line, call, key, &mine, [&](void *const *lanes) {
        uint16_t bits[K][N];
        uintptr_t lo = 0, hi = 0;
        read_b(file, line, call, desc_b, mn_major, bits, &lo, &hi);
        float b[K][N];
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++)
                b[k][n] = gb_emu_mma::half_of(bits[k][n], 0, bf16);
        ::gb_emu::wgmma_warp_issued(file, line,
                                    ::gb_emu::warpgroup_key{N, 2 * mn_major + bf16, 0, desc_b});
        if (::gb_emu::counting_on() && linear_thread() / 32 % 4 == 0)
            ::gb_emu::count_mma(bf16 ? "m64n64k16.bf16.f32" : "m64n64k16.f16.f32");
        float A[16][K];
        for (int l = 0; l < 32; l++) {
            const lane_operands &x = *static_cast<const lane_operands *>(lanes[l]);
            const int g = l / 4, t = l % 4;
            for (int r = 0; r < 4; r++)
                for (int h = 0; h < 2; h++)
                    A[g + 8 * (r % 2)][2 * t + 8 * (r / 2) + h] =
                        gb_emu_mma::half_of(x.a[r], h, bf16);
        }
        for (int l = 0; l < 32; l++) {
            lane_operands &x = *static_cast<lane_operands *>(lanes[l]);
            const int g = l / 4, t = l % 4;
            x.lo = lo;
            x.hi = hi;
            for (int i = 0; i < ACC; i++) {
                const int row = g + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * t + i % 2;
                float sum = x.c[i];
                for (int k = 0; k < K; k++)
                    sum += A[row][k] * b[k][col];
                x.result[i] = sum;
            }
        }
    });
    /* lane 0 of the warp keeps a copy of B's bytes, to compare at the retirement */
    ::gb_emu::wgmma_issue(file, line, d, ACC, result, (const void *)mine.lo, mine.hi - mine.lo);
}

}  // namespace gb_emu_wgmma

inline uint64_t gb_wgmma_desc(const void *tile, uint32_t lbo, uint32_t sbo,
                              const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return gb_wgmma_desc_sw128(::gb_emu::shared_window(file, line, tile), lbo, sbo);
}

inline void gb_wgmma_fence(const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    ::gb_emu::wgmma_fence(file, line);
}

inline void gb_wgmma_commit(const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    ::gb_emu::wgmma_commit(file, line);
}

template <int N>
inline void gb_wgmma_wait(const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    ::gb_emu::wgmma_wait(file, line, N);
}

inline void gb_fence_proxy_async() {}

inline void gb_wgmma_hold(float (&)[32]) {}

template <int TRANS_B>
inline void gb_wgmma_m64n64k16_bf16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                    const char *file = __builtin_FILE(),
                                    int line = __builtin_LINE())
{
    gb_emu_wgmma::mma(file, line, "gb_wgmma_m64n64k16_bf16", d, a, desc_b, TRANS_B, true);
}

template <int TRANS_B>
inline void gb_wgmma_m64n64k16_f16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                   const char *file = __builtin_FILE(),
                                   int line = __builtin_LINE())
{
    gb_emu_wgmma::mma(file, line, "gb_wgmma_m64n64k16_f16", d, a, desc_b, TRANS_B, false);
}

#endif
