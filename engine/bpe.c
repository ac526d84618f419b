/* GPT-2's byte-level BPE; see bpe.h.
 *
 * Tokens are byte strings in one pool, found by id (an array) and by their bytes (an
 * open-addressing table). A merge's priority comes from vocab.bpe's line order (a table
 * of id pairs) or, for a tiktoken file, from the rank of the merged bytes. Each piece is
 * merged by repeatedly joining its adjacent pair of lowest priority: quadratic in the
 * piece's length, which the pattern keeps short except for long whitespace runs.
 *
 * Left out: other special tokens than <|endoftext|>, and the pattern of later
 * vocabularies (cl100k's); the vocabulary files are trusted to describe a byte-level BPE
 * (every single byte a token), which loading checks.
 */
#include "bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsutil.h"

#define NO_RANK INT32_MAX
#define END_OF_TEXT "<|endoftext|>"

/* GPT-2's pre-tokenising pattern: contractions, optional space + letters, optional
 * space + digits, optional space + other symbols, whitespace not before a non-space,
 * whitespace. */
static const char gpt2_pattern[] =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef struct pair_rank {
    uint64_t key;     /* (first id + 1) << 32 | (second id + 1); 0 marks an empty slot */
    int32_t rank;
} pair_rank;

struct gb_bpe {
    char *pool;                   /* every token's bytes */
    size_t pool_len, pool_cap;
    uint32_t *offset, *length;    /* (n_tokens) into pool, by id */
    int64_t n_tokens;             /* ids 0 .. n_tokens - 1, <|endoftext|> included */
    int32_t end_of_text;
    uint32_t *by_bytes;           /* (table_cap) id + 1, or 0 for an empty slot */
    size_t table_cap;
    pair_rank *merges;            /* (merges_cap) vocab.bpe's priorities; NULL: by rank */
    size_t merges_cap;
    pcre2_code *pattern;
};

/* ---- tables -------------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t hash_key(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    return k ^ (k >> 33);
}

/* The id of a token with these bytes, or -1. */
static int32_t lookup(const gb_bpe *b, const char *s, size_t n)
{
    size_t mask = b->table_cap - 1;
    for (size_t i = hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
        uint32_t slot = b->by_bytes[i];
        if (!slot)
            return -1;
        uint32_t id = slot - 1;
        if (b->length[id] == n && memcmp(b->pool + b->offset[id], s, n) == 0)
            return (int32_t)id;
    }
}

static int32_t merge_rank(const gb_bpe *b, int32_t first, int32_t second)
{
    uint64_t key = (uint64_t)(first + 1) << 32 | (uint64_t)(second + 1);
    size_t mask = b->merges_cap - 1;
    for (size_t i = hash_key(key) & mask; b->merges[i].key; i = (i + 1) & mask)
        if (b->merges[i].key == key)
            return b->merges[i].rank;
    return NO_RANK;
}

static size_t power_of_two_above(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

/* ---- building the vocabulary --------------------------------------------------------- */

/* Whether a vocabulary file of `len` bytes could give every id below `id`: each entry
 * takes more than one byte, so a larger id means ids are missing, and room for it
 * (two arrays of id entries) would be allocated for nothing, gigabytes for an id of 10^9. */
static int id_fits_file(long long id, size_t len)
{
    return (unsigned long long)id < (unsigned long long)len;
}

/* Token `id` gets `n` bytes at s; ids may arrive in any order. */
static int add_token(gb_bpe *b, int64_t id, const char *s, size_t n, int64_t *room)
{
    if (id >= *room) {
        int64_t grown = (id + 1) * 2;
        uint32_t *off = realloc(b->offset, (size_t)grown * sizeof *off);
        if (off)
            b->offset = off;
        uint32_t *len = off ? realloc(b->length, (size_t)grown * sizeof *len) : NULL;
        if (!len)
            return -1;
        b->length = len;
        for (int64_t i = *room; i < grown; i++)
            b->length[i] = UINT32_MAX; /* not given yet */
        *room = grown;
    }
    if (!b->pool || b->pool_len + n > b->pool_cap) {   /* an empty first token too */
        size_t cap = (b->pool_len + n) * 2 + 1;
        char *pool = realloc(b->pool, cap);
        if (!pool)
            return -1;
        b->pool = pool;
        b->pool_cap = cap;
    }
    memcpy(b->pool + b->pool_len, s, n);
    b->offset[id] = (uint32_t)b->pool_len;
    b->length[id] = (uint32_t)n;
    b->pool_len += n;
    if (id >= b->n_tokens)
        b->n_tokens = id + 1;
    return 0;
}

/* Fills the bytes -> id table; every id must have been given once and every single byte
 * must be a token. */
static int index_tokens(gb_bpe *b, const char *path, gb_diag *diag)
{
    b->table_cap = power_of_two_above((size_t)b->n_tokens);
    b->by_bytes = calloc(b->table_cap, sizeof *b->by_bytes);
    if (!b->by_bytes) {
        gb_diag_add(diag, "%s: no memory for %lld tokens", path, (long long)b->n_tokens);
        return -1;
    }
    size_t mask = b->table_cap - 1;
    for (int64_t id = 0; id < b->n_tokens; id++) {
        if (b->length[id] == UINT32_MAX) {
            gb_diag_add(diag, "%s: no token has id %lld, but ids up to %lld are used: the ids "
                        "must run from 0 without gaps", path, (long long)id,
                        (long long)b->n_tokens - 1);
            return -1;
        }
        if (id == b->end_of_text)
            continue; /* only ever produced for the literal special text */
        const char *s = b->pool + b->offset[id];
        if (lookup(b, s, b->length[id]) >= 0) {
            gb_diag_add(diag, "%s: ids %d and %lld hold the same bytes", path,
                        lookup(b, s, b->length[id]), (long long)id);
            return -1;
        }
        size_t i = hash_bytes(s, b->length[id]) & mask;
        while (b->by_bytes[i])
            i = (i + 1) & mask;
        b->by_bytes[i] = (uint32_t)id + 1;
    }
    for (int c = 0; c < 256; c++) {
        char byte = (char)c;
        if (lookup(b, &byte, 1) < 0) {
            gb_diag_add(diag, "%s: byte 0x%02x is not a token; a byte-level BPE vocabulary has "
                        "all 256", path, c);
            return -1;
        }
    }
    return 0;
}

/* ---- GPT-2's files: encoder.json and vocab.bpe ----------------------------------------- */

/* A vocabulary file, whole and NUL-terminated; NULL after saying why in `diag`. */
static char *read_whole(const char *path, size_t *len, gb_diag *diag)
{
    unsigned char *data;
    const char *why;
    if (gb_read_regular_file(path, &data, len, &why)) {
        gb_diag_add(diag, "cannot read the tokenizer's %s: %s", path, why);
        return NULL;
    }
    return (char *)data;
}

/* GPT-2 spells each byte as one printable character: bytes that print as themselves in
 * Latin-1 keep their code point, the other 68 take U+0100 onwards, in byte order. */
static int char_of_byte(int byte)
{
    int shifted = 0;
    for (int b = 0; b < byte; b++)
        shifted += !((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174);
    int prints = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174;
    return prints ? byte : 256 + shifted;
}

/* The byte spelt by code point `c`, or -1 (built once into `table`, 324 entries). */
static int byte_of_char(const int16_t *table, uint32_t c)
{
    return c < 324 ? table[c] : -1;
}

static void build_byte_table(int16_t *table)
{
    for (int c = 0; c < 324; c++)
        table[c] = -1;
    for (int b = 0; b < 256; b++)
        table[char_of_byte(b)] = (int16_t)b;
}

/* Decodes one UTF-8 code point at *s (of n bytes); advances *s. -1 on a bad sequence. */
static int64_t next_code_point(const char **s, const char *end)
{
    const unsigned char *p = (const unsigned char *)*s;
    int extra = p[0] < 0x80 ? 0 : p[0] >= 0xf0 ? 3 : p[0] >= 0xe0 ? 2 : p[0] >= 0xc0 ? 1 : -1;
    if (extra < 0 || (const char *)p + extra >= end + (extra ? 0 : 1))
        return -1;
    uint32_t c = extra ? p[0] & (0x3f >> extra) : p[0];
    for (int i = 1; i <= extra; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return -1;
        c = c << 6 | (p[i] & 0x3f);
    }
    *s += extra + 1;
    return c;
}

/* GPT-2's spelling (UTF-8 of printable byte characters) -> the bytes, in place; the new
 * length, or -1 when a character is not one of the 256. */
static int64_t unspell(const int16_t *table, char *s, size_t n)
{
    const char *in = s, *end = s + n;
    size_t out = 0;
    while (in < end) {
        int64_t c = next_code_point(&in, end);
        int byte = c < 0 ? -1 : byte_of_char(table, (uint32_t)c);
        if (byte < 0)
            return -1;
        s[out++] = (char)byte;
    }
    return (int64_t)out;
}

static void put_utf8(char **out, uint32_t c)
{
    unsigned char *o = (unsigned char *)*out;
    if (c < 0x80) {
        *o++ = (unsigned char)c;
    } else if (c < 0x800) {
        *o++ = (unsigned char)(0xc0 | c >> 6);
        *o++ = (unsigned char)(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
        *o++ = (unsigned char)(0xe0 | c >> 12);
        *o++ = (unsigned char)(0x80 | (c >> 6 & 0x3f));
        *o++ = (unsigned char)(0x80 | (c & 0x3f));
    } else {
        *o++ = (unsigned char)(0xf0 | c >> 18);
        *o++ = (unsigned char)(0x80 | (c >> 12 & 0x3f));
        *o++ = (unsigned char)(0x80 | (c >> 6 & 0x3f));
        *o++ = (unsigned char)(0x80 | (c & 0x3f));
    }
    *out = (char *)o;
}

static int hex4(const char *p, uint32_t *out)
{
    *out = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (v < 0)
            return -1;
        *out = *out << 4 | (uint32_t)v;
    }
    return 0;
}

/* A JSON string at *p (just after its opening quote), unescaped in place into UTF-8;
 * *p ends after the closing quote. Its length, or -1 on a malformed string. */
static int64_t json_string(char **p, const char *end)
{
    char *in = *p, *out = *p, *start = *p;
    while (in < end && *in != '"') {
        if (*in != '\\') {
            *out++ = *in++;
            continue;
        }
        if (++in >= end)
            return -1;
        char e = *in++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (simple && e) {
            *out++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            continue;
        }
        uint32_t c, low;
        if (e != 'u' || end - in < 4 || hex4(in, &c))
            return -1;
        in += 4;
        if (c >= 0xd800 && c < 0xdc00) { /* a surrogate pair spells one code point */
            if (end - in < 6 || in[0] != '\\' || in[1] != 'u' || hex4(in + 2, &low) ||
                low < 0xdc00 || low >= 0xe000)
                return -1;
            in += 6;
            c = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
        }
        put_utf8(&out, c);
    }
    if (in >= end)
        return -1;
    *p = in + 1;
    return out - start;
}

static char *skip_blanks(char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

/* encoder.json: {"token": id, ...}. */
static int read_encoder(gb_bpe *b, const char *path, const int16_t *table, gb_diag *diag)
{
    size_t len;
    char *text = read_whole(path, &len, diag);
    if (!text)
        return -1;
    char *p = skip_blanks(text, text + len), *end = text + len;
    int64_t room = 0, entries = 0;
    int rc = -1;
    if (p >= end || *p++ != '{') {
        gb_diag_add(diag, "%s: expected a JSON object of token -> id", path);
        goto done;
    }
    for (;;) {
        p = skip_blanks(p, end);
        if (p < end && *p == '}' && entries == 0)
            break;
        char *key = p + 1;
        int64_t key_len = p < end && *p == '"' ? (p++, json_string(&p, end)) : -1;
        p = skip_blanks(p, end);
        char *number_end = NULL;
        long long id = -1;
        if (key_len >= 0 && p < end && *p == ':')
            id = strtoll(p + 1, &number_end, 10);
        if (key_len < 0 || !number_end || number_end == p + 1 || id < 0 || id > INT32_MAX - 1) {
            gb_diag_add(diag, "%s: byte %lld: expected \"token\": id (an id in [0, 2^31-1))",
                        path, (long long)(p - text));
            goto done;
        }
        if (!id_fits_file(id, len)) {
            gb_diag_add(diag, "%s: id %lld: a file of %zu bytes cannot give every id below "
                        "it, as a vocabulary must", path, id, len);
            goto done;
        }
        int special = key_len == (int64_t)strlen(END_OF_TEXT) &&
                      memcmp(key, END_OF_TEXT, (size_t)key_len) == 0;
        int64_t n = special ? key_len : unspell(table, key, (size_t)key_len);
        if (n < 0) {
            gb_diag_add(diag, "%s: token with id %lld holds a character that is not one of "
                        "GPT-2's 256 byte characters", path, id);
            goto done;
        }
        if (special)
            b->end_of_text = (int32_t)id;
        if (id < room && b->length[id] != UINT32_MAX) {
            gb_diag_add(diag, "%s: id %lld is given twice", path, id);
            goto done;
        }
        if (add_token(b, id, key, (size_t)n, &room)) {
            gb_diag_add(diag, "%s: no memory", path);
            goto done;
        }
        entries++;
        p = skip_blanks(number_end, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == '}')
            break;
        gb_diag_add(diag, "%s: byte %lld: expected ',' or '}'", path, (long long)(p - text));
        goto done;
    }
    if (b->end_of_text < 0) { /* the special token comes after the ranks */
        b->end_of_text = (int32_t)b->n_tokens;
        if (add_token(b, b->n_tokens, END_OF_TEXT, strlen(END_OF_TEXT), &room))
            goto done;
    }
    rc = 0;
done:
    free(text);
    return rc;
}

static int add_merge(gb_bpe *b, int32_t first, int32_t second, int32_t rank)
{
    uint64_t key = (uint64_t)(first + 1) << 32 | (uint64_t)(second + 1);
    size_t mask = b->merges_cap - 1, i = hash_key(key) & mask;
    while (b->merges[i].key && b->merges[i].key != key)
        i = (i + 1) & mask;
    if (b->merges[i].key)
        return -1;
    b->merges[i] = (pair_rank){key, rank};
    return 0;
}

static int joined_is_token(const gb_bpe *b, int32_t first, int32_t second)
{
    char joined[4096];
    size_t la = b->length[first], lb = b->length[second];
    if (la + lb > sizeof joined)
        return 0;
    memcpy(joined, b->pool + b->offset[first], la);
    memcpy(joined + la, b->pool + b->offset[second], lb);
    return lookup(b, joined, la + lb) >= 0;
}

/* vocab.bpe: "#version" line, then "first second" per line, highest priority first. */
static int read_merges(gb_bpe *b, const char *path, const int16_t *table, gb_diag *diag)
{
    size_t len;
    char *text = read_whole(path, &len, diag);
    if (!text)
        return -1;
    int64_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    b->merges_cap = power_of_two_above((size_t)lines);
    b->merges = calloc(b->merges_cap, sizeof *b->merges);
    int rc = b->merges ? 0 : -1;
    int32_t rank = 0;
    char *line = text;
    for (int64_t number = 1; rc == 0 && line < text + len; number++) {
        char *next = memchr(line, '\n', (size_t)(text + len - line));
        next = next ? next : text + len;
        size_t n = (size_t)(next - line);
        if (n && line[n - 1] == '\r')
            n--;
        char *space = memchr(line, ' ', n);
        if (n && !(number == 1 && line[0] == '#')) {
            int64_t la = space ? unspell(table, line, (size_t)(space - line)) : -1;
            int64_t lb = space ? unspell(table, space + 1, n - (size_t)(space + 1 - line)) : -1;
            int32_t first = la > 0 ? lookup(b, line, (size_t)la) : -1;
            int32_t second = lb > 0 ? lookup(b, space + 1, (size_t)lb) : -1;
            if (first < 0 || second < 0 || !joined_is_token(b, first, second) ||
                add_merge(b, first, second, rank++)) {
                gb_diag_add(diag, "%s:%lld: expected two tokens of encoder.json separated by "
                            "one space, whose join is a token too, and not seen before", path,
                            (long long)number);
                rc = -1;
            }
        }
        line = next + 1;
    }
    if (!b->merges)
        gb_diag_add(diag, "%s: no memory", path);
    free(text);
    return rc;
}

/* ---- tiktoken's ranks file ----------------------------------------------------------- */

static int base64_value(char c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
         : c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes n base64 characters at s into out; the byte count, or -1. */
static int64_t base64_decode(const char *s, size_t n, char *out)
{
    while (n && s[n - 1] == '=')
        n--;
    int64_t len = 0;
    uint32_t bits = 0;
    int have = 0;
    for (size_t i = 0; i < n; i++) {
        int v = base64_value(s[i]);
        if (v < 0)
            return -1;
        bits = bits << 6 | (uint32_t)v;
        have += 6;
        if (have >= 8) {
            have -= 8;
            out[len++] = (char)(bits >> have & 0xff);
        }
    }
    return len;
}

static int read_ranks(gb_bpe *b, const char *path, gb_diag *diag)
{
    size_t len;
    char *text = read_whole(path, &len, diag);
    if (!text)
        return -1;
    int64_t room = 0;
    int rc = 0;
    char *line = text;
    char token[1024];
    for (int64_t number = 1; rc == 0 && line < text + len; number++) {
        char *next = memchr(line, '\n', (size_t)(text + len - line));
        next = next ? next : text + len;
        if (next == line) {
            line = next + 1;
            continue;
        }
        char *space = memchr(line, ' ', (size_t)(next - line));
        char *rank_end = NULL;
        long long rank = space ? strtoll(space + 1, &rank_end, 10) : -1;
        int64_t n = space && space - line < (ptrdiff_t)(sizeof token * 4 / 3)
                        ? base64_decode(line, (size_t)(space - line), token) : -1;
        if (n <= 0 || rank < 0 || rank > INT32_MAX - 2 || !id_fits_file(rank, len) ||
            !rank_end ||
            (rank_end != next && *rank_end != '\r') ||
            (rank < room && b->length[rank] != UINT32_MAX) ||
            add_token(b, rank, token, (size_t)n, &room)) {
            gb_diag_add(diag, "%s:%lld: expected 'BASE64 RANK' with a rank given once", path,
                        (long long)number);
            rc = -1;
        }
        line = next + 1;
    }
    b->end_of_text = (int32_t)b->n_tokens;
    if (rc == 0 && add_token(b, b->n_tokens, END_OF_TEXT, strlen(END_OF_TEXT), &room))
        rc = -1;
    free(text);
    return rc;
}

/* ---- loading ------------------------------------------------------------------------- */

static int compile_pattern(gb_bpe *b, gb_diag *diag)
{
    int err;
    PCRE2_SIZE at;
    b->pattern = pcre2_compile((PCRE2_SPTR)gpt2_pattern, PCRE2_ZERO_TERMINATED,
                               PCRE2_UTF | PCRE2_UCP, &err, &at, NULL);
    if (!b->pattern) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(err, message, sizeof message);
        gb_diag_add(diag, "the GPT-2 pattern does not compile with this PCRE2: %s", message);
        return -1;
    }
    pcre2_jit_compile(b->pattern, PCRE2_JIT_COMPLETE); /* optional: a faster matcher */
    return 0;
}

static int is_folder(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int read_gpt2_folder(gb_bpe *b, const char *dir, gb_diag *diag)
{
    int16_t table[324];
    build_byte_table(table);
    char encoder[4200], merges[4200];
    snprintf(encoder, sizeof encoder, "%s/encoder.json", dir);
    snprintf(merges, sizeof merges, "%s/vocab.bpe", dir);
    return read_encoder(b, encoder, table, diag) || index_tokens(b, encoder, diag) ||
           read_merges(b, merges, table, diag);
}

gb_bpe *gb_bpe_load(const char *path, gb_diag *diag)
{
    gb_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        gb_diag_add(diag, "no memory for a tokenizer");
        return NULL;
    }
    b->end_of_text = -1;
    int failed = is_folder(path) ? read_gpt2_folder(b, path, diag)
                                 : read_ranks(b, path, diag) || index_tokens(b, path, diag);
    if (failed || compile_pattern(b, diag)) {
        gb_bpe_free(b);
        return NULL;
    }
    return b;
}

void gb_bpe_free(gb_bpe *b)
{
    if (!b)
        return;
    pcre2_code_free(b->pattern);
    free(b->pool);
    free(b->offset);
    free(b->length);
    free(b->by_bytes);
    free(b->merges);
    free(b);
}

int64_t gb_bpe_vocab_size(const gb_bpe *b)
{
    return b->n_tokens;
}

int32_t gb_bpe_end_of_text(const gb_bpe *b)
{
    return b->end_of_text;
}

const char *gb_bpe_token_bytes(const gb_bpe *b, int32_t id, size_t *len)
{
    if (id < 0 || id >= b->n_tokens)
        return NULL;
    *len = b->length[id];
    return b->pool + b->offset[id];
}

/* ---- encoding ------------------------------------------------------------------------ */

static int push_id(int32_t **ids, int64_t *n, int64_t *cap, int32_t id)
{
    if (*n == *cap) {
        int64_t grown = *cap ? *cap * 2 : 1024;
        int32_t *more = realloc(*ids, (size_t)grown * sizeof *more);
        if (!more)
            return -1;
        *ids = more;
        *cap = grown;
    }
    (*ids)[(*n)++] = id;
    return 0;
}

/* The priority of joining the parts [s, mid) and [mid, e) of a piece. */
static int32_t join_rank(const gb_bpe *b, const char *s, size_t mid, size_t e)
{
    if (!b->merges) {
        int32_t id = lookup(b, s, e);
        return id < 0 ? NO_RANK : id;
    }
    int32_t first = lookup(b, s, mid), second = lookup(b, s + mid, e - mid);
    return first < 0 || second < 0 ? NO_RANK : merge_rank(b, first, second);
}

/* BPE of one piece of n bytes: `cut` holds the part boundaries (n + 1 room). */
static int encode_piece(const gb_bpe *b, const char *s, size_t n, size_t *cut, int32_t **ids,
                        int64_t *count, int64_t *cap)
{
    int32_t whole = b->merges ? -1 : lookup(b, s, n);
    if (whole >= 0) /* a tiktoken vocabulary's own token needs no merging */
        return push_id(ids, count, cap, whole);
    size_t parts = n;
    for (size_t i = 0; i <= n; i++)
        cut[i] = i;
    while (parts > 1) {
        int32_t best = NO_RANK;
        size_t at = 0;
        for (size_t i = 0; i + 1 < parts; i++) {
            int32_t r = join_rank(b, s + cut[i], cut[i + 1] - cut[i], cut[i + 2] - cut[i]);
            if (r < best) {
                best = r;
                at = i;
            }
        }
        if (best == NO_RANK)
            break;
        memmove(cut + at + 1, cut + at + 2, (parts - at - 1) * sizeof *cut);
        parts--;
    }
    for (size_t i = 0; i < parts; i++) {
        int32_t id = lookup(b, s + cut[i], cut[i + 1] - cut[i]);
        if (id < 0 || push_id(ids, count, cap, id))
            return -1;
    }
    return 0;
}

/* Pieces of a text holding no <|endoftext|>; `utf_checked` once PCRE2 has validated it. */
static int encode_plain(const gb_bpe *b, const char *text, size_t len, size_t base,
                        pcre2_match_data *match, int32_t **ids, int64_t *n, int64_t *cap,
                        gb_diag *diag)
{
    size_t *cut = NULL, cut_cap = 0;
    uint32_t options = 0;
    int rc = 0;
    for (size_t at = 0; at < len && rc == 0; options = PCRE2_NO_UTF_CHECK) {
        int found = pcre2_match(b->pattern, (PCRE2_SPTR)text, len, at, options, match, NULL);
        PCRE2_SIZE *span = pcre2_get_ovector_pointer(match);
        if (found < 0) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(found, message, sizeof message);
            gb_diag_add(diag, "the text is not UTF-8 at byte %zu: %s",
                        base + (found <= PCRE2_ERROR_UTF8_ERR1 && found >= PCRE2_ERROR_UTF8_ERR21
                                    ? (size_t)pcre2_get_startchar(match) : at), message);
            rc = -1;
            break;
        }
        size_t piece = span[1] - span[0];
        if (span[0] != at || piece == 0) {
            gb_diag_add(diag, "internal error: the GPT-2 pattern skipped bytes at %zu", base + at);
            rc = -1;
            break;
        }
        if (piece + 1 > cut_cap) {
            cut_cap = (piece + 1) * 2;
            size_t *grown = realloc(cut, cut_cap * sizeof *cut);
            if (!grown) {
                gb_diag_add(diag, "no memory for a piece of %zu bytes", piece);
                rc = -1;
                break;
            }
            cut = grown;
        }
        rc = encode_piece(b, text + at, piece, cut, ids, n, cap);
        if (rc)
            gb_diag_add(diag, "no memory for the token ids of %zu bytes", len);
        at = span[1];
    }
    free(cut);
    return rc;
}

int gb_bpe_encode(const gb_bpe *b, const char *text, size_t len, int32_t **ids, int64_t *n,
                  int64_t *cap, gb_diag *diag)
{
    pcre2_match_data *match = pcre2_match_data_create_from_pattern(b->pattern, NULL);
    if (!match) {
        gb_diag_add(diag, "no memory for the tokenizer's matcher");
        return -1;
    }
    const size_t special = strlen(END_OF_TEXT);
    int rc = 0;
    for (size_t at = 0; at < len && rc == 0;) {
        const char *hit = memmem(text + at, len - at, END_OF_TEXT, special);
        size_t stop = hit ? (size_t)(hit - text) : len;
        rc = encode_plain(b, text + at, stop - at, at, match, ids, n, cap, diag);
        if (rc == 0 && hit && push_id(ids, n, cap, b->end_of_text)) {
            gb_diag_add(diag, "no memory for the token ids of %zu bytes", len);
            rc = -1;
        }
        at = hit ? stop + special : len;
    }
    pcre2_match_data_free(match);
    return rc;
}
