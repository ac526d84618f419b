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

constexpr int K = 16;

/* One lane's share of a product: its accumulators' values before it (chained), its A
 * fragments (null when A comes through a descriptor), where its result goes, and the
 * shared bytes the warp's reads of A and B span. */
struct lane_operands {
    const float *c;
    const uint32_t *a;
    float *result;
    uintptr_t lo, hi;
};

inline int linear_thread()
{
    return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

/* rows (mn, k) .. +8 along the contiguous dimension of a 128-byte-swizzled operand, read
 * into `out` (out(mn, k, element bits) for each of the 8), each 16-byte row checked, its
 * address into `row_at` and the span into [*lo, *hi). */
template <class Out>
inline void read_core_row(const char *file, int line, const char *call, uint64_t desc,
                          const gb_wgmma_desc_fields &f, bool mn_major, int mn, int k,
                          uintptr_t *row_at, uintptr_t *lo, uintptr_t *hi, Out out)
{
    const void *row =
        ::gb_emu::shared_window_pointer(gb_wgmma_element_offset(f, mn_major, mn, k));
    if ((uintptr_t)row % 16 || !::gb_emu::shared_holds(row))
        ::gb_emu::device_violation(file, line, "%s: the operand's row (mn %d, k %d) at %p is "
                                   "not a 16-byte aligned address in the block's shared memory "
                                   "(descriptor 0x%016llx)", call, mn, k, row,
                                   (unsigned long long)desc);
    ::gb_emu::shared_read(file, line, call, row, 16);
    *row_at = (uintptr_t)row;
    *lo = std::min(*lo, (uintptr_t)row);
    *hi = std::max(*hi, (uintptr_t)row + 16);
    for (int e = 0; e < 8; e++) {
        uint16_t v;
        std::memcpy(&v, (const char *)row + 2 * e, sizeof v);
        out(mn_major ? mn + e : mn, mn_major ? k : k + e, v);
    }
}

inline gb_wgmma_desc_fields checked_fields(const char *file, int line, const char *call,
                                           uint64_t desc)
{
    const gb_wgmma_desc_fields f = gb_wgmma_desc_decode(desc);
    if (f.layout != GB_WGMMA_SWIZZLE_128B || f.base_offset != 0)
        ::gb_emu::device_violation(file, line, "%s: descriptor 0x%016llx has layout %u and base "
                                   "offset %u; the emulator implements the 128-byte swizzle "
                                   "(1) with base offset 0", call, (unsigned long long)desc,
                                   f.layout, f.base_offset);
    return f;
}

/* A shared operand's `mns` x K elements from mn0 (B: all N; A: a warp's 16 rows), as core
 * matrices of 8 rows of 16 bytes, counted (when `count`) as requests of 32 such rows. */
template <class Out>
inline void read_operand(const char *file, int line, const char *call, uint64_t desc,
                         bool mn_major, int mn0, int mns, bool count, uintptr_t *lo,
                         uintptr_t *hi, Out out)
{
    const gb_wgmma_desc_fields f = checked_fields(file, line, call, desc);
    uintptr_t rows[32];
    int n_rows = 0;
    for (int m8 = 0; m8 < mns / 8; m8++)
        for (int k8 = 0; k8 < K / 8; k8++)
            for (int r = 0; r < 8; r++) {
                const int mn = mn0 + 8 * m8 + (mn_major ? 0 : r), k = 8 * k8 + (mn_major ? r : 0);
                read_core_row(file, line, call, desc, f, mn_major, mn, k, &rows[n_rows++], lo,
                              hi, [&](int m, int kk, uint16_t v) { out(m - mn0, kk, v); });
                if (n_rows == 32) {
                    if (count)
                        ::gb_emu::count_wgmma_operand(rows);
                    n_rows = 0;
                }
            }
}

/* d (this warp's 16 rows x N) = C + A B, each element's 16 products over k in order; A
 * from the lanes' registers (a_desc 0) or through a_desc (K-major). */
template <int N>
inline void mma(const char *file, int line, const char *call, float (&d)[N / 2],
                const uint32_t *a, uint64_t a_desc, uint64_t desc_b, bool mn_major, bool bf16)
{
    constexpr int ACC = N / 2;
    float c[ACC], result[ACC];
    ::gb_emu::wgmma_chain_input(d, ACC, c);
    lane_operands mine{c, a, result, 0, 0};
    const ::gb_emu::collective_key key{(const void *)(desc_b ^ a_desc), (unsigned)mn_major, bf16};
    ::gb_emu::warp_collective(file, line, call, key, &mine, [&](void *const *lanes) {
        const int warp_in_group = linear_thread() / 32 % 4;
        const bool first_warp = warp_in_group == 0, counting = ::gb_emu::counting_on();
        uintptr_t lo = UINTPTR_MAX, hi = 0;
        float b[K][N], A[16][K];
        read_operand(file, line, call, desc_b, mn_major, 0, N, counting && first_warp, &lo, &hi,
                     [&](int n, int k, uint16_t v) { b[k][n] = gb_emu_mma::half_of(v, 0, bf16); });
        if (a_desc)
            read_operand(file, line, call, a_desc, false, 16 * warp_in_group, 16, counting, &lo,
                         &hi, [&](int m, int k, uint16_t v) {
                             A[m][k] = gb_emu_mma::half_of(v, 0, bf16);
                         });
        const ::gb_emu::warpgroup_key issued{N, 2 * mn_major + bf16, a_desc, desc_b};
        ::gb_emu::wgmma_warp_issued(file, line, issued);
        if (counting)
            ::gb_emu::count_wgmma_issue();
        if (counting && first_warp)
            ::gb_emu::count_mma(bf16 ? (N == 64 ? "m64n64k16.bf16.f32" : "m64n32k16.bf16.f32")
                                     : (N == 64 ? "m64n64k16.f16.f32" : "m64n32k16.f16.f32"));
        for (int l = 0; l < 32 && !a_desc; l++) {
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
    /* lane 0 of the warp keeps a copy of the operands' bytes, to compare at the retirement */
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

template <int N> inline void gb_wgmma_hold(float (&)[N]) {}

template <int TRANS_B>
inline void gb_wgmma_m64n64k16_bf16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                    const char *file = __builtin_FILE(),
                                    int line = __builtin_LINE())
{
    gb_emu_wgmma::mma<64>(file, line, "gb_wgmma_m64n64k16_bf16", d, a, 0, desc_b, TRANS_B, true);
}

template <int TRANS_B>
inline void gb_wgmma_m64n64k16_f16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                   const char *file = __builtin_FILE(),
                                   int line = __builtin_LINE())
{
    gb_emu_wgmma::mma<64>(file, line, "gb_wgmma_m64n64k16_f16", d, a, 0, desc_b, TRANS_B, false);
}

inline void gb_wgmma_m64n32k16_ss_bf16(float (&d)[16], uint64_t desc_a, uint64_t desc_b,
                                       const char *file = __builtin_FILE(),
                                       int line = __builtin_LINE())
{
    gb_emu_wgmma::mma<32>(file, line, "gb_wgmma_m64n32k16_ss_bf16", d, nullptr, desc_a, desc_b,
                          false, true);
}

inline void gb_wgmma_m64n32k16_ss_f16(float (&d)[16], uint64_t desc_a, uint64_t desc_b,
                                      const char *file = __builtin_FILE(),
                                      int line = __builtin_LINE())
{
    gb_emu_wgmma::mma<32>(file, line, "gb_wgmma_m64n32k16_ss_f16", d, nullptr, desc_a, desc_b,
                          false, false);
}

#endif
