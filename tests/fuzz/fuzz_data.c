/* Fuzz target: a token folder (engine/data.c, gb_data_open), through real files, since
 * the reader's refusals (missing files, odd lengths, short splits, bad llm.c shard
 * headers) depend on what the file system says. The input is cut into:
 *
 *   u8 block_size, u8 vocab_size (0: the vocabulary's), u8 flags, u16 length + vocab.txt,
 *   u16 length + the first token file, then the second (the rest)
 *
 * flags: bit 0, 1, 2 leave out vocab.txt, the first and the second token file; bit 3
 * names the token files as llm.c shards (x_train_000000.bin, x_val_000000.bin; their bytes
 * include the 1024-byte header) instead of train.bin and val.bin; bit 4 adds a copy of
 * the first shard as a second training shard, so windows cross from one into the next.
 *
 * A folder that opens must give batches whose every token is below the vocabulary size,
 * or refuse a batch with an id beyond it. */
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
static void check_batches(const gb_dataset *ds, int64_t T)
{
    int32_t tokens[3 * 64], targets[3 * 64];
    for (int split = 0; split < 2; split++) {
        gb_diag diag = {0};
        int rc = gb_data_batch(ds, (gb_split)split, 7, 0, 0, 0, 3, T, tokens, targets, &diag);
        if (rc != 0 && diag.count != 1)
            abort();   /* a refused batch says why */
        for (int64_t i = 0; rc == 0 && i < 3 * T; i++)
            if (tokens[i] < 0 || tokens[i] >= ds->id_limit || targets[i] < 0 ||
                targets[i] >= ds->id_limit)
                abort();
        gb_diag_clear(&diag);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    gb_settings s = {.data_dir = folder, .block_size = data[0] % 64 + 1, .vocab_size = data[1]};
    int flags = data[2], shards = flags & 8;
    data += 3;
    size -= 3;
    size_t n;
    const uint8_t *vocab = gb_fuzz_take_piece(&data, &size, &n);
    put_file("vocab.txt", vocab, n, flags & 1);
    const uint8_t *train = gb_fuzz_take_piece(&data, &size, &n);
    put_file("train.bin", train, n, (flags & 2) || shards);
    put_file("x_train_000000.bin", train, n, (flags & 2) || !shards);
    put_file("x_train_000001.bin", train, n, !(flags & 16) || !shards);
    put_file("val.bin", data, size, (flags & 4) || shards);
    put_file("x_val_000000.bin", data, size, (flags & 4) || !shards);
    gb_diag diag = {0};
    gb_dataset *ds = gb_data_open(&s, &diag);
    if (ds)
        check_batches(ds, s.block_size);
    gb_data_free(ds);
    gb_diag_clear(&diag);
    return 0;
}
