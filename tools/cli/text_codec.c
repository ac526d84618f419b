/* Text into a model's ids, by GPT-2's BPE or a byte vocabulary; see text_codec.h. */
#include "text_codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The lowest id that stands for `byte`, or -1 when none does. */
static int byte_id(const gb_vocab *vocab, unsigned char byte)
{
    for (int id = 0; id < vocab->size; id++)
        if (vocab->bytes[id] == byte)
            return id;
    return -1;
}

/* Appends one id for each byte of text: 0, or -1 after saying which byte has none. */
static int encode_bytes(const gb_vocab *vocab, const char *text, const char *what,
                        int32_t **ids, int64_t *n, int64_t *cap, gb_diag *diag)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        int id = byte_id(vocab, *p);
        if (id < 0) {
            char shown[8] = "";
            if (*p >= 0x20 && *p < 0x7f)
                snprintf(shown, sizeof shown, " '%c'", *p);
            gb_diag_add(diag, "%s's byte %d%s is not in the model's vocabulary of %d "
                        "characters", what, *p, shown, vocab->size);
            return -1;
        }
        if (*n == *cap) {
            int32_t *grown = realloc(*ids, (size_t)(*cap = 2 * *cap + 64) * sizeof **ids);
            if (!grown) {
                gb_diag_add(diag, "%s: out of memory", what);
                return -1;
            }
            *ids = grown;
        }
        (*ids)[(*n)++] = id;
    }
    return 0;
}

int gb_cli_encode(const gb_cli_codec *c, const char *text, const char *what, int64_t V,
                  int32_t **ids, int64_t *n, int64_t *cap, gb_diag *diag)
{
    int64_t first = *n;
    if (c->bpe ? gb_bpe_encode(c->bpe, text, strlen(text), ids, n, cap, diag)
               : encode_bytes(c->vocab, text, what, ids, n, cap, diag))
        return -1;
    for (int64_t i = first; i < *n; i++)
        if ((*ids)[i] >= V) {
            gb_diag_add(diag, "%s's token %lld has id %d, beyond the model's vocabulary of "
                        "%lld ids", what, (long long)(i - first), (*ids)[i], (long long)V);
            return -1;
        }
    return 0;
}
