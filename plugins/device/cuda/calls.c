/* What every entry point of the CUDA device does first: the instance's GPU made current,
 * a kernel's dtype and sizes checked, and the launch size of an element-wise kernel. Apart
 * from device_cuda.c so that matmul.c and the kernels' files, which call these, and
 * device_cuda.c, which calls them, depend on this file rather than on each other. */
#include "cuda_device.h"
#include "cuda_status.h"

/* The instance's GPU as the calling thread's current device (a no-op when it already is:
 * the core, a data thread or another plugin's thread may call in). */
gb_status cuda_enter(cuda_device *dev)
{
    const gb_host *host = dev->host;
    int current = -1;
    GB_CUDA_CHECK(cudaGetDevice(&current));
    if (current != dev->ordinal)
        GB_CUDA_CHECK(cudaSetDevice(dev->ordinal));
    return GB_OK;
}

gb_status cuda_begin(cuda_device *dev, const char *kernel, gb_dtype dtype, int64_t rows,
                     int64_t cols)
{
    const gb_host *host = dev->host;
    if (dtype != GB_F32 && dtype != GB_BF16 && dtype != GB_F16) {
        host->set_error(host, "%s on the cuda device takes f32, bf16 or f16 activations; this "
                        "call asks for %s", kernel, gb_dtype_name(dtype));
        return GB_ERR_UNSUPPORTED;
    }
    if (rows < 0 || cols < 0) {
        host->set_error(host, "%s: negative size (%lld, %lld)", kernel, (long long)rows,
                        (long long)cols);
        return GB_ERR_INVALID_ARG;
    }
    return cuda_enter(dev);
}

unsigned cuda_blocks(int64_t n)
{
    /* enough blocks to fill the largest GPUs several times over; kernels stride beyond */
    const int64_t most = 65536;
    int64_t blocks = (n + CUDA_BLOCK - 1) / CUDA_BLOCK;
    return (unsigned)(blocks < 1 ? 1 : blocks > most ? most : blocks);
}

unsigned cuda_resident_blocks(const cuda_device *dev, int64_t tiles, int threads,
                              size_t smem_bytes)
{
    /* sm_80 and sm_90: 2048 threads and 32 blocks per SM; the SM's shared memory is the
     * opt-in limit plus the 1 KiB reserved per block */
    const size_t reserved = 1024;
    int64_t per_sm = 2048 / threads;
    const int64_t by_smem = (int64_t)((dev->smem_optin + reserved) / (smem_bytes + reserved));
    per_sm = per_sm < by_smem ? per_sm : by_smem;
    per_sm = per_sm > 32 ? 32 : per_sm < 1 ? 1 : per_sm;
    const int64_t most = per_sm * dev->sm_count;
    return (unsigned)(tiles < 1 ? 1 : tiles < most ? tiles : most);
}
