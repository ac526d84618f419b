/* kernels/cuda/mma_sync.cuh on the emulator: ldmatrix and mma.sync m16n8k16 with the
 * fragment layouts PTX documents (that header states them), found before the real one on
 * the emulated build's include path, so the .cu files include the same name.
 *
 * Each helper is a warp collective (gb_emu::warp_collective): all 32 lanes arrive at the
 * same call, or the emulator stops with the .cu line. ldmatrix's row addresses must lie in
 * the block's shared memory and be 16-byte aligned, and a row that an asynchronous copy
 * has not finished filling, or that another thread wrote with no barrier since, stops the
 * kernel (gb_emu::shared_read), as for WMMA loads. The mma computes each element of D as
 * C plus the 16 products over k in order, in f32: products of 16-bit inputs are exact in
 * f32, and tensor cores sum in an unspecified order with their own rounding, which only a
 * GPU shows.
 *
 * With GEARBOX_CUDA_EMU_COUNT, each ldmatrix is one shared load request of 16-byte rows
 * (gb_emu::count_ldmatrix: 8 rows, one 8x8 matrix, a phase; a phase whose rows share banks
 * takes more wavefronts) and each mma one tensor-core operation of shape
 * m16n8k16.bf16.f32 or m16n8k16.f16.f32; the element loops below are not counted.
 */
#ifndef GB_EMU_MMA_SYNC_CUH
#define GB_EMU_MMA_SYNC_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "cuda_runtime.h"
#include "mma_pack.cuh"

namespace gb_emu_mma {

struct ldmatrix_lane {
    uint32_t *r;
    const void *row;
};

inline uint16_t element(const void *row, int column)
{
    uint16_t v;
    std::memcpy(&v, static_cast<const char *>(row) + 2 * column, sizeof v);
    return v;
}

/* ldmatrix of `matrices` (2 or 4) 8x8 matrices, transposed or not. */
inline void ldmatrix(const char *file, int line, const char *call, uint32_t *r, const void *row,
                     int matrices, bool trans)
{
    ldmatrix_lane mine{r, row};
    ::gb_emu::warp_collective(file, line, call,
                              ::gb_emu::collective_key{nullptr, (unsigned)matrices, trans}, &mine,
                              [&](void *const *lanes) {
        const int rows = 8 * matrices;
        uintptr_t addr[32] = {};
        const void *at[32];
        for (int i = 0; i < rows; i++) {
            at[i] = static_cast<const ldmatrix_lane *>(lanes[i])->row;
            addr[i] = (uintptr_t)at[i];
            if (addr[i] % 16)
                ::gb_emu::device_violation(file, line, "%s: lane %d's row address %p is not "
                                           "16-byte aligned", call, i, at[i]);
            if (!::gb_emu::shared_holds(at[i]))
                ::gb_emu::device_violation(file, line, "%s: lane %d's row address %p is not in "
                                           "the block's shared memory", call, i, at[i]);
            ::gb_emu::shared_read(file, line, call, at[i], 16);
        }
        if (::gb_emu::counting_on())
            ::gb_emu::count_ldmatrix(addr, rows);
        for (int l = 0; l < 32; l++) {
            const int g = l / 4, t = l % 4;
            uint32_t *out = static_cast<const ldmatrix_lane *>(lanes[l])->r;
            for (int m = 0; m < matrices; m++) {
                const void *const *rows_of = at + 8 * m;
                const uint16_t lo = trans ? element(rows_of[2 * t], g) : element(rows_of[g], 2 * t);
                const uint16_t hi = trans ? element(rows_of[2 * t + 1], g)
                                          : element(rows_of[g], 2 * t + 1);
                out[m] = (uint32_t)lo | (uint32_t)hi << 16;
            }
        }
    });
}

struct mma_lane {
    float *d;
    const uint32_t *a, *b;
};

inline float half_of(uint32_t pair, int high, bool bf16)
{
    const uint16_t bits = (uint16_t)(high ? pair >> 16 : pair & 0xffffu);
    if (bf16) {
        const uint32_t widened = (uint32_t)bits << 16;
        float v;
        std::memcpy(&v, &widened, sizeof v);
        return v;
    }
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
}

/* D = A B + D for one m16n8k16 tile, each element's 16 products summed over k in order. */
inline void mma(const char *file, int line, const char *call, float *d, const uint32_t *a,
                const uint32_t *b, bool bf16)
{
    mma_lane mine{d, a, b};
    ::gb_emu::warp_collective(file, line, call, ::gb_emu::collective_key{nullptr, 0, bf16}, &mine,
                              [&](void *const *lanes) {
        if (::gb_emu::counting_on())
            ::gb_emu::count_mma(bf16 ? "m16n8k16.bf16.f32" : "m16n8k16.f16.f32");
        float A[16][16], B[16][8], C[16][8];
        for (int l = 0; l < 32; l++) {
            const mma_lane &x = *static_cast<const mma_lane *>(lanes[l]);
            const int g = l / 4, t = l % 4;
            for (int h = 0; h < 2; h++) {
                A[g][2 * t + h] = half_of(x.a[0], h, bf16);
                A[g + 8][2 * t + h] = half_of(x.a[1], h, bf16);
                A[g][2 * t + 8 + h] = half_of(x.a[2], h, bf16);
                A[g + 8][2 * t + 8 + h] = half_of(x.a[3], h, bf16);
                B[2 * t + h][g] = half_of(x.b[0], h, bf16);
                B[2 * t + 8 + h][g] = half_of(x.b[1], h, bf16);
                C[g][2 * t + h] = x.d[h];
                C[g + 8][2 * t + h] = x.d[2 + h];
            }
        }
        for (int l = 0; l < 32; l++) {
            float *out = static_cast<const mma_lane *>(lanes[l])->d;
            const int g = l / 4, t = l % 4;
            for (int e = 0; e < 4; e++) {
                const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
                float sum = C[row][col];
                for (int k = 0; k < 16; k++)
                    sum += A[row][k] * B[k][col];
                out[e] = sum;
            }
        }
    });
}

}  // namespace gb_emu_mma

/* The four ldmatrix helpers, each reported by its own name with its caller's line. */
#define GB_EMU_LDMATRIX(name, matrices, trans)                                             \
    inline void name(uint32_t r[matrices], const void *smem_row,                           \
                     const char *file = __builtin_FILE(), int line = __builtin_LINE())     \
    {                                                                                      \
        gb_emu_mma::ldmatrix(file, line, #name, r, smem_row, matrices, trans);             \
    }
GB_EMU_LDMATRIX(gb_ldmatrix_x4, 4, false)
GB_EMU_LDMATRIX(gb_ldmatrix_x4_trans, 4, true)
GB_EMU_LDMATRIX(gb_ldmatrix_x2, 2, false)
GB_EMU_LDMATRIX(gb_ldmatrix_x2_trans, 2, true)

inline void gb_mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                 const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    gb_emu_mma::mma(file, line, "gb_mma_m16n8k16_bf16", d, a, b, true);
}

inline void gb_mma_m16n8k16_f16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    gb_emu_mma::mma(file, line, "gb_mma_m16n8k16_f16", d, a, b, false);
}

#endif
