/* Exits 0 when the CUDA runtime sees a GPU, else 77 (meson's SKIP) with the reason: the
 * gpu suite's scripts ask it before they run anything on device/cuda.
 * usage: gpu-probe
 */
#include <cuda_runtime.h>
#include <stdio.h>

int main(void)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        printf("SKIP: no NVIDIA GPU (cudaGetDeviceCount: %s, %d devices)\n",
               cudaGetErrorName(err), count);
        return 77;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        printf("%d GPU(s); GPU 0: %s, compute capability %d.%d\n", count, prop.name, prop.major,
               prop.minor);
    return 0;
}
