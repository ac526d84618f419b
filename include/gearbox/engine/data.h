/* Token data: a folder in one of three layouts, told apart by the files it holds.
 * - gearbox's (`gearbox prepare`): train.bin and val.bin, raw little-endian uint16 ids, and
 *   vocab.txt, the byte each id stands for;
 * - nanoGPT's: train.bin and val.bin alone (GPT-2 BPE ids; the vocabulary size comes from
 *   [model] vocab_size or from the GPT-2 vocabulary files, [data] vocab);
 * - llm.c's: shards *_train_*.bin and *_val_*.bin (also *_train.bin, *_val.bin), each a
 *   header of 256 int32 (magic 20240520, version 1, token count) then uint16 ids; a
 *   split's shards, in name order, are read as one stream of tokens.
 *
 * Token files are mapped, never read whole, so a 20 GB split costs no more memory than a
 * small one: only the pages of the windows drawn are touched. Ids are therefore checked
 * as each window is drawn (a bad one is reported with its file and token offset), not at
 * open; headers, lengths and sizes are checked at open.
 *
 * Batches are random windows as in nanoGPT's get_batch, but each row's position comes
 * from its own stream (seed, split, micro-step index, row): a batch is a pure function of
 * those numbers, so resuming needs no RNG state and a data-parallel rank can draw just
 * its own rows. A window may cross from one shard into the next. */
#ifndef GB_ENGINE_DATA_H
#define GB_ENGINE_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/engine/config.h"
#include "gearbox/engine/diag.h"
#include "gearbox/engine/settings.h"

typedef enum gb_split { GB_SPLIT_TRAIN = 0, GB_SPLIT_VAL = 1 } gb_split;

typedef enum gb_data_format { GB_DATA_GEARBOX, GB_DATA_NANOGPT, GB_DATA_LLMC } gb_data_format;

/* The byte each id stands for. With GPT-2 BPE tokens only `size` means anything: the
 * vocabulary size a model of the data needs (the bytes stay 0). */
typedef struct gb_vocab {
    int size;
    unsigned char bytes[65536];   /* bytes[id]: the byte token id stands for */
} gb_vocab;

/* An open data folder: an opaque handle (the engine's code sees the struct in
 * engine/data.h), read through the accessors below. */
typedef struct gb_dataset gb_dataset;

/* Reads vocab.txt: a "# gearbox vocab v1" line, then one decimal byte value per line
 * (lines end in "\n", "\r\n" or "\r"). */
int gb_vocab_read(const char *path, gb_vocab *vocab, gb_diag *diag);
/* The same from `size` bytes of NUL-terminated text in memory; `name` names it in
 * messages. */
int gb_vocab_parse(const char *text, size_t size, const char *name, gb_vocab *vocab,
                   gb_diag *diag);
int gb_vocab_write(const char *path, const gb_vocab *vocab);
/* Whether a vocabulary of `size` tokens fits a model of `model_ids` ids ([model]
 * vocab_size): at least one id per token, and no more than padding up to a multiple of
 * 128 adds (nanoGPT's 50304 for GPT-2's 50257). A narrower model is fed ids it has no row
 * for, a wider one predicts ids that decode to nothing. 0, or -1 after reporting both
 * sizes into diag, `what` naming the vocabulary and `fix` saying what to do. */
int gb_vocab_check_fit(int64_t model_ids, int64_t size, const char *what, const char *fix,
                       gb_diag *diag);

/* The note `gearbox prepare --tokenizer gpt2` leaves in its folder: which GPT-2
 * vocabulary it encoded with, so that a run on the folder need not be told again. */
#define GB_TOKENIZER_NOTE "tokenizer.txt"
int gb_tokenizer_note_write(const char *dir, const char *vocab_path);

/* Opens the folder [data] dir of `s` for a model of [model] vocab_size (0: the data's)
 * and block_size, with [data] tokenizer and vocab. Reports missing files, bad shard
 * headers, short splits and a vocabulary that cannot be known into diag. */
gb_dataset *gb_data_open(const gb_settings *s, gb_diag *diag);
void gb_data_free(gb_dataset *ds);

/* Records the tokenizer and vocabulary the data resolved to as the effective [data]
 * tokenizer and vocab of `cfg`, so that a checkpoint's config tells `gearbox sample` how
 * to decode. 0, or -1 after reporting a path that does not fit a config line. */
int gb_data_record_tokenizer(const gb_dataset *ds, gb_config *cfg, gb_diag *diag);

/* "gearbox", "nanoGPT" or "llm.c". */
const char *gb_data_format_name(gb_data_format format);

/* What the folder holds: its layout, what its ids stand for (bytes or gpt2, never auto),
 * the bound every id is below, and the vocabulary (its size, and with byte tokens the
 * byte of each id). */
gb_data_format gb_data_format_of(const gb_dataset *ds);
gb_tokenizer gb_data_tokenizer(const gb_dataset *ds);
int64_t gb_data_id_limit(const gb_dataset *ds);
const gb_vocab *gb_data_vocab(const gb_dataset *ds);
/* The GPT-2 vocabulary files the folder's ids decode with ([data] vocab, or the one
 * `gearbox prepare` noted), absolute; NULL for byte tokens or when none is known. */
const char *gb_data_vocab_path(const gb_dataset *ds);
/* The tokens of `split`, its file count, and the path of its file `i` (in stream order). */
int64_t gb_data_tokens(const gb_dataset *ds, gb_split split);
int gb_data_file_count(const gb_dataset *ds, gb_split split);
const char *gb_data_file_path(const gb_dataset *ds, gb_split split, int i);

/* Rows [row_begin, row_end) of the batch for micro-step `index` of `split`, `purpose`
 * naming the stream (GB_RNG_*): tokens and targets (rows, T), targets shifted by one.
 * 0, or -1 after reporting into diag an id at or above the vocabulary size. */
int gb_data_batch(const gb_dataset *ds, gb_split split, uint64_t seed, int purpose,
                  uint64_t index, int64_t row_begin, int64_t row_end, int64_t T,
                  int32_t *tokens, int32_t *targets, gb_diag *diag);

#endif
