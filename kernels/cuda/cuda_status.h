/* Status checking for CUDA plugins: every CUDA runtime and CUDA library call goes through
 * one of these macros, which turn a failure into a gb_status plus a message naming the
 * call, the source file and line, and the library's own error string; and the opening of
 * the run's GPU, whose failure on a machine without one must say so plainly.
 *
 * The macros return from the enclosing function, which must return gb_status and have a
 * `const gb_host *host` in scope for set_error(). Kernel launches are checked with
 * GB_CUDA_CHECK_LAUNCH right after the <<< >>> line (a launch reports its configuration
 * errors only through cudaGetLastError). Header-only: nothing to link.
 *
 * Debugging: with GEARBOX_CUDA_SYNC=1 in the environment, GB_CUDA_CHECK_LAUNCH and
 * GB_CUDA_LIB_CHECK also wait for the whole device after the launch or call
 * (cudaDeviceSynchronize) and check cudaGetLastError, so an error the GPU raises while
 * running (an illegal address, a trap) or an unchecked launch before it is reported at
 * the launch or call that ran, by the `what` or call text that names it, instead of at
 * some later call. It serialises everything: for finding a failure, not for timing.
 */
#ifndef GEARBOX_KERNELS_CUDA_STATUS_H
#define GEARBOX_KERNELS_CUDA_STATUS_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "gearbox/plugin.h"

/* A failed CUDA runtime call: GB_ERR_NO_MEMORY for an allocation, GB_ERR_DEVICE else. */
static inline gb_status gb_cuda_failed(const gb_host *host, cudaError_t err, const char *call,
                                       const char *file, int line)
{
    host->set_error(host, "%s:%d: %s failed: %s (%s)", file, line, call, cudaGetErrorString(err),
                    cudaGetErrorName(err));
    return err == cudaErrorMemoryAllocation ? GB_ERR_NO_MEMORY : GB_ERR_DEVICE;
}

static inline int *gb_cuda_sync_flag(void)
{
    static int on;
    return &on;
}

static inline void gb_cuda_sync_read(void)
{
    const char *v = getenv("GEARBOX_CUDA_SYNC");
    *gb_cuda_sync_flag() = v && strcmp(v, "1") == 0;
}

/* Whether GEARBOX_CUDA_SYNC=1 is set: read once per source file, on first use. */
static inline int gb_cuda_sync_each(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, gb_cuda_sync_read);
    return *gb_cuda_sync_flag();
}

/* Under GEARBOX_CUDA_SYNC=1: waits for the device and returns the first error of the work
 * queued so far; cudaSuccess otherwise. The macros below call it; so does code that checks
 * a library's status by hand (attn/cudnn's plan execution). */
static inline cudaError_t gb_cuda_sync_check(void)
{
    if (!gb_cuda_sync_each())
        return cudaSuccess;
    cudaError_t err = cudaDeviceSynchronize();
    cudaError_t last = cudaGetLastError();
    return err != cudaSuccess ? err : last;
}

#define GB_CUDA_CHECK(call)                                                       \
    do {                                                                          \
        cudaError_t gb_cuda_err_ = (call);                                        \
        if (gb_cuda_err_ != cudaSuccess)                                          \
            return gb_cuda_failed(host, gb_cuda_err_, #call, __FILE__, __LINE__); \
    } while (0)

/* After a <<< >>> launch; `what` is a string literal naming the kernel and its shape. */
#define GB_CUDA_CHECK_LAUNCH(what)                                                        \
    do {                                                                                  \
        cudaError_t gb_cuda_err_ = cudaGetLastError();                                    \
        if (gb_cuda_err_ != cudaSuccess)                                                  \
            return gb_cuda_failed(host, gb_cuda_err_, "launch of " what, __FILE__, __LINE__); \
        if ((gb_cuda_err_ = gb_cuda_sync_check()) != cudaSuccess)                         \
            return gb_cuda_failed(host, gb_cuda_err_, "running " what                     \
                                  " (GEARBOX_CUDA_SYNC=1 waited for it)", __FILE__, __LINE__); \
    } while (0)

/* A call of a CUDA library (cuBLAS, cuBLASLt, cuDNN...) whose status type `type` has its
 * success value 0 and a function `to_string` that names a status. */
#define GB_CUDA_LIB_CHECK(type, call, to_string)                                          \
    do {                                                                                  \
        type gb_lib_status_ = (call);                                                     \
        if ((int)gb_lib_status_ != 0) {                                                   \
            host->set_error(host, "%s:%d: %s failed: %s (status %d)", __FILE__, __LINE__, \
                            #call, to_string(gb_lib_status_), (int)gb_lib_status_);       \
            return GB_ERR_DEVICE;                                                         \
        }                                                                                 \
        cudaError_t gb_lib_err_ = gb_cuda_sync_check();                                   \
        if (gb_lib_err_ != cudaSuccess)                                                   \
            return gb_cuda_failed(host, gb_lib_err_, "running " #call                     \
                                  " (GEARBOX_CUDA_SYNC=1 waited for it)", __FILE__, __LINE__); \
    } while (0)

/* What a failed cudaGetDeviceCount means, in terms of what the machine lacks. */
static inline const char *gb_cuda_missing(cudaError_t err)
{
    switch (err) {
    case cudaErrorInsufficientDriver:
        return "no NVIDIA driver is installed, or it is older than this CUDA runtime";
    case cudaErrorNoDevice:
        return "the driver sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
    default:
        return "the GPU or its driver cannot be used (check nvidia-smi)";
    }
}

/* Checks that GPU `ordinal` exists and makes it the calling thread's current device. On
 * failure the message names the plugin (`who`, e.g. "device/cuda"), says that there is no
 * NVIDIA GPU to use and why, and what to configure instead (`instead`). */
static inline gb_status gb_cuda_select_gpu(const gb_host *host, const char *who, int ordinal,
                                           const char *instead)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        if (err == cudaSuccess)
            err = cudaErrorNoDevice;
        host->set_error(host, "%s needs an NVIDIA GPU, and this machine has no NVIDIA GPU it "
                        "can use: cudaGetDeviceCount %s (%s): %s; on a machine without one use "
                        "%s", who, count == 0 && err == cudaErrorNoDevice ? "found none" :
                        "failed", cudaGetErrorName(err), gb_cuda_missing(err), instead);
        return GB_ERR_DEVICE;
    }
    if (ordinal < 0 || ordinal >= count) {
        host->set_error(host, "%s: GPU %d was asked for but %d GPU(s) are visible "
                        "(CUDA_VISIBLE_DEVICES limits which; [device] ordinal or the launcher's "
                        "local rank picks one)", who, ordinal, count);
        return GB_ERR_DEVICE;
    }
    if ((err = cudaSetDevice(ordinal)) != cudaSuccess) {
        host->set_error(host, "%s: cudaSetDevice(%d) failed: %s (%s)", who, ordinal,
                        cudaGetErrorName(err), cudaGetErrorString(err));
        return GB_ERR_DEVICE;
    }
    return GB_OK;
}

#endif
