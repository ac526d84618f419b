/* How the verbs that feed text to a model (sample's prompt, eval's HellaSwag items) turn
 * it into the model's ids: GPT-2's BPE, or the byte vocabulary of a character-level run.
 * One encoder, so both give the same ids and refuse the same text in the same words. */
#ifndef GB_CLI_TEXT_CODEC_H
#define GB_CLI_TEXT_CODEC_H

#include <stdint.h>

#include "gearbox/engine/bpe.h"
#include "gearbox/engine/data.h"
#include "gearbox/engine/diag.h"

typedef struct gb_cli_codec {
    const gb_vocab *vocab;   /* byte tokens: the byte each id stands for; unused with bpe */
    gb_bpe *bpe;             /* GPT-2's BPE, or NULL for byte tokens */
} gb_cli_codec;

/* Appends the ids of `text` to *ids (*n of them in *cap room, grown with realloc), each
 * below the model's V ids: 0, or -1 after adding to diag why not, naming the text as
 * `what` ("the prompt"): a byte the vocabulary lacks, an id beyond V, text BPE refuses, no
 * memory. A byte becomes the lowest id that stands for it. */
int gb_cli_encode(const gb_cli_codec *c, const char *text, const char *what, int64_t V,
                  int32_t **ids, int64_t *n, int64_t *cap, gb_diag *diag);

#endif
