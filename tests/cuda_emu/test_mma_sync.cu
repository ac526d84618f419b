/* The tensor-core primitives of kernels/cuda/mma_sync.cuh and wgmma.cuh on the emulator:
 * each ldmatrix variant and each mma against a scalar reference on known matrices (D = A B
 * + C, 16x16 products made of two m16n8k16 tiles, bit for bit: 16-bit products are exact
 * in f32 and the emulator sums over k in order, as the reference does); fragments built in
 * registers by gb_pack_* at the documented lane positions give the same D as ldmatrix's;
 * wgmma m64n64k16 with B K-major and MN-major through 128-byte-swizzled tiles, one and
 * two warpgroups, four k16 steps chained; the rules (16-byte aligned rows in shared
 * memory, no read of a cp.async destination before its wait; wgmma's fence, groups,
 * retirement and warpgroups); and the counting mode's figures on patterns whose
 * wavefronts are worked out by hand beside each kernel. meson runs it in each resume
 * order (emu_each_order.sh).
 *
 * Written as CUDA (it is compiled through cu2cc.py like the plugins' .cu files).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

#include "emu_test.h"
#include "mma_sync.cuh"
#include "wgmma.cuh"

/* Row stride of the padded tiles, in 16-bit elements: 16 + 8, 48 bytes, so the 8 rows of
 * an 8x8 matrix start 12 words apart and cover the 32 banks once. */
#define LDS 24

/* ---- the values -------------------------------------------------------------------------- */

/* Small integers and halves: exact in bf16 and f16, so the inputs are what the reference
 * multiplies. */
static float a_value(int r, int c) { return (float)((r * 7 + c * 3) % 11 - 5) * 0.5f; }
static float b_value(int k, int n) { return (float)((k * 5 + n * 9) % 13 - 6) * 0.25f; }
static float c_value(int r, int n) { return (float)(r - n) * 0.125f; }

template <class T> static __host__ __device__ T to16(float v);
template <> __host__ __device__ __nv_bfloat16 to16<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}
template <> __host__ __device__ __half to16<__half>(float v) { return __float2half_rn(v); }

template <class T> static __device__ void mma_of(float d[4], const uint32_t a[4],
                                                 const uint32_t b[2]);
template <> __device__ void mma_of<__nv_bfloat16>(float d[4], const uint32_t a[4],
                                                  const uint32_t b[2])
{
    gb_mma_m16n8k16_bf16(d, a, b);
}
template <> __device__ void mma_of<__half>(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    gb_mma_m16n8k16_f16(d, a, b);
}

template <class T> static uint32_t pack_of(float lo, float hi);
template <> uint32_t pack_of<__nv_bfloat16>(float lo, float hi) { return gb_pack_bf16x2(lo, hi); }
template <> uint32_t pack_of<__half>(float lo, float hi) { return gb_pack_f16x2(lo, hi); }

/* ---- kernels (one warp) -------------------------------------------------------------------- */

/* How a kernel reads B (16x16, k x n) into the two n-tiles' b fragments. */
enum b_path { B_X2 = 0, B_X4 = 1, B_X2_TRANS = 2, B_X4_TRANS = 3, B_PACKED = 4 };
#define B_PATHS 5

/* One lane's C and D: d[tile][e], elements (g + 8 (e / 2), 8 tile + 2 t + e % 2). */
static __device__ void write_d(float *d_out, const float d[2][4])
{
    const int g = (int)threadIdx.x / 4, t = (int)threadIdx.x % 4;
    for (int tile = 0; tile < 2; tile++)
        for (int e = 0; e < 4; e++)
            d_out[(g + 8 * (e / 2)) * 16 + 8 * tile + 2 * t + e % 2] = d[tile][e];
}

/* D = A B + C: A by ldmatrix_x4 from a padded tile, B as `path` says: from B^T (n x k,
 * row-major) by ldmatrix x2 or x4, from B (k x n) by their transposing forms, or packed in
 * registers from global memory at the documented positions. */
template <class T>
static __global__ void product(const T *a, const T *b, const T *bt, const float *c, int path,
                               float *d_out)
{
    __shared__ __align__(16) T sa[16 * LDS];
    __shared__ __align__(16) T sb[16 * LDS];
    const int lane = (int)threadIdx.x, g = lane / 4, t = lane % 4;
    const T *b_source = path == B_X2 || path == B_X4 ? bt : b;
    for (int i = lane; i < 256; i += 32) {
        sa[i / 16 * LDS + i % 16] = a[i];
        sb[i / 16 * LDS + i % 16] = b_source[i];
    }
    __syncwarp();
    uint32_t fa[4], fb[2][2];
    gb_ldmatrix_x4(fa, &sa[lane % 16 * LDS + lane / 16 * 8]);
    uint32_t r4[4];
    switch (path) {
    case B_X2:   /* B^T rows n 0..7 (+8 tile), k 0..7 and 8..15 */
        for (int tile = 0; tile < 2; tile++)
            gb_ldmatrix_x2(fb[tile], &sb[(8 * tile + lane % 8) * LDS + lane / 8 % 2 * 8]);
        break;
    case B_X4:   /* matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) */
        gb_ldmatrix_x4(r4, &sb[(lane / 16 * 8 + lane % 8) * LDS + lane / 8 % 2 * 8]);
        break;
    case B_X2_TRANS:   /* B rows k 0..7 and 8..15, columns n 0..7 (+8 tile) */
        for (int tile = 0; tile < 2; tile++)
            gb_ldmatrix_x2_trans(fb[tile], &sb[(lane % 16) * LDS + 8 * tile]);
        break;
    case B_X4_TRANS:   /* matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15) */
        gb_ldmatrix_x4_trans(r4, &sb[(lane % 16) * LDS + lane / 16 * 8]);
        break;
    default:   /* packed at b[0]: (k 2t..2t+1, n g), b[1]: (k 2t+8.., n g), and A likewise */
        for (int tile = 0; tile < 2; tile++)
            for (int half = 0; half < 2; half++) {
                const int k = 2 * t + 8 * half, n = g + 8 * tile;
                fb[tile][half] = pack_of<T>((float)b[k * 16 + n], (float)b[(k + 1) * 16 + n]);
            }
        for (int i = 0; i < 4; i++) {
            const int row = g + 8 * (i % 2), col = 2 * t + 8 * (i / 2);
            fa[i] = pack_of<T>((float)a[row * 16 + col], (float)a[row * 16 + col + 1]);
        }
    }
    if (path == B_X4 || path == B_X4_TRANS)
        for (int tile = 0; tile < 2; tile++)
            for (int half = 0; half < 2; half++)
                fb[tile][half] = r4[2 * tile + half];
    float d[2][4];
    for (int tile = 0; tile < 2; tile++) {
        for (int e = 0; e < 4; e++)
            d[tile][e] = c[(g + 8 * (e / 2)) * 16 + 8 * tile + 2 * t + e % 2];
        mma_of<T>(d[tile], fa, fb[tile]);
    }
    write_d(d_out, d);
}

/* Counting: one ldmatrix_x4 of the 16x16 A pattern (lanes 0-15 rows 0-15 at column 0,
 * lanes 16-31 the same rows at column 8) from a tile of 16 rows of `stride` 16-bit
 * elements, where column chunk j (8 elements, 16 bytes) of row r is stored at chunk
 * j ^ (r % 8) when `swizzle`. Each phase is one 8x8 matrix: 8 rows of 16 bytes.
 * - stride 24 (48 bytes, padded): the rows start at words 0, 12, 24, 36, ... = banks 0, 12,
 *   24, 4, 16, 28, 8, 20: the 8 rows cover the 32 banks once: 1 wavefront a phase, 4.
 * - stride 64 (128 bytes, a 64-wide K or V tile unpadded): every row starts at bank 0 (and
 *   column 8 at bank 4): the 8 rows of a phase all in banks 0-3: 8 wavefronts a phase, 32.
 * - stride 64 swizzled: row r's chunk j sits at chunk j ^ r: the 8 rows of a phase in 8
 *   different chunks = banks 4 (j ^ r) .. +3: 1 wavefront a phase, 4.
 * Then an ldmatrix_x2 (lanes 0-15) of the padded tile: 2 phases, 2 wavefronts; and two
 * mma of each type, counted by shape. */
static __device__ int at_swizzled(int row, int col, int stride, bool swizzle)
{
    const int chunk = col / 8;
    return row * stride + 8 * (swizzle ? chunk ^ (row % 8) : chunk) + col % 8;
}

template <int STRIDE, bool SWIZZLE>
static __global__ void ldmatrix_pattern(float *out)
{
    __shared__ __align__(16) __nv_bfloat16 tile[16 * STRIDE];
    const int lane = (int)threadIdx.x;
    for (int i = lane; i < 16 * STRIDE; i += 32)
        tile[i] = __float2bfloat16_rn((float)i);
    __syncwarp();
    uint32_t r[4];
    gb_ldmatrix_x4(r, &tile[at_swizzled(lane % 16, lane / 16 * 8, STRIDE, SWIZZLE)]);
    out[lane] = (float)(r[0] ^ r[1] ^ r[2] ^ r[3]);
}

static __global__ void ldmatrix_x2_and_mma(float *out)
{
    __shared__ __align__(16) __half tile[16 * LDS];
    const int lane = (int)threadIdx.x;
    for (int i = lane; i < 16 * LDS; i += 32)
        tile[i] = __float2half_rn(1.0f);
    __syncwarp();
    uint32_t a[4] = {0, 0, 0, 0}, b[2];
    gb_ldmatrix_x2(b, &tile[lane % 16 * LDS]);
    float d[4] = {0, 0, 0, 0};
    gb_mma_m16n8k16_f16(d, a, b);
    gb_mma_m16n8k16_f16(d, a, b);
    gb_mma_m16n8k16_bf16(d, a, b);
    gb_mma_m16n8k16_bf16(d, a, b);
    out[lane] = d[0] + d[1] + d[2] + d[3];
}

/* Broken on purpose, by `mode`: 0 a row address 8 bytes off 16-byte alignment, 1 a row in
 * global memory, 2 a read of a cp.async destination before the wait. */
static __global__ void broken_ldmatrix(const __nv_bfloat16 *g, int mode)
{
    __shared__ __align__(16) __nv_bfloat16 tile[16 * LDS];
    const int lane = (int)threadIdx.x;
    for (int i = lane; i < 16 * LDS; i += 32)
        tile[i] = __float2bfloat16_rn(0.0f);
    __syncwarp();
    uint32_t r[4];
    if (mode == 0) {
        gb_ldmatrix_x4(r, &tile[lane % 16 * LDS + 4]);   // MISALIGNED
    } else if (mode == 1) {
        gb_ldmatrix_x4(r, g + lane % 16 * 16);   // GLOBAL
    } else {
        if (lane < 16)
            __pipeline_memcpy_async(&tile[lane * LDS], g + lane * 16, 16);
        __pipeline_commit();
        gb_ldmatrix_x4(r, &tile[lane % 16 * LDS]);   // UNWAITED
        __pipeline_wait_prior(0);
    }
}

/* ---- wgmma (one or two warpgroups) ------------------------------------------------------ */

template <class T, int TRANS>
static __device__ void wgmma_of(float (&d)[32], const uint32_t (&a)[4], uint64_t desc);
template <> __device__ void wgmma_of<__nv_bfloat16, 0>(float (&d)[32], const uint32_t (&a)[4],
                                                       uint64_t desc)
{
    gb_wgmma_m64n64k16_bf16<0>(d, a, desc);
}
template <> __device__ void wgmma_of<__nv_bfloat16, 1>(float (&d)[32], const uint32_t (&a)[4],
                                                       uint64_t desc)
{
    gb_wgmma_m64n64k16_bf16<1>(d, a, desc);
}
template <> __device__ void wgmma_of<__half, 0>(float (&d)[32], const uint32_t (&a)[4],
                                                uint64_t desc)
{
    gb_wgmma_m64n64k16_f16<0>(d, a, desc);
}
template <> __device__ void wgmma_of<__half, 1>(float (&d)[32], const uint32_t (&a)[4],
                                                uint64_t desc)
{
    gb_wgmma_m64n64k16_f16<1>(d, a, desc);
}

/* The tile (64 x 64) at the first 1024-byte boundary of `raw`, 128-byte swizzled. */
template <class T> static __device__ T *swizzled_tile(T *raw, const T *from)
{
    T *tile = (T *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
    for (int i = (int)threadIdx.x; i < 64 * 64; i += (int)blockDim.x)
        tile[gb_sw128_index(i / 64, i % 64)] = from[i];
    gb_fence_proxy_async();
    __syncthreads();
    return tile;
}

/* The B descriptor of k16 step kk of the tile: K-major (its rows are B's columns) or
 * MN-major (its rows are B's rows). */
template <class T, int TRANS> static __device__ uint64_t step_desc(const T *tile, int kk)
{
    return TRANS ? gb_wgmma_desc(tile + kk * 16 * 64, 64 * 64 * sizeof(T), 1024)
                 : gb_wgmma_desc(tile + kk * 16, 16, 1024);
}

/* Row `row` of a warpgroup's 64 (w, g as wgmma.cuh says) of the thread's accumulator i. */
static __device__ int acc_row(int i)
{
    return (int)threadIdx.x / 32 * 16 + (int)threadIdx.x % 32 / 4 + 8 * (i / 2 % 2);
}
static __device__ int acc_col(int i)
{
    return 8 * (i / 4) + 2 * ((int)threadIdx.x % 4) + i % 2;
}

/* D (64 W x 64) = A (64 W x 64, packed in registers at the documented positions) B + C,
 * B the tile (TRANS 1) or its transpose (0), four k16 steps chained; `nan_before_wait`
 * gets whether d[0] read as NaN between the commit and the wait (the emulator's poison). */
template <class T, int TRANS>
static __global__ void wg_product(const T *a, const T *b, const float *c, float *d_out,
                                  int *nan_before_wait)
{
    __shared__ __align__(16) T raw[64 * 64 + 512];
    const T *tile = swizzled_tile(raw, b);
    const int t = (int)threadIdx.x % 4;
    float d[32];
    for (int i = 0; i < 32; i++)
        d[i] = c[acc_row(i) * 64 + acc_col(i)];
    gb_wgmma_fence();
    for (int kk = 0; kk < 4; kk++) {
        uint32_t fa[4];
        for (int r = 0; r < 4; r++) {
            const int row = acc_row(2 * (r % 2)), k = 16 * kk + 2 * t + 8 * (r / 2);
            fa[r] = pack_of<T>((float)a[row * 64 + k], (float)a[row * 64 + k + 1]);
        }
        wgmma_of<T, TRANS>(d, fa, step_desc<T, TRANS>(tile, kk));
    }
    gb_wgmma_commit();
    if (threadIdx.x == 0)
        *nan_before_wait = isnan(d[0]);
    gb_wgmma_wait<0>();
    for (int i = 0; i < 32; i++)
        d_out[acc_row(i) * 64 + acc_col(i)] = d[i];
}

/* D (64 W x 32) = A B + C with both from shared memory: A the warpgroup's 64 rows of `a`
 * (64 W x 64) in a swizzled tile, B^T the first 32 rows of `b` in another, both K-major,
 * four k16 steps 32 bytes apart. */
template <class T>
static __global__ void wg_product_ss(const T *a, const T *b, const float *c, float *d_out)
{
    __shared__ __align__(16) T raw_b[64 * 64 + 512];
    __shared__ __align__(16) T raw_a[2 * 64 * 64 + 512];
    const T *tile_b = swizzled_tile(raw_b, b);
    T *tile_a = (T *)(((uintptr_t)raw_a + 1023) & ~(uintptr_t)1023);
    for (int i = (int)threadIdx.x; i < (int)blockDim.x / 2 * 64; i += (int)blockDim.x)
        tile_a[gb_sw128_index(i / 64, i % 64)] = a[i];
    gb_fence_proxy_async();
    __syncthreads();
    const T *rows_a = tile_a + (int)threadIdx.x / 128 * 64 * 64;
    float d[16];
    for (int i = 0; i < 16; i++)
        d[i] = c[acc_row(i) * 64 + acc_col(i)];
    gb_wgmma_fence();
    for (int kk = 0; kk < 4; kk++) {
        const uint64_t da = gb_wgmma_desc(rows_a + 16 * kk, 16, 1024);
        const uint64_t db = gb_wgmma_desc(tile_b + 16 * kk, 16, 1024);
        if (std::is_same<T, __half>::value)
            gb_wgmma_m64n32k16_ss_f16(d, da, db);
        else
            gb_wgmma_m64n32k16_ss_bf16(d, da, db);
    }
    gb_wgmma_commit();
    gb_wgmma_wait<0>();
    for (int i = 0; i < 16; i++)
        d_out[acc_row(i) * 64 + acc_col(i)] = d[i];
}

/* Broken on purpose, by `mode` (128 threads; 96 for PARTIAL). */
enum wg_broken {
    WG_NOFENCE, WG_REWRITTEN, WG_DIVERGED, WG_UNRETIRED, WG_PARTIAL, WG_UNCOMMITTED, WG_MODES
};
static __global__ void broken_wgmma(const __nv_bfloat16 *g, int mode)
{
    __shared__ __align__(16) __nv_bfloat16 raw[64 * 64 + 512];
    __nv_bfloat16 *tile = swizzled_tile(raw, g);
    float d[32] = {};
    const uint32_t a[4] = {0, 0, 0, 0};
    if (mode != WG_NOFENCE)
        gb_wgmma_fence();
    const int warp = (int)threadIdx.x / 32;
    if (mode == WG_NOFENCE) {
        gb_wgmma_m64n64k16_bf16<0>(d, a, gb_wgmma_desc(tile, 16, 1024));   // NOFENCE
    } else if (mode == WG_DIVERGED) {
        const uint64_t other = gb_wgmma_desc(tile + 16 * (warp == 1), 16, 1024);
        gb_wgmma_m64n64k16_bf16<0>(d, a, other);   // DIVERGED
    } else if (mode == WG_PARTIAL) {
        gb_wgmma_m64n64k16_bf16<0>(d, a, gb_wgmma_desc(tile, 16, 1024));   // PARTIAL
    } else if (mode == WG_UNRETIRED) {
        gb_wgmma_m64n64k16_bf16<0>(d, a, gb_wgmma_desc(tile, 16, 1024));   // UNRETIRED
    } else {
        gb_wgmma_m64n64k16_bf16<0>(d, a, gb_wgmma_desc(tile, 16, 1024));   // REWRITTEN
    }
    if (mode == WG_UNCOMMITTED)
        gb_wgmma_wait<0>();   // UNCOMMITTED
    gb_wgmma_commit();
    if (mode == WG_REWRITTEN && threadIdx.x == 0)
        tile[0] = __float2bfloat16_rn(1.0f);
    if (mode != WG_UNRETIRED)
        gb_wgmma_wait<0>();
}

/* Counting: one warpgroup, a product with B K-major and one MN-major from the same
 * swizzled tile: each reads 16 core matrices of 8 rows of 16 bytes, the 8 rows of each in
 * 8 different 16-byte chunks of their 128-byte rows (the swizzle), so in 8 different groups
 * of 4 banks: 1 wavefront a core matrix, 4 requests of 4 phases a product: 8 requests and
 * 32 wavefronts, and two operations of m64n64k16.bf16.f32 (counted once per warpgroup). */
static __global__ void wgmma_pattern(const __nv_bfloat16 *g, float *out)
{
    __shared__ __align__(16) __nv_bfloat16 raw[64 * 64 + 512];
    const __nv_bfloat16 *tile = swizzled_tile(raw, g);
    float d[32] = {};
    const uint32_t a[4] = {0, 0, 0, 0};
    gb_wgmma_fence();
    gb_wgmma_m64n64k16_bf16<0>(d, a, step_desc<__nv_bfloat16, 0>(tile, 1));
    gb_wgmma_m64n64k16_bf16<1>(d, a, step_desc<__nv_bfloat16, 1>(tile, 1));
    gb_wgmma_commit();
    gb_wgmma_wait<0>();
    out[threadIdx.x] = d[0];
}

/* ---- the checks --------------------------------------------------------------------------- */

template <class T> static T *device_copy(const std::vector<T> &host)
{
    T *p = nullptr;
    cudaMalloc(&p, host.size() * sizeof(T));
    cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return p;
}

template <class T> static void check_products(const char *type)
{
    std::vector<T> a(256), b(256), bt(256);
    std::vector<float> c(256), want(256);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            a[i * 16 + j] = to16<T>(a_value(i, j));
            b[i * 16 + j] = to16<T>(b_value(i, j));
            bt[j * 16 + i] = b[i * 16 + j];
            c[i * 16 + j] = c_value(i, j);
        }
    for (int i = 0; i < 16; i++)
        for (int n = 0; n < 16; n++) {
            float sum = c[i * 16 + n];
            for (int k = 0; k < 16; k++)
                sum += (float)a[i * 16 + k] * (float)b[k * 16 + n];
            want[i * 16 + n] = sum;
        }
    T *da = device_copy(a), *db = device_copy(b), *dbt = device_copy(bt);
    float *dc = device_copy(c), *dd = nullptr;
    cudaMalloc(&dd, 256 * sizeof(float));
    static const char *const names[B_PATHS] = {"ldmatrix_x2 of B^T", "ldmatrix_x4 of B^T",
        "ldmatrix_x2_trans of B", "ldmatrix_x4_trans of B", "fragments packed in registers"};
    for (int path = 0; path < B_PATHS; path++) {
        std::vector<float> got(256, -1.0f);
        product<T><<<1, 32>>>(da, db, dbt, dc, path, dd);
        const cudaError_t status = cudaMemcpy(got.data(), dd, 256 * sizeof(float),
                                              cudaMemcpyDeviceToHost);
        char what[160];
        snprintf(what, sizeof what, "%s: D = A B + C with A by ldmatrix_x4%s and B by %s: "
                 "bit for bit the scalar reference", type,
                 path == B_PACKED ? " (and again packed)" : "", names[path]);
        emu_check(status == cudaSuccess &&
                      memcmp(got.data(), want.data(), 256 * sizeof(float)) == 0, what);
    }
    emu_free(da, db, dbt, dc, dd);
}

static void check_packing()
{
    /* 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7: to even, 1 (0x3f80); -2 0xc000 */
    emu_check(gb_pack_bf16x2(1.00390625f, -2.0f) == 0xc0003f80u,
              "gb_pack_bf16x2: lo in the low half, ties to even");
    emu_check(gb_pack_bf16x2(1.01171875f, 0.0f) == 0x00003f82u,
              "gb_pack_bf16x2: 1 + 3 2^-8 rounds up to the even 1 + 2^-6");
    /* f16: 1 is 0x3c00, 65504 0x7bff; 1 + 2^-11 is a tie: to even, 1 */
    emu_check(gb_pack_f16x2(1.0f + 1.0f / 2048, 65504.0f) == 0x7bff3c00u,
              "gb_pack_f16x2: lo in the low half, ties to even");
}

static const char *const broken_markers[] = {"MISALIGNED", "GLOBAL", "UNWAITED"};
static const char *const broken_rules[] = {"is not 16-byte aligned",
                                           "is not in the block's shared memory", "still fills"};

static void check_rules(const char *self_file)
{
    __nv_bfloat16 *g = nullptr;
    cudaMalloc(&g, 256 * sizeof(__nv_bfloat16));
    cudaMemset(g, 0, 256 * sizeof(__nv_bfloat16));
    for (int mode = 0; mode < 3; mode++) {
        const std::string where = std::string("test_mma_sync.cu:") +
                                  std::to_string(emu_line_of(self_file, broken_markers[mode]));
        emu_expect_stop(broken_rules[mode], [&] {
            broken_ldmatrix<<<1, 32>>>(g, mode);
            cudaDeviceSynchronize();
        }, {where.c_str(), broken_rules[mode]});
    }
    cudaFree(g);
}

/* wgmma: D against the scalar reference with B K-major and MN-major, one warpgroup and two
 * (whose warps pack different rows of A), and the accumulators' poison before the wait. */
template <class T> static void check_wgmma(const char *type)
{
    const int rows = 128;
    std::vector<T> a(rows * 64), b(64 * 64);
    std::vector<float> c(rows * 64);
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < 64; k++) {
            a[r * 64 + k] = to16<T>(a_value(r, k));
            c[r * 64 + k] = c_value(r, k);
        }
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++)
            b[i * 64 + j] = to16<T>(b_value(i, j));
    T *da = device_copy(a), *db = device_copy(b);
    float *dc = device_copy(c), *dd = nullptr;
    int *nan_flag = nullptr;
    cudaMalloc(&dd, rows * 64 * sizeof(float));
    cudaMalloc(&nan_flag, sizeof(int));
    for (int trans = 0; trans < 2; trans++)
        for (int groups = 1; groups <= 2; groups++) {
            std::vector<float> want(rows * 64), got(rows * 64, -1.0f);
            for (int m = 0; m < 64 * groups; m++)
                for (int n = 0; n < 64; n++) {
                    float sum = c[m * 64 + n];
                    for (int k = 0; k < 64; k++)
                        sum += (float)a[m * 64 + k] *
                               (float)(trans ? b[k * 64 + n] : b[n * 64 + k]);
                    want[m * 64 + n] = sum;
                }
            if (trans)
                wg_product<T, 1><<<1, 128 * groups>>>(da, db, dc, dd, nan_flag);
            else
                wg_product<T, 0><<<1, 128 * groups>>>(da, db, dc, dd, nan_flag);
            int poisoned = 0;
            cudaError_t status = cudaMemcpy(got.data(), dd, 64 * groups * 64 * sizeof(float),
                                            cudaMemcpyDeviceToHost);
            if (status == cudaSuccess)
                status = cudaMemcpy(&poisoned, nan_flag, sizeof(int), cudaMemcpyDeviceToHost);
            char what[200];
            snprintf(what, sizeof what, "%s: wgmma m64n64k16, B %s-major from a 128-byte "
                     "swizzled tile, %d warpgroup(s), 4 k16 steps chained: bit for bit the "
                     "scalar reference", type, trans ? "MN" : "K", groups);
            emu_check(status == cudaSuccess &&
                          memcmp(got.data(), want.data(), 64 * groups * 64 * sizeof(float)) == 0,
                      what);
            snprintf(what, sizeof what, "%s: the accumulators read NaN between the commit and "
                     "the wait (B %s-major, %d warpgroup(s))", type, trans ? "MN" : "K", groups);
            emu_check(status == cudaSuccess && poisoned == 1, what);
        }
    for (int groups = 1; groups <= 2; groups++) {
        std::vector<float> want(rows * 64, 0.0f), got(rows * 64, 0.0f);
        for (int m = 0; m < 64 * groups; m++)
            for (int n = 0; n < 32; n++) {
                float sum = c[m * 64 + n];
                for (int k = 0; k < 64; k++)
                    sum += (float)a[m * 64 + k] * (float)b[n * 64 + k];
                want[m * 64 + n] = sum;
            }
        cudaMemset(dd, 0, rows * 64 * sizeof(float));
        wg_product_ss<T><<<1, 128 * groups>>>(da, db, dc, dd);
        const cudaError_t status = cudaMemcpy(got.data(), dd, rows * 64 * sizeof(float),
                                              cudaMemcpyDeviceToHost);
        char what[200];
        snprintf(what, sizeof what, "%s: wgmma m64n32k16, A and B K-major from 128-byte "
                 "swizzled tiles, %d warpgroup(s), 4 k16 steps chained: bit for bit the scalar "
                 "reference", type, groups);
        emu_check(status == cudaSuccess && memcmp(got.data(), want.data(),
                                                  64 * groups * 64 * sizeof(float)) == 0, what);
    }
    emu_free(da, db, dc, dd, nan_flag);
}

static const char *const wg_markers[WG_MODES] = {"NOFENCE", "REWRITTEN", "DIVERGED",
                                                 "UNRETIRED", "PARTIAL", "UNCOMMITTED"};
static const char *const wg_rules[WG_MODES] = {
    "no wgmma.fence since", "was written before the wgmma.wait_group", "differs from warp",
    "never retired", "a warpgroup is four whole warps", "belong to no group"};

static void check_wgmma_rules(const char *self_file)
{
    __nv_bfloat16 *g = nullptr;
    cudaMalloc(&g, 64 * 64 * sizeof(__nv_bfloat16));
    cudaMemset(g, 0, 64 * 64 * sizeof(__nv_bfloat16));
    for (int mode = 0; mode < WG_MODES; mode++) {
        const std::string where = std::string("test_mma_sync.cu:") +
                                  std::to_string(emu_line_of(self_file, wg_markers[mode]));
        emu_expect_stop(wg_rules[mode], [&] {
            broken_wgmma<<<1, mode == WG_PARTIAL ? 96 : 128>>>(g, mode);
            cudaDeviceSynchronize();
        }, {where.c_str(), wg_rules[mode]});
    }
    cudaFree(g);
}

/* ---- counting --------------------------------------------------------------------------- */

static void launch_counted()
{
    float *out = nullptr;
    cudaMalloc(&out, 32 * sizeof(float));
    ldmatrix_pattern<LDS, false><<<1, 32>>>(out);
    ldmatrix_pattern<64, false><<<1, 32>>>(out);
    ldmatrix_pattern<64, true><<<1, 32>>>(out);
    ldmatrix_x2_and_mma<<<1, 32>>>(out);
    __nv_bfloat16 *g = nullptr;
    cudaMalloc(&g, 64 * 64 * sizeof(__nv_bfloat16));
    cudaMemset(g, 0, 64 * 64 * sizeof(__nv_bfloat16));
    float *wide = nullptr;
    cudaMalloc(&wide, 128 * sizeof(float));
    wgmma_pattern<<<1, 128>>>(g, wide);
    cudaDeviceSynchronize();
    emu_free(out, g, wide);
}

static std::string counted_line(const std::string &path, const std::string &kernel)
{
    std::ifstream in(path);
    for (std::string l; std::getline(in, l);)
        if (l.find("\"kernel\":\"" + kernel) != std::string::npos)
            return l;
    return "";
}

static void expect_field(const std::string &line, const char *kernel, const std::string &field,
                         const char *value)
{
    const std::string key = "\"" + field + "\":";
    const size_t at = line.find(key);
    std::string got = "(absent)";
    if (at != std::string::npos) {
        const size_t from = at + key.size();
        const size_t end = line[from] == '{' ? line.find('}', from) + 1
                                             : line.find_first_of(",}", from);
        got = line.substr(from, end - from);
    }
    char what[256];
    snprintf(what, sizeof what, "%s: %s is %s (expected %s)", kernel, field.c_str(), got.c_str(),
             value);
    emu_check(got == value, what);
}

static void check_counts(const char *self)
{
    char dir[] = "/tmp/gearbox-emu-mma-XXXXXX";
    if (!mkdtemp(dir))
        exit(1);
    const std::string path = std::string(dir) + "/count.jsonl";
    const pid_t pid = fork();
    if (pid == 0) {
        setenv("GEARBOX_CUDA_EMU_COUNT", path.c_str(), 1);
        execl(self, self, "count", (char *)nullptr);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    emu_check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the counting child ran");
    const struct {
        const char *kernel, *field, *value;
    } want[] = {
        {"ldmatrix_pattern<24, false>", "shld_requests", "1"},
        {"ldmatrix_pattern<24, false>", "shld_wavefronts", "4"},
        {"ldmatrix_pattern<64, false>", "shld_requests", "1"},
        {"ldmatrix_pattern<64, false>", "shld_wavefronts", "32"},
        {"ldmatrix_pattern<64, true>", "shld_requests", "1"},
        {"ldmatrix_pattern<64, true>", "shld_wavefronts", "4"},
        {"ldmatrix_x2_and_mma", "shld_requests", "1"},
        {"ldmatrix_x2_and_mma", "shld_wavefronts", "2"},
        {"ldmatrix_x2_and_mma", "mma", "{\"m16n8k16.bf16.f32\":2,\"m16n8k16.f16.f32\":2}"},
        {"wgmma_pattern", "shld_requests", "8"},
        {"wgmma_pattern", "shld_wavefronts", "32"},
        {"wgmma_pattern", "mma", "{\"m64n64k16.bf16.f32\":2}"},
    };
    for (const auto &w : want)
        expect_field(counted_line(path, w.kernel), w.kernel, w.field, w.value);
    unlink(path.c_str());
    rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "count") == 0) {
        launch_counted();
        return 0;
    }
    check_packing();
    check_products<__nv_bfloat16>("bf16");
    check_products<__half>("f16");
    check_rules(__FILE__);
    check_wgmma<__nv_bfloat16>("bf16");
    check_wgmma<__half>("f16");
    check_wgmma_rules(__FILE__);
    check_counts(argv[0]);
    return emu_finish("test_mma_sync");
}
