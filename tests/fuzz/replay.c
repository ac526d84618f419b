/* Replays saved inputs through a fuzz target without libFuzzer, so that the corpus and
 * every crash found so far run in the ordinary test suite and under the sanitizers.
 *
 *   fuzz-TARGET FILE_OR_FOLDER...   each file, and each file of each folder, once
 *
 * Exits 0 after all of them; a crash or a sanitizer report ends it first. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    uint8_t *data = NULL;
    size_t size = 0, cap = 0, got;
    do {
        if (size == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *grown = realloc(data, cap);
            if (!grown) {
                fclose(f);
                free(data);
                return -1;
            }
            data = grown;
        }
        got = fread(data + size, 1, cap - size, f);
        size += got;
    } while (got > 0);
    fclose(f);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every regular file directly in `dir`, in name order; the count, or -1. */
static int replay_folder(const char *dir)
{
    struct dirent **entries;
    int n = scandir(dir, &entries, NULL, by_name), done = 0;
    if (n < 0) {
        perror(dir);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, entries[i]->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && replay_file(path) == 0)
            done++;
        free(entries[i]);
    }
    free(entries);
    return done;
}

int main(int argc, char **argv)
{
    int done = 0, failed = 0;
    gb_fuzz_init();
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int n = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? replay_folder(argv[i])
                                                               : replay_file(argv[i]) == 0;
        if (n < 0)
            failed = 1;
        else
            done += n;
    }
    printf("replayed %d inputs\n", done);
    return failed || done == 0;
}
