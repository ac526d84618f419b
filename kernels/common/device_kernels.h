/* The kernel entries of gb_device_ops (gearbox/device.h) as the device plugins declare
 * them: one prototype list, declared under each plugin's prefix. GB_DEVICE_KERNELS(cpu)
 * declares cpu_matmul, cpu_embed_forward, ... cpu_sum_squares, each with its vtable
 * entry's signature; GB_DEVICE_LOSS_KERNELS adds the loss entries that only the queued
 * CPU entries and CUDA define. Header-only; plain C, usable inside extern "C".
 */
#ifndef GEARBOX_KERNELS_COMMON_DEVICE_KERNELS_H
#define GEARBOX_KERNELS_COMMON_DEVICE_KERNELS_H

#include "gearbox/device.h"

#define GB_DEVICE_KERNELS(prefix)                                                           \
    gb_status prefix##_matmul(void *self, const gb_matmul_args *args);                      \
    gb_status prefix##_embed_forward(void *self, gb_dtype dtype, void *out,                 \
                                     const int32_t *tokens, const float *wte,              \
                                     const float *wpe, int64_t B, int64_t T, int64_t C);   \
    gb_status prefix##_embed_backward(void *self, gb_dtype dtype, float *dwte, float *dwpe, \
                                      const void *dout, const int32_t *tokens, int64_t B,  \
                                      int64_t T, int64_t C);                                \
    gb_status prefix##_layernorm_forward(void *self, gb_dtype dtype, void *out, float *mean, \
                                         float *rstd, const void *x, const float *weight,  \
                                         const float *bias, int64_t N, int64_t C,          \
                                         float eps);                                        \
    gb_status prefix##_layernorm_backward(void *self, gb_dtype dtype, void *dx,             \
                                          float *dweight, float *dbias, const void *dout,  \
                                          const void *x, const float *weight,              \
                                          const float *mean, const float *rstd, int64_t N, \
                                          int64_t C);                                       \
    gb_status prefix##_gelu_forward(void *self, gb_dtype dtype, void *out, const void *x,   \
                                    int64_t n);                                             \
    gb_status prefix##_gelu_backward(void *self, gb_dtype dtype, void *dx, const void *x,   \
                                     const void *dout, int64_t n);                          \
    gb_status prefix##_gelu_tanh_forward(void *self, gb_dtype dtype, void *out,             \
                                         const void *x, int64_t n);                         \
    gb_status prefix##_gelu_tanh_backward(void *self, gb_dtype dtype, void *dx,             \
                                          const void *x, const void *dout, int64_t n);      \
    gb_status prefix##_add(void *self, gb_dtype dtype, void *out, const void *a,            \
                           const void *b, int64_t n);                                       \
    gb_status prefix##_bias_backward(void *self, gb_dtype dtype, float *dbias,              \
                                     const void *dout, int64_t N, int64_t C);               \
    gb_status prefix##_cross_entropy_ld(void *self, gb_dtype dtype, float *losses,          \
                                        void *dlogits, const void *logits, int64_t ld,      \
                                        const int32_t *targets, int64_t N, int64_t V,       \
                                        float dloss);                                       \
    gb_status prefix##_sum_squares(void *self, float *out, const float *x, int64_t n);      \
    gb_status prefix##_dropout(void *self, gb_dtype dtype, void *out, const void *in,       \
                               int64_t n, float p, uint64_t seed)

#define GB_DEVICE_LOSS_KERNELS(prefix)                                                      \
    gb_status prefix##_cross_entropy(void *self, gb_dtype dtype, float *losses,             \
                                     void *dlogits, const void *logits,                     \
                                     const int32_t *targets, int64_t N, int64_t V,          \
                                     float dloss);                                          \
    gb_status prefix##_cross_entropy_scaled(void *self, gb_dtype dtype, float *losses,      \
                                            void *dlogits, const void *logits, int64_t ld,  \
                                            const int32_t *targets, int64_t N, int64_t V,   \
                                            float dloss, const float *dloss_scale);         \
    /* One step of the loss scaler in device memory (kernels/common/loss_scale.h). */       \
    gb_status prefix##_loss_scaler_update(void *self, gb_loss_scaler *scaler,               \
                                          const float *norm_sq)

#endif /* GEARBOX_KERNELS_COMMON_DEVICE_KERNELS_H */
