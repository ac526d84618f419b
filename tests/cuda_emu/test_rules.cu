/* The CUDA rules the emulator asserts, each with a small kernel that breaks it: barriers,
 * warp shuffles and __syncwarp, WMMA, asynchronous copies, launch limits and launch bounds,
 * the bounds of shared and device memory, reads of memory never written or written by
 * another thread without a barrier between. Every broken kernel
 * must be stopped with a message that names the rule and this file's line; the correct
 * kernels beside them must give the right answer in every resume order.
 *
 * Written as CUDA (it is compiled through cu2cc.py like the plugins' .cu files).
 */
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>
#include <string.h>

#include <cmath>
#include <string>
#include <vector>

#include "emu_test.h"

namespace wmma = nvcuda::wmma;

/* ---- kernels: barriers ---------------------------------------------------------------- */

static __global__ void early_return(float *out)
{
    __shared__ float s[64];
    if (threadIdx.x == 5)
        return;
    s[threadIdx.x] = 1.0f;
    __syncthreads();   // BARRIER_AFTER_RETURN
    out[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

static __global__ void barrier_in_both_arms(float *out)
{
    if (threadIdx.x < 32) {
        __syncthreads();   // ARM_ONE
    } else {
        __syncthreads();   // ARM_TWO
    }
    out[threadIdx.x] = 1.0f;
}

/* Thread t reads what thread t + 1 wrote, without a barrier: depending on the order
 * threads run in, the slot is unwritten or written unpublished; either is reported. */
static __global__ void neighbour_without_barrier(float *out)
{
    __shared__ float s[64];
    s[threadIdx.x] = (float)threadIdx.x;
    out[threadIdx.x] = s[(threadIdx.x + 1) % 64];   // NO_BARRIER
}

static __global__ void neighbour_with_barrier(float *out)
{
    __shared__ float s[64];
    s[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

static __global__ void read_shared_unwritten(float *out)
{
    extern __shared__ float dyn[];
    out[threadIdx.x] = dyn[threadIdx.x];   // UNWRITTEN_SHARED
}

/* Each thread fills and reads back its float of dynamic shared memory, `past` floats
 * beyond the start when `past` is set (a pointer past the end of the block's memory). */
static __global__ void own_dynamic_slot(float *out, int past)
{
    extern __shared__ float dyn[];
    float *mine = dyn + threadIdx.x + past;
    *mine = (float)threadIdx.x;   // OWN_SLOT
    out[threadIdx.x] = *mine;
}

/* Thread t writes out[t + shift]: a shift of 1 writes past the end of a launch-sized
 * array, -1 below its start. */
static __global__ void shifted_store(float *out, int shift)
{
    out[(int)threadIdx.x + shift] = 1.0f;   // SHIFTED_STORE
}

static __global__ void read_device_unwritten(float *out, const float *in)
{
    out[threadIdx.x] = in[threadIdx.x];   // UNWRITTEN_DEVICE
}

static __global__ void __launch_bounds__(64) bounded_kernel(float *out)
{
    out[threadIdx.x] = 1.0f;
}

/* A warp's lanes exchange their slots after a shuffle, which meets every lane but orders
 * no memory: without the __syncwarp a lane reads another's write unpublished. */
static __global__ void swap_in_warp(float *out, int with_syncwarp)
{
    __shared__ float s[32];
    const int lane = threadIdx.x % 32;
    s[lane] = (float)lane;
    float v = __shfl_xor_sync(0xffffffffu, (float)lane, 1);
    if (with_syncwarp)
        __syncwarp();
    out[lane] = s[lane ^ 1] + v;   // SWAP_READ
}

/* The cross-entropy block max: each warp's max into partials[warp], then thread 0 takes
 * the max of the partials, which needs a __syncthreads between. */
static __global__ void block_max(float *out, const float *in, int with_barrier)
{
    __shared__ float partials[2];
    float v = in[threadIdx.x];
    for (int o = 16; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x % 32 == 0)
        partials[threadIdx.x / 32] = v;
    if (with_barrier)
        __syncthreads();
    if (threadIdx.x == 0)
        out[0] = fmaxf(partials[0], partials[1]);   // PARTIALS_READ
}

static __global__ void too_much_static_shared(float *out)
{
    __shared__ float big[16 << 10];   // STATIC_TOO_BIG (64 KiB)
    big[threadIdx.x] = 1.0f;
    out[threadIdx.x] = big[threadIdx.x];
}

/* ---- kernels: warp collectives -------------------------------------------------------- */

/* mode: 0 correct butterfly, 1 the upper half calls with the lower half's mask, 2 lanes
 * of the mask at two different calls, 3 a lane skips the shuffle, 4 width 3, 5 masks
 * that differ between lanes, 6 overlapping masks (lane 31 in two at once) */
static __global__ void shuffles(float *out, int mode)
{
    const int lane = threadIdx.x % 32;
    float v = (float)lane;
    if (mode == 0) {
        for (int o = 16; o > 0; o /= 2)
            v += __shfl_xor_sync(0xffffffffu, v, o);
    } else if (mode == 1) {
        v += __shfl_xor_sync(0x0000ffffu, v, 1);   // HALF_MASK
    } else if (mode == 2) {
        if (lane < 16)
            v += __shfl_xor_sync(0xffffffffu, v, 1);   // CALL_ONE
        else
            v += __shfl_xor_sync(0xffffffffu, v, 1);   // CALL_TWO
    } else if (mode == 3) {
        if (lane == 7)
            return;
        v += __shfl_xor_sync(0xffffffffu, v, 1);   // SKIPPED_LANE
    } else if (mode == 4) {
        v += __shfl_xor_sync(0xffffffffu, v, 1, 3);   // ODD_WIDTH
    } else if (mode == 5) {
        v += __shfl_xor_sync(lane < 16 ? 0xffffffffu : 0x7fffffffu, v, 1);   // MASKS_DIFFER
    } else if (mode == 6) {   // one line: whichever call comes second is reported
        if (lane < 2 || lane == 31) __syncwarp(lane == 1 ? 0x80000002u : 0x80000001u);   // OVERLAP
    }
    out[threadIdx.x] = v;
}

/* Each lane's shuffles with a source outside its group or warp: up/down do not wrap. */
static __global__ void shuffle_edges(float *up, float *down, float *idx, float *half)
{
    const int lane = threadIdx.x % 32;
    const float v = (float)lane;
    up[lane] = __shfl_up_sync(0xffffffffu, v, 3);
    down[lane] = __shfl_down_sync(0xffffffffu, v, 3);
    idx[lane] = __shfl_sync(0xffffffffu, v, 33);   // lane 1
    half[lane] = __shfl_down_sync(0xffffffffu, v, 1, 16);
}

/* Lanes 0-15 shuffle among themselves but read lane 20, which is not in their mask. */
static __global__ void read_inactive_lane(float *out)
{
    const int lane = threadIdx.x % 32;
    float v = (float)lane;
    if (lane < 16)
        v = __shfl_sync(0x0000ffffu, v, 20);   // INACTIVE_SOURCE
    out[lane] = v;
}

/* mode: 0 every warp votes whether its lane is odd or 5, 1 a lane skips the ballot, 2 a
 * mask of half the warp */
static __global__ void ballots(unsigned *out, int mode)
{
    const int lane = threadIdx.x % 32;
    unsigned bits = 0;
    if (mode == 0) {
        bits = __ballot_sync(0xffffffffu, lane % 2 == 1 || lane == 5);
    } else if (mode == 1) {
        if (lane == 9)
            return;
        bits = __ballot_sync(0xffffffffu, 1);   // BALLOT_SKIPPED
    } else if (mode == 2) {
        bits = __ballot_sync(0x0000ffffu, 1);   // BALLOT_HALF
    }
    out[threadIdx.x] = bits;
}

/* ---- kernels: WMMA ------------------------------------------------------------------- */

/* mode: 0 correct, 1 lanes pass different pointers, 2 misaligned pointer, 3 odd ldm,
 * 4 only 16 lanes store, 5 read the fragment by position (wrong on purpose) */
static __global__ void wmma_tile(float *out, const __half *a, const __half *b, int mode)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    const int lane = threadIdx.x % 32;
    wmma::fill_fragment(fc, 0.0f);
    if (mode == 1)
        wmma::load_matrix_sync(fa, a + (lane < 16 ? 0 : 16), 16);   // POINTERS_DIFFER
    else if (mode == 2)
        wmma::load_matrix_sync(fa, a + 1, 16);   // MISALIGNED
    else if (mode == 3)
        wmma::load_matrix_sync(fa, a, 15);   // ODD_LDM
    else
        wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    if (mode == 4 && lane >= 16)
        return;
    if (mode == 5) {
        out[lane] = fc.x[0];   // position 0 of each lane's fragment
        return;
    }
    wmma::store_matrix_sync(out, fc, 16, wmma::mem_row_major);   // STORE
}

/* ---- kernels: asynchronous copies ------------------------------------------------------ */

/* A 16x16 f16 tile into shared memory by cp.async, 16 bytes a lane, then a WMMA product.
 * mode: 0 correct, 1 no wait before the WMMA load, 2 a wait but no __syncthreads before
 * it, 3 a 12-byte copy, 4 lane 0 reads its destination before the wait (gets NaN), 5 the
 * threads exit without waiting, 6 a __syncwarp instead of the __syncthreads (one warp) */
static __global__ void async_tile(float *out, const __half *a, const __half *b, int mode)
{
    __shared__ __align__(32) __half tile[16 * 16];
    const int lane = threadIdx.x % 32;
    __pipeline_memcpy_async(tile + 8 * lane, a + 8 * lane, mode == 3 ? 12 : 16);   // COPY
    __pipeline_commit();
    if (mode == 4 && lane == 0) out[0] = __half2float(tile[0]);   // READ_EARLY
    if (mode == 5)
        return;
    if (mode != 1)
        __pipeline_wait_prior(0);
    if (mode == 6)
        __syncwarp();
    else if (mode != 1 && mode != 2)
        __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, tile, 16);   // READ_TILE
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    if (mode != 4)
        wmma::store_matrix_sync(out, fc, 16, wmma::mem_row_major);
}

/* ---- host side ------------------------------------------------------------------------ */


template <class T> static T *device_array(size_t n, const T *init = nullptr)
{
    T *p = nullptr;
    cudaMalloc((void **)&p, n * sizeof(T));
    if (init)
        cudaMemcpy(p, init, n * sizeof(T), cudaMemcpyHostToDevice);
    return p;
}

template <class T> static std::vector<T> host_copy(const T *d, size_t n)
{
    std::vector<T> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
}

static std::string at_line(const char *marker)
{
    return "test_rules.cu:" + std::to_string(emu_line_of(__FILE__, marker)) + ":";
}

/* `launch` queues kernels; once the device has run them, the emulator must have stopped
 * at the line of `marker`, stating `rule`. */
static void stop_at(const char *what, const std::function<void()> &launch, const char *marker,
                    const char *rule)
{
    std::string where = at_line(marker);
    emu_expect_stop(what, [&] {
        launch();
        cudaDeviceSynchronize();
    }, {where.c_str(), rule});
}

/* A mode of a test kernel that breaks one rule: the case, the marker of the line the report
 * must name, and a fragment of the rule it must state. */
struct broken_mode {
    int mode;
    const char *what, *marker, *rule;
};

/* Each mode, launched by `launch`, is stopped as stop_at expects. */
static void stop_each(const std::function<void(int)> &launch,
                      std::initializer_list<broken_mode> modes)
{
    for (const broken_mode &b : modes)
        stop_at(b.what, [&] { launch(b.mode); }, b.marker, b.rule);
}

static void barrier_rules()
{
    float *out = device_array<float>(64);
    stop_at("an early return before a barrier", [&] { early_return<<<1, 64>>>(out); },
            "BARRIER_AFTER_RETURN", "exited");
    /* whichever arm's threads arrive second are stopped, naming the other arm's line too:
     * the report holds both lines, in an order that depends on the resume order */
    std::string arm_one = "test_rules.cu:" + std::to_string(emu_line_of(__FILE__, "ARM_ONE"));
    std::string arm_two = "test_rules.cu:" + std::to_string(emu_line_of(__FILE__, "ARM_TWO"));
    emu_expect_stop("barriers in the two arms of an if", [&] {
        barrier_in_both_arms<<<1, 64>>>(out);
        cudaDeviceSynchronize();
    }, {arm_one.c_str(), arm_two.c_str(), "different __syncthreads"});
    neighbour_with_barrier<<<1, 64>>>(out);
    std::vector<float> h = host_copy(out, 64);
    bool right = true;
    for (int i = 0; i < 64; i++)
        right = right && h[(size_t)i] == (float)((i + 1) % 64);
    emu_check(right, "a neighbour's shared memory read after a barrier is its value");
    stop_at("a neighbour's shared memory read without a barrier",
            [&] { neighbour_without_barrier<<<1, 64>>>(out); },
            "NO_BARRIER", "of the __shared__ object declared at");
    stop_at("64 KiB of static shared memory", [&] { too_much_static_shared<<<1, 32>>>(out); },
            "STATIC_TOO_BIG", "above its limit");
    cudaFree(out);
}

static void ballot_rules()
{
    unsigned *out = device_array<unsigned>(64);
    ballots<<<1, 64>>>(out, 0);
    std::vector<unsigned> h = host_copy(out, 64);
    emu_check(h[0] == 0xaaaaaaaau && h[31] == 0xaaaaaaaau && h[63] == 0xaaaaaaaau,
              "__ballot_sync gives every lane of the warp the warp's votes, lane l in bit l");
    stop_each([&](int mode) { ballots<<<1, 64>>>(out, mode); }, {
        {1, "a lane that skips a ballot", "BALLOT_SKIPPED", "lane 9"},
        {2, "a ballot of half a warp", "BALLOT_HALF", "whole warps"},
    });
    cudaFree(out);
}

static void shuffle_rules()
{
    float *out = device_array<float>(64);
    shuffles<<<1, 64>>>(out, 0);
    std::vector<float> h = host_copy(out, 64);
    emu_check(h[0] == 496.0f && h[63] == 496.0f, "a butterfly of __shfl_xor_sync sums the warp");
    stop_each([&](int mode) { shuffles<<<1, 64>>>(out, mode); }, {
        {1, "a shuffle whose mask lacks the caller", "HALF_MASK", "does not name the calling lane"},
        {2, "lanes of one mask at two different shuffles", "CALL_TWO", "must reach the same call"},
        {3, "a lane that skips a full-mask shuffle", "SKIPPED_LANE", "lane 7"},
        {4, "a shuffle of width 3", "ODD_WIDTH", "width 3"},
        {5, "lanes that pass different masks", "MASKS_DIFFER", "mask 0x7fffffff"},
        /* by arrival order: the overlap, the masks that differ, or lane 31 gone from the
         * second call once the first released it: each a report of the same broken line */
        {6, "overlapping masks of concurrent __syncwarp", "OVERLAP", "__syncwarp"},
    });
    float *up = device_array<float>(32), *down = device_array<float>(32);
    float *idx = device_array<float>(32), *half = device_array<float>(32);
    shuffle_edges<<<1, 32>>>(up, down, idx, half);
    std::vector<float> u = host_copy(up, 32), d = host_copy(down, 32), i = host_copy(idx, 32),
                       hf = host_copy(half, 32);
    emu_check(u[0] == 0 && u[2] == 2 && u[3] == 0 && u[31] == 28,
              "__shfl_up_sync does not wrap: lanes below delta keep their value");
    emu_check(d[31] == 31 && d[29] == 29 && d[28] == 31 && d[0] == 3,
              "__shfl_down_sync does not wrap: lanes above 31 - delta keep their value");
    emu_check(i[0] == 1 && i[31] == 1, "__shfl_sync takes the source lane modulo the width");
    emu_check(hf[15] == 15 && hf[14] == 15 && hf[31] == 31 && hf[16] == 17,
              "__shfl_down_sync with width 16 stays in each half");
    stop_at("a shuffle that reads a lane outside its mask",
            [&] { read_inactive_lane<<<1, 32>>>(out); },
            "INACTIVE_SOURCE", "not in the mask");
    bool aborted = false;
    std::string err = emu_run_child([&] {
        setenv("GEARBOX_CUDA_EMU_ON_ERROR", "continue", 1);
        read_inactive_lane<<<1, 32>>>(out);
        std::vector<float> r = host_copy(out, 32);
        _exit(std::isnan(r[0]) && r[20] == 20.0f ? 0 : 1);
    }, &aborted);
    emu_check(!aborted && err.find("not in the mask") != std::string::npos,
              "with GEARBOX_CUDA_EMU_ON_ERROR=continue a read of an inactive lane is "
              "reported and yields NaN");
    emu_free(up, down, idx, half, out);
}

/* The tile kernels' inputs on the host and the device, small integers so that every
 * product is exact (A of `a_halves` halves, B of one 16x16 tile), and their output. */
struct tiles {
    std::vector<__half> ha, hb;
    __half *a, *b;
    float *out;

    explicit tiles(int a_halves) : ha(cycle(a_halves, 7)), hb(cycle(256, 5))
    {
        a = device_array<__half>(ha.size(), ha.data());
        b = device_array<__half>(hb.size(), hb.data());
        out = device_array<float>(256);
    }
    ~tiles() { emu_free(a, b, out); }

    /* Whether c holds the 16x16 product of A's first tile and B, row-major. */
    bool is_product(const std::vector<float> &c) const
    {
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                float want = 0;
                for (int k = 0; k < 16; k++)
                    want += __half2float(ha[(size_t)(i * 16 + k)]) *
                            __half2float(hb[(size_t)(k * 16 + j)]);
                if (c[(size_t)(i * 16 + j)] != want)
                    return false;
            }
        return true;
    }

    /* n halves cycling through the integers around 0 with period `period`. */
    static std::vector<__half> cycle(int n, int period)
    {
        std::vector<__half> h((size_t)n);
        for (int i = 0; i < n; i++)
            h[(size_t)i] = __float2half((float)(i % period - period / 2));
        return h;
    }
};

static void wmma_rules()
{
    const tiles t(512);
    wmma_tile<<<1, 32>>>(t.out, t.a, t.b, 0);
    std::vector<float> c = host_copy(t.out, 256);
    emu_check(t.is_product(c), "wmma load, mma and store give the 16x16 product");
    stop_each([&](int mode) { wmma_tile<<<1, 32>>>(t.out, t.a, t.b, mode); }, {
        {1, "WMMA lanes that pass different pointers", "POINTERS_DIFFER", "all 32 lanes must pass the same"},
        {2, "a misaligned WMMA pointer", "MISALIGNED", "not 32-byte aligned"},
        {3, "an odd WMMA ldm", "ODD_LDM", "ldm 15 is not a multiple of 8"},
        {4, "a WMMA store by 16 lanes", "STORE", "exited"},
    });
    wmma_tile<<<1, 32>>>(t.out, t.a, t.b, 5);
    std::vector<float> x = host_copy(t.out, 32);
    int naive = 0;   // lane l, slot 0 as row l / 2, column 8 (l % 2): a plausible layout
    for (int l = 0; l < 32; l++)
        naive += x[(size_t)l] == c[(size_t)((l / 2) * 16 + 8 * (l % 2))];
    emu_check(naive < 16, "a fragment's elements are scrambled: indexing x[] by position "
              "does not give the element a fixed layout would");
}

static void async_copy_rules()
{
    const tiles t(256);
    async_tile<<<1, 32>>>(t.out, t.a, t.b, 0);
    std::vector<float> c = host_copy(t.out, 256);
    emu_check(t.is_product(c), "cp.async, wait, __syncthreads, then WMMA: the 16x16 product");
    async_tile<<<1, 32>>>(t.out, t.a, t.b, 6);
    emu_check(host_copy(t.out, 256) == c, "a one-warp block: wait, __syncwarp, then WMMA: the "
              "same product");
    stop_each([&](int mode) { async_tile<<<1, 32>>>(t.out, t.a, t.b, mode); }, {
        {1, "a WMMA load of a cp.async destination before the wait", "READ_TILE", "still fills"},
        {2, "a WMMA load of other threads' waited copies without __syncthreads", "READ_TILE",
         "no __syncthreads"},
        {3, "a cp.async of 12 bytes", "COPY", "it copies 4, 8 or 16"},
        {4, "a plain read of a cp.async destination before the wait", "READ_EARLY",
         "still fills"},
        {5, "threads that exit with copies not waited for", "COPY", "never waited"},
    });
}

static void launch_rules()
{
    float *out = device_array<float>(64);
    cudaGetLastError();
    neighbour_with_barrier<<<1, 2048>>>(out);
    emu_check(cudaGetLastError() == cudaErrorInvalidConfiguration,
              "2048 threads per block: cudaErrorInvalidConfiguration");
    neighbour_with_barrier<<<dim3(1, 70000), 64>>>(out);
    emu_check(cudaGetLastError() == cudaErrorInvalidConfiguration,
              "a grid of 70000 in y: cudaErrorInvalidConfiguration");
    own_dynamic_slot<<<1, 32, 64 << 10>>>(out, 0);
    emu_check(cudaGetLastError() == cudaErrorInvalidValue,
              "64 KiB of dynamic shared memory without the attribute: refused");
    emu_check(cudaFuncSetAttribute(own_dynamic_slot, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   64 << 10) == cudaSuccess, "the attribute raises the limit");
    own_dynamic_slot<<<1, 32, 64 << 10>>>(out, 0);
    emu_check(cudaGetLastError() == cudaSuccess, "64 KiB with the attribute: launched");
    cudaDeviceSynchronize();
    emu_check(cudaFuncSetAttribute(own_dynamic_slot, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   228 << 10) == cudaErrorInvalidValue,
              "the attribute above 227 KiB (sm_90): refused");
    cudaFree(out);
}

/* __launch_bounds__(64) launched with 128 threads: refused as CUDA refuses it, with a
 * line that names the kernel and its bounds. */
static void launch_bounds_rule()
{
    float *out = device_array<float>(128);
    cudaGetLastError();
    bounded_kernel<<<1, 64>>>(out);
    emu_check(cudaGetLastError() == cudaSuccess, "a block within its __launch_bounds__: launched");
    bool aborted = false;
    std::string err = emu_run_child([&] {
        cudaGetLastError();
        bounded_kernel<<<1, 128>>>(out);
        _exit(cudaGetLastError() == cudaErrorLaunchOutOfResources ? 0 : 1);
    }, &aborted);
    emu_check(!aborted && err.find("launch of bounded_kernel: a block of 128 threads, above the "
                                   "64 of the kernel's __launch_bounds__") != std::string::npos &&
                  err.find("too many resources requested for launch") != std::string::npos,
              "a block above __launch_bounds__: cudaErrorLaunchOutOfResources, naming the kernel");
    cudaDeviceSynchronize();
    cudaFree(out);
}

/* Shared and device memory end where the launch and the allocation say, to the byte. */
static void memory_bound_rules()
{
    float *out = device_array<float>(100);
    own_dynamic_slot<<<1, 32, 32 * sizeof(float)>>>(out, 0);
    std::vector<float> h = host_copy(out, 32);
    emu_check(h[31] == 31.0f, "each thread's float of dynamic shared memory holds its value");
    stop_at("dynamic shared memory a few bytes short of the block's need",
            [&] { own_dynamic_slot<<<1, 32, 32 * sizeof(float) - 3>>>(out, 0); }, "OWN_SLOT",
            "at byte 124 of the dynamic shared memory (extern __shared__), which has 125 "
            "bytes: out of bounds");
    stop_at("a pointer past the end of the block's shared memory",
            [&] { own_dynamic_slot<<<1, 32, 32 * sizeof(float)>>>(out, 32); }, "OWN_SLOT",
            "of the dynamic shared memory (extern __shared__), which has 128 bytes: out of "
            "bounds");
    stop_at("a store one float past the end of a device allocation",
            [&] { shifted_store<<<1, 100>>>(out, 1); },
            "SHIFTED_STORE", "writes 4 bytes at byte 400 of device allocation");
    stop_at("a store one float below the start of a device allocation",
            [&] { shifted_store<<<1, 100>>>(out, -1); },
            "SHIFTED_STORE", "writes 4 bytes at byte -4 of device allocation");
    cudaFree(out);
}

/* What a GPU leaves undefined is reported at the read, whatever the value read. */
static void undefined_read_rules()
{
    float *out = device_array<float>(64), *in = device_array<float>(64);
    stop_at("a read of dynamic shared memory never written",
            [&] { read_shared_unwritten<<<1, 32, 32 * sizeof(float)>>>(out); },
            "UNWRITTEN_SHARED", "was never written (a read of uninitialised shared memory)");
    stop_at("a read of device memory never written",
            [&] { read_device_unwritten<<<1, 32>>>(out, in); },
            "UNWRITTEN_DEVICE", "never written (a read of uninitialised device memory)");
    std::vector<float> ones(64, 1.0f);
    cudaMemcpy(in, ones.data(), sizeof(float) * 64, cudaMemcpyHostToDevice);
    swap_in_warp<<<1, 32>>>(out, 1);
    std::vector<float> h = host_copy(out, 32);
    emu_check(h[0] == 2.0f && h[31] == 60.0f, "lanes swap their slots after a __syncwarp");
    stop_at("a lane reading another lane's write with no __syncwarp between",
            [&] { swap_in_warp<<<1, 32>>>(out, 0); },
            "SWAP_READ", "with no __syncthreads (nor a __syncwarp of both lanes)");
    block_max<<<1, 64>>>(out, in, 1);
    emu_check(host_copy(out, 1)[0] == 1.0f, "the block max with a barrier before the partials");
    stop_at("the block max reading other warps' partials with no __syncthreads",
            [&] { block_max<<<1, 64>>>(out, in, 0); },
            "PARTIALS_READ", "of the __shared__ object declared at");
    emu_free(out, in);
}

int main()
{
    barrier_rules();
    shuffle_rules();
    ballot_rules();
    wmma_rules();
    async_copy_rules();
    launch_rules();
    launch_bounds_rule();
    memory_bound_rules();
    undefined_read_rules();
    return emu_finish("test_rules");
}
