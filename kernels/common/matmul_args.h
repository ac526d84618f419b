/* The checks a device plugin makes of a matmul call (gearbox/device.h's gb_matmul_args)
 * before running it, shared by device/cpu and device/cuda so both refuse the same calls
 * with the same words: A and B of one activation dtype, C of that dtype or f32, sizes not
 * negative, leading dimensions at least the stored rows' lengths. The struct's size and
 * the 1.2 fields (batch, epilogue) each plugin checks itself. Host code only.
 */
#ifndef GEARBOX_KERNELS_COMMON_MATMUL_ARGS_H
#define GEARBOX_KERNELS_COMMON_MATMUL_ARGS_H

#include <stdio.h>

#include "gearbox/device.h"

/* GB_OK, or the status with the reason in why (cap bytes); `device` names the plugin's
 * device in the message ("cpu", "cuda"). */
static inline gb_status gb_matmul_args_check(const gb_matmul_args *a, const char *device,
                                             char *why, size_t cap)
{
    const gb_dtype t = a->dtype_a;
    if ((t != GB_F32 && t != GB_BF16 && t != GB_F16) || a->dtype_b != t ||
        (a->dtype_c != t && a->dtype_c != GB_F32)) {
        snprintf(why, cap, "matmul on the %s device takes A and B of one dtype (f32, bf16 or "
                 "f16) and C of that dtype or f32; this call asks for A %s, B %s, C %s", device,
                 gb_dtype_name(a->dtype_a), gb_dtype_name(a->dtype_b), gb_dtype_name(a->dtype_c));
        return GB_ERR_UNSUPPORTED;
    }
    if (a->m < 0 || a->n < 0 || a->k < 0) {
        snprintf(why, cap, "matmul: negative size m=%lld n=%lld k=%lld", (long long)a->m,
                 (long long)a->n, (long long)a->k);
        return GB_ERR_INVALID_ARG;
    }
    const int64_t a_cols = a->trans_a ? a->m : a->k, b_cols = a->trans_b ? a->k : a->n;
    if (a->lda < a_cols || a->ldb < b_cols || a->ldc < a->n) {
        snprintf(why, cap, "matmul: leading dimensions lda=%lld ldb=%lld ldc=%lld are below the "
                 "stored row lengths %lld, %lld, %lld", (long long)a->lda, (long long)a->ldb,
                 (long long)a->ldc, (long long)a_cols, (long long)b_cols, (long long)a->n);
        return GB_ERR_INVALID_ARG;
    }
    return GB_OK;
}

#endif /* GEARBOX_KERNELS_COMMON_MATMUL_ARGS_H */
