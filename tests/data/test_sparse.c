/* A 20 GB token split opens and gives batches in little memory: the files are mapped, so
 * only the pages of the windows drawn are touched. The split is a sparse file (its zeros
 * are token 0) made in a scratch folder and removed afterwards; a file system that cannot
 * hold one skips the test. Peak RSS (VmHWM) must stay under 100 MB. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data.h"

#define SPLIT_BYTES 20000000000LL
#define RSS_LIMIT_KB (100 * 1024)
enum { BATCHES = 200, ROWS = 16, T = 256 };

static char folder[4096], train_path[4200], val_path[4200];

static void remove_files(void)
{
    unlink(train_path);
    unlink(val_path);
    rmdir(folder);
}

/* A sparse file of `bytes` zeros; 0, 77 when the file system cannot make one sparse. */
static int make_sparse(const char *path, long long bytes)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        fprintf(stderr, "cannot create %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct stat st;
    int failed = ftruncate(fd, (off_t)bytes) != 0 || fstat(fd, &st) != 0;
    close(fd);
    if (failed || (long long)st.st_blocks * 512 > 64 * 1024 * 1024) {
        printf("SKIP: %s cannot hold a sparse %lld-byte file (%s)\n", folder, bytes,
               failed ? strerror(errno) : "blocks were allocated");
        return 77;
    }
    return 0;
}

/* Peak resident memory of this process in kB, from /proc/self/status. */
static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

/* Draws batches from both splits; every token of the zeros must be id 0. */
static int draw_batches(const gb_dataset *ds)
{
    static int32_t tokens[ROWS * T], targets[ROWS * T];
    for (int b = 0; b < BATCHES; b++) {
        gb_diag diag = {0};
        int rc = gb_data_batch(ds, b % 2 ? GB_SPLIT_VAL : GB_SPLIT_TRAIN, 1337, 2, (uint64_t)b,
                               0, ROWS, T, tokens, targets, &diag);
        gb_diag_print(&diag, stderr);
        gb_diag_clear(&diag);
        if (rc)
            return 1;
        for (int i = 0; i < ROWS * T; i++)
            if (tokens[i] != 0 || targets[i] != 0) {
                fprintf(stderr, "batch %d: token %d is %d, not 0\n", b, i, tokens[i]);
                return 1;
            }
    }
    return 0;
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(folder, sizeof folder, "%s/gearbox-sparse-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(folder)) {
        fprintf(stderr, "cannot make a scratch folder in %s: %s\n", folder, strerror(errno));
        return 1;
    }
    snprintf(train_path, sizeof train_path, "%s/train.bin", folder);
    snprintf(val_path, sizeof val_path, "%s/val.bin", folder);
    atexit(remove_files);
    int rc = make_sparse(train_path, SPLIT_BYTES);
    if (!rc)
        rc = make_sparse(val_path, SPLIT_BYTES / 10);
    if (rc)
        return rc;
    long before = peak_rss_kb();
    gb_settings s = {.data_dir = folder, .vocab_size = 50257, .block_size = T};
    gb_diag diag = {0};
    gb_dataset *ds = gb_data_open(&s, &diag);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    if (!ds)
        return 1;
    if (ds->format != GB_DATA_NANOGPT || ds->split[GB_SPLIT_TRAIN].length != SPLIT_BYTES / 2) {
        fprintf(stderr, "opened as %s with %lld train tokens, not nanoGPT's with %lld\n",
                gb_data_format_name(ds->format), (long long)ds->split[GB_SPLIT_TRAIN].length,
                SPLIT_BYTES / 2);
        return 1;
    }
    rc = draw_batches(ds);
    gb_data_free(ds);
    long peak = peak_rss_kb();
    printf("20 GB train split, %d batches of %d x %d tokens: peak RSS %.1f MB (%.1f MB before "
           "opening)\n", BATCHES, ROWS, T, peak / 1024.0, before / 1024.0);
    if (!rc && (peak < 0 || peak >= RSS_LIMIT_KB)) {
        fprintf(stderr, "peak RSS %ld kB, over the limit of %d kB\n", peak, RSS_LIMIT_KB);
        rc = 1;
    }
    return rc;
}
