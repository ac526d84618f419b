/* Helpers of the fuzz targets that read real files (data, bpe); see fuzz.h. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"

static char scratch[64];

/* Empties and removes the scratch folder (the targets write files only, no folders). */
static void remove_scratch(void)
{
    DIR *d = opendir(scratch);
    struct dirent *e;
    char path[sizeof scratch + 256];
    while (d && (e = readdir(d))) {
        snprintf(path, sizeof path, "%s/%s", scratch, e->d_name);
        unlink(path);   /* "." and ".." refuse, as they should */
    }
    if (d)
        closedir(d);
    rmdir(scratch);
}

const char *gb_fuzz_scratch_folder(void)
{
    snprintf(scratch, sizeof scratch, "%s/gearbox-fuzz-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(scratch))
        abort();
    atexit(remove_scratch);
    return scratch;
}

void gb_fuzz_write_file(const char *name, const uint8_t *bytes, size_t n)
{
    char path[sizeof scratch + 64];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (n && fwrite(bytes, 1, n, f) != n)
        abort();
    fclose(f);
}

void gb_fuzz_remove_file(const char *name)
{
    char path[sizeof scratch + 64];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    unlink(path);
}

const uint8_t *gb_fuzz_take_piece(const uint8_t **data, size_t *size, size_t *len)
{
    size_t n = *size >= 2 ? (size_t)(*data)[0] | (size_t)(*data)[1] << 8 : 0;
    size_t prefix = *size >= 2 ? 2 : *size;
    *data += prefix;
    *size -= prefix;
    *len = n < *size ? n : *size;
    const uint8_t *piece = *data;
    *data += *len;
    *size -= *len;
    return piece;
}
