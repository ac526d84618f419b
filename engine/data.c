/* Token files and batches; see data.h. */
#include "data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static const char *const split_files[2] = {"train.bin", "val.bin"};

int gb_vocab_read(const char *path, gb_vocab *vocab, gb_diag *diag)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        gb_diag_add(diag, "cannot read vocabulary %s: %s; write the data folder with "
                    "`gearbox prepare TEXT DIR`", path, strerror(errno));
        return -1;
    }
    char line[64];
    int lineno = 0, ok = 1;
    vocab->size = 0;
    while (ok && fgets(line, sizeof line, f)) {
        lineno++;
        if (lineno == 1) {
            ok = strncmp(line, "# gearbox vocab v1", 18) == 0;
            if (!ok)
                gb_diag_add(diag, "%s:1: not a gearbox vocabulary (expected '# gearbox vocab "
                            "v1')", path);
            continue;
        }
        char *end;
        long byte = strtol(line, &end, 10);
        if (end == line || byte < 0 || byte > 255 || vocab->size >= 65536) {
            gb_diag_add(diag, "%s:%d: expected a byte value 0..255", path, lineno);
            ok = 0;
            break;
        }
        vocab->bytes[vocab->size++] = (unsigned char)byte;
    }
    fclose(f);
    if (ok && vocab->size == 0) {
        gb_diag_add(diag, "%s: the vocabulary is empty", path);
        ok = 0;
    }
    return ok ? 0 : -1;
}

int gb_vocab_write(const char *path, const gb_vocab *vocab)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "# gearbox vocab v1: one token per line, the byte it stands for\n");
    for (int i = 0; i < vocab->size; i++)
        fprintf(f, "%d\n", vocab->bytes[i]);
    return fclose(f) == 0 ? 0 : -1;
}

static int read_split(gb_dataset *ds, const char *dir, int split, gb_diag *diag)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, split_files[split]);
    FILE *f = fopen(path, "rb");
    if (!f) {
        gb_diag_add(diag, "[data] dir = %s: cannot open %s: %s; write the folder with "
                    "`gearbox prepare TEXT DIR`", dir, path, strerror(errno));
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    ds->length[split] = bytes / 2;
    ds->tokens[split] = malloc((size_t)bytes + 2);
    int ok = ds->tokens[split] &&
             fread(ds->tokens[split], 1, (size_t)bytes, f) == (size_t)bytes && bytes % 2 == 0;
    fclose(f);
    if (!ok)
        gb_diag_add(diag, "%s: could not read %ld bytes of uint16 tokens", path, bytes);
    return ok ? 0 : -1;
}

static int check_tokens(const gb_dataset *ds, const char *dir, int split, int64_t vocab_size,
                        int64_t block_size, gb_diag *diag)
{
    const uint16_t *t = ds->tokens[split];
    for (int64_t i = 0; i < ds->length[split]; i++) {
        if (t[i] >= vocab_size) {
            gb_diag_add(diag, "%s/%s: token %lld (byte offset %lld) has id %u, but the "
                        "vocabulary has %lld ids; was the folder prepared for another model or "
                        "vocab_size?", dir, split_files[split], (long long)i,
                        (long long)(2 * i), t[i], (long long)vocab_size);
            return -1;
        }
    }
    if (ds->length[split] < block_size + 2) {
        gb_diag_add(diag, "%s/%s holds %lld tokens, fewer than block_size + 2 = %lld", dir,
                    split_files[split], (long long)ds->length[split],
                    (long long)(block_size + 2));
        return -1;
    }
    return 0;
}

gb_dataset *gb_data_open(const char *dir, int64_t vocab_size, int64_t block_size, gb_diag *diag)
{
    gb_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    int failed = gb_vocab_read(path, &ds->vocab, diag);
    if (!failed && vocab_size == 0)
        vocab_size = ds->vocab.size;
    for (int s = 0; !failed && s < 2; s++)
        failed = read_split(ds, dir, s, diag) ||
                 check_tokens(ds, dir, s, vocab_size, block_size, diag);
    if (failed) {
        gb_data_free(ds);
        return NULL;
    }
    return ds;
}

void gb_data_free(gb_dataset *ds)
{
    if (!ds)
        return;
    free(ds->tokens[0]);
    free(ds->tokens[1]);
    free(ds);
}

void gb_data_batch(const gb_dataset *ds, gb_split split, uint64_t seed, int purpose,
                   uint64_t index, int64_t row_begin, int64_t row_end, int64_t T,
                   int32_t *tokens, int32_t *targets)
{
    const uint16_t *data = ds->tokens[split];
    uint64_t windows = (uint64_t)(ds->length[split] - T); /* as nanoGPT: randint(len - T) */
    for (int64_t row = row_begin; row < row_end; row++) {
        gb_rng rng = gb_rng_stream(seed, (uint64_t)purpose, index, (uint64_t)row);
        uint64_t start = gb_rng_below(&rng, windows);
        int32_t *x = tokens + (row - row_begin) * T, *y = targets + (row - row_begin) * T;
        for (int64_t t = 0; t < T; t++) {
            x[t] = data[start + (uint64_t)t];
            y[t] = data[start + (uint64_t)t + 1];
        }
    }
}
