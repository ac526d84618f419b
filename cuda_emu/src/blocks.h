/* The thread-block executor (blocks.cc): runs a kernel's blocks on host threads and each
 * block's CUDA threads as fibers, asserting CUDA's rules for barriers, warp collectives and
 * shared memory. Internal to the emulator.
 */
#ifndef GB_EMU_BLOCKS_H
#define GB_EMU_BLOCKS_H

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "gb_emu/kernel.h"

namespace gb_emu {

struct kernel_run {
    launch_site site;
    dim3 grid, block;
    size_t dynamic_bytes;   /* the launch's dynamic shared memory */
    size_t shared_limit;    /* static + dynamic may not exceed this (48 KiB, or the
                               attribute set with cudaFuncSetAttribute) */
    uint64_t serial;        /* the how-manieth launch of the process: seeds its orders */
    std::function<void()> thread_body;
};

/* Runs every block of the kernel; returns when all are done. Rule violations abort. */
void run_kernel(const kernel_run &run);

/* The CUDA thread running on the calling host thread, for fault reports: "kernel K
 * (launched at F:L), block (x,y,z), thread (x,y,z)", or "" outside kernels. */
void describe_running_thread(char *buf, size_t cap);
/* What an access to addr means when it lies in a guard page of the executor's (a fiber
 * stack's: an overflow; a block's shared memory's: out of bounds), else nullptr. */
const char *guard_meaning(const void *addr);

/* An access of `bytes` at p by instrumented code (the emulated .cu files are compiled with
 * -fsanitize=thread's instrumentation, whose entry points access.cc implements): device
 * memory goes to device_access (runtime.cc); the running block's shared memory is checked
 * here, and a broken rule stops the kernel with the .cu line of `pc`, the return address
 * into the access's code. Other memory (stacks, host memory) is not checked. */
void checked_access(const void *p, size_t bytes, bool write, const void *pc);
/* The same access in the counting mode: handed to the counters (counters.h), then checked. */
void counted_access(const void *p, size_t bytes, bool write, const void *pc);
/* The .cu file and line of the code before `pc` (addr2line on its line table; the emulated
 * build compiles with -g1), or a placeholder saying there is none. */
void access_site(const void *pc, const char **file, int *line);

/* How many threads run blocks (GEARBOX_CUDA_EMU_THREADS, default: the online CPUs). */
int executor_threads();

}  // namespace gb_emu

#endif
