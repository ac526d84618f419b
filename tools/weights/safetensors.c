/* safetensors reader and writer; see safetensors.h. */
#include "safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "gearbox/convert.h"

#include "gearbox/engine/fsutil.h"

/* The format's limit on the header, which also bounds what a hostile length makes the
 * reader parse. */
#define MAX_HEADER (100u << 20)

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {{"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1},
              {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2}, {"I32", 4}, {"U32", 4},
              {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8}};

/* Bytes per element of a dtype named in a header, 0 when unknown. */
static size_t dtype_size(const char *name)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, name) == 0)
            return dtypes[i].size;
    return 0;
}

void gb_safetensors_free(gb_safetensors *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->count; i++)
        free(st->tensors[i].name);
    for (int i = 0; i < 2 * st->n_metadata; i++)
        free(st->metadata[i]);
    free(st->tensors);
    free(st->metadata);
    free(st->file);
    free(st);
}

/* A non-negative integer of a header; -1 otherwise. */
static int64_t header_count(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 0 ? json_integer_value(v) : -1;
}

/* __metadata__: an object of strings. NULL, or what is wrong. */
static const char *read_metadata(gb_safetensors *st, const json_t *meta)
{
    if (!json_is_object(meta))
        return "it is not an object";
    st->metadata = calloc(2 * json_object_size(meta) + 1, sizeof *st->metadata);
    if (!st->metadata)
        return "out of memory";
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)meta, key, value) {
        if (!json_is_string(value))
            return "a value in it is not a string";
        st->metadata[2 * st->n_metadata] = strdup(key);
        st->metadata[2 * st->n_metadata + 1] = strdup(json_string_value(value));
        st->n_metadata++;
        if (!st->metadata[2 * st->n_metadata - 2] || !st->metadata[2 * st->n_metadata - 1])
            return "out of memory";
    }
    return NULL;
}

/* The shape's dimensions and their product, with the product kept below 2^62 elements.
 * NULL, or what is wrong. */
static const char *read_shape(gb_st_tensor *t, const json_t *shape)
{
    if (!json_is_array(shape))
        return "its shape is missing or not an array";
    if (json_array_size(shape) > GB_ST_MAX_DIMS)
        return "its shape has more than 8 dimensions";
    t->ndim = (int)json_array_size(shape);
    t->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        int64_t n = header_count(json_array_get(shape, (size_t)d));
        if (n < 0)
            return "a dimension of its shape is not a whole number of 0 or more";
        if (n > 0 && t->numel > (INT64_C(1) << 62) / n)
            return "its shape holds more elements than any file can";
        t->shape[d] = n;
        t->numel *= n;
    }
    return NULL;
}

/* One tensor entry; its bytes must lie within the `data_size` bytes at `data`. NULL, or
 * what is wrong. */
static const char *read_tensor(gb_st_tensor *t, const json_t *entry,
                               const unsigned char *data, size_t data_size)
{
    if (!json_is_object(entry))
        return "its entry is not an object";
    const json_t *dtype = json_object_get(entry, "dtype");
    const json_t *offsets = json_object_get(entry, "data_offsets");
    if (!json_is_string(dtype))
        return "its dtype is missing or not a string";
    size_t elem = dtype_size(json_string_value(dtype));
    if (!elem)
        return "its dtype is none of safetensors' (F32, F16, BF16, F64, I64, ...)";
    snprintf(t->dtype, sizeof t->dtype, "%s", json_string_value(dtype));
    const char *problem = read_shape(t, json_object_get(entry, "shape"));
    if (problem)
        return problem;
    if (!json_is_array(offsets) || json_array_size(offsets) != 2)
        return "its data_offsets are missing or not two numbers [begin, end]";
    int64_t begin = header_count(json_array_get(offsets, 0));
    int64_t end = header_count(json_array_get(offsets, 1));
    if (begin < 0 || end < begin)
        return "its data_offsets are not whole numbers with begin <= end";
    if ((uint64_t)end > data_size)
        return "its data_offsets run past the end of the file";
    if ((uint64_t)(end - begin) / elem != (uint64_t)t->numel || (end - begin) % (int64_t)elem)
        return "its data_offsets span a different number of bytes than its shape and dtype";
    t->data = data + begin;
    t->bytes = (size_t)(end - begin);
    return NULL;
}

static int by_position(const void *a, const void *b)
{
    const gb_st_tensor *x = a, *y = b;
    if (x->data != y->data)
        return x->data < y->data ? -1 : 1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const gb_st_tensor *const *)a)->name, (*(const gb_st_tensor *const *)b)->name);
}

/* Tensors side by side from the data section's start to its end, each name once (the
 * format forbids holes, overlaps, and bytes no tensor owns). 0, or -1 with diag. */
static int check_layout(const gb_safetensors *st, const unsigned char *data, size_t data_size,
                        const char *name, gb_diag *diag)
{
    gb_st_tensor *sorted = malloc((size_t)st->count * sizeof *sorted + 1);
    const gb_st_tensor **names = malloc((size_t)st->count * sizeof *names + 1);
    int rc = sorted && names ? 0 : -1;
    if (rc)
        gb_diag_add(diag, "%s: out of memory", name);
    for (int i = 0; !rc && i < st->count; i++) {
        sorted[i] = st->tensors[i];
        names[i] = &st->tensors[i];
    }
    if (!rc) {
        qsort(sorted, (size_t)st->count, sizeof *sorted, by_position);
        qsort(names, (size_t)st->count, sizeof *names, by_name);
    }
    const unsigned char *next = data;
    for (int i = 0; !rc && i < st->count; i++) {
        if (i > 0 && strcmp(names[i - 1]->name, names[i]->name) == 0) {
            gb_diag_add(diag, "%s: tensor %s appears twice in the header", name, names[i]->name);
            rc = -1;
        } else if (sorted[i].data != next) {
            gb_diag_add(diag, "%s: tensor %s starts at byte %zu of the data, where %s; the "
                        "file is damaged or was not written as safetensors", name,
                        sorted[i].name, (size_t)(sorted[i].data - data),
                        sorted[i].data < next ? "the tensor before it still runs (overlap)"
                                              : "nothing ends (a hole)");
            rc = -1;
        }
        next = sorted[i].data + sorted[i].bytes;
    }
    if (!rc && next != data + data_size) {
        gb_diag_add(diag, "%s: %zu bytes after the last tensor belong to none; the file is "
                    "damaged or not safetensors", name, (size_t)(data + data_size - next));
        rc = -1;
    }
    free(sorted);
    free(names);
    return rc;
}

/* The header's tensors and metadata into st. 0, or -1 with diag. */
static int read_header(gb_safetensors *st, const json_t *header, const unsigned char *data,
                       size_t data_size, const char *name, gb_diag *diag)
{
    if (!json_is_object(header)) {
        gb_diag_add(diag, "%s: the header is not a JSON object", name);
        return -1;
    }
    st->tensors = calloc(json_object_size(header) + 1, sizeof *st->tensors);
    if (!st->tensors) {
        gb_diag_add(diag, "%s: out of memory", name);
        return -1;
    }
    const char *key;
    const json_t *entry;
    json_object_foreach((json_t *)header, key, entry) {
        const char *problem;
        int is_metadata = strcmp(key, "__metadata__") == 0;
        if (is_metadata) {
            problem = read_metadata(st, entry);
        } else {
            gb_st_tensor *t = &st->tensors[st->count++];
            t->name = strdup(key);
            problem = t->name ? read_tensor(t, entry, data, data_size) : "out of memory";
        }
        if (problem) {
            gb_diag_add(diag, "%s: %s %s: %s", name, is_metadata ? "header entry" : "tensor",
                        key, problem);
            return -1;
        }
    }
    return check_layout(st, data, data_size, name, diag);
}

gb_safetensors *gb_safetensors_parse(unsigned char *file, size_t size, const char *name,
                                     gb_diag *diag)
{
    gb_safetensors *st = calloc(1, sizeof *st);
    if (!st) {
        free(file);
        gb_diag_add(diag, "%s: out of memory", name);
        return NULL;
    }
    st->file = file;
    st->size = size;
    uint64_t n = 0;
    if (size >= 8)
        memcpy(&n, file, 8); /* little-endian, as the hosts gearbox runs on */
    if (size < 8 || n > size - 8 || n > MAX_HEADER || n < 2 || file[8] != '{') {
        gb_diag_add(diag, "%s is not a safetensors file: %s; give a model.safetensors as "
                    "Hugging Face writes it", name,
                    size < 8 ? "shorter than the 8-byte header length"
                    : n > MAX_HEADER ? "its header length is beyond the format's 100 MiB"
                    : n > size - 8 ? "its header length runs past the end of the file"
                                   : "its header does not start with '{'");
        gb_safetensors_free(st);
        return NULL;
    }
    json_error_t err;   /* a name given twice is refused, as the format requires */
    json_t *header = json_loadb((const char *)file + 8, (size_t)n, JSON_REJECT_DUPLICATES,
                                &err);
    int rc = -1;
    if (!header && json_error_code(&err) == json_error_duplicate_key)
        gb_diag_add(diag, "%s: a name appears twice in the header (%s)", name, err.text);
    else if (!header)
        gb_diag_add(diag, "%s: the header is not valid JSON: %s, at byte %d of the header",
                    name, err.text, err.position);
    else
        rc = read_header(st, header, file + 8 + n, size - 8 - (size_t)n, name, diag);
    json_decref(header);
    if (rc) {
        gb_safetensors_free(st);
        return NULL;
    }
    return st;
}

gb_safetensors *gb_safetensors_read(const char *path, gb_diag *diag)
{
    unsigned char *data;
    size_t size;
    if (gb_read_file_or_say(path, &data, &size, diag))
        return NULL;
    return gb_safetensors_parse(data, size, path, diag);
}

const gb_st_tensor *gb_safetensors_find(const gb_safetensors *st, const char *name)
{
    for (int i = 0; i < st->count; i++)
        if (strcmp(st->tensors[i].name, name) == 0)
            return &st->tensors[i];
    return NULL;
}

const char *gb_safetensors_metadata(const gb_safetensors *st, const char *key)
{
    for (int i = 0; i < st->n_metadata; i++)
        if (strcmp(st->metadata[2 * i], key) == 0)
            return st->metadata[2 * i + 1];
    return NULL;
}

int gb_safetensors_to_f32(const gb_st_tensor *t, float *out, const char *file, gb_diag *diag)
{
    const unsigned char *p = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        uint16_t h;
        double d;
        if (strcmp(t->dtype, "F32") == 0) {
            memcpy(&out[i], p + 4 * i, 4);
        } else if (strcmp(t->dtype, "F16") == 0 || strcmp(t->dtype, "BF16") == 0) {
            memcpy(&h, p + 2 * i, 2);
            out[i] = t->dtype[0] == 'B' ? gb_f32_from_bf16(h) : gb_f32_from_f16(h);
        } else if (strcmp(t->dtype, "F64") == 0) {
            memcpy(&d, p + 8 * i, 8);
            out[i] = (float)d;
        } else {
            gb_diag_add(diag, "%s: tensor %s is %s; gearbox reads weights stored as F32, F16, "
                        "BF16 or F64", file, t->name, t->dtype);
            return -1;
        }
    }
    return 0;
}

/* ---- writing ------------------------------------------------------------------------- */

/* The header's JSON, blank-padded to a multiple of 8 bytes so the data is aligned. */
static char *header_text(const gb_st_out *tensors, int count, const char *const *metadata,
                         int n_metadata, size_t *len)
{
    json_t *header = json_object(), *meta = n_metadata ? json_object() : NULL;
    int failed = !header || (n_metadata && (!meta || json_object_set_new(header, "__metadata__",
                                                                         meta)));
    for (int i = 0; !failed && i < n_metadata; i++)
        failed = json_object_set_new(meta, metadata[2 * i], json_string(metadata[2 * i + 1]));
    json_int_t offset = 0;
    for (int i = 0; !failed && i < count; i++) {
        const gb_st_out *t = &tensors[i];
        json_t *shape = json_array();
        json_int_t numel = 1;
        for (int d = 0; shape && d < t->ndim; d++) {
            json_array_append_new(shape, json_integer(t->shape[d]));
            numel *= t->shape[d];
        }
        json_t *entry = json_pack("{s:s, s:o, s:[I, I]}", "dtype", "F32", "shape", shape,
                                  "data_offsets", offset, offset + 4 * numel);
        failed = !entry || json_object_set_new(header, t->name, entry);
        offset += 4 * numel;
    }
    char *text = failed ? NULL : json_dumps(header, JSON_COMPACT);
    json_decref(header);
    if (!text)
        return NULL;
    *len = strlen(text);
    size_t padded = (*len + 7) / 8 * 8;
    char *grown = realloc(text, padded + 1);
    if (!grown) {
        free(text);
        return NULL;
    }
    memset(grown + *len, ' ', padded - *len);
    grown[padded] = '\0';
    *len = padded;
    return grown;
}

int gb_safetensors_write(const char *path, const gb_st_out *tensors, int count,
                         const char *const *metadata, int n_metadata, gb_diag *diag)
{
    size_t len = 0;
    char *header = header_text(tensors, count, metadata, n_metadata, &len);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = header ? fopen(tmp, "wb") : NULL;
    if (!f) {
        /* the path the user named: the temporary file beside it is ours */
        gb_diag_add(diag, "cannot write %s: %s", path, header ? strerror(errno) : "out of memory");
        free(header);
        return -1;
    }
    uint64_t n = len;
    int failed = fwrite(&n, 8, 1, f) != 1 || fwrite(header, 1, len, f) != len;
    for (int i = 0; i < count && !failed; i++) {
        size_t numel = 1;
        for (int d = 0; d < tensors[i].ndim; d++)
            numel *= (size_t)tensors[i].shape[d];
        failed = fwrite(tensors[i].data, sizeof(float), numel, f) != numel;
    }
    failed |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    failed |= fclose(f) != 0;
    free(header);
    if (failed || rename(tmp, path) != 0) {
        gb_diag_add(diag, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
