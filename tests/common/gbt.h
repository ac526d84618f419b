/* Reference tensor files ("gbt") for the numeric tests, and the comparison they share.
 *
 * A gbt file holds named tensors that a PyTorch script (tests/reference/) wrote once:
 *   magic "GBTENSR1" (8 bytes); uint32 count; then per tensor: uint32 name_len, the name
 *   (no NUL), uint32 dtype (0 = f32, 3 = i32, the gb_dtype values), uint32 ndim,
 *   int64 shape[ndim], and the data, little-endian and row-major.
 * The reader loads the whole file, checks that every length fits, and gives each tensor
 * its own aligned copy of the data. It is test code: no writing, no memory mapping, no
 * dtypes beyond f32 and i32, and a little-endian host is assumed.
 */
#ifndef GEARBOX_TESTS_GBT_H
#define GEARBOX_TESTS_GBT_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/tensor.h"

#define GBT_MAX_DIMS 8

typedef struct gbt_tensor {
    const char *name;
    gb_dtype dtype;          /* GB_F32 or GB_I32 */
    int32_t ndim;
    int64_t shape[GBT_MAX_DIMS];
    int64_t numel;
    const void *data;        /* numel elements of dtype, 64-byte aligned */
} gbt_tensor;

typedef struct gbt_file gbt_file;

/* Reads `path`. Returns NULL and a message in err (at most errcap bytes) when the file
 * cannot be read or is not a well-formed gbt file. */
gbt_file *gbt_open(const char *path, char *err, size_t errcap);
void gbt_close(gbt_file *file);

/* The tensor called `name`, or NULL. */
const gbt_tensor *gbt_find(const gbt_file *file, const char *name);

/* The tensor called `name` when it has `dtype` and `numel` elements; otherwise prints why
 * to stderr and returns NULL. */
const gbt_tensor *gbt_require(const gbt_file *file, const char *name, gb_dtype dtype,
                              int64_t numel);

/* Compares got (n) with want (n); an element fails when |got - want| > atol + rtol*|want|
 * (a NaN always fails). Prints "what: max abs diff X, max rel diff Y (n=N) ok|FAIL",
 * plus the first failing element on failure, and returns 0 when all pass, 1 otherwise.
 * The relative difference is taken over elements whose wanted value is not zero. */
int gbt_compare(const char *what, const float *got, const float *want, int64_t n,
                double atol, double rtol);

#endif
