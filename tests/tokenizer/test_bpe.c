/* GPT-2's BPE tokenizer against tiktoken: the fixture (make_fixture.py) holds a small
 * vocabulary in both file formats, test texts (unicode, whitespace runs, contractions,
 * <|endoftext|>) and the ids tiktoken gave for them. Each format must give those ids,
 * decoding must give the text back, and bad input must be refused with its place named.
 *
 * Long inputs (a run of 100,000 spaces, one word of 100,002 letters, a 1 MiB base64
 * line, Tiny Shakespeare) must give tiktoken's ids (their count and SHA-256 in
 * long.txt) in under a second of CPU each; random bytes must survive encode and decode; and
 * GPT-2 files that disagree (vocab.bpe cut short, empty, or merging what encoder.json
 * lacks) must be refused with the line named.
 *
 * usage: test-bpe FIXTURE_DIR SCRATCH_DIR CORPUS
 */
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bpe.h"
#include "fsutil.h"

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

/* The bytes of make_fixture.py's lcg_bytes. */
static void lcg_bytes(unsigned char *out, size_t n, uint64_t x)
{
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        out[i] = (unsigned char)(x >> 56);
    }
}

static size_t base64_encode(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = 0;
    for (size_t i = 0; i + 2 < n; i += 3) {   /* n is a multiple of 3 here */
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        for (int k = 3; k >= 0; k--)
            out[len++] = digits[v >> (6 * k) & 63];
    }
    return len;
}

/* make_fixture.py's long text `name`, malloc'ed; NULL for a name it does not know. */
static char *long_text(const char *name, const char *corpus, size_t *len)
{
    char *text = NULL;
    if (strcmp(name, "spaces") == 0 || strcmp(name, "spaces-word") == 0) {
        *len = 100000 + (name[6] ? 4 : 0);
        if ((text = malloc(*len)))
            memcpy(memset(text, ' ', 100000) + 100000, "word", *len - 100000);
    } else if (strcmp(name, "one-word") == 0) {
        *len = 3 * 33334;
        for (size_t i = 0; (text = text ? text : malloc(*len)) && i < *len; i += 3)
            memcpy(text + i, "the", 3);
    } else if (strcmp(name, "base64") == 0) {
        unsigned char *raw = malloc(786432);
        text = malloc(1 << 20);
        if (raw && text) {
            lcg_bytes(raw, 786432, 1);
            *len = base64_encode(raw, 786432, text);
        }
        free(raw);
    } else if (strcmp(name, "shakespeare") == 0) {
        const char *why;
        if (gb_read_regular_file(corpus, (unsigned char **)&text, len, &why))
            printf("  cannot read %s: %s\n", corpus, why);
    }
    return text;
}

/* CPU time: what the encoding costs, whatever else the machine runs meanwhile. */
/* The SHA-256 of n bytes as 64 lower-case hex digits and a NUL (nettle). */
static void sha256_hex(const void *data, size_t n, char hex[65])
{
    struct sha256_ctx h;
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_init(&h);
    sha256_update(&h, n, data);
    sha256_digest(&h, sizeof digest, digest);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Each long text of long.txt: tiktoken's ids, in under a second of CPU. */
static void check_long_texts(const char *fixture, const char *vocab, const char *label,
                             const char *corpus)
{
    char path[4200], line[256];
    snprintf(path, sizeof path, "%s/long.txt", fixture);
    FILE *f = fopen(path, "r");
    gb_diag diag = {0};
    gb_bpe *bpe = gb_bpe_load(vocab, &diag);
    check(f && bpe, "long.txt and the vocabulary are read");
    while (f && bpe && fgets(line, sizeof line, f)) {
        char name[64], want_hash[65], hash[65] = "";
        size_t want_bytes, len = 0;
        long long want_ids;
        if (sscanf(line, "%63s %zu %lld %64s", name, &want_bytes, &want_ids, want_hash) != 4)
            continue;
        char *text = long_text(name, corpus, &len);
        int32_t *ids = NULL;
        int64_t n = 0, cap = 0;
        double start = seconds_now();
        int rc = text ? gb_bpe_encode(bpe, text, len, &ids, &n, &cap, &diag) : -1;
        double took = seconds_now() - start;
        gb_diag_print(&diag, stdout);
        gb_diag_clear(&diag);
        if (rc == 0)
            sha256_hex(ids, (size_t)n * sizeof *ids, hash);
        char what[512];
        snprintf(what, sizeof what, "%s: %s (%zu bytes) encodes to tiktoken's %lld ids in "
                 "%.3f s of CPU, under 1 s", label, name, len, want_ids, took);
        check(rc == 0 && len == want_bytes && n == want_ids && strcmp(hash, want_hash) == 0 &&
              took < 1.0, what);
        if (rc == 0 && (n != want_ids || strcmp(hash, want_hash) != 0))
            printf("  got %lld ids, sha256 %s\n", (long long)n, hash);
        free(ids);
        free(text);
    }
    if (f)
        fclose(f);
    gb_bpe_free(bpe);
}

/* Random bytes, most of them not UTF-8, come back whole through encode_bytes. */
static void check_random_bytes(const char *vocab)
{
    gb_diag diag = {0};
    gb_bpe *bpe = gb_bpe_load(vocab, &diag);
    int all = bpe != NULL;
    for (uint64_t seed = 1; bpe && seed <= 20; seed++) {
        text t = {.len = 64 * seed};
        lcg_bytes((unsigned char *)t.bytes, t.len, seed);
        if (seed % 2)   /* and text with some of it broken */
            for (size_t i = 0; i < t.len; i++)
                t.bytes[i] = (char)(i % 7 == 3 ? (unsigned char)t.bytes[i] | 0x80
                                               : 'a' + (unsigned char)t.bytes[i] % 26);
        int32_t *ids = NULL;
        int64_t n = 0, cap = 0;
        int rc = gb_bpe_encode_bytes(bpe, t.bytes, t.len, &ids, &n, &cap, &diag);
        all &= rc == 0 && decodes_to(bpe, ids, n, &t);
        free(ids);
    }
    gb_diag_print(&diag, stdout);
    gb_diag_clear(&diag);
    check(all, "random bytes (20 texts) encode and decode back to themselves");
    gb_bpe_free(bpe);
}

/* Copies the fixture's GPT-2 files into SCRATCH/NAME with vocab.bpe as given. */
static void gpt2_folder_with(const char *fixture, const char *scratch, const char *name,
                             const char *merges, char *dir, size_t cap)
{
    char from[4200], to[4200];
    snprintf(dir, cap, "%s/%s", scratch, name);
    mkdir(dir, 0755);
    snprintf(from, sizeof from, "%s/encoder.json", fixture);
    snprintf(to, sizeof to, "%s/encoder.json", dir);
    unsigned char *data = NULL;
    size_t size = 0;
    const char *why;
    if (gb_read_regular_file(from, &data, &size, &why) == 0) {
        FILE *f = fopen(to, "wb");
        if (f) {
            fwrite(data, 1, size, f);
            fclose(f);
        }
        free(data);
    }
    snprintf(to, sizeof to, "%s/vocab.bpe", dir);
    write_file(to, merges);
}

/* vocab.bpe that does not describe encoder.json is refused with its line. */
static void check_disagreeing_files(const char *fixture, const char *scratch)
{
    char path[4200], dir[4200];
    snprintf(path, sizeof path, "%s/vocab.bpe", fixture);
    unsigned char *merges = NULL;
    size_t size = 0;
    const char *why;
    if (gb_read_regular_file(path, &merges, &size, &why)) {
        check(0, "the fixture's vocab.bpe is read");
        return;
    }
    char *last = (char *)merges + size - 1;   /* the file ends with a newline */
    while (last > (char *)merges && last[-1] != '\n')
        last--;
    *last = '\0';
    gpt2_folder_with(fixture, scratch, "cut", (char *)merges, dir, sizeof dir);
    check_refused(dir, "vocab.bpe:301: the file ends after 299 merges, but encoder.json has "
                  "300 tokens after its 256 bytes, each made by one merge: none makes id 555",
                  "a vocab.bpe without its last line is refused, the line named");
    gpt2_folder_with(fixture, scratch, "empty", "", dir, sizeof dir);
    check_refused(dir, "vocab.bpe:1: the file is empty: it ends after 0 merges",
                  "an empty vocab.bpe is refused, the line named");
    char *third = strchr(strchr((char *)merges, '\n') + 1, '\n') + 1;
    char unknown[8192];   /* the first merge, "\u0120 t", made "\u0120 qz": qz is no token */
    snprintf(unknown, sizeof unknown, "#version: 0.2\n\xc4\xa0 qz\n%s", third);
    gpt2_folder_with(fixture, scratch, "unknown", unknown, dir, sizeof dir);
    check_refused(dir, "vocab.bpe:2: ",
                  "a vocab.bpe merging a part encoder.json lacks is refused, the line named");
    check_refused(dir, "part is not a token of encoder.json",
                  "... and the message says which part is missing");
    free(merges);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s FIXTURE_DIR SCRATCH_DIR CORPUS\n", argv[0]);
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
    check_disagreeing_files(argv[1], argv[2]);
    check_random_bytes(ranks);
    check_long_texts(argv[1], argv[1], "encoder.json + vocab.bpe", argv[3]);
    check_long_texts(argv[1], ranks, "tiktoken ranks", argv[3]);
    free(texts);
    printf("%s\n", failures ? "some checks failed" : "all checks passed");
    return failures ? 1 : 0;
}
