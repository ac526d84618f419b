/* `gearbox prepare`: character-level token files, as nanoGPT's shakespeare_char/prepare.py
 * (vocabulary = the sorted distinct characters, first 90% train, last 10% val), with
 * bytes as characters: exact for ASCII text such as Tiny Shakespeare. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "data.h"
#include "fsutil.h"

static const char usage[] =
    "usage: gearbox prepare TEXT OUTDIR\n"
    "\n"
    "Reads the text file TEXT and writes OUTDIR/train.bin and OUTDIR/val.bin (uint16\n"
    "little-endian token ids, the first 90% and the last 10% of the text) and\n"
    "OUTDIR/vocab.txt (the byte each id stands for, sorted), which `[data] dir` points at.\n";

static int write_tokens(const char *dir, const char *name, const uint16_t *ids, size_t n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(ids, sizeof *ids, n, f) == n;
    if (f)
        ok &= fclose(f) == 0;
    if (!ok)
        fprintf(stderr, "gearbox prepare: cannot write %s: %s\n", path, strerror(errno));
    return ok ? 0 : -1;
}

static unsigned char *read_text(const char *path, size_t *n)
{
    unsigned char *text;
    const char *why;
    if (gb_read_regular_file(path, &text, n, &why)) {
        fprintf(stderr, "gearbox prepare: cannot read %s: %s\n", path, why);
        return NULL;
    }
    if (*n == 0) {
        fprintf(stderr, "gearbox prepare: %s is empty; give it the text to train on\n", path);
        free(text);
        return NULL;
    }
    return text;
}

int gb_cmd_prepare(int argc, char **argv)
{
    if (gb_cli_wants_help(argc, argv, usage))
        return 0;
    if (argc != 3)
        return gb_cli_usage_error("prepare", "expected TEXT and OUTDIR");
    size_t n;
    unsigned char *text = read_text(argv[1], &n);
    if (!text)
        return 1;
    int seen[256] = {0};
    for (size_t i = 0; i < n; i++)
        seen[text[i]] = 1;
    static gb_vocab vocab;
    int id_of[256];
    vocab.size = 0;
    for (int b = 0; b < 256; b++)
        if (seen[b]) {
            id_of[b] = vocab.size;
            vocab.bytes[vocab.size++] = (unsigned char)b;
        }
    uint16_t *ids = malloc(n * sizeof *ids);
    if (!ids) {
        free(text);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = (uint16_t)id_of[text[i]];
    free(text);
    size_t n_train = (size_t)((double)n * 0.9);
    char vocab_path[4200];
    snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", argv[2]);
    int rc = 1;
    if (mkdir(argv[2], 0777) != 0 && errno != EEXIST)
        fprintf(stderr, "gearbox prepare: cannot create %s: %s\n", argv[2], strerror(errno));
    else if (gb_vocab_write(vocab_path, &vocab) != 0)
        fprintf(stderr, "gearbox prepare: cannot write %s\n", vocab_path);
    else if (!write_tokens(argv[2], "train.bin", ids, n_train) &&
             !write_tokens(argv[2], "val.bin", ids + n_train, n - n_train)) {
        printf("%s: vocab %d, train %zu tokens, val %zu tokens -> %s\n", argv[1], vocab.size,
               n_train, n - n_train, argv[2]);
        rc = 0;
    }
    free(ids);
    return rc;
}
