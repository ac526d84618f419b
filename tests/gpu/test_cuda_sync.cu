/* GEARBOX_CUDA_SYNC=1 through kernels/cuda/cuda_status.h's checks, on the emulator, whose
 * streams run nothing until something waits for them, so whether a check synchronised
 * shows in cudaStreamQuery:
 * - a checked launch, and a checked library call that queues work, leave that work queued
 *   without the switch, and have run it when the check returns with the switch;
 * - a launch that fails (a block of 2048 threads) is reported naming the kernel's text;
 * - a failing launch nobody checked, followed by a checked library call: with the switch
 *   the call reports it, naming the call and the switch; without it nothing does.
 *
 * usage: test-cuda-sync off|on   (run with GEARBOX_CUDA_SYNC unset or 0, and with 1)
 * Written as CUDA (compiled through cu2cc.py like the plugins' .cu files).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cuda_status.h"
#include "test_host.h"

static __global__ void fill(float *x, int n, float v)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        x[i] = v;
}

static gb_status checked_launch(const gb_host *host, float *x, cudaStream_t stream,
                                int threads)
{
    fill<<<1, threads, 0, stream>>>(x, 32, 1.0f);
    GB_CUDA_CHECK_LAUNCH("fill (one block of the threads asked for)");
    return GB_OK;
}

/* A stand-in for a library call (status 0: success) that queues work on `stream`. */
static int queue_work(float *x, cudaStream_t stream)
{
    fill<<<1, 32, 0, stream>>>(x, 32, 2.0f);
    return 0;
}

static const char *status_text(int status)
{
    return status == 0 ? "success" : "failure";
}

static gb_status checked_library_call(const gb_host *host, float *x, cudaStream_t stream)
{
    GB_CUDA_LIB_CHECK(int, queue_work(x, stream), status_text);
    return GB_OK;
}

/* A launch whose error nobody checks, then a checked library call. */
static gb_status unchecked_launch_then_call(const gb_host *host, float *x, cudaStream_t stream)
{
    fill<<<1, 2048, 0, stream>>>(x, 32, 3.0f);
    return checked_library_call(host, x, stream);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2 || (strcmp(argv[1], "on") != 0 && strcmp(argv[1], "off") != 0)) {
        fprintf(stderr, "usage: %s off|on\n", argv[0]);
        return 2;
    }
    const int on = strcmp(argv[1], "on") == 0;
    if (gb_cuda_sync_each() != on) {
        printf("FAIL: GEARBOX_CUDA_SYNC reads as %d; this run expects %d\n",
               gb_cuda_sync_each(), on);
        return 1;
    }
    const gb_host host = *gb_test_host();
    float *x = NULL;
    cudaStream_t stream = NULL;
    if (cudaMalloc((void **)&x, 32 * sizeof(float)) != cudaSuccess ||
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        printf("FAIL: cannot allocate on the emulated GPU\n");
        return 1;
    }
    const cudaError_t want = on ? cudaSuccess : cudaErrorNotReady;

    gb_status st = checked_launch(&host, x, stream, 32);
    cudaError_t queued = cudaStreamQuery(stream);
    check_that(st == GB_OK && queued == want,
               "%s, a checked launch's kernel has %s (cudaStreamQuery: %s)", argv[1],
               on ? "run" : "stayed queued", cudaGetErrorName(queued));
    cudaStreamSynchronize(stream);

    st = checked_library_call(&host, x, stream);
    queued = cudaStreamQuery(stream);
    check_that(st == GB_OK && queued == want,
               "%s, a checked library call's work has %s (cudaStreamQuery: %s)", argv[1],
               on ? "run" : "stayed queued", cudaGetErrorName(queued));
    cudaStreamSynchronize(stream);

    gb_test_clear_error();
    st = checked_launch(&host, x, stream, 2048);
    const char *message = gb_test_last_error();
    check_that(st == GB_ERR_DEVICE &&
                   strstr(message, "launch of fill (one block of the threads asked for) failed"),
               "a failing launch is named: \"%s\"", message);

    gb_test_clear_error();
    st = unchecked_launch_then_call(&host, x, stream);
    if (on)
        check_that(st == GB_ERR_DEVICE && strstr(message, "running queue_work(x, stream)") &&
                       strstr(message, "GEARBOX_CUDA_SYNC=1"),
                   "an unchecked failing launch is reported at the next checked call: \"%s\"",
                   message);
    else
        check_that(st == GB_OK && cudaGetLastError() != cudaSuccess,
                   "without the switch the next call does not look for the unchecked launch's "
                   "error (it stays pending)");
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
    cudaFree(x);
    return check_exit("cuda sync");
}
