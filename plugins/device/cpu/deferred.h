/* The kernel entries of the CPU device's vtable, run at once or queued (deferred.c). Each
 * has the signature of its gb_device_ops entry and of the kernel it runs (cpu_device.h). */
#ifndef GB_DEVICE_CPU_DEFERRED_H
#define GB_DEVICE_CPU_DEFERRED_H

#include "gearbox/device.h"

gb_status cpu_q_matmul(void *self, const gb_matmul_args *args);
gb_status cpu_q_embed_forward(void *self, gb_dtype dtype, void *out, const int32_t *tokens,
                              const float *wte, const float *wpe, int64_t B, int64_t T,
                              int64_t C);
gb_status cpu_q_embed_backward(void *self, gb_dtype dtype, float *dwte, float *dwpe,
                               const void *dout, const int32_t *tokens, int64_t B, int64_t T,
                               int64_t C);
gb_status cpu_q_layernorm_forward(void *self, gb_dtype dtype, void *out, float *mean,
                                  float *rstd, const void *x, const float *weight,
                                  const float *bias, int64_t N, int64_t C, float eps);
gb_status cpu_q_layernorm_backward(void *self, gb_dtype dtype, void *dx, float *dweight,
                                   float *dbias, const void *dout, const void *x,
                                   const float *weight, const float *mean, const float *rstd,
                                   int64_t N, int64_t C);
gb_status cpu_q_gelu_forward(void *self, gb_dtype dtype, void *out, const void *x, int64_t n);
gb_status cpu_q_gelu_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                              const void *dout, int64_t n);
gb_status cpu_q_gelu_tanh_forward(void *self, gb_dtype dtype, void *out, const void *x,
                                  int64_t n);
gb_status cpu_q_gelu_tanh_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                                   const void *dout, int64_t n);
gb_status cpu_q_add(void *self, gb_dtype dtype, void *out, const void *a, const void *b,
                    int64_t n);
gb_status cpu_q_bias_backward(void *self, gb_dtype dtype, float *dbias, const void *dout,
                              int64_t N, int64_t C);
gb_status cpu_q_cross_entropy(void *self, gb_dtype dtype, float *losses, void *dlogits,
                              const void *logits, const int32_t *targets, int64_t N,
                              int64_t V, float dloss);
gb_status cpu_q_cross_entropy_ld(void *self, gb_dtype dtype, float *losses, void *dlogits,
                                 const void *logits, int64_t ld, const int32_t *targets,
                                 int64_t N, int64_t V, float dloss);
gb_status cpu_q_sum_squares(void *self, float *out, const float *x, int64_t n);
gb_status cpu_q_cross_entropy_scaled(void *self, gb_dtype dtype, float *losses, void *dlogits,
                                     const void *logits, int64_t ld, const int32_t *targets,
                                     int64_t N, int64_t V, float dloss,
                                     const float *dloss_scale);
/* One step of the loss scaler in device memory (kernels/common/loss_scale.h). */
gb_status cpu_q_loss_scaler_update(void *self, gb_loss_scaler *scaler, const float *norm_sq);

#endif /* GB_DEVICE_CPU_DEFERRED_H */
