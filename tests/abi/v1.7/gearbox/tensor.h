/* gearbox tensors as they cross the plugin boundary.
 *
 * The core owns all tensor memory: it plans every buffer once before the first step and
 * hands plugins raw device pointers plus the shapes in the call's arguments. There is no
 * reference counting, no autograd and no allocation behind a pointer here: a tensor view
 * is plain data, valid for the duration of the call that receives it.
 *
 * gb_tensor is passed by value and is frozen for ABI major 1 (it has no size field and
 * never grows); new information goes into the argument structs that carry tensors.
 */
#ifndef GEARBOX_TENSOR_H
#define GEARBOX_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. Values are frozen for ABI 1. */
typedef enum gb_dtype {
    GB_F32 = 0,    /* IEEE binary32 */
    GB_BF16 = 1,   /* bfloat16: the top 16 bits of a binary32 */
    GB_F16 = 2,    /* IEEE binary16 */
    GB_I32 = 3,    /* signed 32-bit integer (token ids on the device) */
    GB_U16 = 4     /* unsigned 16-bit integer (token files) */
} gb_dtype;

/* Bytes per element of `dtype`; 0 for a value outside the enum. */
static inline size_t gb_dtype_size(gb_dtype dtype)
{
    switch (dtype) {
    case GB_F32: case GB_I32: return 4;
    case GB_BF16: case GB_F16: case GB_U16: return 2;
    }
    return 0;
}

/* Lower-case name of `dtype` ("f32", "bf16", ...); "?" for a value outside the enum. */
static inline const char *gb_dtype_name(gb_dtype dtype)
{
    switch (dtype) {
    case GB_F32: return "f32";
    case GB_BF16: return "bf16";
    case GB_F16: return "f16";
    case GB_I32: return "i32";
    case GB_U16: return "u16";
    }
    return "?";
}

#define GB_MAX_DIMS 4

/* A dense view of device memory: element (i0, i1, ...) lives at
 * data + sum_k(i_k * stride[k]) elements. Unused trailing dims have shape 1. */
typedef struct gb_tensor {
    void *data;                     /* device pointer (host pointer on the CPU device) */
    gb_dtype dtype;
    int32_t ndim;
    int64_t shape[GB_MAX_DIMS];
    int64_t stride[GB_MAX_DIMS];    /* in elements, not bytes */
} gb_tensor;

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_TENSOR_H */
