/* Multiple-choice evaluation in HellaSwag's published format, as nanoGPT's and llm.c's
 * hellaswag.py score it: a JSONL file, one item per line, each an object with `ctx` (the
 * context, a string), `endings` (its candidate endings, an array of 2 to
 * GB_HELLASWAG_MAX_ENDINGS strings) and `label` (the index of the right ending, an integer
 * or a string of one, as Hugging Face's copy writes it); other keys (`ind`,
 * `activity_label`, `ctx_a`, ...) are ignored. Blank lines are skipped.
 *
 * Each ending is read after its context (as " " + ending, as those scripts encode it), and
 * the cross-entropy of every ending token is summed: the ending with the lowest sum is
 * the prediction `acc` counts, the one with the lowest mean over its tokens is the one
 * `acc_norm` counts. */
#ifndef GB_ENGINE_HELLASWAG_H
#define GB_ENGINE_HELLASWAG_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/engine/diag.h"
#include "gearbox/engine/model.h"

#define GB_HELLASWAG_MAX_ENDINGS 16

typedef struct gb_hellaswag_item {
    char *ctx;
    char *endings[GB_HELLASWAG_MAX_ENDINGS];
    int n_endings;
    int label;            /* 0 .. n_endings - 1 */
    int64_t line;         /* 1-based, in the file it was read from */
} gb_hellaswag_item;

typedef struct gb_hellaswag {
    gb_hellaswag_item *items;
    int64_t count;
} gb_hellaswag;

/* Reads the JSONL file at `path` (a regular file) whole. A line that is not such an
 * object is refused as "PATH:LINE: ..." saying what was expected; every bad line is
 * reported (at most 20), and a file without items is refused too. 0, or -1 with the
 * problems in diag (nothing to free). */
int gb_hellaswag_read(const char *path, gb_hellaswag *set, gb_diag *diag);
/* The same over `size` bytes of text in memory; `name` names it in messages. */
int gb_hellaswag_parse(const char *text, size_t size, const char *name, gb_hellaswag *set,
                       gb_diag *diag);
void gb_hellaswag_free(gb_hellaswag *set);

/* The summed cross-entropy of the last `n_ending` tokens of `row` (`n` tokens: a context,
 * then an ending), each predicted by the model `m` (of `vocab_size` logits) from the
 * tokens before it. A row longer than block_size + 1 tokens loses its first ones (the
 * model sees at most block_size); the ending must fit, 1 <= n_ending <= block_size and
 * n_ending < n. 0, or -1 (the model failed; or the arguments, added to diag). */
int gb_hellaswag_ending_loss(gb_model *m, int64_t block_size, int64_t vocab_size,
                             const int32_t *row, int64_t n, int64_t n_ending, double *sum,
                             gb_diag *diag);

#endif
