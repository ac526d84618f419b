/* `gearbox encode` and `gearbox decode`: text to GPT-2 BPE ids and back, from the
 * command line. Ids are written as decimal numbers (a line) or as a token file of
 * little-endian uint16 or uint32, the layout nanoGPT's train.bin has. Any bytes encode,
 * UTF-8 or not (gb_bpe_encode_bytes), so decode gives back exactly what encode read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gearbox/engine/bpe.h"
#include "cli.h"
#include "gearbox/engine/fsutil.h"
#include "options.h"

#define VOCAB_OPTION                                                                    \
    {"vocab", 0, "PATH", "GPT-2's vocabulary: a folder with encoder.json and vocab.bpe, or\n" \
                         "a tiktoken file such as gpt2.tiktoken"}

enum { OPT_VOCAB, OPT_INPUT, OPT_OUTPUT, OPT_DTYPE, OPT_STATS };

const gb_cli_spec gb_cli_encode_spec = {
    .verb = "encode",
    .usage = "gearbox encode --vocab PATH [TEXT | --input FILE] [--output FILE --dtype D]",
    .about = "Writes the GPT-2 BPE ids of TEXT, of FILE, or of the standard input (when neither is\n"
             "given), as decimal numbers on one line; <|endoftext|> in the text becomes its id.\n"
             "Bytes that are not UTF-8 are encoded too, so `gearbox decode` gives them back.\n",
    .options = {
        [OPT_VOCAB] = VOCAB_OPTION,
        [OPT_INPUT] = {"input", 0, "FILE", "the text to encode: a file, a pipe such as\n"
                       "<(zcat text.gz), or '-' for the standard input"},
        [OPT_OUTPUT] = {"output", 0, "FILE", "write the ids to FILE as a token file of --dtype\n"
                        "instead of numbers to the standard output"},
        [OPT_DTYPE] = {"dtype", 0, "uint16|uint32", "the token file's ids (default uint16 where\n"
                       "the vocabulary fits, else uint32)"},
        [OPT_STATS] = {"stats", 0, NULL, "say on the standard error how many bytes and ids, and\n"
                       "how long encoding took (loading the vocabulary apart)"},
    }};

const gb_cli_spec gb_cli_decode_spec = {
    .verb = "decode",
    .usage = "gearbox decode --vocab PATH [ID... | --input FILE] [--dtype D] [--output FILE]",
    .about = "Writes the bytes of GPT-2 BPE ids: the IDs given, or those of FILE or of the standard\n"
             "input (when none is given), as decimal numbers separated by blanks, or a token file\n"
             "(see --dtype).\n",
    .options = {
        [OPT_VOCAB] = VOCAB_OPTION,
        [OPT_INPUT] = {"input", 0, "FILE", "the ids: a file, a pipe, or '-' for the standard\n"
                       "input"},
        [OPT_OUTPUT] = {"output", 0, "FILE",
                        "write the bytes to FILE instead of the standard output"},
        [OPT_DTYPE] = {"dtype", 0, "text|uint16|uint32",
                       "how the input holds the ids: decimal numbers (text) or a\n"
                       "token file. Default: text for IDs and the standard input;\n"
                       "for --input FILE, text when FILE is plain ASCII text,\n"
                       "else the token file `encode --output` writes (uint16\n"
                       "where the vocabulary fits, else uint32)"},
    }};

typedef struct codec_args {
    const char *vocab, *input, *output, *dtype;
    int stats;
} codec_args;

static int on_option(void *ctx, int index, const char *value)
{
    codec_args *a = ctx;
    const char **slot[] = {&a->vocab, &a->input, &a->output, &a->dtype};
    if (index == OPT_STATS)
        a->stats = 1;
    else
        *slot[index] = value;
    return 0;
}

/* Options, then the arguments left in argv[*first..argc). 0; -1 after --help; 2. */
static int parse(int argc, char **argv, const gb_cli_spec *spec, codec_args *a, int *first)
{
    *a = (codec_args){0};
    int rc = gb_cli_parse(spec, argc, argv, on_option, a, first);
    if (rc)
        return rc;
    if (!a->vocab)
        return gb_cli_usage_error(spec->verb, "--vocab PATH is needed: a folder with GPT-2's "
                                  "encoder.json and vocab.bpe, or a tiktoken file");
    if (a->input && *first < argc)
        return gb_cli_usage_error(spec->verb, "--input %s and the argument %s: give one of them",
                                  a->input, argv[*first]);
    return 0;
}

/* bytes per id of a token file: 2, 4, or 0 for numbers ("text"); -1 when unknown. */
static int dtype_size(const char *verb, const char *dtype, int allow_text)
{
    if (strcmp(dtype, "uint16") == 0)
        return 2;
    if (strcmp(dtype, "uint32") == 0)
        return 4;
    if (allow_text && strcmp(dtype, "text") == 0)
        return 0;
    gb_cli_usage_error(verb, "--dtype %s: expected %suint16 or uint32", dtype,
                       allow_text ? "text, " : "");
    return -1;
}

/* The bytes per id of the token files encode writes unless told: uint16 where the
 * vocabulary fits, else uint32. */
static int token_size(const gb_bpe *bpe)
{
    return gb_bpe_vocab_size(bpe) > 65536 ? 4 : 2;
}

/* How decode reads an --input FILE given no --dtype: as decimal ids (0) when it is plain
 * ASCII text, as encode prints them (a typo in it then gets the text reader's message);
 * else as the token file encode --output writes by default (token_size). A token file
 * of real text is not plain ASCII: the ids of common tokens have a byte below 32. */
static int token_file_default(const char *data, size_t len, const gb_bpe *bpe)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        if ((c < 32 || c > 126) && c != '\t' && c != '\r' && c != '\n')
            return token_size(bpe);
    }
    return 0;
}

char *gb_cli_read_input(const char *verb, const char *path, size_t *len)
{
    unsigned char *data;
    const char *why;
    if (gb_read_input(path, &data, len, &why) == 0)
        return (char *)data;
    fprintf(stderr, "gearbox %s: cannot read %s: %s\n", verb,
            strcmp(path, "-") ? path : "the standard input", why);
    return NULL;
}

static gb_bpe *load_vocab(const char *verb, const char *path)
{
    gb_diag diag = {0};
    gb_bpe *bpe = gb_bpe_load(path, &diag);
    for (int i = 0; i < diag.count; i++)
        fprintf(stderr, "gearbox %s: --vocab: %s\n", verb, diag.messages[i]);
    gb_diag_clear(&diag);
    return bpe;
}

/* Writes `n` bytes to `path`, or to the standard output when it is NULL. */
static int write_output(const char *verb, const char *path, const void *data, size_t n)
{
    if (!path) {
        fwrite(data, 1, n, stdout);
        return gb_cli_flush_stdout(verb);
    }
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, n, f) == n;
    ok &= f && fclose(f) == 0;
    if (!ok)
        fprintf(stderr, "gearbox %s: cannot write %s: %s\n", verb, path, strerror(errno));
    return ok ? 0 : 1;
}

/* The ids as a token file of `size` bytes each, checked to fit. */
static int write_token_file(const char *path, const int32_t *ids, int64_t n, int size,
                            int64_t vocab)
{
    if (size == 2 && vocab > 65536) {
        fprintf(stderr, "gearbox encode: --dtype uint16 holds ids below 65536, but the "
                "vocabulary has %lld: use --dtype uint32\n", (long long)vocab);
        return 2;
    }
    unsigned char *out = malloc((size_t)n * (size_t)size + 1);
    if (!out) {
        fprintf(stderr, "gearbox encode: out of memory for %lld ids\n", (long long)n);
        return 1;
    }
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int k = 0; k < size; k++)
            out[i * size + k] = (unsigned char)(v >> (8 * k));
    }
    int rc = write_output("encode", path, out, (size_t)n * (size_t)size);
    free(out);
    return rc;
}

static int print_ids(const int32_t *ids, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        printf("%s%d", i ? " " : "", ids[i]);
    putchar('\n');
    return gb_cli_flush_stdout("encode");
}

int gb_cmd_encode(int argc, char **argv)
{
    codec_args a;
    int first;
    int rc = parse(argc, argv, &gb_cli_encode_spec, &a, &first);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (argc - first > 1)
        return gb_cli_usage_error("encode", "unexpected argument %s (quote the text to encode "
                                  "as one argument)", argv[first + 1]);
    int size = a.dtype ? dtype_size("encode", a.dtype, 0) : 0;
    if (size < 0)
        return 2;
    if (a.dtype && !a.output)
        return gb_cli_usage_error("encode", "--dtype goes with --output FILE");
    gb_bpe *bpe = load_vocab("encode", a.vocab);
    if (!bpe)
        return 1;
    size_t len = first < argc ? strlen(argv[first]) : 0;
    char *text = first < argc ? strdup(argv[first])
                              : gb_cli_read_input("encode", a.input ? a.input : "-", &len);
    int32_t *ids = NULL;
    int64_t n = 0, cap = 0;
    gb_diag diag = {0};
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    rc = !text || gb_bpe_encode_bytes(bpe, text, len, &ids, &n, &cap, &diag) ? 1 : 0;
    clock_gettime(CLOCK_MONOTONIC, &end);
    double took = (double)(end.tv_sec - start.tv_sec) +
                  1e-9 * (double)(end.tv_nsec - start.tv_nsec);
    if (rc == 0 && a.stats)
        fprintf(stderr, "gearbox encode: %zu bytes -> %lld ids in %.4f s (%.2f MB/s)\n", len,
                (long long)n, took, took > 0 ? 1e-6 * (double)len / took : 0.0);
    for (int i = 0; i < diag.count; i++)
        fprintf(stderr, "gearbox encode: %s\n", diag.messages[i]);
    gb_diag_clear(&diag);
    if (rc == 0 && a.output)
        rc = write_token_file(a.output, ids, n, size ? size : token_size(bpe),
                              gb_bpe_vocab_size(bpe));
    else if (rc == 0)
        rc = print_ids(ids, n);
    free(ids);
    free(text);
    gb_bpe_free(bpe);
    return rc;
}

/* Appends id `v` to *ids after checking it names a token; position `at` for messages. */
static int add_id(int32_t **ids, int64_t *n, int64_t *cap, long long v, int64_t vocab,
                  const char *where)
{
    if (v < 0 || v >= vocab) {
        fprintf(stderr, "gearbox decode: %s: id %lld is not a token of this vocabulary "
                "(ids 0 to %lld); decode with the vocabulary the ids were encoded with\n",
                where, v, (long long)vocab - 1);
        return -1;
    }
    if (*n == *cap) {
        int64_t grown = *cap ? *cap * 2 : 1024;
        int32_t *more = realloc(*ids, (size_t)grown * sizeof *more);
        if (!more) {
            fprintf(stderr, "gearbox decode: out of memory\n");
            return -1;
        }
        *ids = more;
        *cap = grown;
    }
    (*ids)[(*n)++] = (int32_t)v;
    return 0;
}

/* Decimal ids separated by blanks, as encode prints them. */
static int parse_text_ids(const char *text, size_t len, const char *name, int64_t vocab,
                          int32_t **ids, int64_t *n, int64_t *cap)
{
    const char *p = text, *end = text + len;
    while (p < end) {
        if (strchr(" \t\r\n", *p) && *p) {
            p++;
            continue;
        }
        char where[4200];
        snprintf(where, sizeof where, "%s, byte %zu", name, (size_t)(p - text));
        long long v = 0;
        const char *start = p;
        while (p < end && *p >= '0' && *p <= '9' && v <= 1LL << 40)
            v = v * 10 + (*p++ - '0');
        if (p == start || (p < end && !strchr(" \t\r\n", *p))) {
            fprintf(stderr, "gearbox decode: %s: expected ids as decimal numbers separated by "
                    "blanks (as `gearbox encode` prints them); for a token file give --dtype "
                    "uint16 or uint32\n", where);
            return -1;
        }
        if (add_id(ids, n, cap, v, vocab, where))
            return -1;
    }
    return 0;
}

static int parse_file_ids(const unsigned char *data, size_t len, int size, const char *name,
                          int64_t vocab, int32_t **ids, int64_t *n, int64_t *cap)
{
    if (len % (size_t)size) {
        fprintf(stderr, "gearbox decode: %s: %zu bytes is not a whole number of %d-byte ids; "
                "is --dtype right?\n", name, len, size);
        return -1;
    }
    for (size_t i = 0; i < len; i += (size_t)size) {
        uint32_t v = 0;
        for (int k = 0; k < size; k++)
            v |= (uint32_t)data[i + k] << (8 * k);
        char where[4200];
        snprintf(where, sizeof where, "%s, id %zu", name, i / (size_t)size);
        if (add_id(ids, n, cap, v, vocab, where))
            return -1;
    }
    return 0;
}

int gb_cmd_decode(int argc, char **argv)
{
    codec_args a;
    int first;
    int rc = parse(argc, argv, &gb_cli_decode_spec, &a, &first);
    if (rc)
        return rc < 0 ? 0 : rc;
    int size = a.dtype ? dtype_size("decode", a.dtype, 1) : 0;
    if (size < 0)
        return 2;
    if (size && first < argc)
        return gb_cli_usage_error("decode", "--dtype %s reads a token file: give --input FILE, "
                                  "not ids as arguments", a.dtype);
    gb_bpe *bpe = load_vocab("decode", a.vocab);
    if (!bpe)
        return 1;
    int64_t vocab = gb_bpe_vocab_size(bpe), n = 0, cap = 0;
    int32_t *ids = NULL;
    rc = 0;
    for (int i = first; i < argc && rc == 0; i++) {
        char where[64];
        snprintf(where, sizeof where, "argument %d", i - first + 1);
        rc = parse_text_ids(argv[i], strlen(argv[i]), where, vocab, &ids, &n, &cap);
    }
    if (first == argc) {
        int from_file = a.input && strcmp(a.input, "-") != 0;
        const char *name = from_file ? a.input : "the standard input";
        size_t len;
        char *data = gb_cli_read_input("decode", a.input ? a.input : "-", &len);
        if (data && from_file && !a.dtype)
            size = token_file_default(data, len, bpe);
        rc = !data ? -1 : size ? parse_file_ids((unsigned char *)data, len, size, name, vocab,
                                                &ids, &n, &cap)
                               : parse_text_ids(data, len, name, vocab, &ids, &n, &cap);
        free(data);
    }
    size_t total = 0, len;
    for (int64_t i = 0; rc == 0 && i < n; i++)
        total += (gb_bpe_token_bytes(bpe, ids[i], &len), len);
    char *out = rc == 0 ? malloc(total + 1) : NULL;
    if (rc == 0 && !out)
        fprintf(stderr, "gearbox decode: out of memory for %zu bytes\n", total);
    for (int64_t i = 0, at = 0; out && i < n; i++) {
        const char *bytes = gb_bpe_token_bytes(bpe, ids[i], &len);
        memcpy(out + at, bytes, len);
        at += (int64_t)len;
    }
    rc = out ? write_output("decode", a.output, out, total) : 1;
    free(out);
    free(ids);
    gb_bpe_free(bpe);
    return rc;
}
