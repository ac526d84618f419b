/* Token files and batches; see data.h. */
#include "data.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bpe.h"
#include "fsutil.h"
#include "rng.h"
#include "text.h"

static const char *const split_files[2] = {"train.bin", "val.bin"};
/* llm.c's shard names, by split: fineweb_train_000001.bin, tiny_shakespeare_val.bin */
static const char *const shard_patterns[2][2] = {{"*_train_*.bin", "*_train.bin"},
                                                 {"*_val_*.bin", "*_val.bin"}};
enum { LLMC_HEADER_BYTES = 256 * 4, LLMC_MAGIC = 20240520, LLMC_VERSION = 1 };
static const char note_header[] = "# gearbox tokenizer v1";
/* What writes a token file of each layout again, for messages about a bad one. */
static const char *const rewrite_advice[] = {
    [GB_DATA_GEARBOX] = "write the folder again with `gearbox prepare TEXT DIR`",
    [GB_DATA_NANOGPT] = "write it again with nanoGPT's data/*/prepare.py",
    [GB_DATA_LLMC] = "write it again with llm.c's dev/data scripts"};

/* A byte value 0..255 written in decimal, blanks around it allowed; -1 otherwise. */
static int parse_byte(const char *text, size_t len)
{
    size_t i = 0;
    int value = 0, digits = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t'))
        i++;
    for (; i < len && text[i] >= '0' && text[i] <= '9' && digits < 4; i++, digits++)
        value = value * 10 + (text[i] - '0');
    while (i < len && (text[i] == ' ' || text[i] == '\t'))
        i++;
    return digits && digits < 4 && i == len && value <= 255 ? value : -1;
}

int gb_vocab_parse(const char *text, size_t size, const char *name, gb_vocab *vocab,
                   gb_diag *diag)
{
    static const char header[] = "# gearbox vocab v1";
    vocab->size = 0;
    if (strlen(text) != size) {
        gb_diag_add(diag, "%s: not a gearbox vocabulary (it contains NUL bytes)", name);
        return -1;
    }
    const char *next = text;
    size_t len;
    const char *line = gb_next_line(&next, &len);
    if (len < strlen(header) || memcmp(line, header, strlen(header)) != 0) {
        gb_diag_add(diag, "%s:1: not a gearbox vocabulary (expected '%s')", name, header);
        return -1;
    }
    for (int lineno = 2; *next; lineno++) {
        line = gb_next_line(&next, &len);
        int byte = parse_byte(line, len);
        if (byte < 0 || vocab->size >= (int)sizeof vocab->bytes) {
            gb_diag_add(diag, "%s:%d: expected a byte value 0..255%s", name, lineno,
                        byte < 0 ? "" : ", but the vocabulary already has 65536 ids");
            return -1;
        }
        vocab->bytes[vocab->size++] = (unsigned char)byte;
    }
    if (vocab->size == 0) {
        gb_diag_add(diag, "%s: the vocabulary is empty", name);
        return -1;
    }
    return 0;
}

int gb_vocab_read(const char *path, gb_vocab *vocab, gb_diag *diag)
{
    unsigned char *text;
    size_t size;
    const char *why;
    if (gb_read_regular_file(path, &text, &size, &why)) {
        gb_diag_add(diag, "cannot read vocabulary %s: %s; write the data folder with "
                    "`gearbox prepare TEXT DIR`", path, why);
        return -1;
    }
    int rc = gb_vocab_parse((const char *)text, size, path, vocab, diag);
    free(text);
    return rc;
}

int gb_vocab_check_fit(int64_t model_ids, int64_t size, const char *what, const char *fix,
                       gb_diag *diag)
{
    int64_t padded = (size + 127) / 128 * 128;
    if (size <= model_ids && model_ids <= padded)
        return 0;
    if (size > model_ids)
        gb_diag_add(diag, "%s holds %lld tokens, but the model has only %lld ids ([model] "
                    "vocab_size), one for each token it reads or predicts: %s", what,
                    (long long)size, (long long)model_ids, fix);
    else
        gb_diag_add(diag, "%s holds %lld tokens, but the model has %lld ids ([model] "
                    "vocab_size), more than those tokens padded up to a multiple of 128 "
                    "(%lld); the ids beyond its tokens decode to nothing: %s", what,
                    (long long)size, (long long)model_ids, (long long)padded, fix);
    return -1;
}

int gb_vocab_write(const char *path, const gb_vocab *vocab)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "# gearbox vocab v1: one token per line, the byte it stands for\n");
    for (int i = 0; i < vocab->size; i++)
        fprintf(f, "%d\n", vocab->bytes[i]);
    return fclose(f) == 0 ? 0 : -1;
}

const char *gb_data_format_name(gb_data_format format)
{
    static const char *const names[] = {"gearbox", "nanoGPT", "llm.c"};
    return names[format];
}

/* ---- the tokenizer note -------------------------------------------------------------- */

int gb_tokenizer_note_write(const char *dir, const char *vocab_path)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, GB_TOKENIZER_NOTE);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "%s: GPT-2 BPE ids, encoded with the vocabulary on the next line\n%s\n",
            note_header, vocab_path);
    return fclose(f) == 0 ? 0 : -1;
}

/* The vocabulary path the note in `dir` names, malloc'ed; NULL with *failed 0 when there
 * is no note, with *failed 1 after reporting a note that says nothing usable. */
static char *read_tokenizer_note(const char *dir, int *failed, gb_diag *diag)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, GB_TOKENIZER_NOTE);
    unsigned char *text;
    size_t size, len;
    const char *why;
    *failed = 0;
    if (gb_read_regular_file(path, &text, &size, &why))
        return NULL;   /* no note: a nanoGPT or llm.c folder */
    const char *next = (const char *)text, *line = gb_next_line(&next, &len);
    char *vocab = NULL;
    if (len >= strlen(note_header) && memcmp(line, note_header, strlen(note_header)) == 0) {
        line = gb_next_line(&next, &len);
        vocab = len ? strndup(line, len) : NULL;
    }
    free(text);
    if (!vocab) {
        gb_diag_add(diag, "%s: not a note of `gearbox prepare --tokenizer gpt2` (a '%s' line, "
                    "then the vocabulary's path); remove it or set [data] vocab", path,
                    note_header);
        *failed = 1;
    }
    return vocab;
}

/* ---- finding the files --------------------------------------------------------------- */

static int exists(const char *dir, const char *name)
{
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

static int is_shard_of(const char *name, int split)
{
    return fnmatch(shard_patterns[split][0], name, 0) == 0 ||
           fnmatch(shard_patterns[split][1], name, 0) == 0;
}

/* Adds a file of `dir` to the stream (its path only; mapped later). */
static int add_file(gb_token_stream *st, const char *dir, const char *name)
{
    gb_token_file *grown = realloc(st->files, (size_t)(st->n_files + 1) * sizeof *grown);
    if (!grown)
        return -1;
    st->files = grown;
    gb_token_file *f = &st->files[st->n_files];
    *f = (gb_token_file){0};
    size_t len = strlen(dir) + strlen(name) + 2;
    if (!(f->path = malloc(len)))
        return -1;
    snprintf(f->path, len, "%s/%s", dir, name);
    st->n_files++;
    return 0;
}

static int by_path(const void *a, const void *b)
{
    const gb_token_file *x = a, *y = b;
    return strcmp(x->path, y->path);
}

/* The llm.c shards of each split in `dir`, in name order. */
static int list_shards(gb_dataset *ds, const char *dir, gb_diag *diag)
{
    DIR *d = opendir(dir);
    int failed = !d;
    for (struct dirent *e; !failed && (e = readdir(d));)
        for (int split = 0; split < 2 && !failed; split++)
            if (is_shard_of(e->d_name, split))
                failed = add_file(&ds->split[split], dir, e->d_name);
    if (d)
        closedir(d);
    if (failed) {
        gb_diag_add(diag, "[data] dir = %s: cannot list its files: %s", dir,
                    d ? "out of memory" : strerror(errno));
        return -1;
    }
    for (int split = 0; split < 2; split++)
        if (ds->split[split].n_files)   /* qsort may not be given a NULL array */
            qsort(ds->split[split].files, (size_t)ds->split[split].n_files,
                  sizeof(gb_token_file), by_path);
    return 0;
}

/* Tells the folder's layout from its files and lists the token files of each split. */
static int find_files(gb_dataset *ds, const char *dir, gb_diag *diag)
{
    struct stat st;
    const char *why = stat(dir, &st) != 0 ? strerror(errno)
                      : S_ISDIR(st.st_mode) ? NULL : "not a folder";
    if (why) {
        gb_diag_add(diag, "[data] dir = %s: %s; write a token folder with `gearbox prepare "
                    "TEXT DIR`, or point at nanoGPT's or llm.c's", dir, why);
        return -1;
    }
    int has_vocab = exists(dir, "vocab.txt");
    if (has_vocab || exists(dir, split_files[0]) || exists(dir, split_files[1])) {
        ds->format = has_vocab ? GB_DATA_GEARBOX : GB_DATA_NANOGPT;
        for (int split = 0; split < 2; split++)
            if (add_file(&ds->split[split], dir, split_files[split])) {
                gb_diag_add(diag, "out of memory");
                return -1;
            }
        return 0;
    }
    ds->format = GB_DATA_LLMC;
    if (list_shards(ds, dir, diag))
        return -1;
    for (int split = 0; split < 2; split++)
        if (ds->split[split].n_files == 0) {
            gb_diag_add(diag, "[data] dir = %s holds no %s tokens: expected train.bin and "
                        "val.bin (`gearbox prepare`, nanoGPT) or llm.c shards named %s and %s",
                        dir, split ? "validation" : "training", shard_patterns[split][0],
                        shard_patterns[split][1]);
            return -1;
        }
    return 0;
}

/* ---- mapping and checking them ------------------------------------------------------- */

static int32_t header_int(const unsigned char *map, int i)
{
    int32_t v;
    memcpy(&v, map + 4 * i, sizeof v);
    return v;
}

/* What is wrong with an llm.c shard's header (of a file `size` bytes long), or NULL. */
static const char *check_shard_header(const unsigned char *map, size_t size, char *buf,
                                      size_t cap)
{
    if (size < LLMC_HEADER_BYTES) {
        snprintf(buf, cap, "it is %zu bytes long, shorter than the %d-byte header of an llm.c "
                 "shard: the file is truncated; copy or write it again", size,
                 LLMC_HEADER_BYTES);
        return buf;
    }
    int32_t magic = header_int(map, 0), version = header_int(map, 1), count = header_int(map, 2);
    long long expected = LLMC_HEADER_BYTES + 2LL * count;
    if (magic != LLMC_MAGIC)
        snprintf(buf, cap, "its header starts with %d, not llm.c's magic number %d: it is not "
                 "an llm.c token shard; move it out of the folder", magic, LLMC_MAGIC);
    else if (version != LLMC_VERSION)
        snprintf(buf, cap, "it is an llm.c shard of version %d, but gearbox reads version %d "
                 "(uint16 GPT-2 ids; version 2 holds LLaMA 3's uint32 ids); write the shard "
                 "with the GPT-2 tokenizer", version, LLMC_VERSION);
    else if (count < 0 || expected != (long long)size)
        snprintf(buf, cap, "its header counts %d tokens, %lld bytes with the header, but the "
                 "file is %zu bytes long: %s; copy or write it again", count, expected, size,
                 count >= 0 && expected > (long long)size ? "it is truncated"
                                                          : "the count disagrees with its size");
    else
        return NULL;
    return buf;
}

/* Maps one token file and finds its ids: past the header of an llm.c shard. */
static int map_token_file(gb_token_file *f, gb_data_format format, gb_diag *diag)
{
    const char *why;
    if (gb_map_regular_file(f->path, &f->map, &f->map_bytes, &why)) {
        gb_diag_add(diag, "cannot read %s: %s; %s", f->path, why, rewrite_advice[format]);
        return -1;
    }
    char buf[512];
    size_t skip = format == GB_DATA_LLMC ? LLMC_HEADER_BYTES : 0;
    if (skip && (why = check_shard_header(f->map, f->map_bytes, buf, sizeof buf))) {
        gb_diag_add(diag, "%s: %s", f->path, why);
        return -1;
    }
    if (f->map_bytes % 2 != 0) {
        gb_diag_add(diag, "%s holds %zu bytes, an odd number: token files hold 2-byte ids; %s",
                    f->path, f->map_bytes, rewrite_advice[format]);
        return -1;
    }
    f->ids = f->map ? (const uint16_t *)(const void *)(f->map + skip) : NULL;
    f->length = (int64_t)((f->map_bytes - skip) / 2);
    return 0;
}

static int map_split(gb_dataset *ds, int split, int64_t block_size, gb_diag *diag)
{
    gb_token_stream *st = &ds->split[split];
    for (int i = 0; i < st->n_files; i++) {
        if (map_token_file(&st->files[i], ds->format, diag))
            return -1;
        st->files[i].first = st->length;
        st->length += st->files[i].length;
    }
    if (st->length < block_size + 2) {
        gb_diag_add(diag, "%s%s holds %lld tokens, fewer than block_size + 2 = %lld",
                    st->files[0].path, st->n_files > 1 ? " with the shards after it" : "",
                    (long long)st->length, (long long)(block_size + 2));
        return -1;
    }
    return 0;
}

/* ---- the vocabulary ------------------------------------------------------------------ */

/* Byte tokens: vocab.txt says what they stand for and, unless [model] vocab_size does,
 * how many there are. */
static int resolve_bytes(gb_dataset *ds, const gb_settings *s, gb_diag *diag)
{
    if (s->tokenizer == GB_TOKENIZER_GPT2) {
        gb_diag_add(diag, "[data] tokenizer = gpt2, but %s holds a vocab.txt: its ids stand "
                    "for bytes; set tokenizer = auto, or remove vocab.txt if the ids are GPT-2's",
                    s->data_dir);
        return -1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab.txt", s->data_dir);
    if (gb_vocab_read(path, &ds->vocab, diag))
        return -1;
    ds->tokenizer = GB_TOKENIZER_BYTES;
    ds->id_limit = s->vocab_size ? s->vocab_size : ds->vocab.size;
    char what[4300];
    snprintf(what, sizeof what, "[data] dir = %s: its vocab.txt", s->data_dir);
    return s->vocab_size ? gb_vocab_check_fit(s->vocab_size, ds->vocab.size, what,
                                              "prepare the data with the model's vocabulary, "
                                              "or train another [model] vocab_size", diag)
                         : 0;
}

/* The size of the GPT-2 vocabulary at ds->vocab_path: the model's where [model]
 * vocab_size leaves it to the data, else checked against it. */
static int read_gpt2_size(gb_dataset *ds, const gb_settings *s, gb_diag *diag)
{
    gb_bpe *bpe = gb_bpe_load(ds->vocab_path, diag);
    int64_t size = gb_bpe_vocab_size(bpe);
    gb_bpe_free(bpe);
    if (!bpe) {
        gb_diag_add(diag, "[data] dir = %s: the size of its GPT-2 vocabulary is read from "
                    "those files; or set [model] vocab_size (50257 for GPT-2's)", s->data_dir);
        return -1;
    }
    if (!s->vocab_size) {
        ds->id_limit = size;
        return 0;
    }
    char what[4300];
    snprintf(what, sizeof what, "[data] dir = %s: its GPT-2 vocabulary %s", s->data_dir,
             ds->vocab_path);
    return gb_vocab_check_fit(s->vocab_size, size, what, "give [data] vocab the vocabulary "
                              "the data was encoded with, or train another [model] vocab_size",
                              diag);
}

/* GPT-2 tokens: the vocabulary files from [data] vocab or the note `gearbox prepare`
 * left; the vocabulary size from [model] vocab_size or those files. */
static int resolve_gpt2(gb_dataset *ds, const gb_settings *s, gb_diag *diag)
{
    const char *format = gb_data_format_name(ds->format);
    if (s->tokenizer == GB_TOKENIZER_BYTES) {
        gb_diag_add(diag, "[data] tokenizer = bytes, but %s has no vocab.txt naming the bytes "
                    "(it holds %s token files, GPT-2 BPE ids); set tokenizer = gpt2 or auto",
                    s->data_dir, format);
        return -1;
    }
    ds->tokenizer = GB_TOKENIZER_GPT2;
    int failed = 0;
    ds->vocab_path = s->vocab_path ? strdup(s->vocab_path)
                                   : read_tokenizer_note(s->data_dir, &failed, diag);
    if (failed)
        return -1;
    ds->id_limit = s->vocab_size;
    if (ds->vocab_path && read_gpt2_size(ds, s, diag))
        return -1;
    if (!ds->id_limit) {
        gb_diag_add(diag, "%s holds %s token files, which do not say how many ids there are: "
                    "set [model] vocab_size (50257 for GPT-2's; nanoGPT's GPT-2 models use "
                    "50304), or [data] vocab = GPT-2's vocabulary (a folder with encoder.json "
                    "and vocab.bpe, or a tiktoken gpt2 file)", s->data_dir, format);
        return -1;
    }
    ds->vocab.size = ds->id_limit < (int64_t)sizeof ds->vocab.bytes ? (int)ds->id_limit
                                                                    : (int)sizeof ds->vocab.bytes;
    return 0;
}

gb_dataset *gb_data_open(const gb_settings *s, gb_diag *diag)
{
    gb_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return NULL;
    int failed = find_files(ds, s->data_dir, diag);
    if (!failed)
        failed = ds->format == GB_DATA_GEARBOX ? resolve_bytes(ds, s, diag)
                                               : resolve_gpt2(ds, s, diag);
    for (int split = 0; !failed && split < 2; split++)
        failed = map_split(ds, split, s->block_size, diag);
    if (failed) {
        gb_data_free(ds);
        return NULL;
    }
    return ds;
}

void gb_data_free(gb_dataset *ds)
{
    if (!ds)
        return;
    for (int split = 0; split < 2; split++) {
        for (int i = 0; i < ds->split[split].n_files; i++) {
            gb_unmap_file(ds->split[split].files[i].map, ds->split[split].files[i].map_bytes);
            free(ds->split[split].files[i].path);
        }
        free(ds->split[split].files);
    }
    free(ds->vocab_path);
    free(ds);
}

int gb_data_record_tokenizer(const gb_dataset *ds, gb_config *cfg, gb_diag *diag)
{
    const char *name = ds->tokenizer == GB_TOKENIZER_GPT2 ? "gpt2" : "bytes";
    if (gb_config_set_effective(cfg, "data", "tokenizer", name) == 0 &&
        (!ds->vocab_path || gb_config_set_effective(cfg, "data", "vocab", ds->vocab_path) == 0))
        return 0;
    gb_diag_add(diag, "[data] vocab = %s: longer than a config line (and so the config a "
                "checkpoint saves) may hold; use a shorter path", ds->vocab_path);
    return -1;
}

/* ---- batches ------------------------------------------------------------------------- */

/* The file of `st` holding token `i` of the stream. */
static const gb_token_file *file_holding(const gb_token_stream *st, int64_t i)
{
    int lo = 0, hi = st->n_files - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (st->files[mid].first <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return &st->files[lo];
}

static int report_bad_id(const gb_dataset *ds, const gb_token_file *f, int64_t i, unsigned id,
                         gb_diag *diag)
{
    long long offset = (long long)((const unsigned char *)(f->ids + i) - f->map);
    gb_diag_add(diag, "%s: token %lld (byte offset %lld) has id %u, but the vocabulary has "
                "%lld ids; was the folder prepared for another model or vocab_size?", f->path,
                (long long)i, offset, id, (long long)ds->id_limit);
    return -1;
}

/* Tokens [start, start + T] of the stream into x (the first T) and y (the last T). */
static int read_window(const gb_dataset *ds, const gb_token_stream *st, int64_t start, int64_t T,
                       int32_t *x, int32_t *y, gb_diag *diag)
{
    const gb_token_file *f = file_holding(st, start);
    for (int64_t k = 0; k <= T; k++) {
        int64_t i = start + k;
        while (i >= f->first + f->length)
            f++;
        unsigned id = f->ids[i - f->first];
        if (id >= ds->id_limit)
            return report_bad_id(ds, f, i - f->first, id, diag);
        if (k < T)
            x[k] = (int32_t)id;
        if (k > 0)
            y[k - 1] = (int32_t)id;
    }
    return 0;
}

int gb_data_batch(const gb_dataset *ds, gb_split split, uint64_t seed, int purpose,
                  uint64_t index, int64_t row_begin, int64_t row_end, int64_t T,
                  int32_t *tokens, int32_t *targets, gb_diag *diag)
{
    const gb_token_stream *st = &ds->split[split];
    uint64_t windows = (uint64_t)(st->length - T); /* as nanoGPT: randint(len - T) */
    for (int64_t row = row_begin; row < row_end; row++) {
        gb_rng rng = gb_rng_stream(seed, (uint64_t)purpose, index, (uint64_t)row);
        int64_t start = (int64_t)gb_rng_below(&rng, windows);
        if (read_window(ds, st, start, T, tokens + (row - row_begin) * T,
                        targets + (row - row_begin) * T, diag))
            return -1;
    }
    return 0;
}
