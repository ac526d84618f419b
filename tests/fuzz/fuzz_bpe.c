/* Fuzz target: the BPE tokenizer's vocabulary files (engine/bpe.c), through real files
 * as gb_bpe_load reads them, then encoding text with what loaded. The input is cut into:
 *
 *   u8 mode; u16 length + a tiktoken ranks file, the rest the text (mode even), or
 *   u16 length + encoder.json, u16 length + vocab.bpe, the rest the text (mode odd)
 *
 * A vocabulary that loads must encode text to ids it has, whose bytes spell the text
 * again (byte-level BPE loses nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "fuzz.h"

static const char *folder;
static char ranks[128];

void gb_fuzz_init(void)
{
    folder = gb_fuzz_scratch_folder();
    snprintf(ranks, sizeof ranks, "%s/ranks.tiktoken", folder);
}
GB_FUZZ_INITIALIZE

/* What token `id` stands for in the text: its bytes, or the special token's name. */
static const char *spelling(const gb_bpe *bpe, int32_t id, size_t *len)
{
    static const char end_of_text[] = "<|endoftext|>";
    if (id == gb_bpe_end_of_text(bpe)) {
        *len = strlen(end_of_text);
        return end_of_text;
    }
    return gb_bpe_token_bytes(bpe, id, len);
}

/* Encodes `text` and checks that the ids spell it again. */
static void check_encoding(const gb_bpe *bpe, const uint8_t *text, size_t len)
{
    int32_t *ids = NULL;
    int64_t n = 0, cap = 0;
    gb_diag diag = {0};
    if (gb_bpe_encode(bpe, (const char *)text, len, &ids, &n, &cap, &diag) == 0) {
        size_t at = 0;
        for (int64_t i = 0; i < n; i++) {
            size_t piece;
            const char *bytes = spelling(bpe, ids[i], &piece);
            if (ids[i] < 0 || ids[i] >= gb_bpe_vocab_size(bpe) || !bytes || at + piece > len ||
                memcmp(text + at, bytes, piece) != 0)
                abort();
            at += piece;
        }
        if (at != len)
            abort();
    }
    free(ids);
    gb_diag_clear(&diag);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int gpt2_files = data[0] & 1;
    data++;
    size--;
    size_t n;
    const uint8_t *piece = gb_fuzz_take_piece(&data, &size, &n);
    if (gpt2_files) {
        gb_fuzz_write_file("encoder.json", piece, n);
        piece = gb_fuzz_take_piece(&data, &size, &n);
        gb_fuzz_write_file("vocab.bpe", piece, n);
        gb_fuzz_remove_file("ranks.tiktoken");   /* the folder holds GPT-2's files only */
    } else {
        gb_fuzz_write_file("ranks.tiktoken", piece, n);
    }
    gb_diag diag = {0};
    gb_bpe *bpe = gb_bpe_load(gpt2_files ? folder : ranks, &diag);
    if (bpe)
        check_encoding(bpe, data, size);
    gb_bpe_free(bpe);
    gb_diag_clear(&diag);
    return 0;
}
