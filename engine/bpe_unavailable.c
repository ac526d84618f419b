/* The BPE tokenizer of a build without PCRE2 (see engine/meson.build): loading says what
 * is missing; nothing else can be reached without a loaded tokenizer. */
#include "bpe.h"

gb_bpe *gb_bpe_load(const char *path, gb_diag *diag)
{
    gb_diag_add(diag, "%s: this gearbox was built without PCRE2, which GPT-2's tokenizer "
                "needs: install libpcre2-dev and build again", path);
    return NULL;
}

void gb_bpe_free(gb_bpe *bpe)
{
    (void)bpe;
}

int64_t gb_bpe_vocab_size(const gb_bpe *bpe)
{
    (void)bpe;
    return 0;
}

int32_t gb_bpe_end_of_text(const gb_bpe *bpe)
{
    (void)bpe;
    return -1;
}

int gb_bpe_encode(const gb_bpe *bpe, const char *text, size_t len, int32_t **ids, int64_t *n,
                  int64_t *cap, gb_diag *diag)
{
    (void)bpe, (void)text, (void)len, (void)ids, (void)n, (void)cap;
    gb_diag_add(diag, "no tokenizer: this gearbox was built without PCRE2");
    return -1;
}

int gb_bpe_encode_bytes(const gb_bpe *bpe, const char *text, size_t len, int32_t **ids,
                        int64_t *n, int64_t *cap, gb_diag *diag)
{
    return gb_bpe_encode(bpe, text, len, ids, n, cap, diag);
}

const char *gb_bpe_token_bytes(const gb_bpe *bpe, int32_t id, size_t *len)
{
    (void)bpe, (void)id, (void)len;
    return NULL;
}
