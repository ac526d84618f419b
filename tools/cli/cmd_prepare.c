/* `gearbox prepare`: token files from a text file, in two flavours.
 * - Characters, as nanoGPT's shakespeare_char/prepare.py (vocabulary = the sorted distinct
 *   characters, first 90% train, last 10% val), with bytes as characters: exact for ASCII
 *   text such as Tiny Shakespeare. Writes gearbox's layout (vocab.txt beside the ids).
 * - GPT-2 BPE, as nanoGPT's shakespeare/prepare.py (the text's first 90% and last 10%
 *   encoded apart). Writes nanoGPT's layout plus a note naming the vocabulary files, so
 *   that runs and `gearbox sample` find them. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gearbox/engine/bpe.h"
#include "cli.h"
#include "gearbox/engine/data.h"
#include "gearbox/engine/fsutil.h"
#include "options.h"

enum { OPT_TOKENIZER, OPT_VOCAB };

const gb_cli_spec gb_cli_prepare_spec = {
    .verb = "prepare",
    .usage = "gearbox prepare [--tokenizer bytes|gpt2] [--vocab PATH] TEXT|- OUTDIR",
    .about = "Reads the text file TEXT and writes OUTDIR/train.bin and OUTDIR/val.bin (uint16\n"
             "little-endian token ids of the first 90% and the last 10% of the text), which\n"
             "`[data] dir` points at. TEXT may be a pipe (`<(zcat text.gz)`) or '-', the\n"
             "standard input. A text too short to give both splits a token is refused.\n",
    .options = {
        [OPT_TOKENIZER] = {"tokenizer", 0, "bytes|gpt2",
                           "bytes: one token per distinct byte (the default); the\n"
                           "ids' bytes go to OUTDIR/vocab.txt, sorted.\n"
                           "gpt2: GPT-2's BPE (nanoGPT's layout, no vocab.txt); the\n"
                           "text is cut at the first character boundary at or\n"
                           "after 90% of its bytes and each part encoded apart;\n"
                           "<|endoftext|> in the text becomes its id.\n"
                           "OUTDIR/tokenizer.txt notes the vocabulary for runs\n"
                           "and sample"},
        [OPT_VOCAB] = {"vocab", 0, "PATH", "GPT-2's vocabulary (needed with gpt2): a folder with\n"
                       "encoder.json and vocab.bpe, or a tiktoken ranks file\n"
                       "such as gpt2.tiktoken"},
    }};

typedef struct prepare_args {
    const char *tokenizer, *vocab;
} prepare_args;

static int on_option(void *ctx, int index, const char *value)
{
    prepare_args *a = ctx;
    if (index == OPT_TOKENIZER)
        a->tokenizer = value;
    else
        a->vocab = value;
    return 0;
}

static int write_file(const char *dir, const char *name, const void *data, size_t size)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, size, f) == size;
    if (f)
        ok &= fclose(f) == 0;
    if (!ok)
        fprintf(stderr, "gearbox prepare: cannot write %s: %s\n", path, strerror(errno));
    return ok ? 0 : -1;
}

/* A split of no tokens, which a run could draw no window from: -1 after naming it. */
static int refuse_empty_split(const char *text_path, size_t n_train, size_t n)
{
    if (n_train > 0 && n > n_train)
        return 0;
    fprintf(stderr, "gearbox prepare: %s gives the %s split no tokens (train %zu, val %zu: the "
            "first 90%% of the text and the last 10%%), and a run cannot train or evaluate on "
            "an empty split; give a longer text\n", text_path, n_train ? "val" : "train",
            n_train, n - n_train);
    return -1;
}

/* The train and val token files: ids [0, n_train) and [n_train, n). */
static int write_splits(const char *dir, const uint16_t *ids, size_t n_train, size_t n)
{
    return write_file(dir, "train.bin", ids, n_train * sizeof *ids) ||
           write_file(dir, "val.bin", ids + n_train, (n - n_train) * sizeof *ids);
}

/* Creates OUTDIR and its missing parents and removes the file of the other flavour, which
 * would make the folder read as that one. */
static int make_out_dir(const char *dir, const char *stale)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, stale);
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "gearbox prepare: OUTDIR %s is a file, but prepare writes train.bin "
                "and val.bin into a folder: give the path of a folder (created if missing)\n",
                dir);
        return -1;
    }
    if (gb_make_dirs(dir) != 0) {
        fprintf(stderr, "gearbox prepare: cannot create %s: %s; give OUTDIR a path "
                "whose folders you can create\n", dir, strerror(errno));
        return -1;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        fprintf(stderr, "gearbox prepare: cannot remove %s, left from an earlier prepare: %s\n",
                path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The text at `path` ("-": the standard input), which messages call `name`. */
static unsigned char *read_text(const char *path, const char *name, size_t *n)
{
    unsigned char *text;
    const char *why;
    if (gb_read_input(path, &text, n, &why)) {
        fprintf(stderr, "gearbox prepare: cannot read %s: %s\n", name, why);
        return NULL;
    }
    if (*n == 0) {
        fprintf(stderr, "gearbox prepare: %s is empty; give it the text to train on\n", name);
        free(text);
        return NULL;
    }
    return text;
}

static int prepare_bytes(const char *text_path, const unsigned char *text, size_t n,
                         const char *out)
{
    int seen[256] = {0};
    for (size_t i = 0; i < n; i++)
        seen[text[i]] = 1;
    static gb_vocab vocab;
    int id_of[256];
    vocab.size = 0;
    for (int b = 0; b < 256; b++)
        if (seen[b]) {
            id_of[b] = vocab.size;
            vocab.bytes[vocab.size++] = (unsigned char)b;
        }
    uint16_t *ids = malloc(n * sizeof *ids);
    if (!ids)
        return 1;
    for (size_t i = 0; i < n; i++)
        ids[i] = (uint16_t)id_of[text[i]];
    size_t n_train = (size_t)((double)n * 0.9);
    char vocab_path[4200];
    snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", out);
    int rc = refuse_empty_split(text_path, n_train, n) || make_out_dir(out, GB_TOKENIZER_NOTE)
                 ? 1 : gb_vocab_write(vocab_path, &vocab);
    if (rc == -1)
        fprintf(stderr, "gearbox prepare: cannot write %s\n", vocab_path);
    if (!rc && !(rc = write_splits(out, ids, n_train, n)))
        printf("%s: vocab %d, train %zu tokens, val %zu tokens -> %s\n", text_path, vocab.size,
               n_train, n - n_train, out);
    free(ids);
    return rc ? 1 : 0;
}

/* The ids of `len` bytes of text appended to `*ids`, as uint16 (a vocabulary of more than
 * 65536 ids cannot be written so, and was refused before). */
static int encode_part(const gb_bpe *bpe, const char *text, size_t len, uint16_t **ids,
                       size_t *n, const char *text_path)
{
    int32_t *part = NULL;
    int64_t count = 0, cap = 0;
    gb_diag diag = {0};
    int rc = gb_bpe_encode(bpe, text, len, &part, &count, &cap, &diag);
    uint16_t *grown = rc ? NULL : realloc(*ids, (*n + (size_t)count + 1) * sizeof **ids);
    if (grown) {
        for (int64_t i = 0; i < count; i++)
            grown[*n + (size_t)i] = (uint16_t)part[i];
        *ids = grown;
        *n += (size_t)count;
    } else if (!rc) {
        gb_diag_add(&diag, "out of memory for the token ids");
    }
    for (int i = 0; i < diag.count; i++)
        fprintf(stderr, "gearbox prepare: %s: %s\n", text_path, diag.messages[i]);
    gb_diag_clear(&diag);
    free(part);
    return grown ? 0 : -1;
}

/* Where nanoGPT's text[:int(n*0.9)] would cut, moved on to a UTF-8 character's start. */
static size_t train_part_bytes(const unsigned char *text, size_t n)
{
    size_t cut = (size_t)((double)n * 0.9);
    while (cut < n && (text[cut] & 0xC0) == 0x80)
        cut++;
    return cut;
}

/* GPT-2's vocabulary at `path`, with its absolute path for the note; NULL after saying
 * what is wrong. */
static gb_bpe *load_vocabulary(const char *path, char absolute[PATH_MAX])
{
    gb_diag diag = {0};
    gb_bpe *bpe = gb_bpe_load(path, &diag);
    if (bpe && gb_bpe_vocab_size(bpe) > 65536)
        gb_diag_add(&diag, "%s: %lld ids, more than the 65536 a uint16 token file can hold",
                    path, (long long)gb_bpe_vocab_size(bpe));
    else if (bpe && !realpath(path, absolute))
        gb_diag_add(&diag, "%s: %s", path, strerror(errno));
    gb_diag_print(&diag, stderr);
    if (diag.count) {
        gb_bpe_free(bpe);
        bpe = NULL;
    }
    gb_diag_clear(&diag);
    return bpe;
}

static int prepare_gpt2(const char *text_path, const unsigned char *text, size_t n,
                        const char *out, const char *vocab_path)
{
    char absolute[PATH_MAX];
    gb_bpe *bpe = load_vocabulary(vocab_path, absolute);
    uint16_t *ids = NULL;
    size_t n_ids = 0, cut = train_part_bytes(text, n), n_train;
    int rc = !bpe || encode_part(bpe, (const char *)text, cut, &ids, &n_ids, text_path);
    n_train = n_ids;
    rc = rc || encode_part(bpe, (const char *)text + cut, n - cut, &ids, &n_ids, text_path) ||
         refuse_empty_split(text_path, n_train, n_ids) || make_out_dir(out, "vocab.txt") ||
         write_splits(out, ids, n_train, n_ids);
    if (!rc && gb_tokenizer_note_write(out, absolute) != 0) {
        fprintf(stderr, "gearbox prepare: cannot write %s/%s: %s\n", out, GB_TOKENIZER_NOTE,
                strerror(errno));
        rc = 1;
    }
    if (!rc)
        printf("%s: GPT-2 BPE, vocab %lld (%s), train %zu tokens, val %zu tokens -> %s\n",
               text_path, (long long)gb_bpe_vocab_size(bpe), absolute, n_train, n_ids - n_train,
               out);
    gb_bpe_free(bpe);
    free(ids);
    return rc ? 1 : 0;
}

int gb_cmd_prepare(int argc, char **argv)
{
    prepare_args a = {"bytes", NULL};
    const char *operands[2];
    int rc = gb_cli_parse_operands(&gb_cli_prepare_spec, argc, argv, on_option, &a, 2, 2,
                                   "TEXT OUTDIR", operands);
    if (rc)
        return rc < 0 ? 0 : rc;
    int gpt2 = strcmp(a.tokenizer, "gpt2") == 0;
    if (!gpt2 && strcmp(a.tokenizer, "bytes") != 0)
        return gb_cli_usage_error("prepare", "--tokenizer %s: expected bytes or gpt2",
                                  a.tokenizer);
    if (gpt2 != (a.vocab != NULL))
        return gb_cli_usage_error("prepare", gpt2 ? "--tokenizer gpt2 needs --vocab PATH (a "
                                  "folder with encoder.json and vocab.bpe, or a tiktoken file)"
                                  : "--vocab goes with --tokenizer gpt2");
    const char *text_path = strcmp(operands[0], "-") ? operands[0] : "the standard input";
    const char *out = operands[1];
    size_t n;
    unsigned char *text = read_text(operands[0], text_path, &n);
    if (!text)
        return 1;
    rc = gpt2 ? prepare_gpt2(text_path, text, n, out, a.vocab)
              : prepare_bytes(text_path, text, n, out);
    free(text);
    return rc;
}
