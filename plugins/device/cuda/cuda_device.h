/* The CUDA device plugin's instance and the entries each source file contributes to its
 * vtable (device_cuda.c assembles them). Included by the C host files and by the .cu
 * kernel files, so it is plain C with C linkage.
 *
 * An instance owns one GPU (gb_host.device_ordinal), one compute stream that every kernel,
 * copy, memset and matmul of the vtable is queued on, a cuBLASLt handle with its
 * workspace, and a scratch buffer for the kernels' partial sums; all of it is allocated in
 * create(), so no kernel allocates. Like a CUDA stream it is used by one host thread at a
 * time; its caches are not locked.
 */
#ifndef GB_DEVICE_CUDA_H
#define GB_DEVICE_CUDA_H

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "device_kernels.h"
#include "gearbox/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_matmul_cache cuda_matmul_cache;

typedef struct cuda_device {
    const gb_host *host;
    int ordinal;                /* the GPU, as cudaSetDevice numbers it */
    int cc_major, cc_minor;
    int sm_count;
    size_t smem_optin;          /* cudaDeviceProp.sharedMemPerBlockOptin: an SM's shared
                                   memory less the 1 KiB it reserves per block */
    char name[128];             /* cudaDeviceProp.name */
    uint64_t memory_bytes;      /* cudaDeviceProp.totalGlobalMem */
    cudaStream_t compute;       /* the compute stream (gb_device_ctx.stream) */
    cublasLtHandle_t lt;
    void *workspace;            /* cuBLASLt's, CUDA_LT_WORKSPACE bytes */
    void *scratch;              /* partial sums of the reductions, 16-bit bias copies */
    size_t scratch_bytes;
    cuda_matmul_cache *matmul;  /* plans by shape (matmul.c) */
    int host_failed;            /* first failure of queued host work (gb_status), 0 if
                                   none; written from CUDA's callback thread (atomics) */
    int recording;              /* the compute stream is captured into a graph (ABI 1.4) */
} cuda_device;

/* cuBLASLt's workspace: what its fastest Hopper kernels ask for at GPT sizes. */
#define CUDA_LT_WORKSPACE (32u << 20)
/* The kernels' scratch: sums over rows that need more partials than fit are done a slab
 * of columns at a time, so this bounds speed, not size. */
#define CUDA_SCRATCH_BYTES (32u << 20)

/* Threads per block of the element-wise kernels. */
#define CUDA_BLOCK 256

/* ---- helpers (calls.c) ---- */
/* Makes the instance's GPU current on the calling thread (a no-op when it already is). */
gb_status cuda_enter(cuda_device *dev);
/* cuda_enter after checking a kernel's dtype and sizes; GB_OK, or the error with its
 * message set. Every vtable entry that queues a kernel starts with it. */
gb_status cuda_begin(cuda_device *dev, const char *kernel, gb_dtype dtype, int64_t rows,
                     int64_t cols);
/* Blocks for a 1-D launch over n elements, capped (kernels stride over the rest). */
unsigned cuda_blocks(int64_t n);
/* Blocks for a kernel whose blocks loop over `tiles` tiles, each block loading what every
 * tile shares once: one per tile, but no more than the GPU holds at once (by threads and
 * shared memory per SM), so every block is resident and the shared data is read once per
 * block rather than once per tile. */
unsigned cuda_resident_blocks(const cuda_device *dev, int64_t tiles, int threads,
                              size_t smem_bytes);

/* ---- kernels: the gb_device_ops entries (one .cu file each) ---- */
gb_status cuda_matmul_open(cuda_device *dev);
void cuda_matmul_close(cuda_device *dev);
GB_DEVICE_KERNELS(cuda);
GB_DEVICE_LOSS_KERNELS(cuda);
gb_status cuda_add_layernorm_forward(void *self, gb_dtype dtype, void *sum, void *out,
                                     float *mean, float *rstd, const void *a, const void *b,
                                     const float *weight, const float *bias, int64_t N,
                                     int64_t C, float eps);

/* ---- the column sums behind bias and LayerNorm gradients (reduce.cu) ---- */
/* dst[c] += the sum over the rows r of src[r, c], for `rows` rows of `cols` columns with
 * row stride `ld`, in reduce_order.h's chunk order: bias_backward, and the bias gradient
 * of a matmul (where `rows` spans `batch` matrices of rows / batch rows each, batch_stride
 * elements apart). */
gb_status cuda_column_sums(cuda_device *dev, const char *kernel, float *dst, const void *src,
                           gb_dtype dtype, int64_t rows, int64_t cols, int64_t ld,
                           int64_t batch, int64_t batch_stride);

/* dst[c] += the sum over p of partials[p * stride + c] in increasing p, for c < cols, and
 * where dst2 is not NULL dst2[c] += the same of partials[second + p * stride + c], in the
 * same launch. */
gb_status cuda_add_partials(cuda_device *dev, float *dst, float *dst2, const double *partials,
                            int64_t chunks, int64_t stride, int64_t cols, int64_t second);
/* How many columns' partials fit the scratch at once (at most cols; 0 when not even one
 * column's do): `chunks` partials of `per_column` doubles each per column. */
int64_t cuda_slab_columns(cuda_device *dev, int64_t chunks, int64_t per_column, int64_t cols);

/* ---- what matmul.c runs around cuBLASLt (epilogue.cu) ---- */
/* dst (n) of `dtype` = src (n) f32, rounded: a 16-bit copy of a bias for cuBLASLt. */
gb_status cuda_cast_from_f32(cuda_device *dev, void *dst, gb_dtype dtype, const float *src,
                             int64_t n);
/* For each of `batch` (m, n) matrices with row stride ld, stride_c apart:
 * c = gelu(pre) (pre may be c), exact or tanh form. */
gb_status cuda_gelu_after_matmul(cuda_device *dev, int tanh_form, void *c, const void *pre,
                                 gb_dtype dtype, int64_t m, int64_t n, int64_t ld,
                                 int64_t batch, int64_t stride_c);
/* The same shapes: c *= gelu'(aux). */
gb_status cuda_dgelu_after_matmul(cuda_device *dev, int tanh_form, void *c, const void *aux,
                                  gb_dtype dtype, int64_t m, int64_t n, int64_t ld,
                                  int64_t batch, int64_t stride_c);
/* A matmul with k == 0 (the product is all zeros): c = beta c + bias, then the epilogue
 * (GELU forms: aux, when set, = that pre-activation and c = gelu of it; DGELU forms: c = 0
 * times gelu'(aux)). bias (n) f32 or NULL. */
gb_status cuda_matmul_without_k(cuda_device *dev, const gb_matmul_args *args,
                                gb_matmul_epilogue epilogue, void *aux, int64_t batch,
                                int64_t stride_c);
/* bias_grad (m) += the sum over k of A[i, k] for a plain (not transposed) A (m, k) with
 * row stride lda, over `batch` matrices stride_a apart. */
gb_status cuda_row_sums(cuda_device *dev, float *bias_grad, const void *a, gb_dtype dtype,
                        int64_t m, int64_t k, int64_t lda, int64_t batch, int64_t stride_a);

#ifdef __cplusplus
}
#endif
#endif /* GB_DEVICE_CUDA_H */
