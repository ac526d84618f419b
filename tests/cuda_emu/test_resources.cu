/* The launch rules the real build's kernel resources decide, and sm_90's occupancy.
 *
 * The occupancy figures are derived by hand below from CUDA's rules for compute capability
 * 9.0 (the CUDA Programming Guide's table of limits; cuda_occupancy.h's calculator):
 * registers are allocated per warp, a warp's registers (per thread x 32) rounded up to
 * units of 256; the SM's 65536 registers lie in 4 sub-partitions of 16384, each holding
 * floor(16384 / per_warp) warps, and a block may launch only if per_warp x (its warps
 * rounded up to a multiple of 4) is at most 65536. An SM holds 64 warps (2048 threads) and
 * 32 blocks, and 228 KiB (233472 bytes) of shared memory, each block taking its static and
 * dynamic bytes plus 1024 reserved, rounded up to units of 128. Blocks per SM is the
 * smallest of the four limits; the occupancy is the resident warps over 64.
 *
 * The launches use this program's own table (resources.tsv, copied beside the program as
 * test-cuda-emu-resources.resources.tsv) with made-up figures: 80 registers for
 * eighty_registers, 40000 bytes of static shared memory for static_40000, named as nvcc
 * mangles them (no L for a static kernel, where g++ writes one).
 *
 * Written as CUDA (it is compiled through cu2cc.py like the plugins' .cu files).
 */
#include <cuda_runtime.h>

#include <string>

#include "emu_test.h"
#include "resources.h"

static __global__ void eighty_registers(float *out)
{
    out[blockIdx.x] = 1.0f;
}

static __global__ void static_40000(float *out)
{
    out[blockIdx.x] = 2.0f;
}

using gb_emu::KernelResources;
using gb_emu::Occupancy;
using gb_emu::sm90_occupancy;

struct occupancy_case {
    const char *what;
    KernelResources r;
    int threads;
    size_t dynamic;
    int blocks, warps;   /* per SM, derived by hand */
    const char *limiter;
};

static const occupancy_case occupancy_cases[] = {
    /* 40 registers, 48 bytes static, 256 threads (cross-entropy's figures): a warp takes
     * 40 x 32 = 1280 registers (a multiple of 256); a sub-partition holds 16384 / 1280 = 12
     * warps, the SM 48, so 48 / 8 = 6 blocks by registers; 64 / 8 = 8 by threads; shared
     * memory 48 + 1024 = 1072 -> 1152, 233472 / 1152 = 202 blocks; 32 by blocks.
     * 6 blocks, 48 warps, 75%, registers. */
    {"40 registers x 256 threads: 6 blocks, 48 warps, by registers",
     {40, 48, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 256, 0, 6, 48, "registers"},
    /* 255 registers, 128 threads: a warp 8160 -> 8192; 16384 / 8192 = 2 warps per
     * sub-partition, 8 per SM, 8 / 4 = 2 blocks (the launch check: 8192 x 4 = 32768, fits).
     * 2 blocks, 8 warps, 12.5%, registers. */
    {"255 registers x 128 threads: 2 blocks, 8 warps, by registers",
     {255, 0, 0, 128, 0, 0, 0, 0, 0, 0, 0}, 128, 0, 2, 8, "registers"},
    /* 32 registers, 128 threads, 72952 bytes dynamic: registers 1024 per warp, 16 per
     * sub-partition, 64 warps / 4 = 16 blocks; threads 64 / 4 = 16; shared memory
     * 72952 + 1024 = 73976 -> 73984 (578 x 128), 233472 / 73984 = 3 blocks.
     * 3 blocks, 12 warps, 18.75%, shared memory. */
    {"72952 bytes of dynamic shared memory: 3 blocks, by shared memory",
     {32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 128, 72952, 3, 12, "shared memory"},
    /* 16 registers, 1024 threads: registers 512 per warp, 32 per sub-partition, 128 / 32 =
     * 4 blocks; threads 64 / 32 = 2 blocks. 2 blocks, 64 warps, 100%, threads. */
    {"16 registers x 1024 threads: 2 blocks, 64 warps, by threads",
     {16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1024, 0, 2, 64, "threads"},
    /* 16 registers, 32 threads, no shared memory: registers 128 blocks; threads 64; shared
     * memory 1024 -> 233472 / 1024 = 228; blocks 32. 32 blocks, 32 warps, 50%, blocks. */
    {"16 registers x 32 threads: 32 blocks, by the block limit",
     {16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 32, 0, 32, 32, "blocks"},
    /* 80 registers: a warp 2560. 768 threads = 24 warps: 2560 x 24 = 61440, launches;
     * 16384 / 2560 = 6 warps per sub-partition, 24 per SM, 1 block. 800 threads = 25 warps:
     * 64000 registers, but the hardware counts 25 -> 28 warps, 71680 > 65536: no block. */
    {"80 registers x 768 threads: 1 block, 24 warps",
     {80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 768, 0, 1, 24, "registers"},
    {"80 registers x 800 threads: no block (warps counted in fours)",
     {80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 800, 0, 0, 0, "registers"},
    /* 227 KiB of shared memory in all (static 1000 + dynamic 231448 = 232448): with the
     * reserved 1024, 233472 = 228 KiB, exactly an SM: 1 block; one byte more, none. */
    {"227 KiB of shared memory: 1 block",
     {32, 1000, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 128, 231448, 1, 4, "shared memory"},
    {"227 KiB and a byte: no block",
     {32, 1000, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 128, 231449, 0, 0, "shared memory"},
};

static void occupancy_rules()
{
    for (const occupancy_case &c : occupancy_cases) {
        const Occupancy o = sm90_occupancy(c.r, c.threads, c.dynamic);
        const bool ok = o.blocks_per_sm == c.blocks && o.warps_per_sm == c.warps &&
                        o.fraction == c.warps / 64.0 && std::string(o.limiter) == c.limiter;
        if (!ok)
            printf("  got %d blocks, %d warps, %.4f, %s\n", o.blocks_per_sm, o.warps_per_sm,
                   o.fraction, o.limiter);
        emu_check(ok, c.what);
    }
}

/* Runs `launch` in a child; checks it returned cudaErrorLaunchOutOfResources and said
 * every fragment. */
static void expect_refused(const char *what, const std::function<void()> &launch,
                           std::initializer_list<const char *> fragments)
{
    bool aborted = false;
    std::string err = emu_run_child([&] {
        cudaGetLastError();
        launch();
        _exit(cudaGetLastError() == cudaErrorLaunchOutOfResources ? 0 : 1);
    }, &aborted);
    bool all = !aborted;
    for (const char *f : fragments)
        all = all && err.find(f) != std::string::npos;
    if (!all)
        printf("  stderr: %s\n", err.c_str());
    emu_check(all, what);
}

static void launch_rules(float *out)
{
    const KernelResources *r = gb_emu::kernel_resources((const void *)eighty_registers);
    emu_check(r && r->registers == 80 && r->local_bytes == 16 && r->max_threads_bound == 0,
              "the table's row of a kernel, found by its entry (g++'s _ZL name, nvcc's _Z)");
    emu_check(gb_emu::kernel_resources("_Z12static_40000Pf") &&
                  gb_emu::kernel_resources("static_40000(float*)") &&
                  gb_emu::kernel_resources("static_40000(float*)")->static_smem == 40000,
              "the row found by the mangled and the demangled name");
    emu_check(!gb_emu::kernel_resources("no_such_kernel(int)"), "no row: nullptr");

    cudaGetLastError();
    eighty_registers<<<1, 768>>>(out);
    emu_check(cudaGetLastError() == cudaSuccess, "80 registers x 768 threads: launched");
    expect_refused("80 registers x 800 threads: refused, with the figures", [&] {
        eighty_registers<<<1, 800>>>(out);
    }, {"launch of eighty_registers: 80 registers per thread", "in a block of 800 threads",
        "counted as 71680", "too many resources requested for launch"});

    static_40000<<<1, 32, 9152>>>(out);
    emu_check(cudaGetLastError() == cudaSuccess, "40000 static + 9152 dynamic = 48 KiB: launched");
    expect_refused("40000 static + 9153 dynamic: refused without the attribute", [&] {
        static_40000<<<1, 32, 9153>>>(out);
    }, {"launch of static_40000: 40000 bytes of static shared memory", "49153 bytes",
        "without cudaFuncSetAttribute", "too many resources requested for launch"});
    emu_check(cudaFuncSetAttribute(static_40000, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   200000) == cudaSuccess, "the dynamic limit raised to 200000");
    static_40000<<<1, 32, 192448>>>(out);
    emu_check(cudaGetLastError() == cudaSuccess,
              "40000 static + 192448 dynamic = 227 KiB: launched");
    expect_refused("40000 static + 192449 dynamic: above 227 KiB, refused", [&] {
        static_40000<<<1, 32, 192449>>>(out);
    }, {"40000 bytes of static shared memory", "232449 bytes, above the 232448"});

    /* GEARBOX_CUDA_EMU_RESOURCES=report (meson sets it for this test): a line per kernel
     * and configuration, with the occupancy. */
    bool aborted = false;
    std::string err = emu_run_child([&] { eighty_registers<<<2, 256>>>(out); }, &aborted);
    emu_check(!aborted && err.find("resources: eighty_registers") != std::string::npos &&
                  err.find("80 registers, 0 bytes static shared memory, 16 bytes local per "
                           "thread; a block of 256 threads") != std::string::npos &&
                  err.find("3 blocks (24 warps) per SM, occupancy 38%, limited by registers") !=
                      std::string::npos,
              "GEARBOX_CUDA_EMU_RESOURCES=report: the kernel's figures and occupancy");
    cudaDeviceSynchronize();
}

int main()
{
    occupancy_rules();
    float *out = nullptr;
    if (cudaMalloc(&out, 64 * sizeof(float)) != cudaSuccess) {
        printf("FAIL: cudaMalloc\n");
        return 1;
    }
    launch_rules(out);
    cudaFree(out);
    return emu_finish("test_resources");
}
