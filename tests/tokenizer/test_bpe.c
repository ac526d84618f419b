/* GPT-2's BPE tokenizer against tiktoken: the fixture (make_fixture.py) holds a small
 * vocabulary in both file formats, test texts (unicode, whitespace runs, contractions,
 * <|endoftext|>) and the ids tiktoken gave for them. Each format must give those ids,
 * decoding must give the text back, and bad input must be refused with its place named.
 *
 * usage: test-bpe FIXTURE_DIR SCRATCH_DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bpe.h"

#define MAX_TEXTS 16
#define MAX_LEN 4096

static int failures;

static void check(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    failures += !ok;
}

typedef struct text {
    char bytes[MAX_LEN];
    size_t len;
    int32_t ids[MAX_LEN];
    int64_t n_ids;
} text;

static int read_texts(const char *dir, text *texts)
{
    char path[4200], line[4 * MAX_LEN];
    snprintf(path, sizeof path, "%s/texts.hex", dir);
    FILE *hex = fopen(path, "r");
    snprintf(path, sizeof path, "%s/expected.txt", dir);
    FILE *ids = fopen(path, "r");
    int n = 0;
    while (hex && ids && n < MAX_TEXTS && fgets(line, sizeof line, hex)) {
        text *t = &texts[n];
        for (t->len = 0; line[2 * t->len] && line[2 * t->len] != '\n'; t->len++) {
            unsigned v;
            sscanf(line + 2 * t->len, "%2x", &v);
            t->bytes[t->len] = (char)v;
        }
        if (!fgets(line, sizeof line, ids))
            break;
        char *p = line, *end;
        for (t->n_ids = 0;; t->n_ids++) {
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            t->ids[t->n_ids] = (int32_t)v;
            p = end;
        }
        n++;
    }
    if (hex)
        fclose(hex);
    if (ids)
        fclose(ids);
    return n;
}

static int decodes_to(const gb_bpe *bpe, const int32_t *ids, int64_t n, const text *t)
{
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t len;
        const char *bytes = gb_bpe_token_bytes(bpe, ids[i], &len);
        if (!bytes || at + len > t->len || memcmp(t->bytes + at, bytes, len) != 0)
            return 0;
        at += len;
    }
    return at == t->len;
}

static void check_vocabulary(const char *path, const char *label, const text *texts, int n)
{
    gb_diag diag = {0};
    gb_bpe *bpe = gb_bpe_load(path, &diag);
    gb_diag_print(&diag, stdout);
    gb_diag_clear(&diag);
    char what[256];
    snprintf(what, sizeof what, "%s loads: 557 tokens, <|endoftext|> = 556", label);
    check(bpe && gb_bpe_vocab_size(bpe) == 557 && gb_bpe_end_of_text(bpe) == 556, what);
    if (!bpe)
        return;
    for (int k = 0; k < n; k++) {
        int32_t *ids = NULL;
        int64_t count = 0, cap = 0;
        int rc = gb_bpe_encode(bpe, texts[k].bytes, texts[k].len, &ids, &count, &cap, &diag);
        gb_diag_print(&diag, stdout);
        gb_diag_clear(&diag);
        int same = rc == 0 && count == texts[k].n_ids &&
                   (count == 0 || memcmp(ids, texts[k].ids, (size_t)count * sizeof *ids) == 0);
        snprintf(what, sizeof what, "%s: text %d (%zu bytes) encodes to tiktoken's %lld ids",
                 label, k, texts[k].len, (long long)texts[k].n_ids);
        check(same, what);
        if (!same && rc == 0) {
            printf("  got:");
            for (int64_t i = 0; i < count; i++)
                printf(" %d", ids[i]);
            printf("\n");
        }
        snprintf(what, sizeof what, "%s: text %d decodes back to its bytes", label, k);
        check(rc == 0 && decodes_to(bpe, ids, count, &texts[k]), what);
        free(ids);
    }
    int32_t *ids = NULL;
    int64_t count = 0, cap = 0;
    const char bad[] = "fine text \xff\xfe then not UTF-8";
    int rc = gb_bpe_encode(bpe, bad, sizeof bad - 1, &ids, &count, &cap, &diag);
    snprintf(what, sizeof what, "%s: text that is not UTF-8 is refused at byte 10", label);
    check(rc != 0 && diag.count == 1 && strstr(diag.messages[0], "not UTF-8 at byte 10"), what);
    if (diag.count)
        printf("  (%s)\n", diag.messages[0]);
    gb_diag_clear(&diag);
    free(ids);
    gb_bpe_free(bpe);
}

static void write_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(content, f);
        fclose(f);
    }
}

/* A broken vocabulary must be refused with a message holding `expected`. */
static void check_refused(const char *path, const char *expected, const char *what)
{
    gb_diag diag = {0};
    gb_bpe *bpe = gb_bpe_load(path, &diag);
    int ok = !bpe && diag.count >= 1 && strstr(diag.messages[0], expected);
    check(ok, what);
    if (diag.count)
        printf("  (%s)\n", diag.messages[0]);
    gb_diag_clear(&diag);
    gb_bpe_free(bpe);
}

static void check_broken_files(const char *scratch)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/missing", scratch);
    check_refused(path, "missing", "a missing ranks file is named");
    snprintf(path, sizeof path, "%s/bad.tiktoken", scratch);
    write_file(path, "IQ== 0\nnot-base64! 1\n");
    check_refused(path, "bad.tiktoken:2: expected 'BASE64 RANK'", "a bad ranks line is named");
    write_file(path, "IQ== 0\nIg== 0\n");
    check_refused(path, "bad.tiktoken:2", "a rank given twice is refused");
    write_file(path, "IQ== 0\n");
    check_refused(path, "byte 0x00 is not a token", "a vocabulary without every byte is refused");
    snprintf(path, sizeof path, "%s/gpt2", scratch);
    mkdir(path, 0755);
    check_refused(path, "encoder.json", "a folder without encoder.json is named");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s FIXTURE_DIR SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    text *texts = calloc(MAX_TEXTS, sizeof *texts);
    int n = texts ? read_texts(argv[1], texts) : 0;
    check(n >= 7, "the fixture's texts and expected ids are read");
    check_vocabulary(argv[1], "encoder.json + vocab.bpe", texts, n);
    char ranks[4200];
    snprintf(ranks, sizeof ranks, "%s/tiny.tiktoken", argv[1]);
    check_vocabulary(ranks, "tiktoken ranks", texts, n);
    check_broken_files(argv[2]);
    free(texts);
    printf("%s\n", failures ? "some checks failed" : "all checks passed");
    return failures ? 1 : 0;
}
