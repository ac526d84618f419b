/* Fuzz target: a token folder (engine/data.c, gb_data_open), through real files, since
 * the reader's refusals (missing files, odd lengths, short splits, ids beyond the
 * vocabulary) depend on what the file system says. The input is cut into:
 *
 *   u8 block_size, u8 vocab_size (0: the vocabulary's), u8 which files to leave out
 *   (bit 0 vocab.txt, 1 train.bin, 2 val.bin), u16 length + vocab.txt, u16 length +
 *   train.bin, then val.bin (the rest)
 *
 * A folder that opens must give batches whose every token is below the vocabulary size. */
#include <stdlib.h>

#include "data.h"
#include "fuzz.h"

static const char *folder;

void gb_fuzz_init(void)
{
    folder = gb_fuzz_scratch_folder();
}
GB_FUZZ_INITIALIZE

/* Writes `name` from the input's bytes, or leaves it out. */
static void put_file(const char *name, const uint8_t *bytes, size_t n, int leave_out)
{
    if (leave_out)
        gb_fuzz_remove_file(name);
    else
        gb_fuzz_write_file(name, bytes, n);
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
    if (size < 3)
        return 0;
    int64_t block_size = data[0] % 64 + 1, vocab_size = data[1];
    int leave_out = data[2];
    data += 3;
    size -= 3;
    size_t n;
    const uint8_t *vocab = gb_fuzz_take_piece(&data, &size, &n);
    put_file("vocab.txt", vocab, n, leave_out & 1);
    const uint8_t *train = gb_fuzz_take_piece(&data, &size, &n);
    put_file("train.bin", train, n, leave_out & 2);
    put_file("val.bin", data, size, leave_out & 4);
    gb_diag diag = {0};
    gb_dataset *ds = gb_data_open(folder, vocab_size, block_size, &diag);
    if (ds)
        check_batches(ds, vocab_size ? vocab_size : ds->vocab.size, block_size);
    gb_data_free(ds);
    gb_diag_clear(&diag);
    return 0;
}
