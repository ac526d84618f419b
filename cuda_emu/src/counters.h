/* The counting mode (GEARBOX_CUDA_EMU_COUNT=FILE; README.md, "Counting what each kernel
 * costs"): what each kernel launch, library call, copy and event record costs on a GPU, as
 * Nsight Compute counts it, one JSON line each. The executor (blocks.cc) hands every
 * instrumented access, barrier and shuffle of the running block here; counters.cc groups the
 * accesses into warp-level requests, reduces each block to its sectors and wavefronts and
 * sums the blocks into the launch's line. Internal to the emulator.
 */
#ifndef GB_EMU_COUNTERS_H
#define GB_EMU_COUNTERS_H

#include <cstddef>
#include <cstdint>
#include <string>

#include "blocks.h"

namespace gb_emu {

/* Whether GEARBOX_CUDA_EMU_COUNT names a file: set once when the library loads, read at
 * every instrumented access (one predictable branch when off; hidden, so a direct load
 * rather than one through the GOT). */
extern const bool counting __attribute__((visibility("hidden")));

/* How many blocks of a grid of `total` run: all of them, or with
 * GEARBOX_CUDA_EMU_COUNT_SAMPLE=K and more than K blocks, K; which ones: sampled_block. */
uint64_t blocks_to_run(uint64_t total);
/* The linear index of the i-th of those blocks: first, last, evenly spaced between. */
uint64_t sampled_block(uint64_t i, uint64_t run, uint64_t total);
/* Whether a launch may run only some of its blocks: device memory a kernel reads may then
 * never have been written, and the uninitialised-read check is off. */
bool sampling();

/* Where an access lies, for the counters. */
enum class space { global, shared };
/* What made an access: the kernel's own load or store, or an asynchronous copy (counted as
 * a global load and a shared store, and in the cp_async counters). */
enum class access_kind { plain, cp_async };

/* A cp.async's access site: its .cu file (a string literal, below 2^48 as user-space
 * addresses are) and line in one word, which copy_site_file and copy_site_line take apart. */
inline uintptr_t copy_site(const char *file, int line)
{
    return (uintptr_t)file | (uintptr_t)line << 48;
}
inline const char *copy_site_file(uintptr_t site)
{
    return (const char *)(site & ((uintptr_t(1) << 48) - 1));
}
inline int copy_site_line(uintptr_t site)
{
    return (int)(site >> 48);
}

/* An access of `bytes` at p by thread `lane` (linear in its block) of the running block, at
 * the code site `site` (the return address into the kernel, or a cp.async's file and line). */
void count_access(int lane, space where, access_kind kind, const void *p, size_t bytes,
                  bool write, uintptr_t site);
/* A warp-level request whose lane addresses are given whole (WMMA's and ldmatrix's
 * modelled patterns): lane i of the first `lanes` accesses `bytes` at addr[i]. */
void count_request(space where, bool write, const uintptr_t addr[32], size_t bytes,
                   int lanes = 32);
void count_barrier();
void count_shuffle();
/* The running block has ended; `static_bytes` of __shared__ objects it declared. */
void count_block_done(size_t static_bytes);

/* Runs the launch (run_kernel) and appends its line, with the stream it ran on. */
void run_counted_kernel(const kernel_run &run, const void *kernel);

/* The stream whose operation the calling thread runs now (runtime.cc sets it), for the
 * lines of library calls, copies and event records. */
void set_counted_stream(unsigned id);
/* Appends {"type":TYPE,"seq":N,"stream":S,FIELDS}; FIELDS, without braces, may be empty. */
void count_record(const char *type, const std::string &fields);

}  // namespace gb_emu

#endif
