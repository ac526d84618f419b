/* What each kernel of the real build uses on an sm_90 GPU (registers, static shared memory,
 * local memory, launch bounds: nvcc's own figures, cuda_emu/resources.py), the launch rules
 * CUDA applies with them, and sm_90's occupancy calculator. Internal to the emulator.
 *
 * The table of an emulated plugin X.so is X.resources.tsv beside it (of a program P,
 * P.resources.tsv), written at build time where nvcc is found, and X.lines.tsv its PTX's
 * weight per access of each source line; an emulated kernel is matched to its rows by its
 * demangled name (g++ and nvcc mangle `static` kernels apart).
 */
#ifndef GB_EMU_RESOURCES_H
#define GB_EMU_RESOURCES_H

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "gb_emu/kernel.h"

namespace gb_emu {

struct KernelResources {
    int registers;           /* per thread */
    int static_smem;         /* bytes per block */
    int local_bytes;         /* per thread: the stack frame, spills included */
    int max_threads_bound;   /* __launch_bounds__' first argument; 0: none */
    int min_blocks_bound;    /* its second; 0: none */
    /* The kernel's static PTX instructions: all, global and shared memory ones, CUDA-core
     * floating-point ones, SFU ones (resources.py: ptx_classes), which the counting mode
     * scales by the executed memory instructions; and its innermost loops that load from
     * global memory and their loads. All 0 in a table without those columns. */
    int ptx_instructions, ptx_memory, ptx_fp32, ptx_sfu, ptx_loops, ptx_loop_loads;
};

/* The row of the kernel whose entry is `kernel_entry` (a kernel's address, as launched), or
 * of the kernel named `symbol` (mangled or demangled) in a table read so far; nullptr when
 * no table has one. */
const KernelResources *kernel_resources(const void *kernel_entry);
const KernelResources *kernel_resources(const char *symbol);

/* The demangled name of the function whose code is at `code` (addr2line on its object's
 * symbols), or "" when the symbols do not say. */
std::string function_name(const void *code);

/* A place in the source: a file's path as the line table gives it, and a line (0: none). */
struct SourcePlace {
    std::string file;
    int line;
};

/* The line of some code and the call sites it was inlined through, innermost first. */
struct SourceLine : SourcePlace {
    std::vector<SourcePlace> callers;
    SourceLine(std::string f = "", int l = 0, std::vector<SourcePlace> c = {})
        : SourcePlace{std::move(f), l}, callers(std::move(c))
    {
    }
};

/* The source line of the code at each of `code` (addr2line -i on the objects' line tables,
 * one call per object: the innermost inlined function's line, as nvcc's .loc gives it,
 * with the frames that inlined it). */
std::vector<SourceLine> source_lines(const std::vector<const void *> &code);

/* What the real build's PTX issues per access at one source line (the lines table,
 * resources.py): the warp instructions, CUDA-core floating-point and SFU instructions of
 * the innermost loop holding the access, per access of that loop. */
struct LineWeight {
    double instructions, fp32, sfu;
};

/* The weight of an access of the kernel whose entry is `kernel_entry` at `at` (files
 * compared by their last component: nvcc and g++ spell paths apart), shared or global, a
 * store or a load: the row of that space, else of a generic access at that line; of the
 * line's rows per chain of call sites (where nvcc inlined it through several), the one
 * whose chain agrees with at.callers the furthest, when one alone does; else the line's
 * own row; nullptr where the object has no lines table or it no such row. */
const LineWeight *line_weight(const void *kernel_entry, const SourceLine &at, bool shared,
                              bool store);

struct Occupancy {
    int blocks_per_sm;
    int warps_per_sm;
    double fraction;       /* warps_per_sm of the SM's 64 */
    const char *limiter;   /* "registers", "shared memory", "threads", "blocks" */
};

/* Blocks of `threads_per_block` resident on one SM of compute capability 9.0, as CUDA's
 * occupancy calculator (cuda_occupancy.h) counts them: 65536 registers in 4 sub-partitions,
 * allocated per warp in units of 256; 2048 threads (64 warps); 32 blocks; 228 KiB of shared
 * memory, allocated per block in units of 128 bytes with 1 KiB reserved per block. A block
 * that cannot launch has 0 blocks per SM. */
Occupancy sm90_occupancy(const KernelResources &r, int threads_per_block, size_t dynamic_smem);

/* Why a launch of `kernel` with `threads` per block and `dynamic_smem` bytes does not fit
 * sm_90 with the real build's registers and static shared memory ("" when it fits, or when
 * there is no table: said once on stderr). `opted_in`: the kernel's dynamic shared memory
 * limit was raised by cudaFuncSetAttribute. With GEARBOX_CUDA_EMU_RESOURCES=report, prints
 * each kernel's figures and occupancy at its first launch of each configuration. */
std::string launch_resources_refusal(const launch_site &site, const void *kernel,
                                     unsigned threads, size_t dynamic_smem, bool opted_in);

}  // namespace gb_emu

#endif
