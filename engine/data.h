/* Token data: the folder `gearbox prepare` writes (nanoGPT's layout): train.bin and
 * val.bin, raw little-endian uint16 token ids, and vocab.txt, the byte each id stands for.
 *
 * Batches are random windows as in nanoGPT's get_batch, but each row's position comes
 * from its own stream (seed, split, micro-step index, row): a batch is a pure function of
 * those numbers, so resuming needs no RNG state and a data-parallel rank can draw just
 * its own rows. The files are read whole and checked once at open (every id must be
 * below the vocabulary size), so the training loop never meets a bad token. */
#ifndef GB_CORE_DATA_H
#define GB_CORE_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

typedef enum gb_split { GB_SPLIT_TRAIN = 0, GB_SPLIT_VAL = 1 } gb_split;

typedef struct gb_vocab {
    int size;
    unsigned char bytes[65536];   /* bytes[id]: the byte token id stands for */
} gb_vocab;

typedef struct gb_dataset {
    uint16_t *tokens[2];          /* indexed by gb_split */
    int64_t length[2];
    gb_vocab vocab;
} gb_dataset;

/* Reads vocab.txt: a "# gearbox vocab v1" line, then one decimal byte value per line
 * (lines end in "\n", "\r\n" or "\r"). */
int gb_vocab_read(const char *path, gb_vocab *vocab, gb_diag *diag);
/* The same from `size` bytes of NUL-terminated text in memory; `name` names it in
 * messages. */
int gb_vocab_parse(const char *text, size_t size, const char *name, gb_vocab *vocab,
                   gb_diag *diag);
int gb_vocab_write(const char *path, const gb_vocab *vocab);

/* Opens `dir` for a model of `vocab_size` (0: the vocabulary's size) and context
 * `block_size`. Reports missing files, short splits and out-of-range ids into diag. */
gb_dataset *gb_data_open(const char *dir, int64_t vocab_size, int64_t block_size, gb_diag *diag);
void gb_data_free(gb_dataset *ds);

/* Rows [row_begin, row_end) of the batch for micro-step `index` of `split`, `purpose`
 * naming the stream (GB_RNG_*): tokens and targets (rows, T), targets shifted by one. */
void gb_data_batch(const gb_dataset *ds, gb_split split, uint64_t seed, int purpose,
                   uint64_t index, int64_t row_begin, int64_t row_end, int64_t T,
                   int32_t *tokens, int32_t *targets);

#endif
