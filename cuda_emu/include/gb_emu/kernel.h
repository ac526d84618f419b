/* The device side of the CUDA emulator, as the .cu files see it once cu2cc.py has
 * rewritten their launches and __shared__ declarations: the built-in variables, barriers,
 * warp shuffles, shared memory, and the launch helper. Included through the emulator's
 * cuda_runtime.h, never by hand.
 *
 * Every call that names a rule takes the .cu file and line (the macros below pass
 * __FILE__ and __LINE__, which cu2cc.py's #line keeps pointing at the .cu), so a broken
 * rule is reported where it was broken.
 */
#ifndef GB_EMU_KERNEL_H
#define GB_EMU_KERNEL_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

namespace gb_emu {

/* What the built-in variables read for the CUDA thread running now. */
struct thread_view {
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
};
const thread_view &here();

/* ---- launches ---------------------------------------------------------------------- */

/* Every kernel, template instances too, is listed in its object's section
 * __patchable_function_entries (the attribute's one no-op instruction at its entry is the
 * price), so the emulated plugins say which of their functions are kernels
 * (tests/cuda_emu/test_launched.sh). */
#undef __global__
#define __global__ __attribute__((patchable_function_entry(1, 0)))

struct launch_site {
    const char *file;
    int line;
    const char *kernel;   /* as written at the launch, e.g. "forward_kernel<E, DP>" */
};

/* A kernel's __launch_bounds__ (max_threads 0: it has none) and where they are written.
 * Its minimum of resident blocks and cluster size shape a GPU's register allocation, which
 * the emulator does not model: declare_bounds takes them and lets them go. */
struct launch_bounds {
    unsigned max_threads;
    const char *file;
    int line;
};

/* cu2cc.py starts every kernel's body with
 *   if (bounds_probe()) return declare_bounds(__FILE__, __LINE__, <its __launch_bounds__>);
 * probe_bounds runs `call_kernel` (the kernel with the launch's arguments) with the probe
 * on, so the kernel only says its bounds, in its own scope (template arguments and all). */
bool bounds_probe();
void declare_bounds(const char *file, int line, unsigned max_threads = 0,
                    unsigned min_blocks = 0, unsigned max_blocks_per_cluster = 0);
launch_bounds probe_bounds(const std::function<void()> &call_kernel);

/* Checks the configuration against CUDA's limits and the kernel's bounds (a failure sets
 * cudaGetLastError's error and says why on stderr) and queues `thread_body`, which runs
 * the kernel for one CUDA thread, on stream. */
void submit_kernel(const launch_site &site, const void *kernel, const launch_bounds &bounds,
                   dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   std::function<void()> thread_body);

/* `kernel<<<grid, block, shared, stream>>>(args...)` is written by cu2cc.py as
 * launch(__FILE__, __LINE__, "kernel", kernel, grid, block, shared, stream)(args...): the
 * arguments are converted to the kernel's parameter types and copied at the launch, as
 * CUDA does. */
template <class... P> class launcher {
  public:
    launcher(launch_site site, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared,
             cudaStream_t stream)
        : site_(site), kernel_(kernel), grid_(grid), block_(block), shared_(shared),
          stream_(stream)
    {
    }

    template <class... A> void operator()(A &&...args) const
    {
        static_assert(sizeof...(A) == sizeof...(P), "a launch passes every kernel parameter");
        std::tuple<std::decay_t<P>...> copied(static_cast<P>(std::forward<A>(args))...);
        void (*kernel)(P...) = kernel_;
        const std::function<void()> body = [kernel, copied]() { std::apply(kernel, copied); };
        submit_kernel(site_, reinterpret_cast<const void *>(kernel), probe_bounds(body), grid_,
                      block_, shared_, stream_, body);
    }

  private:
    launch_site site_;
    void (*kernel_)(P...);
    dim3 grid_, block_;
    size_t shared_;
    cudaStream_t stream_;
};

template <class... P>
launcher<P...> launch(const char *file, int line, const char *name, void (*kernel)(P...),
                      dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream)
{
    return launcher<P...>(launch_site{file, line, name}, kernel, grid, block, shared_bytes,
                          stream);
}

/* ---- shared memory ----------------------------------------------------------------- */

/* The block's dynamic shared memory (256-byte aligned, every byte 0xff at block start). */
void *dynamic_shared_base();
template <class T> T *dynamic_shared()
{
    return static_cast<T *>(dynamic_shared_base());
}

/* The block's object for the __shared__ declaration identified by `site` (allocated by the
 * first thread of the block that reaches it, every byte 0xff). */
void *block_static(const void *site, size_t bytes, size_t align, const char *file, int line);
template <class T> T &block_shared(const void *site, const char *file = __builtin_FILE(),
                                   int line = __builtin_LINE())
{
    static_assert(std::is_trivially_default_constructible<T>::value,
                  "__shared__ objects have no constructors");
    return *static_cast<T *>(block_static(site, sizeof(T), alignof(T), file, line));
}

/* ---- asynchronous copies (cp.async; cuda_pipeline.h) ---------------------------------- */

/* __pipeline_memcpy_async: checked (4, 8 or 16 bytes, both ends aligned, shared memory
 * from global), and the destination reads as 0xff bytes (NaN) until the copying thread's
 * __pipeline_wait_prior performs it; the bytes become readable by other threads at the
 * next __syncthreads (by the copying warp's threads at a full-warp __syncwarp). */
void async_copy_issue(const char *file, int line, void *dst, const void *src, size_t bytes,
                      size_t zfill);
void async_commit(const char *file, int line);
void async_wait_prior(const char *file, int line, size_t prior);
/* Stops the kernel when `bytes` of shared memory at p, read by `what` (a WMMA load, whose
 * own loads run on one lane's behalf), lie outside the block's shared objects, are the
 * destination of an asynchronous copy not yet waited for, or were written by another
 * thread (a copy: by the thread that waited for it) with no __syncthreads since, nor a
 * __syncwarp of both lanes. Memory outside the block's shared memory is not checked. */
void shared_read(const char *file, int line, const char *what, const void *p, size_t bytes);
/* Whether p lies in the running block's shared memory (where ldmatrix reads). */
bool shared_holds(const void *p);
/* The shared-window address of p (__cvta_generic_to_shared: its offset in the block's
 * shared area, whose start is 4096-byte aligned, so the low bits a swizzle keys on are
 * the pointer's), stopping the kernel when p lies outside the area; and back. */
uint32_t shared_window(const char *file, int line, const void *p);
const void *shared_window_pointer(uint32_t address);

/* ---- barriers and warp collectives --------------------------------------------------- */

void syncthreads(const char *file, int line);
void syncwarp(const char *file, int line, unsigned mask);
/* __syncwarp() and __syncwarp(mask) through one macro: the call site, then the mask. */
struct syncwarp_at {
    const char *file;
    int line;
    void operator()(unsigned mask = 0xffffffffu) const { syncwarp(file, line, mask); }
};

enum shuffle_kind { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };
/* The rendezvous behind the __shfl*_sync functions, on a value's bits; a lane that reads
 * an inactive lane gets `poison` (and a report). */
uint64_t shuffle_bits(shuffle_kind kind, const char *file, int line, unsigned mask,
                      uint64_t bits, uint64_t poison, int arg, int width);

template <class T> uint64_t poison_bits()
{
    if (std::is_floating_point<T>::value) {
        T nan = std::numeric_limits<T>::quiet_NaN();
        uint64_t bits = 0;
        std::memcpy(&bits, &nan, sizeof nan);
        return bits;
    }
    return 0xdeadbeefdeadbeefull;
}

template <class T>
T shuffle(shuffle_kind kind, const char *file, int line, unsigned mask, T value, int arg,
          int width = 32)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "shuffles move values of at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof value);
    bits = shuffle_bits(kind, file, line, mask, bits, poison_bits<T>(), arg, width);
    T out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
}

/* A warp-wide operation on per-lane data (WMMA): every lane of the warp arrives with the
 * same `key` and a pointer to its own data; when the last arrives, `action` runs once with
 * the 32 lanes' pointers, in lane order. `what` names the call in reports. */
struct collective_key {
    const void *ptr;
    unsigned ldm;
    int layout;
};
void warp_collective(const char *file, int line, const char *what, const collective_key &key,
                     void *mine, const std::function<void(void *const *lanes)> &action);

/* A broken rule found in device code (a WMMA pointer's alignment, say): reported with the
 * kernel, block, thread and file:line, and the process aborts. */
[[noreturn]] void device_violation(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* CUDA's __ballot_sync for a whole warp: bit l of the result is lane l's predicate. A
 * collective of the 32 lanes, so a lane that does not arrive is reported as for WMMA; a
 * mask of fewer lanes stops the kernel (no kernel of the tree asks for one). */
inline unsigned ballot(const char *file, int line, unsigned mask, int predicate)
{
    if (mask != 0xffffffffu)
        device_violation(file, line, "__ballot_sync with mask 0x%08x: the emulator takes only "
                         "whole warps (0xffffffff)", mask);
    struct vote {
        int predicate;
        unsigned bits;
    } mine = {predicate != 0, 0u};
    warp_collective(file, line, "__ballot_sync", collective_key{nullptr, 0, 0}, &mine,
                    [](void *const *lanes) {
                        unsigned bits = 0;
                        for (int l = 0; l < 32; l++)
                            bits |= (unsigned)((const vote *)lanes[l])->predicate << l;
                        for (int l = 0; l < 32; l++)
                            ((vote *)lanes[l])->bits = bits;
                    });
    return mine.bits;
}

/* ---- wgmma's asynchronous groups (sm_90a; wgmma.cuh) ---------------------------------- */

/* The state a thread keeps for wgmma.mma_async, whose products wgmma.cuh's helpers compute
 * at the issue and the core retires as PTX orders them:
 *   wgmma_fence        wgmma.fence: the thread may issue again (needed before its first
 *                      wgmma and after every wait_group, stricter than PTX, which asks for
 *                      it only after the registers a wgmma reads were written);
 *   wgmma_chain_input  the C a product about to be issued on the n accumulators d reads,
 *                      into `in`: their newest pending values (chained, as the hardware
 *                      chains products of one shape), or d itself;
 *   wgmma_issue        the product's `values` wait in the open group and d reads as NaN
 *                      until the wait that retires it; `operands` (n_bytes): the shared
 *                      memory it read, which must be unchanged at its retirement;
 *   wgmma_commit       wgmma.commit_group;
 *   wgmma_wait         wgmma.wait_group N: every group but the newest N retires.
 * A thread that exits with a product not retired stops the kernel, and so does a warp of a
 * warpgroup whose sequence of products (warpgroup_key) differs from its siblings', checked
 * as each one issues and when the block ends. */
void wgmma_fence(const char *file, int line);
void wgmma_chain_input(float *d, int n, float *in);
void wgmma_issue(const char *file, int line, float *d, int n, const float *values,
                 const void *operands, size_t n_bytes);
void wgmma_commit(const char *file, int line);
void wgmma_wait(const char *file, int line, int newest_left);
/* A product as the warps of a warpgroup must agree on it (its shape and kind, its shared
 * operands' descriptors), reported once per warp by the warp's last lane to issue it. */
struct warpgroup_key {
    unsigned n;
    int kind;
    uint64_t desc_a, desc_b;
};
void wgmma_warp_issued(const char *file, int line, const warpgroup_key &key);

/* ---- atomics (src/atomics.cc) ---------------------------------------------------------- */

/* atomicAdd on device memory: checked as a read and a write of the calling thread (within
 * an allocation, of bytes something wrote), done atomically (a grid's blocks run on several
 * host threads), counted in the counting mode; returns the old value. Shared-memory atomics
 * stop the kernel: the emulator does not implement them. */
float atomic_add(const char *file, int line, float *p, float value);
int atomic_add(const char *file, int line, int *p, int value);
unsigned atomic_add(const char *file, int line, unsigned *p, unsigned value);

/* ---- counting (GEARBOX_CUDA_EMU_COUNT; src/counters.cc) ------------------------------ */

/* Whether the counting mode is on. */
bool counting_on();
/* A WMMA fragment's load or store, counted by the accesses the GPU makes for it, not by
 * the emulator's element loop (README.md, "WMMA by its real access pattern"): a 16-bit
 * matrix_a or matrix_b fragment as ldmatrix.x4 reads it, an f32 accumulator as the
 * m16n8k16 accumulator layout's lanes access it. `col_major`: the tile's lines are columns. */
void count_fragment(const void *p, unsigned ldm, int col_major, size_t element_bytes,
                    bool accumulator, bool write);
/* An ldmatrix (mma_sync.cuh): one shared load request in which lane i of the first
 * `lanes` (32 for .x4, 16 for .x2) reads the 16-byte row at rows[i]; its wavefronts are
 * those of 16-byte accesses, 8 lanes (one 8x8 matrix) a phase. */
void count_ldmatrix(const uintptr_t rows[32], int lanes);
/* 32 16-byte rows (4 core matrices) of a wgmma operand in shared memory, read by the
 * tensor cores: a shared load request as count_ldmatrix's, and no instruction of the
 * warps' (the estimate from the PTX leaves it out of the memory instructions); and one
 * warp's wgmma.mma_async, one memory instruction of the warp there (resources.py's). */
void count_wgmma_operand(const uintptr_t rows[32]);
void count_wgmma_issue();
/* One warp-level tensor-core operation of `shape` ("m16n16k16.bf16.f32"). */
void count_mma(const char *shape);
/* One lane's atomic operation on global memory. */
void count_atomic();

/* A seed fixed for the process (GEARBOX_CUDA_EMU_SEED), for what the emulator scrambles. */
uint64_t run_seed();

}  // namespace gb_emu

/* The built-in variables: warpSize a constant, the others the running thread's. */
static constexpr int warpSize = 32;
#undef threadIdx
#undef blockIdx
#undef blockDim
#undef gridDim
#define threadIdx (::gb_emu::here().thread_idx)
#define blockIdx (::gb_emu::here().block_idx)
#define blockDim (::gb_emu::here().block_dim)
#define gridDim (::gb_emu::here().grid_dim)

/* CUDA's __ffs: the 1-based position of the lowest set bit of x, 0 when none is set. */
static inline int __ffs(int x)
{
    return __builtin_ffs(x);
}

#define __syncthreads() ::gb_emu::syncthreads(__FILE__, __LINE__)
#define atomicAdd(p, value) ::gb_emu::atomic_add(__FILE__, __LINE__, p, value)
#define __syncwarp(...) ::gb_emu::syncwarp_at{__FILE__, __LINE__}(__VA_ARGS__)
#define __ballot_sync(mask, predicate) ::gb_emu::ballot(__FILE__, __LINE__, mask, predicate)
#define __shfl_sync(mask, ...) \
    ::gb_emu::shuffle(::gb_emu::SHFL_IDX, __FILE__, __LINE__, mask, __VA_ARGS__)
#define __shfl_up_sync(mask, ...) \
    ::gb_emu::shuffle(::gb_emu::SHFL_UP, __FILE__, __LINE__, mask, __VA_ARGS__)
#define __shfl_down_sync(mask, ...) \
    ::gb_emu::shuffle(::gb_emu::SHFL_DOWN, __FILE__, __LINE__, mask, __VA_ARGS__)
#define __shfl_xor_sync(mask, ...) \
    ::gb_emu::shuffle(::gb_emu::SHFL_XOR, __FILE__, __LINE__, mask, __VA_ARGS__)

#endif
