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
#include <unistd.h>

#include "bpe.h"
#include "fuzz.h"

static char folder[64], ranks[96];

static void remove_files(void)
{
    static const char *const files[] = {"encoder.json", "vocab.bpe", "ranks.tiktoken"};
    char path[128];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", folder, files[i]);
        unlink(path);
    }
    rmdir(folder);
}

void gb_fuzz_init(void)
{
    snprintf(folder, sizeof folder, "/tmp/gearbox-fuzz-bpe-XXXXXX");
    if (!mkdtemp(folder))
        abort();
    snprintf(ranks, sizeof ranks, "%s/ranks.tiktoken", folder);
    atexit(remove_files);
}
GB_FUZZ_INITIALIZE

/* The next length-prefixed piece of the input (fewer bytes at its end). */
static const uint8_t *take_piece(const uint8_t **data, size_t *size, size_t *len)
{
    size_t n = *size >= 2 ? (size_t)(*data)[0] | (size_t)(*data)[1] << 8 : 0;
    size_t skip = *size >= 2 ? 2 : *size;
    *data += skip;
    *size -= skip;
    *len = n < *size ? n : *size;
    const uint8_t *piece = *data;
    *data += *len;
    *size -= *len;
    return piece;
}

static void write_file(const char *path, const uint8_t *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    fwrite(bytes, 1, n, f);
    fclose(f);
}

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
    char path[128];
    size_t n;
    const uint8_t *piece = take_piece(&data, &size, &n);
    if (gpt2_files) {
        snprintf(path, sizeof path, "%s/encoder.json", folder);
        write_file(path, piece, n);
        piece = take_piece(&data, &size, &n);
        snprintf(path, sizeof path, "%s/vocab.bpe", folder);
        write_file(path, piece, n);
        unlink(ranks);   /* the folder holds the two GPT-2 files only */
    } else {
        write_file(ranks, piece, n);
    }
    gb_diag diag = {0};
    gb_bpe *bpe = gb_bpe_load(gpt2_files ? folder : ranks, &diag);
    if (bpe)
        check_encoding(bpe, data, size);
    gb_bpe_free(bpe);
    gb_diag_clear(&diag);
    return 0;
}
