/* Checkpoint files; see checkpoint.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char magic[8] = {'G', 'E', 'A', 'R', 'B', 'O', 'X', 'K'};

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
    if (!hf.f) {
        gb_diag_add(diag, "cannot write checkpoint %s: %s", tmp, strerror(errno));
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

static void *copy_out(const void *src, size_t n, size_t extra)
{
    void *dst = malloc(n + extra);
    if (dst) {
        memcpy(dst, src, n);
        memset((char *)dst + n, 0, extra);
    }
    return dst;
}

static int read_section(gb_checkpoint *ck, const char *tag, const void *p, uint64_t n)
{
    if (memcmp(tag, "CONF", 4) == 0) {
        ck->config_text = copy_out(p, n, 1);
    } else if (memcmp(tag, "VOCB", 4) == 0) {
        ck->vocab = calloc(1, sizeof *ck->vocab);
        if (!ck->vocab || n > 65536)
            return -1;
        ck->vocab->size = (int)n;
        memcpy(ck->vocab->bytes, p, n);
    } else if (memcmp(tag, "STEP", 4) == 0 && n == sizeof ck->step) {
        memcpy(&ck->step, p, sizeof ck->step);
    } else if (memcmp(tag, "PRMS", 4) == 0) {
        ck->n_params = (int64_t)(n / sizeof(float));
        ck->params = copy_out(p, n, 0);
    } else if (memcmp(tag, "OPTM", 4) == 0 && n >= sizeof ck->optim_name) {
        memcpy(ck->optim_name, p, sizeof ck->optim_name);
        ck->optim_name[sizeof ck->optim_name - 1] = '\0';
        ck->optim_bytes = n - sizeof ck->optim_name;
        ck->optim_state = copy_out((const char *)p + sizeof ck->optim_name, ck->optim_bytes, 0);
    } else if (memcmp(tag, "PREC", 4) == 0) {
        ck->precision_bytes = n;
        ck->precision_state = copy_out(p, n, 0);
    }
    return 0; /* unknown sections are skipped: later versions may append */
}

static int parse(gb_checkpoint *ck, reader *r, const char *path, gb_diag *diag)
{
    const char *m = take(r, sizeof magic);
    if (!m || memcmp(m, magic, sizeof magic) != 0) {
        gb_diag_add(diag, "%s is not a gearbox checkpoint (bad magic)", path);
        return -1;
    }
    uint32_t version, sections;
    memcpy(&version, take(r, 4), 4);
    memcpy(&sections, take(r, 4), 4);
    if (version != GB_CHECKPOINT_VERSION) {
        gb_diag_add(diag, "%s: checkpoint format version %u; this gearbox reads version %d",
                    path, version, GB_CHECKPOINT_VERSION);
        return -1;
    }
    for (uint32_t s = 0; s < sections; s++) {
        const char *tag = take(r, 4);
        const void *len = take(r, 8);
        uint64_t n = 0;
        if (len)
            memcpy(&n, len, 8);
        const void *body = tag && len ? take(r, (size_t)n) : NULL;
        if (!body || read_section(ck, tag, body, n)) {
            gb_diag_add(diag, "%s: truncated or corrupt section %u", path, s);
            return -1;
        }
    }
    if (!ck->config_text || !ck->vocab || !ck->params || !ck->optim_state) {
        gb_diag_add(diag, "%s: a required section is missing", path);
        return -1;
    }
    return 0;
}

int gb_checkpoint_read(const char *path, gb_checkpoint *ck, gb_diag *diag)
{
    memset(ck, 0, sizeof *ck);
    FILE *f = fopen(path, "rb");
    if (!f) {
        gb_diag_add(diag, "cannot open checkpoint %s: %s", path, strerror(errno));
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = size > 24 ? malloc((size_t)size) : NULL;
    int ok = data && fread(data, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok) {
        gb_diag_add(diag, "%s: too short or unreadable to be a gearbox checkpoint", path);
        free(data);
        return -1;
    }
    uint64_t want, got = 0xcbf29ce484222325ull;
    memcpy(&want, data + size - 8, 8);
    fnv1a(&got, data, (size_t)size - 8);
    if (want != got) {
        gb_diag_add(diag, "%s: checksum mismatch; the file is damaged or incomplete", path);
        free(data);
        return -1;
    }
    reader r = {data, (size_t)size - 8, 0};
    int rc = parse(ck, &r, path, diag);
    free(data);
    if (rc)
        gb_checkpoint_free(ck);
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

char *gb_checkpoint_latest(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    long long best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long step;
        char tail[8];
        if (sscanf(e->d_name, "ckpt-%lld.gb%1s", &step, tail) == 2 && strcmp(tail, "k") == 0 &&
            step > best)
            best = step;
    }
    closedir(d);
    if (best < 0)
        return NULL;
    char *path = malloc(strlen(dir) + 32);
    if (path)
        sprintf(path, "%s/ckpt-%06lld.gbk", dir, best);
    return path;
}
