/* What the CUDA device's matmul (matmul.c) runs around cuBLASLt: the element-wise GELU
 * epilogues that cuBLASLt does not fuse (the exact form always, the tanh form where it has
 * no algorithm), a 16-bit copy of a bias for a 16-bit C, a matmul with k == 0, and the
 * bias gradient of a plain (untransposed) A.
 *
 * Matrices are `batch` row-major (m, n) blocks with row stride ld, stride_c elements apart;
 * one thread per element, striding. The GELU formulas are kernels/common/gelu.h's, the
 * activation types kernels/cuda/act.cuh's.
 */
#include "act.cuh"
#include "cuda_device.h"
#include "cuda_status.h"
#include "gelu.h"

/* Element e of `batch` (m, n) matrices, as an offset: row-major with row stride ld. */
static __device__ __forceinline__ int64_t matrix_offset(int64_t e, int64_t m, int64_t n,
                                                        int64_t ld, int64_t stride)
{
    const int64_t j = e % n, i = e / n % m, b = e / n / m;
    return b * stride + i * ld + j;
}

// dst (n) act; src (n)
static __global__ void cast_kernel(void *dst, gb_dtype dtype, const float *src, int64_t n)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        gb_act_store(dst, dtype, i, src[i]);
}

extern "C" gb_status cuda_cast_from_f32(cuda_device *dev, void *dst, gb_dtype dtype,
                                        const float *src, int64_t n)
{
    const gb_host *host = dev->host;
    cast_kernel<<<cuda_blocks(n), CUDA_BLOCK, 0, dev->compute>>>(dst, dtype, src, n);
    GB_CUDA_CHECK_LAUNCH("cast_kernel");
    return GB_OK;
}

/* c = gelu(pre), or (derivative) c = c * gelu'(pre); pre may be c. */
// c, pre (batch, m, n) act, row stride ld
static __global__ void gelu_epilogue_kernel(int tanh_form, int derivative, void *c,
                                            const void *pre, gb_dtype dtype, int64_t m,
                                            int64_t n, int64_t ld, int64_t stride, int64_t total)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        const int64_t at = matrix_offset(e, m, n, ld, stride);
        const float x = gb_act_load(pre, dtype, at);
        float v;
        if (derivative)
            v = gb_act_load(c, dtype, at) * (tanh_form ? gb_gelu_tanh_grad(x) : gb_gelu_erf_grad(x));
        else
            v = tanh_form ? gb_gelu_tanh(x) : gb_gelu_erf(x);
        gb_act_store(c, dtype, at, v);
    }
}

static gb_status gelu_epilogue(cuda_device *dev, int tanh_form, int derivative, void *c,
                               const void *pre, gb_dtype dtype, int64_t m, int64_t n,
                               int64_t ld, int64_t batch, int64_t stride_c)
{
    const gb_host *host = dev->host;
    const int64_t total = batch * m * n;
    gelu_epilogue_kernel<<<cuda_blocks(total), CUDA_BLOCK, 0, dev->compute>>>(
        tanh_form, derivative, c, pre, dtype, m, n, ld, stride_c, total);
    GB_CUDA_CHECK_LAUNCH("gelu_epilogue_kernel");
    return GB_OK;
}

extern "C" gb_status cuda_gelu_after_matmul(cuda_device *dev, int tanh_form, void *c,
                                            const void *pre, gb_dtype dtype, int64_t m,
                                            int64_t n, int64_t ld, int64_t batch,
                                            int64_t stride_c)
{
    return gelu_epilogue(dev, tanh_form, 0, c, pre, dtype, m, n, ld, batch, stride_c);
}

extern "C" gb_status cuda_dgelu_after_matmul(cuda_device *dev, int tanh_form, void *c,
                                             const void *aux, gb_dtype dtype, int64_t m,
                                             int64_t n, int64_t ld, int64_t batch,
                                             int64_t stride_c)
{
    return gelu_epilogue(dev, tanh_form, 1, c, aux, dtype, m, n, ld, batch, stride_c);
}

/* C = beta C + bias (the CPU device's order), then the epilogue. */
// c, aux (batch, m, n) act, row stride ld; bias (n) or NULL
static __global__ void without_k_kernel(gb_matmul_epilogue epilogue, void *c, void *aux,
                                        gb_dtype dtype, const float *bias, float beta,
                                        int64_t m, int64_t n, int64_t ld, int64_t stride,
                                        int64_t total)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        const int64_t at = matrix_offset(e, m, n, ld, stride);
        float v = beta != 0.0f ? beta * gb_act_load(c, dtype, at) : 0.0f;
        v = bias ? v + bias[e % n] : v;
        switch (epilogue) {
        case GB_EPILOGUE_GELU:
        case GB_EPILOGUE_GELU_TANH:
            if (aux)
                gb_act_store(aux, dtype, at, v);
            v = epilogue == GB_EPILOGUE_GELU ? gb_gelu_erf(v) : gb_gelu_tanh(v);
            break;
        case GB_EPILOGUE_DGELU:
            v = 0.0f * gb_gelu_erf_grad(gb_act_load(aux, dtype, at));
            break;
        case GB_EPILOGUE_DGELU_TANH:
            v = 0.0f * gb_gelu_tanh_grad(gb_act_load(aux, dtype, at));
            break;
        default:
            break;
        }
        gb_act_store(c, dtype, at, v);
    }
}

extern "C" gb_status cuda_matmul_without_k(cuda_device *dev, const gb_matmul_args *args,
                                           gb_matmul_epilogue epilogue, void *aux,
                                           int64_t batch, int64_t stride_c)
{
    const gb_host *host = dev->host;
    const int64_t total = batch * args->m * args->n;
    without_k_kernel<<<cuda_blocks(total), CUDA_BLOCK, 0, dev->compute>>>(
        epilogue, args->c, aux, args->dtype_c, args->bias, args->beta, args->m, args->n,
        args->ldc, stride_c, total);
    GB_CUDA_CHECK_LAUNCH("without_k_kernel");
    return GB_OK;
}

/* bias_grad[i] += the sum over batches and k of A[i, k], in that order, in double. */
// bias_grad (m) +=; a (batch, m, k) act, row stride lda
static __global__ void row_sums_kernel(float *bias_grad, const void *a, gb_dtype dtype,
                                       int64_t m, int64_t k, int64_t lda, int64_t batch,
                                       int64_t stride_a)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += step) {
        double acc = 0.0;
        for (int64_t b = 0; b < batch; b++)
            for (int64_t kk = 0; kk < k; kk++)
                acc += (double)gb_act_load(a, dtype, b * stride_a + i * lda + kk);
        bias_grad[i] += (float)acc;
    }
}

extern "C" gb_status cuda_row_sums(cuda_device *dev, float *bias_grad, const void *a,
                                   gb_dtype dtype, int64_t m, int64_t k, int64_t lda,
                                   int64_t batch, int64_t stride_a)
{
    const gb_host *host = dev->host;
    row_sums_kernel<<<cuda_blocks(m), CUDA_BLOCK, 0, dev->compute>>>(bias_grad, a, dtype, m, k,
                                                                    lda, batch, stride_a);
    GB_CUDA_CHECK_LAUNCH("row_sums_kernel");
    return GB_OK;
}
