/* Reader for gbt reference tensor files and the shared comparison; see gbt.h. */
#include "gbt.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GBT_MAGIC "GBTENSR1"

struct gbt_file {
    int64_t count;
    gbt_tensor *tensors;
};

/* A bounds-checked read position in the loaded file. */
typedef struct cursor {
    const unsigned char *pos, *end;
} cursor;

static void set_err(char *err, size_t errcap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errcap, const char *fmt, ...)
{
    if (!err || errcap == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errcap, fmt, ap);
    va_end(ap);
}

static int take(cursor *c, void *out, size_t bytes)
{
    if ((size_t)(c->end - c->pos) < bytes)
        return 0;
    memcpy(out, c->pos, bytes);
    c->pos += bytes;
    return 1;
}

static unsigned char *read_whole_file(const char *path, size_t *size, char *err, size_t errcap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errcap, "%s: %s", path, strerror(errno));
        return NULL;
    }
    unsigned char *buf = NULL;
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        len = ftell(f);
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc(len > 0 ? (size_t)len : 1);
    if (buf && fread(buf, 1, (size_t)len, f) == (size_t)len) {
        fclose(f);
        *size = (size_t)len;
        return buf;
    }
    set_err(err, errcap, "%s: cannot read the file", path);
    free(buf);
    fclose(f);
    return NULL;
}

/* Reads one tensor record at the cursor into t (which owns its name and data after). */
static int parse_tensor(cursor *c, gbt_tensor *t, char *err, size_t errcap)
{
    uint32_t name_len, dtype, ndim;
    if (!take(c, &name_len, 4) || (size_t)(c->end - c->pos) < name_len) {
        set_err(err, errcap, "truncated tensor name");
        return 0;
    }
    char *name = malloc((size_t)name_len + 1);
    if (!name) {
        set_err(err, errcap, "out of memory");
        return 0;
    }
    memcpy(name, c->pos, name_len);
    name[name_len] = '\0';
    c->pos += name_len;
    t->name = name;

    if (!take(c, &dtype, 4) || !take(c, &ndim, 4)) {
        set_err(err, errcap, "%s: truncated header", name);
        return 0;
    }
    if (dtype != GB_F32 && dtype != GB_I32) {
        set_err(err, errcap, "%s: dtype %u is neither f32 (0) nor i32 (3)", name, dtype);
        return 0;
    }
    if (ndim > GBT_MAX_DIMS) {
        set_err(err, errcap, "%s: %u dims, at most %d supported", name, ndim, GBT_MAX_DIMS);
        return 0;
    }
    t->dtype = (gb_dtype)dtype;
    t->ndim = (int32_t)ndim;
    t->numel = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (!take(c, &t->shape[d], 8) || t->shape[d] < 0) {
            set_err(err, errcap, "%s: truncated or negative shape", name);
            return 0;
        }
        if (t->shape[d] > 0 && t->numel > INT64_MAX / 4 / t->shape[d]) {
            set_err(err, errcap, "%s: shape too large", name);
            return 0;
        }
        t->numel *= t->shape[d];
    }

    size_t bytes = (size_t)t->numel * 4;
    if ((size_t)(c->end - c->pos) < bytes) {
        set_err(err, errcap, "%s: data truncated (%zu bytes expected, %zu left)", name, bytes,
                (size_t)(c->end - c->pos));
        return 0;
    }
    /* A copy, because data in the file sits at whatever offset the names left it. */
    void *data = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (!data) {
        set_err(err, errcap, "%s: out of memory", name);
        return 0;
    }
    memcpy(data, c->pos, bytes);
    c->pos += bytes;
    t->data = data;
    return 1;
}

static int parse_file(gbt_file *file, cursor *c, char *err, size_t errcap)
{
    char magic[8];
    uint32_t count;
    if (!take(c, magic, 8) || memcmp(magic, GBT_MAGIC, 8) != 0) {
        set_err(err, errcap, "not a gbt file (magic is not " GBT_MAGIC ")");
        return 0;
    }
    /* Each record takes at least 12 bytes, which bounds a corrupt count. */
    if (!take(c, &count, 4) || count > (size_t)(c->end - c->pos) / 12) {
        set_err(err, errcap, "bad tensor count");
        return 0;
    }
    file->tensors = calloc(count ? count : 1, sizeof *file->tensors);
    if (!file->tensors) {
        set_err(err, errcap, "out of memory");
        return 0;
    }
    for (uint32_t i = 0; i < count; i++) {
        file->count = i + 1;
        if (!parse_tensor(c, &file->tensors[i], err, errcap))
            return 0;
        if (gbt_find(file, file->tensors[i].name) != &file->tensors[i]) {
            set_err(err, errcap, "%s: name appears twice", file->tensors[i].name);
            return 0;
        }
    }
    if (c->pos != c->end) {
        set_err(err, errcap, "%zu bytes after the last tensor", (size_t)(c->end - c->pos));
        return 0;
    }
    return 1;
}

gbt_file *gbt_open(const char *path, char *err, size_t errcap)
{
    size_t size;
    unsigned char *buf = read_whole_file(path, &size, err, errcap);
    if (!buf)
        return NULL;
    gbt_file *file = calloc(1, sizeof *file);
    cursor c = {buf, buf + size};
    char why[256] = "out of memory";
    int ok = file && parse_file(file, &c, why, sizeof why);
    free(buf);
    if (!ok) {
        set_err(err, errcap, "%s: %s", path, why);
        gbt_close(file);
        return NULL;
    }
    return file;
}

void gbt_close(gbt_file *file)
{
    if (!file)
        return;
    for (int64_t i = 0; i < file->count; i++) {
        free((void *)file->tensors[i].name);
        free((void *)file->tensors[i].data);
    }
    free(file->tensors);
    free(file);
}

const gbt_tensor *gbt_find(const gbt_file *file, const char *name)
{
    for (int64_t i = 0; i < file->count; i++)
        if (strcmp(file->tensors[i].name, name) == 0)
            return &file->tensors[i];
    return NULL;
}

const gbt_tensor *gbt_require(const gbt_file *file, const char *name, gb_dtype dtype,
                              int64_t numel)
{
    const gbt_tensor *t = gbt_find(file, name);
    if (!t) {
        fprintf(stderr, "reference tensor %s is missing\n", name);
        return NULL;
    }
    if (t->dtype != dtype || t->numel != numel) {
        fprintf(stderr, "reference tensor %s is %s with %lld elements, expected %s with %lld\n",
                name, gb_dtype_name(t->dtype), (long long)t->numel, gb_dtype_name(dtype),
                (long long)numel);
        return NULL;
    }
    return t;
}

int gbt_compare(const char *what, const float *got, const float *want, int64_t n,
                double atol, double rtol)
{
    double max_abs = 0, max_rel = 0;
    int64_t first_bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - (double)want[i]);
        double scale = fabs((double)want[i]);
        if (!(diff <= atol + rtol * scale) && first_bad < 0)
            first_bad = i;
        if (isnan(diff)) {
            max_abs = max_rel = NAN;  /* sticks: every later comparison with NaN is false */
            continue;
        }
        if (diff > max_abs)
            max_abs = diff;
        if (scale > 0 && diff / scale > max_rel)
            max_rel = diff / scale;
    }
    if (first_bad < 0) {
        printf("%s: max abs diff %.3g, max rel diff %.3g (n=%lld) ok\n", what, max_abs, max_rel,
               (long long)n);
        return 0;
    }
    printf("%s: max abs diff %.3g, max rel diff %.3g (n=%lld) FAIL (first at [%lld]: got %.9g, "
           "want %.9g)\n",
           what, max_abs, max_rel, (long long)n, (long long)first_bad, (double)got[first_bad],
           (double)want[first_bad]);
    return 1;
}
