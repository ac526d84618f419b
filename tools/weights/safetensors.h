/* safetensors files, Hugging Face's format for weights: a u64 little-endian header
 * length N, N bytes of a JSON object
 *     {"NAME": {"dtype": "F32", "shape": [R, C], "data_offsets": [BEGIN, END]}, ...,
 *      "__metadata__": {"key": "value", ...}}
 * (blanks may pad it), then the data section: each tensor's row-major little-endian bytes
 * at [BEGIN, END) from the section's start.
 *
 * The reader checks what the format requires: a header that fits the file and is one
 * JSON object of string metadata and tensors with a known dtype, a shape of non-negative
 * dimensions, and offsets whose span is exactly the shape's bytes; tensors that neither
 * overlap nor leave holes, and together cover the data section to its end; no name twice.
 * Every refusal names the file and the tensor. The writer writes f32 tensors in the
 * order given, its header padded with blanks to 8 bytes, atomically (a temporary file
 * renamed over the target). */
#ifndef GB_CORE_SAFETENSORS_H
#define GB_CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/engine/diag.h"

#define GB_ST_MAX_DIMS 8

typedef struct gb_st_tensor {
    char *name;
    char dtype[8];                   /* as the header writes it: "F32", "BF16", "I64"... */
    int ndim;
    int64_t shape[GB_ST_MAX_DIMS];
    int64_t numel;
    const unsigned char *data;       /* into the file held by gb_safetensors */
    size_t bytes;
} gb_st_tensor;

typedef struct gb_safetensors {
    unsigned char *file;
    size_t size;
    gb_st_tensor *tensors;           /* in the header's order */
    int count;
    char **metadata;                 /* key, value, key, value... */
    int n_metadata;                  /* pairs */
} gb_safetensors;

/* Parses a whole file held in memory and takes ownership of `file` (freed on failure
 * too); `name` names it in messages. NULL after adding the problem to `diag`. */
gb_safetensors *gb_safetensors_parse(unsigned char *file, size_t size, const char *name,
                                     gb_diag *diag);
/* Reads and parses the regular file at `path`. */
gb_safetensors *gb_safetensors_read(const char *path, gb_diag *diag);
void gb_safetensors_free(gb_safetensors *st);

const gb_st_tensor *gb_safetensors_find(const gb_safetensors *st, const char *name);
/* The value of a __metadata__ key, or NULL. */
const char *gb_safetensors_metadata(const gb_safetensors *st, const char *key);
/* The tensor's values widened to f32 (F32, F16 and BF16; F64 rounded). -1 after saying
 * in `diag` that the dtype is not one of them; `file` names the file. */
int gb_safetensors_to_f32(const gb_st_tensor *t, float *out, const char *file, gb_diag *diag);

/* One f32 tensor to write. */
typedef struct gb_st_out {
    const char *name;
    int ndim;
    int64_t shape[GB_ST_MAX_DIMS];
    const float *data;
} gb_st_out;

/* Writes `count` tensors and `n_metadata` key/value pairs (metadata[2i], metadata[2i+1]).
 * 0, or -1 with the problem in `diag`. */
int gb_safetensors_write(const char *path, const gb_st_out *tensors, int count,
                         const char *const *metadata, int n_metadata, gb_diag *diag);

#endif
