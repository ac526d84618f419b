/* GPT-2's byte-level BPE; see bpe.h.
 *
 * Tokens are byte strings in one pool, found by id (an array) and by their bytes (an
 * open-addressing table). Merges are a table of id pairs -> (priority, merged id): from
 * vocab.bpe's lines, or for a tiktoken file from every split of a token into two tokens
 * (a merge's priority is then its result's rank). A piece is merged lowest priority
 * first, leftmost among equals, as tiktoken and GPT-2's encoder.py do; its parts are a
 * linked list and the candidate pairs a binary heap, so a piece of n bytes costs
 * O(n log n) and a run of 100,000 spaces no more than 100,000 letters. The pieces of one
 * text that repeat (most words do) come from a cache.
 *
 * GPT-2's files are checked against each other as tiktoken checks them: the 256 byte
 * tokens take ids 0 to 255, vocab.bpe's k-th merge makes id 256 + k out of two tokens of
 * encoder.json, every other token is made by one merge, and <|endoftext|> is the last id.
 *
 * Left out: other special tokens than <|endoftext|>, and the pattern of later
 * vocabularies (cl100k's).
 */
#include "bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsutil.h"

#define END_OF_TEXT "<|endoftext|>"
#define BYTE_TOKENS 256

/* GPT-2's pre-tokenising pattern: contractions, optional space + letters, optional
 * space + digits, optional space + other symbols, whitespace not before a non-space,
 * whitespace. */
static const char gpt2_pattern[] =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef struct merge {
    uint64_t key;     /* (first id + 1) << 32 | (second id + 1); 0 marks an empty slot */
    int32_t rank;     /* lower merges first */
    int32_t result;   /* the id the two parts make */
} merge;

struct gb_bpe {
    char *pool;                   /* every token's bytes */
    size_t pool_len, pool_cap;
    uint32_t *offset, *length;    /* (n_tokens) into pool, by id */
    int64_t n_tokens;             /* ids 0 .. n_tokens - 1, <|endoftext|> included */
    int32_t end_of_text;
    int32_t byte_id[256];         /* the token of each single byte */
    uint32_t *by_bytes;           /* (table_cap) id + 1, or 0 for an empty slot */
    size_t table_cap;
    merge *merges;                /* (merges_cap) */
    size_t merges_cap;
    int whole_pieces;             /* tiktoken: a piece that is a token is not merged */
    pcre2_code *pattern;
};

/* ---- tables -------------------------------------------------------------------------- */

static uint64_t hash_key(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    return k ^ (k >> 33);
}

/* FNV-1a, its bits mixed so that the low ones a table's mask keeps vary too. */
static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return hash_key(h);
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

static uint64_t pair_key(int32_t first, int32_t second)
{
    return (uint64_t)(uint32_t)(first + 1) << 32 | (uint32_t)(second + 1);
}

/* The merge of two adjacent parts, or NULL. */
static const merge *find_merge(const gb_bpe *b, int32_t first, int32_t second)
{
    uint64_t key = pair_key(first, second);
    size_t mask = b->merges_cap - 1;
    for (size_t i = hash_key(key) & mask; b->merges[i].key; i = (i + 1) & mask)
        if (b->merges[i].key == key)
            return &b->merges[i];
    return NULL;
}

/* Adds a merge; -1 when the pair has one already. */
static int add_merge(gb_bpe *b, int32_t first, int32_t second, int32_t rank, int32_t result)
{
    uint64_t key = pair_key(first, second);
    size_t mask = b->merges_cap - 1, i = hash_key(key) & mask;
    while (b->merges[i].key && b->merges[i].key != key)
        i = (i + 1) & mask;
    if (b->merges[i].key)
        return -1;
    b->merges[i] = (merge){key, rank, result};
    return 0;
}

static size_t power_of_two_above(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

static int alloc_merges(gb_bpe *b, size_t count, const char *path, gb_diag *diag)
{
    b->merges_cap = power_of_two_above(count);
    b->merges = calloc(b->merges_cap, sizeof *b->merges);
    if (!b->merges)
        gb_diag_add(diag, "%s: no memory for %zu merges", path, count);
    return b->merges ? 0 : -1;
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
        b->byte_id[c] = lookup(b, &byte, 1);
        if (b->byte_id[c] < 0) {
            gb_diag_add(diag, "%s: byte 0x%02x is not a token; a byte-level BPE vocabulary has "
                        "all 256", path, c);
            return -1;
        }
    }
    return 0;
}

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

/* ---- GPT-2's files: encoder.json and vocab.bpe ----------------------------------------- */

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

/* GPT-2's spelling (UTF-8 of printable byte characters) -> the bytes, into `out` (room
 * for n); the new length, or -1 when a character is not one of the 256. */
static int64_t unspell(const int16_t *table, const char *s, size_t n, char *out)
{
    const char *in = s, *end = s + n;
    size_t len = 0;
    while (in < end) {
        int64_t c = next_code_point(&in, end);
        int byte = c < 0 ? -1 : byte_of_char(table, (uint32_t)c);
        if (byte < 0)
            return -1;
        out[len++] = (char)byte;
    }
    return (int64_t)len;
}

/* A token's bytes as encoder.json spells them, for messages (cut to fit `cap`). */
static void spell(const char *s, size_t n, char *out, size_t cap)
{
    size_t at = 0;
    for (size_t i = 0; i < n && at + 3 < cap; i++) {
        int c = char_of_byte((unsigned char)s[i]);
        if (c < 0x80) {
            out[at++] = (char)c;
        } else {
            out[at++] = (char)(0xc0 | c >> 6);
            out[at++] = (char)(0x80 | (c & 0x3f));
        }
    }
    out[at] = '\0';
}

/* One encoder.json entry: token `key` (GPT-2's spelling) has the id `value`. */
static int read_encoder_entry(gb_bpe *b, const char *path, size_t file_len, const char *key,
                              const json_t *value, const int16_t *table, int64_t *room,
                              gb_diag *diag)
{
    json_int_t id = json_is_integer(value) ? json_integer_value(value) : -1;
    if (id < 0 || id > INT32_MAX - 1) {
        gb_diag_add(diag, "%s: token \"%s\": expected an id from 0 to 2^31-2, found %s", path,
                    key, json_is_integer(value) ? "one out of that range" : "another value");
        return -1;
    }
    if (!id_fits_file(id, file_len)) {
        gb_diag_add(diag, "%s: id %lld: a file of %zu bytes cannot give every id below it, "
                    "as a vocabulary must", path, (long long)id, file_len);
        return -1;
    }
    size_t key_len = strlen(key);
    char *bytes = malloc(key_len + 1);
    int special = strcmp(key, END_OF_TEXT) == 0;
    int64_t n = !bytes ? -2 : special ? (int64_t)key_len : unspell(table, key, key_len, bytes);
    if (special && bytes)
        memcpy(bytes, key, key_len);
    int rc = -1;
    if (n == -1)
        gb_diag_add(diag, "%s: token \"%s\" (id %lld) holds a character that is not one of "
                    "GPT-2's 256 byte characters", path, key, (long long)id);
    else if (id < *room && b->length[id] != UINT32_MAX)
        gb_diag_add(diag, "%s: id %lld is given twice", path, (long long)id);
    else if (n < 0 || add_token(b, id, bytes, (size_t)n, room))
        gb_diag_add(diag, "%s: no memory", path);
    else
        rc = 0;
    if (rc == 0 && special)
        b->end_of_text = (int32_t)id;
    free(bytes);
    return rc;
}

/* encoder.json: {"token": id, ...}. */
static int read_encoder(gb_bpe *b, const char *path, const int16_t *table, gb_diag *diag)
{
    size_t len;
    char *text = read_whole(path, &len, diag);
    if (!text)
        return -1;
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    free(text);
    if (!json_is_object(root)) {
        if (root)
            gb_diag_add(diag, "%s: expected a JSON object of token -> id, found another value",
                        path);
        else
            gb_diag_add(diag, "%s:%d:%d: %s; encoder.json is one JSON object of token -> id",
                        path, err.line, err.column, err.text);
        json_decref(root);
        return -1;
    }
    int64_t room = 0;
    int rc = 0;
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if ((rc = read_encoder_entry(b, path, len, key, value, table, &room, diag)))
            break;
    }
    json_decref(root);
    if (rc == 0 && b->end_of_text >= 0 && b->end_of_text != b->n_tokens - 1) {
        gb_diag_add(diag, "%s: %s has id %d, but GPT-2's comes after every other token (id "
                    "%lld here)", path, END_OF_TEXT, b->end_of_text,
                    (long long)b->n_tokens - 1);
        rc = -1;
    }
    if (rc == 0 && b->end_of_text < 0) { /* the special token comes after the merges */
        b->end_of_text = (int32_t)b->n_tokens;
        rc = add_token(b, b->n_tokens, END_OF_TEXT, strlen(END_OF_TEXT), &room);
        if (rc)
            gb_diag_add(diag, "%s: no memory", path);
    }
    return rc;
}

/* The byte tokens must take ids 0 to 255, where vocab.bpe's merges start after them. */
static int check_byte_ids(const gb_bpe *b, const char *path, gb_diag *diag)
{
    for (int c = 0; c < 256; c++) {
        if (b->byte_id[c] < BYTE_TOKENS)
            continue;
        gb_diag_add(diag, "%s: the token of byte 0x%02x has id %d; GPT-2's 256 byte tokens "
                    "take ids 0 to 255", path, c, b->byte_id[c]);
        return -1;
    }
    return 0;
}

/* One merge line "FIRST SECOND" of `n` bytes, the k-th merge: added when it makes id
 * 256 + k out of two tokens, else -1 with what is wrong in `why`. `scratch` has room
 * for n bytes. */
static int add_merge_line(gb_bpe *b, const int16_t *table, const char *line, size_t n,
                          int32_t k, char *scratch, char *why, size_t cap)
{
    const char *space = memchr(line, ' ', n);
    if (!space || space == line || space + 1 == line + n ||
        memchr(space + 1, ' ', (size_t)(line + n - space - 1))) {
        snprintf(why, cap, "expected two tokens separated by one space");
        return -1;
    }
    size_t la = (size_t)(space - line), lb = n - la - 1;
    int64_t a = unspell(table, line, la, scratch);
    int64_t c = a < 0 ? -1 : unspell(table, space + 1, lb, scratch + a);
    int32_t first = a < 0 ? -1 : lookup(b, scratch, (size_t)a);
    int32_t second = c < 0 ? -1 : lookup(b, scratch + a, (size_t)c);
    int32_t made = first < 0 || second < 0 ? -1 : lookup(b, scratch, (size_t)(a + c));
    if (a < 0 || c < 0)
        snprintf(why, cap, "a character is not one of GPT-2's 256 byte characters");
    else if (first < 0 || second < 0)
        snprintf(why, cap, "its %s part is not a token of encoder.json",
                 first < 0 ? "first" : "second");
    else if (made < 0)
        snprintf(why, cap, "the two parts joined are not a token of encoder.json");
    else if (made != BYTE_TOKENS + k)
        snprintf(why, cap, "it makes id %d, but merge %d must make id %d (the k-th merge "
                 "makes id 256 + k): the merges are out of order, repeated, or of another "
                 "encoder.json", made, k, BYTE_TOKENS + k);
    else if (add_merge(b, first, second, k, made))
        snprintf(why, cap, "the same pair was merged before");
    else
        return 0;
    return -1;
}

/* vocab.bpe: a "#version" line, then "first second" per line, highest priority first;
 * the k-th merge makes id 256 + k, and every token after the bytes has its merge. */
static int read_merges(gb_bpe *b, const char *path, const int16_t *table, gb_diag *diag)
{
    size_t len;
    char *text = read_whole(path, &len, diag);
    if (!text)
        return -1;
    int64_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    char *scratch = malloc(len + 1);   /* one line's bytes */
    int rc = alloc_merges(b, (size_t)lines, path, diag);
    if (rc == 0 && !scratch) {
        gb_diag_add(diag, "%s: no memory", path);
        rc = -1;
    }
    int32_t k = 0;
    const int32_t wanted = (int32_t)b->n_tokens - BYTE_TOKENS - 1;  /* but bytes and EOT */
    int64_t number = 1;
    for (char *line = text; rc == 0 && line < text + len; number++) {
        char *next = memchr(line, '\n', (size_t)(text + len - line));
        next = next ? next : text + len;
        size_t n = (size_t)(next - line);
        if (n && line[n - 1] == '\r')
            n--;
        int is_merge = n && !(number == 1 && line[0] == '#');
        char why[256];
        if (is_merge && add_merge_line(b, table, line, n, k, scratch, why, sizeof why)) {
            gb_diag_add(diag, "%s:%lld: '%.*s': %s", path, (long long)number,
                        n > 200 ? 200 : (int)n, line, why);
            rc = -1;
        }
        k += is_merge;
        line = next + 1;
    }
    if (rc == 0 && k != wanted) {   /* fewer: a merge of more would make an unknown id */
        char shown[256];
        size_t n = 0;
        const char *missing = gb_bpe_token_bytes(b, BYTE_TOKENS + k, &n);
        spell(missing, n, shown, sizeof shown);
        gb_diag_add(diag, "%s:%lld: the file %s after %d merges, but encoder.json has %d tokens "
                    "after its 256 bytes, each made by one merge: none makes id %d (\"%s\"); "
                    "the file is cut short or belongs to another encoder.json", path,
                    (long long)number, len == 0 ? "is empty: it ends" : "ends", k, wanted,
                    BYTE_TOKENS + k, shown);
        rc = -1;
    }
    free(scratch);
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

/* A tiktoken vocabulary merges two parts when their bytes joined are a token, at that
 * token's rank: every split of every token into two tokens is such a merge. `add` 0
 * counts them, 1 adds them. */
static size_t split_merges(gb_bpe *b, int add)
{
    size_t count = 0;
    for (int32_t id = 0; id < b->n_tokens; id++) {
        const char *s = b->pool + b->offset[id];
        for (size_t cut = 1; id != b->end_of_text && cut < b->length[id]; cut++) {
            int32_t first = lookup(b, s, cut);
            int32_t second = first < 0 ? -1 : lookup(b, s + cut, b->length[id] - cut);
            if (second < 0)
                continue;
            count++;
            if (add)
                add_merge(b, first, second, id, id);
        }
    }
    return count;
}

static int index_splits(gb_bpe *b, const char *path, gb_diag *diag)
{
    if (alloc_merges(b, split_merges(b, 0), path, diag))
        return -1;
    split_merges(b, 1);
    b->whole_pieces = 1;
    return 0;
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
           check_byte_ids(b, encoder, diag) || read_merges(b, merges, table, diag);
}

/* A path at encoder.json or vocab.bpe itself, where the folder holding both was meant:
 * read as a tiktoken file, it would fail on its first line with no word of the fix. */
static int is_gpt2_file(const char *path, gb_diag *diag)
{
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    if (strcmp(name, "encoder.json") != 0 && strcmp(name, "vocab.bpe") != 0)
        return 0;
    gb_diag_add(diag, "%s is one of GPT-2's two vocabulary files: give the folder that holds "
                "encoder.json and vocab.bpe (%.*s), or a tiktoken ranks file such as "
                "gpt2.tiktoken", path, slash ? (int)(slash - path) : 1, slash ? path : ".");
    return 1;
}

gb_bpe *gb_bpe_load(const char *path, gb_diag *diag)
{
    if (!is_folder(path) && is_gpt2_file(path, diag))
        return NULL;
    gb_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        gb_diag_add(diag, "no memory for a tokenizer");
        return NULL;
    }
    b->end_of_text = -1;
    int failed = is_folder(path) ? read_gpt2_folder(b, path, diag)
                                 : read_ranks(b, path, diag) || index_tokens(b, path, diag) ||
                                   index_splits(b, path, diag);
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

/* Pieces up to this long are cached, up to this many ids and bytes in all before the
 * cache starts again: bounded memory whatever the text. */
#define CACHE_PIECE 64
#define CACHE_SLOTS (1u << 16)
#define CACHE_POOL (1u << 22)

typedef struct cached {
    uint64_t hash;      /* 0: an empty slot */
    uint32_t bytes_at, ids_at;
    uint16_t len, n_ids;
} cached;

/* What one gb_bpe_encode call works with: the matcher, one piece's parts and heap, the
 * cache of pieces, and where the ids go. */
typedef struct encoder {
    const gb_bpe *b;
    pcre2_match_data *match;
    int32_t *part, *next, *prev;    /* by byte of the piece: token, linked list; -1 dead */
    uint64_t *heap;                 /* rank << 32 | byte of the pair's first part */
    size_t room;                    /* bytes the arrays above hold (heap: 3 x) */
    cached *slots;
    char *cache_bytes;
    int32_t *cache_ids;
    uint32_t cache_used, bytes_used, ids_used;
    int32_t **ids;
    int64_t *n, *cap;
    gb_diag *diag;
} encoder;

static int push_id(encoder *e, int32_t id)
{
    if (*e->n == *e->cap) {
        int64_t grown = *e->cap ? *e->cap * 2 : 1024;
        int32_t *more = realloc(*e->ids, (size_t)grown * sizeof *more);
        if (!more)
            return -1;
        *e->ids = more;
        *e->cap = grown;
    }
    (*e->ids)[(*e->n)++] = id;
    return 0;
}

static void heap_push(uint64_t *heap, size_t *len, uint64_t key)
{
    size_t i = (*len)++;
    while (i > 0 && heap[(i - 1) / 2] > key) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = key;
}

static uint64_t heap_pop(uint64_t *heap, size_t *len)
{
    uint64_t top = heap[0], last = heap[--*len];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *len)
            break;
        if (child + 1 < *len && heap[child + 1] < heap[child])
            child++;
        if (heap[child] >= last)
            break;
        heap[i] = heap[child];
        i = child;
    }
    heap[i] = last;
    return top;
}

/* Queues the pair whose first part starts at byte `at`, if the two merge. */
static void queue_pair(const encoder *e, size_t *heap_len, int32_t at)
{
    const merge *m = find_merge(e->b, e->part[at], e->part[e->next[at]]);
    if (m)
        heap_push(e->heap, heap_len, (uint64_t)(uint32_t)m->rank << 32 | (uint32_t)at);
}

static int grow_parts(encoder *e, size_t n)
{
    if (n <= e->room)
        return 0;
    size_t room = n * 2;
    int32_t *part = realloc(e->part, room * sizeof *part);
    if (part)
        e->part = part;
    int32_t *next = part ? realloc(e->next, room * sizeof *next) : NULL;
    if (next)
        e->next = next;
    int32_t *prev = next ? realloc(e->prev, room * sizeof *prev) : NULL;
    if (prev)
        e->prev = prev;
    uint64_t *heap = prev ? realloc(e->heap, 3 * room * sizeof *heap) : NULL;
    if (!heap)
        return -1;
    e->heap = heap;
    e->room = room;
    return 0;
}

/* BPE of one piece of n bytes (n < 2^31): its tokens appended to the ids. A popped pair
 * is still current when its first part lives, has a next part, and the two still merge
 * at the popped rank (a rank names one pair). */
static int merge_piece(encoder *e, const char *s, size_t n)
{
    const gb_bpe *b = e->b;
    int32_t whole = b->whole_pieces && n > 1 ? lookup(b, s, n) : -1;
    if (n == 1 || whole >= 0)
        return push_id(e, n == 1 ? b->byte_id[(unsigned char)s[0]] : whole);
    if (grow_parts(e, n))
        return -1;
    int32_t end = (int32_t)n;
    size_t heap_len = 0;
    for (int32_t i = 0; i < end; i++) {
        e->part[i] = b->byte_id[(unsigned char)s[i]];
        e->next[i] = i + 1;
        e->prev[i] = i - 1;
    }
    for (int32_t i = 0; i + 1 < end; i++)
        queue_pair(e, &heap_len, i);
    while (heap_len) {
        uint64_t key = heap_pop(e->heap, &heap_len);
        int32_t at = (int32_t)(uint32_t)key, after = e->next[at];
        if (e->part[at] < 0 || after == end)
            continue;
        const merge *m = find_merge(b, e->part[at], e->part[after]);
        if (!m || (uint32_t)m->rank != key >> 32)
            continue;
        e->part[at] = m->result;
        e->part[after] = -1;
        e->next[at] = e->next[after];
        if (e->next[at] != end) {
            e->prev[e->next[at]] = at;
            queue_pair(e, &heap_len, at);
        }
        if (e->prev[at] >= 0)
            queue_pair(e, &heap_len, e->prev[at]);
    }
    for (int32_t i = 0; i < end; i = e->next[i])
        if (push_id(e, e->part[i]))
            return -1;
    return 0;
}

static uint64_t hash_piece(const char *s, size_t n)
{
    return hash_bytes(s, n) | 1;   /* never 0, which marks an empty slot */
}

/* A piece through the cache: its ids as last computed, or computed and kept. */
static int encode_piece(encoder *e, const char *s, size_t n)
{
    if (n > CACHE_PIECE || n == 1 || !e->slots)
        return merge_piece(e, s, n);
    uint64_t h = hash_piece(s, n);
    size_t mask = CACHE_SLOTS - 1, i = h & mask;
    for (; e->slots[i].hash; i = (i + 1) & mask) {
        const cached *c = &e->slots[i];
        if (c->hash != h || c->len != n || memcmp(e->cache_bytes + c->bytes_at, s, n) != 0)
            continue;
        for (uint16_t k = 0; k < c->n_ids; k++)
            if (push_id(e, e->cache_ids[c->ids_at + k]))
                return -1;
        return 0;
    }
    int64_t first = *e->n;
    if (merge_piece(e, s, n))
        return -1;
    int64_t count = *e->n - first;
    if (e->cache_used >= CACHE_SLOTS / 2 || e->bytes_used + n > CACHE_POOL ||
        e->ids_used + count > CACHE_POOL) {   /* full: start again */
        memset(e->slots, 0, CACHE_SLOTS * sizeof *e->slots);
        e->cache_used = e->bytes_used = e->ids_used = 0;
        for (i = h & mask; e->slots[i].hash; i = (i + 1) & mask)
            ;
    }
    e->slots[i] = (cached){h, e->bytes_used, e->ids_used, (uint16_t)n, (uint16_t)count};
    memcpy(e->cache_bytes + e->bytes_used, s, n);
    memcpy(e->cache_ids + e->ids_used, *e->ids + first, (size_t)count * sizeof **e->ids);
    e->cache_used++;
    e->bytes_used += (uint32_t)n;
    e->ids_used += (uint32_t)count;
    return 0;
}

/* encode_piece, saying what went wrong; `at` is the piece's offset in the text. */
static int encode_piece_or_say(encoder *e, const char *s, size_t n, size_t at)
{
    if (n > INT32_MAX) {   /* merge_piece counts bytes in int32 */
        gb_diag_add(e->diag, "the piece at byte %zu is %zu bytes long (one run of whitespace, "
                    "letters, digits or bytes that are not UTF-8); the tokenizer merges pieces "
                    "up to 2 GiB", at, n);
        return -1;
    }
    if (encode_piece(e, s, n)) {
        gb_diag_add(e->diag, "no memory for the token ids of the piece at byte %zu", at);
        return -1;
    }
    return 0;
}

/* The length of the UTF-8 sequence at s (before end) as PCRE2 accepts it (no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0 when it is not one. */
static size_t utf8_length(const unsigned char *s, const unsigned char *end)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
             : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!n || (size_t)(end - s) < n)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) ||
        (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
        return 0;
    return n;
}

/* How many bytes from s on are UTF-8 (all of them when the answer is len). */
static size_t utf8_prefix(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        size_t n = utf8_length(p, end);
        if (!n)
            break;
        p += n;
    }
    return (size_t)(p - (const unsigned char *)s);
}

/* How many bytes from s on are not UTF-8 (at least 1). */
static size_t not_utf8_prefix(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    size_t n = 1;
    while (p + n < end && !utf8_length(p + n, end))
        n++;
    return n;
}

/* The pieces of UTF-8 text; `base` is its offset in the caller's text. */
static int encode_utf8(encoder *e, const char *text, size_t len, size_t base)
{
    for (size_t at = 0; at < len;) {
        int found = pcre2_match(e->b->pattern, (PCRE2_SPTR)text, len, at, PCRE2_NO_UTF_CHECK,
                                e->match, NULL);
        PCRE2_SIZE *span = pcre2_get_ovector_pointer(e->match);
        if (found < 0 || span[0] != at || span[1] == at) {
            PCRE2_UCHAR message[256] = "it matched elsewhere";
            if (found < 0)
                pcre2_get_error_message(found, message, sizeof message);
            gb_diag_add(e->diag, "internal error: the GPT-2 pattern gave no piece at byte %zu: "
                        "%s", base + at, message);
            return -1;
        }
        if (encode_piece_or_say(e, text + at, span[1] - at, base + at))
            return -1;
        at = span[1];
    }
    return 0;
}

/* A text holding no <|endoftext|>: its UTF-8 runs through the pattern, and (`keep_bytes`)
 * each run of bytes that are not UTF-8 one piece, or (not) a refusal naming the first. */
static int encode_plain(encoder *e, const char *text, size_t len, size_t base, int keep_bytes)
{
    for (size_t at = 0; at < len;) {
        size_t good = utf8_prefix(text + at, len - at);
        if (encode_utf8(e, text + at, good, base + at))
            return -1;
        at += good;
        if (at == len)
            break;
        if (!keep_bytes) {
            gb_diag_add(e->diag, "the text is not UTF-8 at byte %zu (0x%02x starts no UTF-8 "
                        "character)", base + at, (unsigned char)text[at]);
            return -1;
        }
        size_t bad = not_utf8_prefix(text + at, len - at);
        if (encode_piece_or_say(e, text + at, bad, base + at))
            return -1;
        at += bad;
    }
    return 0;
}

static int encode(const gb_bpe *b, const char *text, size_t len, int keep_bytes, int32_t **ids,
                  int64_t *n, int64_t *cap, gb_diag *diag)
{
    encoder e = {.b = b, .ids = ids, .n = n, .cap = cap, .diag = diag};
    e.match = pcre2_match_data_create_from_pattern(b->pattern, NULL);
    if (len > 4096) {   /* a prompt needs no cache */
        e.slots = calloc(CACHE_SLOTS, sizeof *e.slots);
        e.cache_bytes = malloc(CACHE_POOL);
        e.cache_ids = malloc(CACHE_POOL * sizeof *e.cache_ids);
    }
    int rc = 0;
    if (!e.match) {
        gb_diag_add(diag, "no memory for the tokenizer's matcher");
        rc = -1;
    }
    if (!e.slots || !e.cache_bytes || !e.cache_ids) { /* a cache is a luxury */
        free(e.slots);
        e.slots = NULL;
    }
    const size_t special = strlen(END_OF_TEXT);
    for (size_t at = 0; at < len && rc == 0;) {
        const char *hit = memmem(text + at, len - at, END_OF_TEXT, special);
        size_t stop = hit ? (size_t)(hit - text) : len;
        rc = encode_plain(&e, text + at, stop - at, at, keep_bytes);
        if (rc == 0 && hit && push_id(&e, b->end_of_text)) {
            gb_diag_add(diag, "no memory for the token ids of %zu bytes", len);
            rc = -1;
        }
        at = hit ? stop + special : len;
    }
    pcre2_match_data_free(e.match);
    free(e.part);
    free(e.next);
    free(e.prev);
    free(e.heap);
    free(e.slots);
    free(e.cache_bytes);
    free(e.cache_ids);
    return rc;
}

int gb_bpe_encode(const gb_bpe *b, const char *text, size_t len, int32_t **ids, int64_t *n,
                  int64_t *cap, gb_diag *diag)
{
    return encode(b, text, len, 0, ids, n, cap, diag);
}

int gb_bpe_encode_bytes(const gb_bpe *b, const char *text, size_t len, int32_t **ids,
                        int64_t *n, int64_t *cap, gb_diag *diag)
{
    return encode(b, text, len, 1, ids, n, cap, diag);
}
