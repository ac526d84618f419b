// Compiled by tests/build with the nvcc flags CUDA plugins use (cuda_nvcc_args): every
// -Dgpu_arch target, nvcc and host-compiler warnings as errors. convert.h's functions
// are __host__ __device__ under nvcc, so they must compile in a kernel and on the host.
#include "gearbox/convert.h"

__global__ void round_trip(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = gb_f32_from_bf16(gb_bf16_from_f32(in[i])) + gb_f32_from_f16(gb_f16_from_f32(in[i]));
}

float host_round_trip(float x)
{
    return gb_f32_from_bf16(gb_bf16_from_f32(x)) + gb_f32_from_f16(gb_f16_from_f32(x));
}
