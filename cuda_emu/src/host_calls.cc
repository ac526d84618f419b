/* The record of the host calls a training step must not make: with
 * GEARBOX_CUDA_EMU_HOST_CALLS=FILE, every call that waits for the device (cudaDeviceSynchronize,
 * cudaStreamSynchronize, cudaEventSynchronize, cudaMemcpy, cudaMemcpyAsync into pageable
 * memory, cudaFree), allocates (cudaMalloc, cudaMallocHost, cudaFreeHost) or builds cuBLASLt's
 * per-shape objects (descriptors, layouts, preferences, their destruction, the heuristic
 * query) appends one line to FILE: the call's name, then its callers outside the emulator,
 * innermost first, each as "OBJECT+0xOFFSET" (the shared object or program that holds the
 * return address, and the address's offset in it, for addr2line). Each line is one write(),
 * so the processes of a test may share a file. tests/gpu/test_step_host_calls.sh counts the
 * lines of runs of different lengths: a call whose count grows with the steps is made inside
 * a step, and it names the call and its callers' source lines.
 */
#include "emu.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace gb_emu {

namespace {

constexpr int kCallers = 4;   /* enough to reach the engine through a plugin's entry */

int record_fd()
{
    static const int fd = open_record("GEARBOX_CUDA_EMU_HOST_CALLS");
    return fd;
}

/* The emulator's own object: its frames are not the caller's. */
const char *own_object()
{
    static const char *const self = [] {
        Dl_info info;
        return dladdr((void *)&record_fd, &info) && info.dli_fname ? info.dli_fname : "";
    }();
    return self;
}

}  // namespace

void note_host_call(const char *call)
{
    const int fd = record_fd();
    if (fd < 0)
        return;
    void *frames[32];
    const int n = backtrace(frames, 32);
    std::string line = call;
    int callers = 0;
    for (int i = 1; i < n && callers < kCallers; i++) {
        Dl_info info;
        if (!dladdr(frames[i], &info) || !info.dli_fname)
            continue;
        if (strcmp(info.dli_fname, own_object()) == 0)
            continue;
        char frame[64];
        /* the return address less one: the call instruction's own line */
        snprintf(frame, sizeof frame, "+0x%zx",
                 (size_t)((const char *)frames[i] - 1 - (const char *)info.dli_fbase));
        line += std::string(" ") + info.dli_fname + frame;
        callers++;
    }
    line += '\n';
    if (write(fd, line.data(), line.size()) != (ssize_t)line.size())
        say("GEARBOX_CUDA_EMU_HOST_CALLS: a line was not written: %s", strerror(errno));
}

}  // namespace gb_emu
