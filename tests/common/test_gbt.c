/* Tests for the gbt reader and compare helper, and a check that the committed reference
 * files hold what their consumers expect.
 *
 * - gpt_tiny.gbt and gpt_tiny_bias.gbt: the config, every tensor name the core maps with
 *   its shape and dtype (bias tensors present only in the bias file), tokens inside the
 *   vocabulary, grad_norm equal to the norm of the stored gradients, and clipping active.
 * - adamw.gbt opens.
 * - Corrupt files (bad magic, truncations, a trailing byte) are refused with a
 *   message instead of being half read.
 * - gbt_compare passes within tolerance and fails outside it and on NaN.
 *
 * Usage: test_gbt REFERENCE_DIR
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gbt.h"
#include "test_host.h"

enum { L = 2, H = 2, C = 32, T = 16, B = 4, V = 65 };

typedef struct expected {
    const char *name;  /* without the "param." prefix */
    int ndim;
    int64_t shape[2];
} expected;

/* The parameter names of gpt_tiny*.gbt, in file order. Returns how many were written. */
static int gpt_param_names(int bias, expected *out)
{
    static const struct {
        const char *suffix;
        int ndim;
        int64_t rows, cols;
        int is_bias;
    } block[] = {
        {"ln_1.weight", 1, C, 0, 0},          {"ln_1.bias", 1, C, 0, 1},
        {"attn.c_attn.weight", 2, 3 * C, C, 0}, {"attn.c_attn.bias", 1, 3 * C, 0, 1},
        {"attn.c_proj.weight", 2, C, C, 0},   {"attn.c_proj.bias", 1, C, 0, 1},
        {"ln_2.weight", 1, C, 0, 0},          {"ln_2.bias", 1, C, 0, 1},
        {"mlp.c_fc.weight", 2, 4 * C, C, 0},  {"mlp.c_fc.bias", 1, 4 * C, 0, 1},
        {"mlp.c_proj.weight", 2, C, 4 * C, 0}, {"mlp.c_proj.bias", 1, C, 0, 1},
    };
    static char names[L][12][40];
    int n = 0;
    out[n++] = (expected){"wte", 2, {V, C}};
    out[n++] = (expected){"wpe", 2, {T, C}};
    for (int l = 0; l < L; l++)
        for (int k = 0; k < 12; k++) {
            if (block[k].is_bias && !bias)
                continue;
            snprintf(names[l][k], sizeof names[l][k], "h.%d.%s", l, block[k].suffix);
            out[n++] = (expected){names[l][k], block[k].ndim, {block[k].rows, block[k].cols}};
        }
    out[n++] = (expected){"ln_f.weight", 1, {C, 0}};
    if (bias)
        out[n++] = (expected){"ln_f.bias", 1, {C, 0}};
    return n;
}

static int check_shape(const gbt_file *file, const char *name, gb_dtype dtype, int ndim,
                       const int64_t *shape)
{
    int failures = 0;
    const gbt_tensor *t = gbt_find(file, name);
    GB_TEST_CHECK(failures, t != NULL, "%s missing", name);
    if (!t)
        return failures;
    int same = t->dtype == dtype && t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    GB_TEST_CHECK(failures, same, "%s has the wrong dtype or shape", name);
    return failures;
}

static int check_gpt_file(const char *dir, int bias)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, bias ? "gpt_tiny_bias.gbt" : "gpt_tiny.gbt");
    char err[512];
    gbt_file *file = gbt_open(path, err, sizeof err);
    if (!file) {
        printf("FAIL: %s\n", err);
        return 1;
    }
    int failures = 0;
    const gbt_tensor *config = gbt_require(file, "config", GB_I32, 7);
    const int32_t want_config[7] = {L, H, C, T, B, V, bias};
    GB_TEST_CHECK(failures, config && memcmp(config->data, want_config, sizeof want_config) == 0,
                  "%s: config is not [L, H, C, T, B, V, bias] = [2, 2, 32, 16, 4, 65, %d]", path,
                  bias);

    expected params[4 + 12 * L];
    int n_params = gpt_param_names(bias, params);
    double norm_sq = 0;
    static const char *const prefixes[] = {"param.", "grad.", "step3."};
    for (int p = 0; p < n_params; p++)
        for (int k = 0; k < 3; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s%s", prefixes[k], params[p].name);
            failures += check_shape(file, name, GB_F32, params[p].ndim, params[p].shape);
            const gbt_tensor *g = gbt_find(file, name);
            for (int64_t i = 0; k == 1 && g && i < g->numel; i++)
                norm_sq += (double)((const float *)g->data)[i] * ((const float *)g->data)[i];
        }
    if (!bias)
        GB_TEST_CHECK(failures, !gbt_find(file, "param.ln_f.bias") &&
                                    !gbt_find(file, "param.h.0.attn.c_attn.bias"),
                      "%s holds bias tensors", path);

    const int64_t bt[2] = {B, T}, btv[3] = {B, T, V}, one[1] = {1}, eight[1] = {8};
    failures += check_shape(file, "tokens", GB_I32, 2, bt);
    failures += check_shape(file, "targets", GB_I32, 2, bt);
    failures += check_shape(file, "logits", GB_F32, 3, btv);
    failures += check_shape(file, "loss", GB_F32, 1, one);
    failures += check_shape(file, "hparams", GB_F32, 1, eight);
    failures += check_shape(file, "grad_norm", GB_F32, 1, one);
    for (int k = 0; k < 2; k++) {
        const gbt_tensor *ids = gbt_find(file, k ? "targets" : "tokens");
        for (int64_t i = 0; ids && i < ids->numel; i++) {
            int32_t id = ((const int32_t *)ids->data)[i];
            GB_TEST_CHECK(failures, id >= 0 && id < V, "%s[%lld] = %d outside [0, %d)",
                          ids->name, (long long)i, id, V);
        }
    }
    const gbt_tensor *hp = gbt_find(file, "hparams"), *gn = gbt_find(file, "grad_norm");
    if (hp && gn) {
        float norm = (float)sqrt(norm_sq);
        char what[128];
        snprintf(what, sizeof what, "%s grad_norm vs stored gradients", bias ? "bias" : "no-bias");
        failures += gbt_compare(what, &norm, gn->data, 1, 0, 1e-5);
        float max_norm = ((const float *)hp->data)[7];
        GB_TEST_CHECK(failures, max_norm > 0 && max_norm < norm,
                      "max_norm %g does not clip the first step (norm %g)", max_norm, norm);
    }
    gbt_close(file);
    return failures;
}

static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)len;
    return buf;
}

/* Writes bytes (size) to a fresh temporary file and returns whether gbt_open refused it
 * with a message. */
static int refused(const unsigned char *bytes, size_t size, char *err, size_t errcap)
{
    char path[] = "/tmp/gbt-test-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    int wrote = write(fd, bytes, size) == (ssize_t)size;
    close(fd);
    err[0] = '\0';
    gbt_file *file = wrote ? gbt_open(path, err, errcap) : NULL;
    unlink(path);
    if (file) {
        gbt_close(file);
        return 0;
    }
    return wrote && err[0] != '\0';
}

static int check_corrupt_files_refused(const char *dir)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/adamw.gbt", dir);
    gbt_file *file = gbt_open(path, err, sizeof err);
    if (!file) {
        printf("FAIL: %s\n", err);
        return 1;
    }
    gbt_close(file);
    size_t size;
    unsigned char *bytes = slurp(path, &size);
    if (!bytes) {
        printf("FAIL: cannot read %s\n", path);
        return 1;
    }
    int failures = 0;
    /* Every cut through the header and first records, then a sample of the rest. */
    for (size_t cut = 0; cut < size; cut += cut < 512 ? 1 : 61)
        if (!refused(bytes, cut, err, sizeof err)) {
            printf("FAIL: %s cut to %zu bytes was accepted\n", path, cut);
            failures++;
            break;
        }
    printf("truncations refused, e.g.: %s\n", err);
    bytes[size] = 0;
    GB_TEST_CHECK(failures, refused(bytes, size + 1, err, sizeof err),
                  "a trailing byte was accepted");
    bytes[0] = 'X';
    GB_TEST_CHECK(failures, refused(bytes, size, err, sizeof err), "a bad magic was accepted");
    printf("bad magic refused: %s\n", err);
    GB_TEST_CHECK(failures, !gbt_open("/nonexistent/x.gbt", err, sizeof err) && err[0],
                  "a missing file was not reported");
    free(bytes);
    return failures;
}

static int check_compare(void)
{
    int failures = 0;
    const float want[3] = {1.0f, -2.0f, 0.0f};
    const float close[3] = {1.0f + 1e-7f, -2.0f, 5e-8f};
    const float far[3] = {1.001f, -2.0f, 0.0f};
    const float nan[3] = {1.0f, NAN, 0.0f};
    GB_TEST_CHECK(failures, gbt_compare("compare: within tolerance", close, want, 3, 1e-7, 1e-6) == 0,
                  "a difference within tolerance failed");
    GB_TEST_CHECK(failures, gbt_compare("compare: outside tolerance (FAIL expected)", far, want, 3,
                                        1e-7, 1e-6) == 1,
                  "a difference of 1e-3 passed");
    GB_TEST_CHECK(failures, gbt_compare("compare: NaN (FAIL expected)", nan, want, 3, 1, 1) == 1,
                  "a NaN passed");
    return failures;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s REFERENCE_DIR\n", argv[0]);
        return 2;
    }
    int failures = check_gpt_file(argv[1], 0);
    failures += check_gpt_file(argv[1], 1);
    failures += check_corrupt_files_refused(argv[1]);
    failures += check_compare();
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
