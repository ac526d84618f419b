/* GPT-2's byte-level BPE tokenizer: encode and decode with the vocabulary files OpenAI
 * published for GPT-2, or with a tiktoken ranks file, given by path (nothing is
 * downloaded).
 *
 * Text is split into pieces by GPT-2's pre-tokenising pattern (contractions, letters,
 * numbers, other symbols, whitespace runs; Unicode classes from PCRE2), each piece's
 * UTF-8 bytes are merged pair by pair, lowest rank first, and each final part is one
 * token. `<|endoftext|>` in the text is the special token, never split.
 *
 * Merging costs O(n log n) in a piece's length (a run of whitespace can be 100,000
 * bytes long), and a piece that repeats in one text is merged once.
 *
 * Two vocabulary files are read:
 * - a folder with GPT-2's `encoder.json` (token string -> id, bytes spelt with GPT-2's
 *   printable byte characters) and `vocab.bpe` (merges, highest priority first), checked
 *   against each other as tiktoken does: the byte tokens are ids 0 to 255, the k-th
 *   merge makes id 256 + k of two tokens, every later token has its merge, and
 *   <|endoftext|> is the last id;
 * - a tiktoken ranks file (one `base64(token) rank` per line; the rank is the id, and a
 *   merge's priority is its result's rank); `<|endoftext|>` is then the next id.
 */
#ifndef GB_CORE_BPE_H
#define GB_CORE_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/engine/diag.h"

typedef struct gb_bpe gb_bpe;

/* NULL after adding to `diag` what is wrong with the files at `path`. */
gb_bpe *gb_bpe_load(const char *path, gb_diag *diag);
void gb_bpe_free(gb_bpe *bpe);

/* Token ids run from 0 to gb_bpe_vocab_size() - 1, <|endoftext|> included. */
int64_t gb_bpe_vocab_size(const gb_bpe *bpe);
int32_t gb_bpe_end_of_text(const gb_bpe *bpe);

/* Appends the ids of `len` bytes of UTF-8 text to *ids (grown with realloc; *n ids of
 * *cap room). 0, or -1 after adding to `diag` why (text that is not UTF-8, with the
 * byte offset; no memory). */
int gb_bpe_encode(const gb_bpe *bpe, const char *text, size_t len, int32_t **ids, int64_t *n,
                  int64_t *cap, gb_diag *diag);

/* The same for any bytes: each run of bytes that are not UTF-8 is a piece of its own
 * (merged like any other), so that decoding the ids gives back every input. */
int gb_bpe_encode_bytes(const gb_bpe *bpe, const char *text, size_t len, int32_t **ids,
                        int64_t *n, int64_t *cap, gb_diag *diag);

/* The bytes of token `id` (not NUL-terminated) and their count; NULL for an id out of
 * range. */
const char *gb_bpe_token_bytes(const gb_bpe *bpe, int32_t id, size_t *len);

#endif
