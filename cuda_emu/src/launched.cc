/* The record of launched kernels: with GEARBOX_CUDA_EMU_LAUNCHED=FILE, the first launch of
 * each kernel in a process appends one line to FILE, "OBJECT MTIME OFFSET": the shared
 * object or program that holds the kernel (its real path), that file's modification time
 * (seconds.nanoseconds, as `stat -c %.9Y` writes it: a rebuilt object makes its older
 * lines stale) and the kernel's offset in it, in hex. Many processes append to one file,
 * each line in one write(). The emulated tests all write to one file, and
 * tests/cuda_emu/test_launched.sh names each kernel of the emulated plugins (the functions
 * in their __patchable_function_entries, where gb_emu/kernel.h's __global__ lists them)
 * that none of them launched.
 */
#include "emu.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_set>

namespace gb_emu {

int open_record(const char *variable)
{
    const char *path = getenv(variable);
    if (!path || !*path)
        return -1;
    int f = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0)
        violation("%s=%s: cannot open it for appending: %m (name a file in a folder that "
                  "exists)", variable, path);
    return f;
}

namespace {

/* The record's descriptor, opened at the first launch; -1 without the variable. */
int record_fd()
{
    static const int fd = open_record("GEARBOX_CUDA_EMU_LAUNCHED");
    return fd;
}

}  // namespace

void record_launch(const void *kernel)
{
    static std::mutex lock;
    static std::unordered_set<const void *> seen;
    if (record_fd() < 0)
        return;
    std::lock_guard<std::mutex> hold(lock);
    if (!seen.insert(kernel).second)
        return;
    Dl_info info;
    char path[PATH_MAX];
    struct stat st;
    if (!dladdr(kernel, &info) || !info.dli_fname || !realpath(info.dli_fname, path) ||
        stat(path, &st) != 0)
        violation("GEARBOX_CUDA_EMU_LAUNCHED: no loaded object holds the kernel at %p",
                  kernel);
    char line[PATH_MAX + 64];
    const int n = snprintf(line, sizeof line, "%s %lld.%09ld %llx\n", path,
                           (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec,
                           (unsigned long long)((const char *)kernel -
                                                (const char *)info.dli_fbase));
    if (write(record_fd(), line, (size_t)n) != n)
        violation("GEARBOX_CUDA_EMU_LAUNCHED: writing the record failed: %m");
}

}  // namespace gb_emu
