/* Checkpoint files; see checkpoint.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fsutil.h"
#include "settings.h"

static const char magic[sizeof GB_CHECKPOINT_MAGIC - 1] = GB_CHECKPOINT_MAGIC;

typedef struct hashed_file {
    FILE *f;
    uint64_t hash;
    int failed;
} hashed_file;

static void fnv1a(uint64_t *hash, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        *hash ^= p[i];
        *hash *= 0x100000001b3ull;
    }
}

static void put(hashed_file *hf, const void *data, size_t n)
{
    if (hf->failed || (n && fwrite(data, 1, n, hf->f) != n)) {
        hf->failed = 1;
        return;
    }
    fnv1a(&hf->hash, data, n);
}

static void put_section(hashed_file *hf, const char tag[4], const void *data, uint64_t n)
{
    put(hf, tag, 4);
    put(hf, &n, sizeof n);
    put(hf, data, (size_t)n);
}

static void put_optim(hashed_file *hf, const gb_checkpoint *ck)
{
    uint64_t n = sizeof ck->optim_name + ck->optim_bytes;
    put(hf, "OPTM", 4);
    put(hf, &n, sizeof n);
    put(hf, ck->optim_name, sizeof ck->optim_name);
    put(hf, ck->optim_state, ck->optim_bytes);
}

int gb_checkpoint_write(const char *path, const gb_checkpoint *ck, gb_diag *diag)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    hashed_file hf = {fopen(tmp, "wb"), 0xcbf29ce484222325ull, 0};
    if (!hf.f) {   /* the path the user named: the temporary file beside it is ours */
        gb_diag_add(diag, "cannot write checkpoint %s: %s", path, strerror(errno));
        return -1;
    }
    uint32_t version = GB_CHECKPOINT_VERSION, sections = 6;
    unsigned char vocab[65536];
    for (int i = 0; i < ck->vocab->size; i++)
        vocab[i] = ck->vocab->bytes[i];
    put(&hf, magic, sizeof magic);
    put(&hf, &version, sizeof version);
    put(&hf, &sections, sizeof sections);
    put_section(&hf, "CONF", ck->config_text, strlen(ck->config_text));
    put_section(&hf, "VOCB", vocab, (uint64_t)ck->vocab->size);
    put_section(&hf, "STEP", &ck->step, sizeof ck->step);
    put_section(&hf, "PRMS", ck->params, (uint64_t)ck->n_params * sizeof(float));
    put_optim(&hf, ck);
    put_section(&hf, "PREC", ck->precision_state, ck->precision_bytes);
    uint64_t hash = hf.hash;
    put(&hf, &hash, sizeof hash);
    int failed = hf.failed || fflush(hf.f) != 0 || fsync(fileno(hf.f)) != 0;
    failed |= fclose(hf.f) != 0;
    if (failed || rename(tmp, path) != 0) {
        gb_diag_add(diag, "cannot write checkpoint %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

uint64_t gb_checkpoint_checksum(const void *data, size_t n)
{
    uint64_t hash = 0xcbf29ce484222325ull;
    fnv1a(&hash, data, n);
    return hash;
}

/* A bounds-checked reader over the whole file in memory. */
typedef struct reader {
    const unsigned char *data;
    size_t size, pos;
} reader;

static const void *take(reader *r, size_t n)
{
    if (r->size - r->pos < n)
        return NULL;
    const void *p = r->data + r->pos;
    r->pos += n;
    return p;
}

static int take_u32(reader *r, uint32_t *out)
{
    const void *p = take(r, sizeof *out);
    if (p)
        memcpy(out, p, sizeof *out);
    return p ? 0 : -1;
}

static void *copy_out(const void *src, size_t n, size_t extra)
{
    void *dst = malloc(n + extra);
    if (dst) {
        memcpy(dst, src, n);
        memset((char *)dst + n, 0, extra);
    }
    return dst;
}

/* The sections this version reads, in the order it writes them. */
static const char known_tags[][5] = {"CONF", "VOCB", "STEP", "PRMS", "OPTM", "PREC"};
#define N_TAGS ((int)(sizeof known_tags / sizeof known_tags[0]))
enum { TAG_CONF, TAG_VOCB, TAG_STEP, TAG_PRMS, TAG_OPTM, TAG_PREC };
/* What each holds, for messages about a missing one. */
static const char *const tag_meaning[N_TAGS] = {
    "the run's configuration", "the vocabulary", "the step it was written at",
    "the parameters", "the optimizer's state", "the loss scaler's state"};

static int tag_index(const char *tag)
{
    for (int i = 0; i < N_TAGS; i++)
        if (memcmp(tag, known_tags[i], 4) == 0)
            return i;
    return -1;
}

/* Stores one known section's body in ck; NULL, or what is wrong with it. */
static const char *read_section(gb_checkpoint *ck, int tag, const void *p, uint64_t n)
{
    switch (tag) {
    case TAG_CONF:
        if (memchr(p, '\0', (size_t)n))
            return "the configuration holds a NUL byte";
        ck->config_text = copy_out(p, (size_t)n, 1);
        return ck->config_text ? NULL : "out of memory";
    case TAG_VOCB:
        if (n == 0 || n > sizeof ck->vocab->bytes)
            return "the vocabulary must hold 1 to 65536 ids";
        ck->vocab = calloc(1, sizeof *ck->vocab);
        if (!ck->vocab)
            return "out of memory";
        ck->vocab->size = (int)n;
        memcpy(ck->vocab->bytes, p, (size_t)n);
        return NULL;
    case TAG_STEP:
        if (n != sizeof ck->step)
            return "the step section is not 8 bytes long";
        memcpy(&ck->step, p, sizeof ck->step);
        return ck->step < 0 ? "the step is negative" : NULL;
    case TAG_PRMS:
        if (n == 0 || n % sizeof(float) != 0)
            return "the parameters are not a whole number of f32 values";
        ck->n_params = (int64_t)(n / sizeof(float));
        ck->params = copy_out(p, (size_t)n, 0);
        return ck->params ? NULL : "out of memory";
    case TAG_OPTM:
        if (n < sizeof ck->optim_name)
            return "the optimizer section is shorter than its name field";
        memcpy(ck->optim_name, p, sizeof ck->optim_name);
        ck->optim_name[sizeof ck->optim_name - 1] = '\0';
        ck->optim_bytes = (size_t)n - sizeof ck->optim_name;
        ck->optim_state = copy_out((const char *)p + sizeof ck->optim_name, ck->optim_bytes, 1);
        return ck->optim_state ? NULL : "out of memory";
    case TAG_PREC:
        ck->precision_bytes = (size_t)n;
        ck->precision_state = copy_out(p, (size_t)n, 1);
        return ck->precision_state ? NULL : "out of memory";
    }
    return NULL;
}

/* Every section but the loss scaler's must be there: without STEP a resumed run would
 * start at step 0 with trained weights. */
static int check_required(const int *seen, const char *name, gb_diag *diag)
{
    for (int t = 0; t < N_TAGS; t++) {
        if (seen[t] || t == TAG_PREC)
            continue;
        gb_diag_add(diag, "%s: the %s section (%s) is missing; the file was not written by "
                    "gearbox or was altered", name, known_tags[t], tag_meaning[t]);
        return -1;
    }
    return 0;
}

static int parse_sections(gb_checkpoint *ck, reader *r, uint32_t sections, const char *name,
                          gb_diag *diag)
{
    int seen[N_TAGS] = {0};
    for (uint32_t s = 0; s < sections; s++) {
        const char *tag = take(r, 4);
        const void *len = take(r, 8);
        uint64_t n = 0;
        if (len)
            memcpy(&n, len, 8);
        const void *body = tag && len && n <= r->size ? take(r, (size_t)n) : NULL;
        if (!body) {
            gb_diag_add(diag, "%s: section %u is truncated", name, s);
            return -1;
        }
        int t = tag_index(tag);
        if (t < 0)
            continue; /* unknown sections are skipped: later versions may append */
        const char *problem = seen[t]++ ? "it appears twice" : read_section(ck, t, body, n);
        if (problem) {
            gb_diag_add(diag, "%s: section %u (%s): %s", name, s, known_tags[t], problem);
            return -1;
        }
    }
    return check_required(seen, name, diag);
}

int gb_checkpoint_parse(const unsigned char *data, size_t size, const char *name,
                        gb_checkpoint *ck, gb_diag *diag)
{
    memset(ck, 0, sizeof *ck);
    uint64_t want;
    if (size < sizeof magic + 8 + sizeof want || memcmp(data, magic, sizeof magic) != 0) {
        gb_diag_add(diag, "%s is not a gearbox checkpoint (%s)", name,
                    size < sizeof magic + 8 + sizeof want ? "too short" : "bad magic");
        return -1;
    }
    memcpy(&want, data + size - sizeof want, sizeof want);
    if (gb_checkpoint_checksum(data, size - sizeof want) != want) {
        gb_diag_add(diag, "%s: checksum mismatch; the file is damaged or incomplete", name);
        return -1;
    }
    reader r = {data, size - sizeof want, sizeof magic};
    uint32_t version = 0, sections = 0;
    take_u32(&r, &version);
    take_u32(&r, &sections);
    if (version != GB_CHECKPOINT_VERSION) {
        gb_diag_add(diag, "%s: checkpoint format version %u; this gearbox reads version %d",
                    name, version, GB_CHECKPOINT_VERSION);
        return -1;
    }
    if (parse_sections(ck, &r, sections, name, diag)) {
        gb_checkpoint_free(ck);
        return -1;
    }
    return 0;
}

int gb_checkpoint_is_file(const char *path)
{
    const unsigned char *data;
    size_t size;
    const char *why;
    if (gb_map_regular_file(path, &data, &size, &why))
        return 0;
    int is = size >= sizeof magic && memcmp(data, magic, sizeof magic) == 0;
    gb_unmap_file(data, size);
    return is;
}

/* Names the newest checkpoint of a folder given where a checkpoint file belongs. */
static void suggest_newest(const char *dir, gb_diag *diag)
{
    char *newest = gb_checkpoint_latest(dir);
    gb_diag_add(diag, "cannot read checkpoint %s: it is a folder; name one of its checkpoints%s%s",
                dir, newest ? ", e.g. the newest, " : " (it holds none)", newest ? newest : "");
    free(newest);
}

int gb_checkpoint_read(const char *path, gb_checkpoint *ck, gb_diag *diag)
{
    memset(ck, 0, sizeof *ck);
    unsigned char *data;
    size_t size;
    const char *why;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        suggest_newest(path, diag);
        return -1;
    }
    if (gb_read_regular_file(path, &data, &size, &why)) {
        gb_diag_add(diag, "cannot read checkpoint %s: %s", path, why);
        return -1;
    }
    int rc = gb_checkpoint_parse(data, size, path, ck, diag);
    free(data);
    return rc;
}

void gb_checkpoint_free(gb_checkpoint *ck)
{
    free(ck->config_text);
    free(ck->vocab);
    free(ck->params);
    free(ck->optim_state);
    free(ck->precision_state);
    memset(ck, 0, sizeof *ck);
}

/* The step of a file called exactly "ckpt-DIGITS.gbk", else -1: what a crash leaves
 * (ckpt-N.gbk.tmp) and copies (ckpt-N.gbk.bak) are not checkpoints to continue from. */
static long long checkpoint_step(const char *name)
{
    static const char prefix[] = "ckpt-", suffix[] = ".gbk";
    size_t len = strlen(name), frame = strlen(prefix) + strlen(suffix);
    if (len <= frame || len - frame > 18 || strncmp(name, prefix, strlen(prefix)) != 0 ||
        strcmp(name + len - strlen(suffix), suffix) != 0)
        return -1;
    long long step = 0;
    for (const char *c = name + strlen(prefix); c < name + len - strlen(suffix); c++) {
        if (*c < '0' || *c > '9')
            return -1;
        step = step * 10 + (*c - '0');
    }
    return step;
}

long long gb_checkpoint_file_step(const char *name)
{
    return checkpoint_step(name);
}

char *gb_checkpoint_latest(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    long long best = -1;
    char best_name[256] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        long long step = checkpoint_step(e->d_name);
        if (step > best) {
            best = step;
            snprintf(best_name, sizeof best_name, "%s", e->d_name);
        }
    }
    closedir(d);
    if (best < 0)
        return NULL;
    char *path = malloc(strlen(dir) + strlen(best_name) + 2);
    if (path)
        sprintf(path, "%s/%s", dir, best_name);
    return path;
}

/* A run that took its vocabulary size from its data saved vocab_size = 0; the
 * checkpoint's vocabulary says how many ids that was. */
int gb_checkpoint_inherit_model(const gb_checkpoint *ck, const char *origin, gb_config *cfg,
                                gb_diag *diag)
{
    gb_config *saved = gb_config_load_string(ck->config_text, origin, "/", diag);
    const char *vocab_size = saved ? gb_config_get(saved, "model", "vocab_size") : NULL;
    char assignment[64];
    snprintf(assignment, sizeof assignment, "model.vocab_size=%d", ck->vocab->size);
    int problems = !saved || ((!vocab_size || strcmp(vocab_size, "0") == 0) &&
                              gb_config_set(saved, assignment, diag) != 0);
    if (!problems)
        problems = gb_settings_inherit_model(cfg, saved, origin, diag);
    gb_config_free(saved);
    return problems;
}

int gb_checkpoint_take_model(gb_config *cfg, const char *resume, gb_diag *diag)
{
    const char *given = gb_config_get(cfg, "train", "init_from");
    if (!resume && (!given || !*given))
        return 0;
    char *path = resume ? strdup(resume) : gb_config_resolve_path(cfg, "train", "init_from", given);
    char *origin = NULL;
    if (!path || asprintf(&origin, resume ? "--resume %s" : "[train] init_from = %s", path) < 0) {
        free(path);
        gb_diag_add(diag, "out of memory");
        return 1;
    }
    gb_checkpoint ck = {0};
    int problems = gb_checkpoint_read(path, &ck, diag) != 0;
    if (problems && !resume)
        gb_diag_add(diag, "%s: not a readable checkpoint; write one with `gearbox import`, or "
                    "name a run's ckpt-STEP.gbk", origin);
    if (!problems)
        problems = gb_checkpoint_inherit_model(&ck, origin, cfg, diag);
    gb_checkpoint_free(&ck);
    free(origin);
    free(path);
    return problems;
}

/* A [model] value as the config writes it: an enum's choice, or the number. */
static void value_text(char *out, size_t cap, int64_t value, const char *const *names)
{
    if (names)
        snprintf(out, cap, "%s", names[value]);
    else
        snprintf(out, cap, "%lld", (long long)value);
}

/* Each [model] key of the checkpoint's saved config that this run sets differently. */
static int compare_shapes(const gb_settings *saved, const gb_settings *now, const char *path,
                          gb_diag *diag)
{
    static const char *const gelu_forms[] = {"erf", "tanh"}, *const booleans[] = {"false",
                                                                                 "true"};
    const struct {
        const char *key;
        int64_t then, now;
        const char *const *names;   /* an enum's choices, or NULL for a number */
    } keys[] = {{"n_layer", saved->n_layer, now->n_layer, NULL},
                {"n_head", saved->n_head, now->n_head, NULL},
                {"n_embd", saved->n_embd, now->n_embd, NULL},
                {"block_size", saved->block_size, now->block_size, NULL},
                {"bias", saved->bias, now->bias, booleans},
                {"padded_vocab_size", saved->padded_vocab_size, now->padded_vocab_size, NULL},
                {"gelu", saved->gelu_tanh, now->gelu_tanh, gelu_forms}};
    int problems = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (keys[i].then == keys[i].now)
            continue;
        char then[32], now_text[32];
        value_text(then, sizeof then, keys[i].then, keys[i].names);
        value_text(now_text, sizeof now_text, keys[i].now, keys[i].names);
        gb_diag_add(diag, "%s was trained with [model] %s = %s, this config says %s; set "
                    "[model] %s = %s to load it", path, keys[i].key, then, now_text,
                    keys[i].key, then);
        problems++;
    }
    return problems;
}

/* The checkpoint's own [model] section against this run's. */
static int check_shapes(const gb_checkpoint *ck, const char *path, const gb_settings *now,
                        gb_diag *diag)
{
    gb_diag saved_diag = {0};
    gb_settings saved;
    gb_config *cfg = gb_config_load_string(ck->config_text, path, "/", &saved_diag);
    int problems = cfg ? gb_settings_resolve(cfg, &saved, &saved_diag) : 1;
    if (problems)
        gb_diag_add(diag, "%s: its saved configuration does not read back: %s", path,
                    saved_diag.count ? saved_diag.messages[0] : "out of memory");
    else
        problems = compare_shapes(&saved, now, path, diag);
    if (cfg)
        gb_settings_free(&saved);
    gb_config_free(cfg);
    gb_diag_clear(&saved_diag);
    return problems;
}

/* Names the tensors holding NaN or infinity: continuing from them would train on
 * garbage from the first step. */
static int check_finite(const gb_checkpoint *ck, const char *path, const gb_model *m,
                        gb_diag *diag)
{
    int n_tensors, problems = 0;
    const gb_param_tensor *tensors = gb_model_tensors(m, &n_tensors);
    for (int i = 0; i < n_tensors; i++) {
        const float *v = ck->params + tensors[i].offset;
        int64_t bad = 0, first = -1;
        for (int64_t j = 0; j < tensors[i].numel; j++) {
            if (isfinite(v[j]))
                continue;
            bad++;
            first = first < 0 ? j : first;
        }
        if (!bad)
            continue;
        gb_diag_add(diag, "%s: tensor %s holds %lld non-finite values (the first, element %lld, "
                    "is %g); training had diverged when it was written: load an earlier "
                    "checkpoint", path, tensors[i].name, (long long)bad, (long long)first,
                    (double)v[first]);
        problems++;
    }
    return problems;
}

int gb_checkpoint_check_model(const gb_checkpoint *ck, const char *path, const gb_model *m,
                              const gb_settings *s, gb_diag *diag)
{
    if (check_shapes(ck, path, s, diag))
        return -1;
    if (ck->n_params != gb_model_num_params(m)) {
        gb_diag_add(diag, "%s holds %lld parameters but this config's model has %lld; give "
                    "the config the [model] section the checkpoint was written with", path,
                    (long long)ck->n_params, (long long)gb_model_num_params(m));
        return -1;
    }
    return check_finite(ck, path, m, diag) ? -1 : 0;
}
