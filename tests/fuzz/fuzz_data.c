/* Fuzz target: a token folder (engine/data.c, gb_data_open), through real files, since
 * the reader's refusals (missing files, odd lengths, short splits, ids beyond the
 * vocabulary) depend on what the file system says. The input is cut into:
 *
 *   u8 block_size, u8 vocab_size (0: the vocabulary's), u8 which files to leave out
 *   (bit 0 vocab.txt, 1 train.bin, 2 val.bin), u16 length + vocab.txt, u16 length +
 *   train.bin, then val.bin (the rest)
 *
 * A folder that opens must give batches whose every token is below the vocabulary size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "fuzz.h"

static char folder[64];

static void remove_folder(void)
{
    static const char *const files[] = {"vocab.txt", "train.bin", "val.bin"};
    char path[128];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", folder, files[i]);
        unlink(path);
    }
    rmdir(folder);
}

void gb_fuzz_init(void)
{
    snprintf(folder, sizeof folder, "/tmp/gearbox-fuzz-data-XXXXXX");
    if (!mkdtemp(folder))
        abort();
    atexit(remove_folder);
}
GB_FUZZ_INITIALIZE

/* The next `n` bytes of the input, fewer at its end. */
static const uint8_t *take(const uint8_t **data, size_t *size, size_t n, size_t *got)
{
    const uint8_t *p = *data;
    *got = n < *size ? n : *size;
    *data += *got;
    *size -= *got;
    return p;
}

static size_t take_length(const uint8_t **data, size_t *size)
{
    size_t got;
    const uint8_t *p = take(data, size, 2, &got);
    return got == 2 ? (size_t)p[0] | (size_t)p[1] << 8 : 0;
}

static void write_file(const char *name, const uint8_t *bytes, size_t n, int leave_out)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    unlink(path);
    FILE *f = leave_out ? NULL : fopen(path, "wb");
    if (f) {
        fwrite(bytes, 1, n, f);
        fclose(f);
    }
}

/* Every token of a few batches must be an id the vocabulary has. */
static void check_batches(const gb_dataset *ds, int64_t vocab_size, int64_t T)
{
    int32_t tokens[3 * 64], targets[3 * 64];
    for (int split = 0; split < 2; split++) {
        gb_data_batch(ds, (gb_split)split, 7, 0, 0, 0, 3, T, tokens, targets);
        for (int64_t i = 0; i < 3 * T; i++)
            if (tokens[i] < 0 || tokens[i] >= vocab_size || targets[i] < 0 ||
                targets[i] >= vocab_size)
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t got;
    const uint8_t *head = take(&data, &size, 3, &got);
    if (got < 3)
        return 0;
    int64_t block_size = head[0] % 64 + 1, vocab_size = head[1];
    size_t n = take_length(&data, &size);
    const uint8_t *vocab = take(&data, &size, n, &n);
    write_file("vocab.txt", vocab, n, head[2] & 1);
    n = take_length(&data, &size);
    const uint8_t *train = take(&data, &size, n, &n);
    write_file("train.bin", train, n, head[2] & 2);
    write_file("val.bin", data, size, head[2] & 4);
    gb_diag diag = {0};
    gb_dataset *ds = gb_data_open(folder, vocab_size, block_size, &diag);
    if (ds)
        check_batches(ds, vocab_size ? vocab_size : ds->vocab.size, block_size);
    gb_data_free(ds);
    gb_diag_clear(&diag);
    return 0;
}
