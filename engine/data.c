/* Token files and batches; see data.h. */
#include "data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "rng.h"
#include "text.h"

static const char *const split_files[2] = {"train.bin", "val.bin"};

/* A byte value 0..255 written in decimal, blanks around it allowed; -1 otherwise. */
static int parse_byte(const char *text, size_t len)
{
    size_t i = 0;
    int value = 0, digits = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t'))
        i++;
    for (; i < len && text[i] >= '0' && text[i] <= '9' && digits < 4; i++, digits++)
        value = value * 10 + (text[i] - '0');
    while (i < len && (text[i] == ' ' || text[i] == '\t'))
        i++;
    return digits && digits < 4 && i == len && value <= 255 ? value : -1;
}

int gb_vocab_parse(const char *text, size_t size, const char *name, gb_vocab *vocab,
                   gb_diag *diag)
{
    static const char header[] = "# gearbox vocab v1";
    vocab->size = 0;
    if (strlen(text) != size) {
        gb_diag_add(diag, "%s: not a gearbox vocabulary (it contains NUL bytes)", name);
        return -1;
    }
    const char *next = text;
    size_t len;
    const char *line = gb_next_line(&next, &len);
    if (len < strlen(header) || memcmp(line, header, strlen(header)) != 0) {
        gb_diag_add(diag, "%s:1: not a gearbox vocabulary (expected '%s')", name, header);
        return -1;
    }
    for (int lineno = 2; *next; lineno++) {
        line = gb_next_line(&next, &len);
        int byte = parse_byte(line, len);
        if (byte < 0 || vocab->size >= (int)sizeof vocab->bytes) {
            gb_diag_add(diag, "%s:%d: expected a byte value 0..255%s", name, lineno,
                        byte < 0 ? "" : ", but the vocabulary already has 65536 ids");
            return -1;
        }
        vocab->bytes[vocab->size++] = (unsigned char)byte;
    }
    if (vocab->size == 0) {
        gb_diag_add(diag, "%s: the vocabulary is empty", name);
        return -1;
    }
    return 0;
}

int gb_vocab_read(const char *path, gb_vocab *vocab, gb_diag *diag)
{
    unsigned char *text;
    size_t size;
    const char *why;
    if (gb_read_regular_file(path, &text, &size, &why)) {
        gb_diag_add(diag, "cannot read vocabulary %s: %s; write the data folder with "
                    "`gearbox prepare TEXT DIR`", path, why);
        return -1;
    }
    int rc = gb_vocab_parse((const char *)text, size, path, vocab, diag);
    free(text);
    return rc;
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
    unsigned char *bytes;
    size_t size;
    const char *why;
    if (gb_read_regular_file(path, &bytes, &size, &why)) {
        gb_diag_add(diag, "[data] dir = %s: cannot read %s: %s; write the folder with "
                    "`gearbox prepare TEXT DIR`", dir, path, why);
        return -1;
    }
    ds->tokens[split] = (uint16_t *)bytes;   /* malloc'ed memory suits any type */
    ds->length[split] = (int64_t)(size / 2);
    if (size % 2 != 0) {
        gb_diag_add(diag, "%s holds %zu bytes, an odd number: token files hold 2-byte ids; "
                    "write the folder again with `gearbox prepare TEXT DIR`", path, size);
        return -1;
    }
    return 0;
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
