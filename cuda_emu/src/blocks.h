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
/* Whether addr lies in the guard page of a fiber stack (a CUDA thread overflowed it). */
bool in_stack_guard(const void *addr);

/* How many threads run blocks (GEARBOX_CUDA_EMU_THREADS, default: the online CPUs). */
int executor_threads();

}  // namespace gb_emu

#endif
