/* nvcuda::wmma on the emulator: the 16x16x16 shape with f16 or bf16 inputs and f32
 * accumulators, which is what gearbox's kernels use.
 *
 * Every load, store and mma is a warp collective (gb_emu::warp_collective): all 32 lanes
 * must arrive at the same call with the same pointer, ldm and layout, or the emulator
 * stops with the .cu line. Pointers must be 32-byte aligned and ldm a multiple of 8
 * elements for 16-bit types and 4 for float, as the CUDA guide requires.
 *
 * A load from shared memory that an asynchronous copy (cuda_pipeline.h) has not finished
 * filling for every thread stops the kernel (gb_emu::shared_read).
 *
 * With GEARBOX_CUDA_EMU_COUNT, each load and store is counted by the accesses a GPU makes
 * for it (gb_emu::count_fragment) and each mma_sync as one tensor-core operation of its
 * shape and types; the element loops below are not counted.
 *
 * Which lane holds which element of a fragment is unspecified in CUDA; here it is a
 * permutation drawn per process from GEARBOX_CUDA_EMU_SEED, so code that indexes a
 * fragment's x[] by position gets garbage instead of working by luck. Products of
 * 16-bit inputs are exact in f32 and summed over k in order, in f32: tensor cores sum in
 * an unspecified order with their own rounding, which only a GPU shows.
 */
#ifndef GB_EMU_MMA_H
#define GB_EMU_MMA_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <functional>
#include <type_traits>

#include "cuda_runtime.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulator has the 16x16x16 shape only");
    static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value ||
                      std::is_same<T, float>::value,
                  "the emulator has f16, bf16 and f32 fragments only");
    using element_type = T;
    static constexpr int num_elements = 8;   /* 256 elements over 32 lanes */
    T x[num_elements];
};

namespace emu {

/* Where element (row, col) of a 16x16 fragment lives: lane, and slot within its x[]. */
struct placement {
    uint8_t lane[256], slot[256];
};

inline placement scrambled(uint64_t salt)
{
    placement p;
    uint8_t perm[256];
    for (int i = 0; i < 256; i++)
        perm[i] = (uint8_t)i;
    uint64_t s = ::gb_emu::run_seed() ^ salt;
    for (int i = 255; i > 0; i--) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((s >> 33) % (uint64_t)(i + 1));
        uint8_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < 256; i++) {
        p.lane[i] = (uint8_t)(perm[i] / 8);
        p.slot[i] = (uint8_t)(perm[i] % 8);
    }
    return p;
}

template <class Use> const placement &placement_of()
{
    static const placement p = scrambled(std::is_same<Use, matrix_a>::value   ? 0xa11ull
                                         : std::is_same<Use, matrix_b>::value ? 0xb22ull
                                                                              : 0xacc3ull);
    return p;
}

inline float to_f32(float v) { return v; }
inline float to_f32(__half v) { return __half2float(v); }
inline float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class L> constexpr int layout_code()
{
    return std::is_same<L, col_major>::value ? mem_col_major : mem_row_major;
}

template <class T>
void check_operand(const char *file, int line, const char *call, const void *p, unsigned ldm)
{
    if ((uintptr_t)p % 32)
        ::gb_emu::device_violation(file, line, "%s: pointer %p is not 32-byte aligned", call, p);
    const unsigned multiple = sizeof(T) == 2 ? 8 : 4;
    if (ldm % multiple)
        ::gb_emu::device_violation(file, line, "%s: ldm %u is not a multiple of %u elements for "
                                   "%zu-byte elements", call, ldm, multiple, sizeof(T));
}

/* Element (r, c) of a 16x16 tile at p with leading dimension ldm. */
inline size_t at(int layout, int r, int c, unsigned ldm)
{
    return layout == mem_col_major ? (size_t)c * ldm + (size_t)r : (size_t)r * ldm + (size_t)c;
}

template <class Frag, class T>
void load(const char *file, int line, const char *call, Frag &f, const T *p, unsigned ldm,
          int layout, const placement &where)
{
    check_operand<T>(file, line, call, p, ldm);
    ::gb_emu::warp_collective(file, line, call, ::gb_emu::collective_key{p, ldm, layout}, &f,
                              [&](void *const *lanes) {
                                  if (::gb_emu::counting_on())
                                      ::gb_emu::count_fragment(p, ldm, layout == mem_col_major,
                                                               sizeof(T), sizeof(T) == 4, false);
                                  for (int i = 0; i < 16; i++)   // rows, or columns
                                      ::gb_emu::shared_read(file, line, call, p + (size_t)i * ldm,
                                                            16 * sizeof(T));
                                  for (int r = 0; r < 16; r++)
                                      for (int c = 0; c < 16; c++) {
                                          const int e = r * 16 + c;
                                          static_cast<Frag *>(lanes[where.lane[e]])
                                              ->x[where.slot[e]] = p[at(layout, r, c, ldm)];
                                      }
                              });
}

struct mma_lane {
    void *d;
    const void *a, *b, *c;
};

}  // namespace emu

template <class Use, class T, class L>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ldm,
                      const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    emu::load(file, line, "wmma::load_matrix_sync", f, p, ldm, emu::layout_code<L>(),
              emu::placement_of<Use>());
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
                             unsigned ldm, layout_t layout, const char *file = __builtin_FILE(),
                             int line = __builtin_LINE())
{
    emu::load(file, line, "wmma::load_matrix_sync", f, p, ldm, layout,
              emu::placement_of<accumulator>());
}

inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ldm, layout_t layout, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE())
{
    using frag = fragment<accumulator, 16, 16, 16, float>;
    const char *call = "wmma::store_matrix_sync";
    emu::check_operand<float>(file, line, call, p, ldm);
    const emu::placement &where = emu::placement_of<accumulator>();
    ::gb_emu::warp_collective(file, line, call, ::gb_emu::collective_key{p, ldm, layout},
                              const_cast<frag *>(&f), [&](void *const *lanes) {
                                  if (::gb_emu::counting_on())
                                      ::gb_emu::count_fragment(p, ldm, layout == mem_col_major,
                                                               sizeof(float), true, true);
                                  for (int r = 0; r < 16; r++)
                                      for (int c = 0; c < 16; c++) {
                                          const int e = r * 16 + c;
                                          p[emu::at(layout, r, c, ldm)] =
                                              static_cast<const frag *>(lanes[where.lane[e]])
                                                  ->x[where.slot[e]];
                                      }
                              });
}

template <class Use, class T, class L>
void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, const T &v)
{
    for (T &x : f.x)
        x = v;
}

template <class T, class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, T, LA> &a,
              const fragment<matrix_b, 16, 16, 16, T, LB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c,
              const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    using fa = fragment<matrix_a, 16, 16, 16, T, LA>;
    using fb = fragment<matrix_b, 16, 16, 16, T, LB>;
    using fc = fragment<accumulator, 16, 16, 16, float>;
    emu::mma_lane mine{&d, &a, &b, &c};
    ::gb_emu::warp_collective(file, line, "wmma::mma_sync", ::gb_emu::collective_key{nullptr, 0, 0},
                              &mine, [](void *const *lanes) {
        if (::gb_emu::counting_on())
            ::gb_emu::count_mma(std::is_same<T, __half>::value ? "m16n16k16.f16.f32"
                                                               : "m16n16k16.bf16.f32");
        const emu::placement &pa = emu::placement_of<matrix_a>(), &pb = emu::placement_of<matrix_b>(),
                             &pc = emu::placement_of<accumulator>();
        float A[256], B[256], C[256];
        for (int e = 0; e < 256; e++) {
            const auto *la = static_cast<const emu::mma_lane *>(lanes[pa.lane[e]]);
            const auto *lb = static_cast<const emu::mma_lane *>(lanes[pb.lane[e]]);
            const auto *lc = static_cast<const emu::mma_lane *>(lanes[pc.lane[e]]);
            A[e] = emu::to_f32(static_cast<const fa *>(la->a)->x[pa.slot[e]]);
            B[e] = emu::to_f32(static_cast<const fb *>(lb->b)->x[pb.slot[e]]);
            C[e] = static_cast<const fc *>(lc->c)->x[pc.slot[e]];
        }
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                float sum = C[i * 16 + j];
                for (int k = 0; k < 16; k++)
                    sum += A[i * 16 + k] * B[k * 16 + j];
                const int e = i * 16 + j;
                static_cast<fc *>(static_cast<const emu::mma_lane *>(lanes[pc.lane[e]])->d)
                    ->x[pc.slot[e]] = sum;
            }
    });
}

}  // namespace wmma
}  // namespace nvcuda

#endif
