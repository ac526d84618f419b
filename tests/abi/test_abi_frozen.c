/* The plugin ABI 1.x, frozen: this file compiles only while every public struct, vtable
 * entry and enum value is where the version that added it put it (docs/abi.md).
 *
 * For each struct it states the offset of every field and the size, for each vtable
 * entry its offset and its exact function type (so a changed parameter list fails too),
 * and for each enum its values. Growing a struct by appending is allowed in a minor
 * version: the 1.0 `== size` checks hold only while GB_ABI_MINOR is 0, and each later
 * version's block states where the older parts end (END) and its own exact sizes
 * (SIZES_NOW), so the bump that appends must add a block of its own here. Anything else that
 * breaks a check here is a change of major version.
 *
 * The numbers are those of LP64 Linux (x86-64, AArch64), the platforms gearbox builds
 * for; elsewhere the checks are skipped rather than restated. The run itself only adds
 * the one property C cannot check at compile time: the entry symbol's name.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/attn.h"
#include "gearbox/comm.h"
#include "gearbox/device.h"
#include "gearbox/optim.h"
#include "gearbox/plugin.h"
#include "gearbox/precision.h"
#include "gearbox/tensor.h"

#if defined(__LP64__) && defined(__linux__)
#define FROZEN 1

#define FIELD(type, field, offset) \
    _Static_assert(offsetof(type, field) == (offset), #type "." #field " moved")
/* Appending keeps the old size as a lower bound; within minor 0 it is exact. */
#define SIZE(type, bytes)                                                                  \
    _Static_assert(sizeof(type) >= (bytes), #type " shrank below its ABI 1.0 size");       \
    _Static_assert(GB_ABI_MINOR != 0 || sizeof(type) == (bytes),                            \
                   #type " changed size without a minor version bump")
/* A vtable entry: its offset and its function type, parameter by parameter. */
#define ENTRY(type, field, offset, fn_type)                                                \
    FIELD(type, field, offset);                                                            \
    _Static_assert(_Generic(((type *)0)->field, fn_type: 1, default: 0),                   \
                   #type "." #field " changed its type")
#define VALUE(name, value) _Static_assert((name) == (value), #name " changed its value")
/* Where one version's part of a struct ends: the loader's minimum size for that version
 * (engine/loader.c, abi_versions) and what a plugin built for it passes. */
#define END(type, last_field, bytes)                                                       \
    _Static_assert(offsetof(type, last_field) + sizeof(((type *)0)->last_field) == (bytes), \
                   #type " no longer ends its version at " #bytes " bytes")
/* The exact size in the newest version (the bump that appends must move these). */
#define SIZE_NOW(minor, type, bytes)                                                       \
    _Static_assert(GB_ABI_MINOR != (minor) || sizeof(type) == (bytes),                      \
                   #type " changed size without a minor version bump")

/* The exact sizes of every struct and vtable in one version, in the order of its block. */
#define SIZES_NOW(minor, host, desc, ctx, info, matmul, device_ops, attn_problem, attn_ops,  \
                  step_args, optim_ops, policy, precision_ops, comm_ops)                     \
    SIZE_NOW(minor, gb_host, host);                                                         \
    SIZE_NOW(minor, gb_plugin_desc, desc);                                                  \
    SIZE_NOW(minor, gb_device_ctx, ctx);                                                    \
    SIZE_NOW(minor, gb_device_info, info);                                                  \
    SIZE_NOW(minor, gb_matmul_args, matmul);                                                \
    SIZE_NOW(minor, gb_device_ops, device_ops);                                             \
    SIZE_NOW(minor, gb_attn_problem, attn_problem);                                         \
    SIZE_NOW(minor, gb_attn_ops, attn_ops);                                                 \
    SIZE_NOW(minor, gb_optim_step_args, step_args);                                         \
    SIZE_NOW(minor, gb_optim_ops, optim_ops);                                               \
    SIZE_NOW(minor, gb_precision_policy, policy);                                           \
    SIZE_NOW(minor, gb_precision_ops, precision_ops);                                       \
    SIZE_NOW(minor, gb_comm_ops, comm_ops)

/* ---- plugin.h ---- */
VALUE(GB_ABI_MAJOR, 1);
VALUE(GB_OK, 0);
VALUE(GB_ERR_INVALID_ARG, 1);
VALUE(GB_ERR_CONFIG, 2);
VALUE(GB_ERR_UNSUPPORTED, 3);
VALUE(GB_ERR_NO_MEMORY, 4);
VALUE(GB_ERR_DEVICE, 5);
VALUE(GB_ERR_SYSTEM, 6);
VALUE(GB_ERR_INTERNAL, 7);
VALUE(GB_KIND_DEVICE, 1);
VALUE(GB_KIND_ATTN, 2);
VALUE(GB_KIND_OPTIM, 3);
VALUE(GB_KIND_PRECISION, 4);
VALUE(GB_KIND_COMM, 5);
VALUE(GB_DEVICE_CPU, 1u);
VALUE(GB_DEVICE_CUDA, 2u);
VALUE(GB_OPT_INT, 0);
VALUE(GB_OPT_FLOAT, 1);
VALUE(GB_OPT_BOOL, 2);
VALUE(GB_OPT_STRING, 3);
VALUE(GB_OPT_ENUM, 4);
VALUE(GB_LOG_ERROR, 0);
VALUE(GB_LOG_WARN, 1);
VALUE(GB_LOG_INFO, 2);
VALUE(GB_LOG_DEBUG, 3);

/* gb_option and gb_value are arrays' elements: they never grow, in any minor version. */
FIELD(gb_option, key, 0);
FIELD(gb_option, type, 8);
FIELD(gb_option, default_value, 16);
FIELD(gb_option, min, 24);
FIELD(gb_option, max, 32);
FIELD(gb_option, choices, 40);
FIELD(gb_option, help, 48);
_Static_assert(sizeof(gb_option) == 56, "gb_option changed size: option tables are arrays");
FIELD(gb_value, i, 0);
FIELD(gb_value, f, 0);
FIELD(gb_value, s, 0);
_Static_assert(sizeof(gb_value) == 8, "gb_value changed size: values are arrays");
_Static_assert(_Generic(((gb_value *)0)->i, int64_t: 1, default: 0), "gb_value.i retyped");
_Static_assert(_Generic(((gb_value *)0)->f, double: 1, default: 0), "gb_value.f retyped");

FIELD(gb_host, struct_size, 0);
FIELD(gb_host, abi_major, 8);
FIELD(gb_host, abi_minor, 10);
ENTRY(gb_host, log, 16, void (*)(const gb_host *, gb_log_level, const char *, ...));
ENTRY(gb_host, set_error, 24, void (*)(const gb_host *, const char *, ...));
ENTRY(gb_host, alloc, 32, void *(*)(const gb_host *, size_t));
ENTRY(gb_host, free, 40, void (*)(const gb_host *, void *));
FIELD(gb_host, num_threads, 48);
FIELD(gb_host, core_private, 56);
SIZE(gb_host, 64);

FIELD(gb_plugin_desc, struct_size, 0);
FIELD(gb_plugin_desc, abi_major, 8);
FIELD(gb_plugin_desc, abi_minor, 10);
FIELD(gb_plugin_desc, kind, 12);
FIELD(gb_plugin_desc, name, 16);
FIELD(gb_plugin_desc, version, 24);
FIELD(gb_plugin_desc, description, 32);
FIELD(gb_plugin_desc, devices, 40);
FIELD(gb_plugin_desc, options, 48);
FIELD(gb_plugin_desc, n_options, 56);
FIELD(gb_plugin_desc, ops, 64);
SIZE(gb_plugin_desc, 72);
_Static_assert(_Generic((gb_plugin_entry_fn)0, const gb_plugin_desc *(*)(void): 1, default: 0),
               "gb_plugin_entry_fn changed its type");

/* ---- tensor.h ---- */
VALUE(GB_F32, 0);
VALUE(GB_BF16, 1);
VALUE(GB_F16, 2);
VALUE(GB_I32, 3);
VALUE(GB_U16, 4);
VALUE(GB_MAX_DIMS, 4);
FIELD(gb_tensor, data, 0);
FIELD(gb_tensor, dtype, 8);
FIELD(gb_tensor, ndim, 12);
FIELD(gb_tensor, shape, 16);
FIELD(gb_tensor, stride, 48);
_Static_assert(sizeof(gb_tensor) == 80, "gb_tensor changed size: it is frozen for major 1");

/* ---- device.h ---- */
VALUE(GB_COPY_HOST_TO_DEVICE, 0);
VALUE(GB_COPY_DEVICE_TO_HOST, 1);
VALUE(GB_COPY_DEVICE_TO_DEVICE, 2);
FIELD(gb_device_ctx, struct_size, 0);
FIELD(gb_device_ctx, device, 8);
FIELD(gb_device_ctx, ordinal, 12);
FIELD(gb_device_ctx, stream, 16);
SIZE(gb_device_ctx, 24);
FIELD(gb_device_info, struct_size, 0);
FIELD(gb_device_info, name, 8);
FIELD(gb_device_info, memory_bytes, 136);
FIELD(gb_device_info, peak_flops_f32, 144);
FIELD(gb_device_info, peak_flops_bf16, 152);
SIZE(gb_device_info, 160);
FIELD(gb_matmul_args, struct_size, 0);
FIELD(gb_matmul_args, m, 8);
FIELD(gb_matmul_args, n, 16);
FIELD(gb_matmul_args, k, 24);
FIELD(gb_matmul_args, a, 32);
FIELD(gb_matmul_args, lda, 40);
FIELD(gb_matmul_args, trans_a, 48);
FIELD(gb_matmul_args, dtype_a, 52);
FIELD(gb_matmul_args, b, 56);
FIELD(gb_matmul_args, ldb, 64);
FIELD(gb_matmul_args, trans_b, 72);
FIELD(gb_matmul_args, dtype_b, 76);
FIELD(gb_matmul_args, c, 80);
FIELD(gb_matmul_args, ldc, 88);
FIELD(gb_matmul_args, dtype_c, 96);
FIELD(gb_matmul_args, alpha, 100);
FIELD(gb_matmul_args, beta, 104);
FIELD(gb_matmul_args, bias, 112);
SIZE(gb_matmul_args, 120);

FIELD(gb_device_ops, struct_size, 0);
ENTRY(gb_device_ops, create, 8, gb_status (*)(const gb_host *, const gb_value *, void **));
ENTRY(gb_device_ops, destroy, 16, void (*)(void *));
ENTRY(gb_device_ops, context, 24, gb_status (*)(void *, gb_device_ctx *));
ENTRY(gb_device_ops, info, 32, gb_status (*)(void *, gb_device_info *));
ENTRY(gb_device_ops, alloc, 40, gb_status (*)(void *, size_t, void **));
ENTRY(gb_device_ops, free, 48, void (*)(void *, void *));
ENTRY(gb_device_ops, copy, 56,
      gb_status (*)(void *, void *, const void *, size_t, gb_copy_kind));
ENTRY(gb_device_ops, memset_zero, 64, gb_status (*)(void *, void *, size_t));
ENTRY(gb_device_ops, sync, 72, gb_status (*)(void *));
ENTRY(gb_device_ops, matmul, 80, gb_status (*)(void *, const gb_matmul_args *));
ENTRY(gb_device_ops, embed_forward, 88,
      gb_status (*)(void *, gb_dtype, void *, const int32_t *, const float *, const float *,
                    int64_t, int64_t, int64_t));
ENTRY(gb_device_ops, embed_backward, 96,
      gb_status (*)(void *, gb_dtype, float *, float *, const void *, const int32_t *,
                    int64_t, int64_t, int64_t));
ENTRY(gb_device_ops, layernorm_forward, 104,
      gb_status (*)(void *, gb_dtype, void *, float *, float *, const void *, const float *,
                    const float *, int64_t, int64_t, float));
ENTRY(gb_device_ops, layernorm_backward, 112,
      gb_status (*)(void *, gb_dtype, void *, float *, float *, const void *, const void *,
                    const float *, const float *, const float *, int64_t, int64_t));
ENTRY(gb_device_ops, gelu_forward, 120,
      gb_status (*)(void *, gb_dtype, void *, const void *, int64_t));
ENTRY(gb_device_ops, gelu_backward, 128,
      gb_status (*)(void *, gb_dtype, void *, const void *, const void *, int64_t));
ENTRY(gb_device_ops, add, 136,
      gb_status (*)(void *, gb_dtype, void *, const void *, const void *, int64_t));
ENTRY(gb_device_ops, bias_backward, 144,
      gb_status (*)(void *, gb_dtype, float *, const void *, int64_t, int64_t));
ENTRY(gb_device_ops, cross_entropy, 152,
      gb_status (*)(void *, gb_dtype, float *, void *, const void *, const int32_t *, int64_t,
                    int64_t, float));
ENTRY(gb_device_ops, sum_squares, 160, gb_status (*)(void *, float *, const float *, int64_t));
SIZE(gb_device_ops, 168);

/* ---- attn.h ---- */
FIELD(gb_attn_problem, struct_size, 0);
FIELD(gb_attn_problem, batch, 8);
FIELD(gb_attn_problem, heads, 16);
FIELD(gb_attn_problem, seq_len, 24);
FIELD(gb_attn_problem, head_dim, 32);
FIELD(gb_attn_problem, dtype, 40);
FIELD(gb_attn_problem, causal, 44);
SIZE(gb_attn_problem, 48);

FIELD(gb_attn_ops, struct_size, 0);
ENTRY(gb_attn_ops, create, 8,
      gb_status (*)(const gb_host *, const gb_value *, const gb_device_ctx *, void **));
ENTRY(gb_attn_ops, destroy, 16, void (*)(void *));
ENTRY(gb_attn_ops, eligible, 24, int (*)(void *, const gb_attn_problem *, char *, size_t));
ENTRY(gb_attn_ops, memory, 32,
      gb_status (*)(void *, const gb_attn_problem *, size_t *, size_t *));
ENTRY(gb_attn_ops, forward, 40,
      gb_status (*)(void *, const gb_attn_problem *, gb_tensor, gb_tensor, gb_tensor,
                    gb_tensor, void *, void *));
ENTRY(gb_attn_ops, backward, 48,
      gb_status (*)(void *, const gb_attn_problem *, gb_tensor, gb_tensor, gb_tensor,
                    gb_tensor, gb_tensor, gb_tensor, gb_tensor, gb_tensor, const void *,
                    void *));
SIZE(gb_attn_ops, 56);

/* ---- optim.h ---- */
FIELD(gb_param_group, offset, 0);
FIELD(gb_param_group, count, 8);
FIELD(gb_param_group, decay, 16);
_Static_assert(sizeof(gb_param_group) == 24, "gb_param_group changed size: groups are arrays");
FIELD(gb_optim_step_args, struct_size, 0);
FIELD(gb_optim_step_args, params, 8);
FIELD(gb_optim_step_args, grads, 16);
FIELD(gb_optim_step_args, state, 24);
FIELD(gb_optim_step_args, n, 32);
FIELD(gb_optim_step_args, groups, 40);
FIELD(gb_optim_step_args, n_groups, 48);
FIELD(gb_optim_step_args, step, 56);
FIELD(gb_optim_step_args, lr, 64);
FIELD(gb_optim_step_args, grad_norm_sq, 72);
FIELD(gb_optim_step_args, max_norm, 80);
FIELD(gb_optim_step_args, inv_loss_scale, 84);
FIELD(gb_optim_step_args, params_lowp, 88);
FIELD(gb_optim_step_args, lowp_dtype, 96);
SIZE(gb_optim_step_args, 104);
/* ABI 1.1 (the first in the 1.0 padding after lowp_dtype) */
FIELD(gb_optim_step_args, lowp_stochastic, 100);
FIELD(gb_optim_step_args, lowp_seed, 104);

FIELD(gb_optim_ops, struct_size, 0);
ENTRY(gb_optim_ops, create, 8,
      gb_status (*)(const gb_host *, const gb_value *, const gb_device_ctx *, void **));
ENTRY(gb_optim_ops, destroy, 16, void (*)(void *));
ENTRY(gb_optim_ops, state_bytes, 24, size_t (*)(void *, int64_t));
ENTRY(gb_optim_ops, step, 32, gb_status (*)(void *, const gb_optim_step_args *));
ENTRY(gb_optim_ops, grad_norm_sq, 40, gb_status (*)(void *, float *, const float *, int64_t));
SIZE(gb_optim_ops, 48);

/* ---- precision.h ---- */
FIELD(gb_precision_policy, struct_size, 0);
FIELD(gb_precision_policy, activation_dtype, 8);
FIELD(gb_precision_policy, matmul_dtype, 12);
FIELD(gb_precision_policy, param_dtype, 16);
FIELD(gb_precision_policy, master_weights, 20);
SIZE(gb_precision_policy, 24);
/* ABI 1.1 */
FIELD(gb_precision_policy, stochastic_rounding, 24);

FIELD(gb_precision_ops, struct_size, 0);
ENTRY(gb_precision_ops, create, 8,
      gb_status (*)(const gb_host *, const gb_value *, const gb_device_ctx *, void **));
ENTRY(gb_precision_ops, destroy, 16, void (*)(void *));
ENTRY(gb_precision_ops, eligible, 24, int (*)(void *, const gb_device_ctx *, char *, size_t));
ENTRY(gb_precision_ops, policy, 32, gb_status (*)(void *, gb_precision_policy *));
ENTRY(gb_precision_ops, loss_scale, 40, float (*)(void *));
ENTRY(gb_precision_ops, update, 48, gb_status (*)(void *, int, int *));
ENTRY(gb_precision_ops, state_bytes, 56, size_t (*)(void *));
ENTRY(gb_precision_ops, save_state, 64, gb_status (*)(void *, void *));
ENTRY(gb_precision_ops, load_state, 72, gb_status (*)(void *, const void *));
SIZE(gb_precision_ops, 80);

/* ---- comm.h ---- */
VALUE(GB_COMM_MAX_INFLIGHT, 64);
VALUE(GB_REDUCE_SUM, 0);
VALUE(GB_REDUCE_AVG, 1);
_Static_assert(_Generic((gb_comm_request)0, int64_t: 1, default: 0),
               "gb_comm_request changed its type");
FIELD(gb_comm_ops, struct_size, 0);
ENTRY(gb_comm_ops, create, 8,
      gb_status (*)(const gb_host *, const gb_value *, const gb_device_ctx *, void **));
ENTRY(gb_comm_ops, destroy, 16, void (*)(void *));
ENTRY(gb_comm_ops, rank, 24, int (*)(void *));
ENTRY(gb_comm_ops, world, 32, int (*)(void *));
ENTRY(gb_comm_ops, all_reduce_start, 40,
      gb_status (*)(void *, void *, int64_t, gb_dtype, gb_reduce_op, gb_comm_request *));
ENTRY(gb_comm_ops, all_reduce_wait, 48, gb_status (*)(void *, gb_comm_request));
ENTRY(gb_comm_ops, broadcast, 56, gb_status (*)(void *, void *, size_t, int));
ENTRY(gb_comm_ops, barrier, 64, gb_status (*)(void *));
SIZE(gb_comm_ops, 72);
#else
#define FROZEN 0
#endif

/* ---- ABI 1.1 and 1.2 ---------------------------------------------------------------- */
/* 1.0's and 1.1's descriptors and device vtables end where the 1.2 ones append */
END(gb_plugin_desc, ops, 72);
END(gb_device_ops, sum_squares, 168);
END(gb_optim_step_args, lowp_seed, 112);   /* 1.1 */
END(gb_precision_policy, stochastic_rounding, 28);   /* 1.1 */
/* 1.2 */
VALUE(GB_ERR_NOT_READY, 8);
VALUE(GB_CAP_DETERMINISTIC, 1u);
VALUE(GB_CAP_LOWP_COPY, 2u);
VALUE(GB_CAP_STOCHASTIC_ROUNDING, 4u);
VALUE(GB_CAP_MATMUL_BATCHED, 8u);
VALUE(GB_CAP_MATMUL_EPILOGUES, 16u);
VALUE(GB_CAP_GELU_TANH, 32u);
VALUE(GB_CAP_TF32, 64u);
VALUE(GB_CAP_QUEUED_MEMORY, 128u);
VALUE(GB_CAPS_UNDECLARED, 1u << 31);
VALUE(GB_EPILOGUE_DEFAULT, 0);
VALUE(GB_EPILOGUE_GELU, 1);
VALUE(GB_EPILOGUE_GELU_TANH, 2);
VALUE(GB_EPILOGUE_DGELU, 3);
VALUE(GB_EPILOGUE_DGELU_TANH, 4);
VALUE(GB_EPILOGUE_BIAS_GRAD, 5);
FIELD(gb_host, device_ordinal, 64);
FIELD(gb_plugin_desc, dtypes, 72);
FIELD(gb_plugin_desc, caps, 76);
FIELD(gb_device_ctx, ops, 24);
FIELD(gb_device_ctx, self, 32);
FIELD(gb_device_ctx, host_access, 40);
FIELD(gb_device_ctx, cc_major, 44);
FIELD(gb_device_ctx, cc_minor, 48);
FIELD(gb_device_ctx, caps, 52);
FIELD(gb_device_info, libraries, 160);
FIELD(gb_device_info, free_bytes, 416);
FIELD(gb_device_info, cc_major, 424);
FIELD(gb_device_info, cc_minor, 428);
FIELD(gb_device_info, driver, 432);
FIELD(gb_matmul_args, batch, 120);
FIELD(gb_matmul_args, stride_a, 128);
FIELD(gb_matmul_args, stride_b, 136);
FIELD(gb_matmul_args, stride_c, 144);
FIELD(gb_matmul_args, epilogue, 152);
FIELD(gb_matmul_args, aux, 160);
FIELD(gb_matmul_args, bias_grad, 168);
FIELD(gb_matmul_args, allow_tf32, 176);
typedef gb_status (*gelu_fn)(void *, gb_dtype, void *, const void *, int64_t);
typedef gb_status (*gelu_bwd_fn)(void *, gb_dtype, void *, const void *, const void *, int64_t);
ENTRY(gb_device_ops, gelu_tanh_forward, 168, gelu_fn);
ENTRY(gb_device_ops, gelu_tanh_backward, 176, gelu_bwd_fn);
ENTRY(gb_device_ops, alloc_host, 184, gb_status (*)(void *, size_t, void **));
ENTRY(gb_device_ops, free_host, 192, void (*)(void *, void *));
ENTRY(gb_device_ops, copy_async, 200,
      gb_status (*)(void *, void *, const void *, size_t, gb_copy_kind, void *));
ENTRY(gb_device_ops, stream_create, 208, gb_status (*)(void *, void **));
ENTRY(gb_device_ops, stream_destroy, 216, void (*)(void *, void *));
ENTRY(gb_device_ops, event_create, 224, gb_status (*)(void *, void **));
ENTRY(gb_device_ops, event_destroy, 232, void (*)(void *, void *));
ENTRY(gb_device_ops, event_record, 240, gb_status (*)(void *, void *, void *));
ENTRY(gb_device_ops, stream_wait_event, 248, gb_status (*)(void *, void *, void *));
ENTRY(gb_device_ops, event_query, 256, gb_status (*)(void *, void *));
ENTRY(gb_device_ops, event_sync, 264, gb_status (*)(void *, void *));
ENTRY(gb_device_ops, enqueue_host, 272,
      gb_status (*)(void *, void *, gb_host_fn, const void *, size_t));
FIELD(gb_attn_problem, allow_tf32, 48);
FIELD(gb_precision_policy, tf32, 28);

/* ---- ABI 1.3 ------------------------------------------------------------------------ */
/* 1.2's device vtable ends where 1.3 appends cross_entropy_ld */
END(gb_device_ops, enqueue_host, 280);
ENTRY(gb_device_ops, cross_entropy_ld, 280,
      gb_status (*)(void *, gb_dtype, float *, void *, const void *, int64_t, const int32_t *,
                    int64_t, int64_t, float));
SIZES_NOW(3, 72, 80, 56, 496, 184, 288, 56, 56, 112, 48, 32, 80, 72);

/* ---- ABI 1.4 ------------------------------------------------------------------------ */
/* 1.3's device description and vtable, and every earlier precision vtable, end where 1.4
 * appends */
END(gb_device_info, driver, 496);
FIELD(gb_device_info, pci_bus_id, 496);
END(gb_device_ops, cross_entropy_ld, 288);
END(gb_precision_ops, load_state, 80);
VALUE(GB_CAP_DEVICE_LOSS_SCALE, 256u);
FIELD(gb_loss_scaler, growth_factor, 0);
FIELD(gb_loss_scaler, backoff_factor, 8);
FIELD(gb_loss_scaler, growth_interval, 16);
FIELD(gb_loss_scaler, min_scale, 24);
FIELD(gb_loss_scaler, enabled, 28);
FIELD(gb_loss_scaler, scale, 32);
FIELD(gb_loss_scaler, reserved, 36);
FIELD(gb_loss_scaler, growth_tracker, 40);
FIELD(gb_loss_scaler, skipped_steps, 48);
FIELD(gb_loss_scaler, total_steps, 56);
_Static_assert(sizeof(gb_loss_scaler) == 64, "gb_loss_scaler (device memory) changed size");
ENTRY(gb_device_ops, cross_entropy_scaled, 288,
      gb_status (*)(void *, gb_dtype, float *, void *, const void *, int64_t, const int32_t *,
                    int64_t, int64_t, float, const float *));
ENTRY(gb_device_ops, loss_scaler_update, 296,
      gb_status (*)(void *, gb_loss_scaler *, const float *));
ENTRY(gb_device_ops, graph_begin, 304, gb_status (*)(void *));
ENTRY(gb_device_ops, graph_end, 312, gb_status (*)(void *, void **));
ENTRY(gb_device_ops, graph_launch, 320, gb_status (*)(void *, void *));
ENTRY(gb_device_ops, graph_destroy, 328, void (*)(void *, void *));
FIELD(gb_optim_step_args, loss_scale, 112);
ENTRY(gb_precision_ops, scaler_get, 80, gb_status (*)(void *, gb_loss_scaler *));
ENTRY(gb_precision_ops, scaler_set, 88, gb_status (*)(void *, const gb_loss_scaler *));
SIZES_NOW(4, 72, 80, 56, 528, 184, 336, 56, 56, 120, 48, 32, 96, 72);

/* ---- ABI 1.5 ------------------------------------------------------------------------ */
/* 1.4's device vtable ends where 1.5 appends add_layernorm_forward */
END(gb_device_ops, graph_destroy, 336);
END(gb_matmul_args, allow_tf32, 180);
FIELD(gb_matmul_args, bias_lowp, 184);
ENTRY(gb_device_ops, add_layernorm_forward, 336,
      gb_status (*)(void *, gb_dtype, void *, void *, float *, float *, const void *,
                    const void *, const float *, const float *, int64_t, int64_t, float));
SIZES_NOW(5, 72, 80, 56, 528, 192, 344, 56, 56, 120, 48, 32, 96, 72);

/* ---- ABI 1.6 ------------------------------------------------------------------------ */
/* 1.5's device vtable ends where 1.6 appends describe; its context where memory begins */
END(gb_device_ops, add_layernorm_forward, 344);
END(gb_device_ctx, caps, 56);
VALUE(GB_DEVICE_CPU, 1u);
VALUE(GB_DEVICE_CUDA, 2u);
VALUE(GB_DEVICE_ANY_HOST, 1u << 16);
VALUE(GB_MEMORY_UNSTATED, 0);
VALUE(GB_MEMORY_HOST, 1);
VALUE(GB_MEMORY_DEVICE, 2);
FIELD(gb_device_ctx, memory, 56);
FIELD(gb_device_desc, struct_size, 0);
FIELD(gb_device_desc, family, 8);
FIELD(gb_device_desc, memory, 40);
FIELD(gb_device_desc, native_dtypes, 44);
FIELD(gb_device_desc, preferred_precision, 48);
FIELD(gb_device_desc, preferred_why, 64);
FIELD(gb_device_desc, asynchronous, 256);
ENTRY(gb_device_ops, describe, 344, gb_status (*)(const gb_host *, gb_device_desc *));
SIZES_NOW(6, 72, 80, 64, 528, 192, 352, 56, 56, 120, 48, 32, 96, 72);
SIZE_NOW(6, gb_device_desc, 264);

/* ---- ABI 1.7 ------------------------------------------------------------------------ */
/* 1.6's device vtable ends where 1.7 appends dropout, its attention vtable where 1.7
 * appends forward_cached */
END(gb_device_ops, describe, 352);
ENTRY(gb_device_ops, dropout, 352,
      gb_status (*)(void *, gb_dtype, void *, const void *, int64_t, float, uint64_t));
END(gb_attn_ops, backward, 56);
ENTRY(gb_attn_ops, forward_cached, 56,
      gb_status (*)(void *, const gb_attn_problem *, int64_t, gb_tensor, gb_tensor, gb_tensor,
                    gb_tensor, gb_tensor, gb_tensor));
SIZES_NOW(7, 72, 80, 64, 528, 192, 360, 56, 64, 120, 48, 32, 96, 72);
SIZE_NOW(7, gb_device_desc, 264);

/* ---- ABI 1.8 ------------------------------------------------------------------------ */
/* 1.7's descriptor ends where 1.8 appends the device families */
END(gb_plugin_desc, caps, 80);
FIELD(gb_plugin_desc, families, 80);
/* 1.7's comm vtable ends where 1.8 appends the sharded collectives */
END(gb_comm_ops, barrier, 72);
ENTRY(gb_comm_ops, reduce_scatter_start, 72,
      gb_status (*)(void *, void *, void *, int64_t, gb_dtype, gb_reduce_op, gb_comm_request *));
ENTRY(gb_comm_ops, all_gather, 80, gb_status (*)(void *, const void *, void *, int64_t, gb_dtype));
VALUE(GB_CAP_RANGE_STEP, 1u << 9);
/* 1.7's optimizer vtable ends where 1.8 appends bind_params, its step arguments where 1.8
 * appends workspace */
END(gb_optim_ops, grad_norm_sq, 48);
END(gb_optim_step_args, loss_scale, 120);
FIELD(gb_optim_step_args, workspace, 120);
FIELD(gb_optim_step_args, lr_max, 128);
ENTRY(gb_optim_ops, bind_params, 48,
      gb_status (*)(void *, const gb_optim_params *, size_t *));
VALUE(GB_PARAM_MATRIX, 0);
VALUE(GB_PARAM_EMBEDDING, 1);
VALUE(GB_PARAM_HEAD, 2);
VALUE(GB_PARAM_BIAS, 3);
VALUE(GB_PARAM_NORM, 4);
FIELD(gb_optim_param, name, 0);
FIELD(gb_optim_param, offset, 8);
FIELD(gb_optim_param, rows, 16);
FIELD(gb_optim_param, cols, 24);
FIELD(gb_optim_param, role, 32);
FIELD(gb_optim_param, decay, 36);
FIELD(gb_optim_param, dtype, 40);
FIELD(gb_optim_param, tied_head, 44);
FIELD(gb_optim_params, struct_size, 0);
FIELD(gb_optim_params, params, 8);
FIELD(gb_optim_params, count, 16);
FIELD(gb_optim_params, param_size, 24);
FIELD(gb_optim_params, n, 32);
SIZES_NOW(8, 72, 88, 64, 528, 192, 360, 56, 64, 136, 56, 32, 96, 88);
SIZE_NOW(8, gb_device_desc, 264);
SIZE_NOW(8, gb_optim_param, 48);
SIZE_NOW(8, gb_optim_params, 40);

int main(void)
{
    if (!FROZEN) {
        printf("SKIP: the frozen layout is stated for LP64 Linux only\n");
        return 77;
    }
    if (strcmp(GB_PLUGIN_ENTRY_NAME, "gearbox_plugin_entry") != 0) {
        printf("FAIL: GB_PLUGIN_ENTRY_NAME is \"%s\", ABI 1 says \"gearbox_plugin_entry\"\n",
               GB_PLUGIN_ENTRY_NAME);
        return 1;
    }
    printf("plugin ABI %d.%d: every struct, vtable entry and enum value is where 1.0 put it\n",
           GB_ABI_MAJOR, GB_ABI_MINOR);
    return 0;
}
