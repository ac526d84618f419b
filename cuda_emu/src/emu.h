/* What the emulator's parts share: the CUDA runtime (runtime.cc: memory, streams, events,
 * launches), the thread-block executor (blocks.cc), and the library doubles (cublaslt.cc,
 * nccl.cc). Internal: nothing outside cuda_emu/src includes it.
 *
 * Work queued on a stream runs only when something waits for it (a synchronize, an event
 * query, a blocking copy), with device memory accessible; between those moments device
 * memory is inaccessible to the host, so a host read of a device pointer faults with a
 * message naming the allocation.
 */
#ifndef GB_EMU_EMU_H
#define GB_EMU_EMU_H

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace gb_emu {

/* A rule of CUDA was broken: prints "gearbox cuda emulator: <message>" on stderr and
 * aborts the process (GEARBOX_CUDA_EMU_ON_ERROR=continue reports and goes on). */
[[noreturn]] void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A report that lets the program go on (a poisoned value was returned, say); aborts unless
 * GEARBOX_CUDA_EMU_ON_ERROR=continue. */
void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A line on stderr, "gearbox cuda emulator: <message>", and nothing else. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Queues `run` on stream s (nullptr: the default stream) as one operation; `what` names it
 * in messages ("cublasLtMatmul", "ncclAllReduce"). It runs later, when something waits
 * for the stream, on an emulator thread, with device memory accessible. cudaSuccess, or
 * cudaErrorInvalidResourceHandle for a destroyed or unknown stream. */
cudaError_t enqueue(cudaStream_t s, const char *what, std::function<void()> run);

/* Marks the calling thread, which runs a queued operation, as waiting on other processes
 * (the NCCL double's collective waiting for its peers) while `waiting` is true: it touches
 * no emulator state meanwhile, so cudaEventQuery on other threads answers from that state
 * at once instead of waiting for the operation, as a GPU answers queries while a
 * collective's kernel spins. */
void waiting_on_peers(bool waiting);

/* One cudaMalloc allocation. */
struct allocation {
    char *base;          /* what cudaMalloc returned */
    size_t bytes;        /* what was asked for */
    unsigned id;         /* 1, 2, ... in the order of allocation */
};
/* The device allocation that holds all of [p, p + bytes), or nullptr. */
const allocation *find_allocation(const void *p, size_t bytes);

/* Device memory is carved from one reserved range of addresses (the arena), so an
 * instrumented access tells device memory with one comparison. */
extern uintptr_t device_arena_lo;
extern size_t device_arena_bytes;
inline bool device_arena_holds(const void *p)
{
    return (uintptr_t)p - device_arena_lo < device_arena_bytes;
}
/* An instrumented access of `bytes` at p, inside the arena (blocks.h: checked_access):
 * within an allocation, and not a read of bytes nothing wrote; else a report with the .cu
 * line of `pc`, and the process aborts. */
void device_access(const void *p, size_t bytes, bool write, const void *pc);
/* [p, p + bytes) of device memory was written by code the instrumentation does not see
 * (copies, memsets, library doubles); nothing outside device memory. */
void mark_device_written(const void *p, size_t bytes);
/* The offset of the first byte of [p, p + bytes) that nothing has written (the initcheck
 * of the library doubles' inputs), or SIZE_MAX: all written, or not device memory. */
size_t first_unwritten(const void *p, size_t bytes);

/* Sets the calling thread's last error (cudaGetLastError) and returns err. */
cudaError_t set_last_error(cudaError_t err);

/* The file the environment variable `variable` names, opened for appending (a record many
 * processes write to, a line per write()), or -1 where the variable is unset or empty; a
 * file that cannot be opened is a violation naming the variable (launched.cc). */
int open_record(const char *variable);

/* Notes that `kernel` was launched, in GEARBOX_CUDA_EMU_LAUNCHED's file (launched.cc). */
void record_launch(const void *kernel);

/* Notes a host call that waits for the device, allocates or builds a cuBLASLt object, with
 * its callers, in GEARBOX_CUDA_EMU_HOST_CALLS's file (host_calls.cc). */
void note_host_call(const char *call);

}  // namespace gb_emu

#endif
