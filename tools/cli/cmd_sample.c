/* `gearbox sample`: text from a checkpoint, one token at a time over a sliding window of
 * block_size tokens (no KV cache: the models this runs on CPU are small). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "cli.h"
#include "model.h"
#include "rng.h"
#include "runtime.h"

static const char usage[] =
    "usage: gearbox sample CHECKPOINT [--prompt S] [--tokens N] [--temperature T]\n"
    "                      [--top-k K] [--seed N] [--plugin-path DIRS]\n"
    "\n"
    "Generates text from CHECKPOINT (a .gbk file, or an out_dir: its newest checkpoint),\n"
    "using the model, vocabulary and plugins recorded in it.\n"
    "\n"
    "  --prompt S        text to continue (default: a newline)\n"
    "  --tokens N        tokens to generate (default 500)\n"
    "  --temperature T   softmax temperature, > 0 (default 0.8)\n"
    "  --top-k K         sample among the K likeliest tokens; 0 for all (default 200)\n"
    "  --seed N          random seed (default 1337)\n";

static int parse_real(const char *flag, const char *text, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= lo && v <= hi))
        return gb_cli_usage_error("sample", "%s %s: expected a number in [%g, %g]", flag, text,
                                  lo, hi);
    *out = v;
    return 0;
}

/* A whole number written in decimal digits only: "1.5", "0x10", "-1" and "1e3" are not
 * counts a user meant. */
static int parse_count(const char *flag, const char *text, unsigned long long hi,
                       unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = text[0] >= '0' && text[0] <= '9' ? strtoull(text, &end, 10) : 0;
    if (text[0] < '0' || text[0] > '9' || errno || *end || v > hi)
        return gb_cli_usage_error("sample", "%s %s: expected a whole number from 0 to %llu", flag,
                                  text, hi);
    *out = v;
    return 0;
}

/* One "--flag VALUE" (or --flag=VALUE) at argv[*i] into a; 2 after a usage error. */
static int parse_flag(int argc, char **argv, int *i, gb_sample_args *a)
{
    int missing = 0, rc = 0;
    const char *v;
    unsigned long long n = 0;
    if ((v = gb_cli_flag_value(argc, argv, i, "--prompt", &missing))) {
        a->prompt = v;
    } else if ((v = gb_cli_flag_value(argc, argv, i, "--plugin-path", &missing))) {
        a->plugin_path = v;
    } else if ((v = gb_cli_flag_value(argc, argv, i, "--tokens", &missing))) {
        rc = parse_count("--tokens", v, 1000000000, &n);
        a->tokens = (long)n;
    } else if ((v = gb_cli_flag_value(argc, argv, i, "--top-k", &missing))) {
        rc = parse_count("--top-k", v, 1000000000, &n);
        a->top_k = (long)n;
    } else if ((v = gb_cli_flag_value(argc, argv, i, "--seed", &missing))) {
        rc = parse_count("--seed", v, ULLONG_MAX, &a->seed);
    } else if ((v = gb_cli_flag_value(argc, argv, i, "--temperature", &missing))) {
        rc = parse_real("--temperature", v, 1e-6, 1e6, &a->temperature);
    } else if (missing) {
        rc = gb_cli_usage_error("sample", "%s needs a value", argv[*i]);
    } else {
        rc = gb_cli_usage_error("sample", "unknown option %s", argv[*i]);
    }
    return rc ? 2 : 0;
}

int gb_cli_parse_sample(int argc, char **argv, gb_sample_args *a)
{
    *a = (gb_sample_args){NULL, "\n", NULL, 500, 200, 0.8, 1337};
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            int rc = parse_flag(argc, argv, &i, a);
            if (rc)
                return rc;
        } else if (a->checkpoint) {
            return gb_cli_usage_error("sample", "unexpected argument %s", argv[i]);
        } else {
            a->checkpoint = argv[i];
        }
    }
    if (!a->checkpoint)
        return gb_cli_usage_error("sample", "missing CHECKPOINT");
    return 0;
}

static int descending(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a < b) - (a > b);
}

/* Draws a token from logits (V) with temperature and top-k. */
static int draw(float *logits, int64_t V, const gb_sample_args *a, gb_rng *rng)
{
    double max = -INFINITY;
    for (int64_t i = 0; i < V; i++) {
        logits[i] = (float)(logits[i] / a->temperature);
        max = fmax(max, logits[i]);
    }
    float cutoff = -INFINITY;
    if (a->top_k > 0 && a->top_k < V) {
        float *sorted = malloc((size_t)V * sizeof *sorted);
        if (sorted) {
            memcpy(sorted, logits, (size_t)V * sizeof *sorted);
            qsort(sorted, (size_t)V, sizeof *sorted, descending);
            cutoff = sorted[a->top_k - 1];
            free(sorted);
        }
    }
    double total = 0.0;
    for (int64_t i = 0; i < V; i++)
        total += logits[i] >= cutoff ? exp(logits[i] - max) : 0.0;
    double u = gb_rng_uniform(rng) * total;
    for (int64_t i = 0; i < V; i++) {
        if (logits[i] < cutoff)
            continue;
        u -= exp(logits[i] - max);
        if (u <= 0.0)
            return (int)i;
    }
    return (int)(V - 1);
}

static int encode_prompt(const char *prompt, const gb_vocab *vocab, int32_t *ids, int64_t *n)
{
    *n = 0;
    for (const unsigned char *p = (const unsigned char *)prompt; *p; p++) {
        int id = -1;
        for (int v = 0; v < vocab->size && id < 0; v++)
            if (vocab->bytes[v] == *p)
                id = v;
        if (id < 0) {
            fprintf(stderr, "gearbox sample: the prompt's character '%c' (byte %d) is not in "
                    "the model's vocabulary\n", *p, *p);
            return -1;
        }
        ids[(*n)++] = id;
    }
    return 0;
}

static int generate(gb_model *m, const gb_model_config *mc, const gb_vocab *vocab,
                    const gb_sample_args *a)
{
    int64_t cap = (int64_t)strlen(a->prompt) + a->tokens + 1, n;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    float *logits = malloc((size_t)(mc->block_size * mc->vocab_size) * sizeof *logits);
    int rc = -1;
    if (!ids || !logits || encode_prompt(a->prompt, vocab, ids, &n))
        goto out;
    if (n == 0)
        ids[n++] = 0;
    fputs(a->prompt, stdout);
    gb_rng rng = gb_rng_stream(a->seed, GB_RNG_SAMPLE, 0, 0);
    for (long i = 0; i < a->tokens; i++) {
        int64_t T = n < mc->block_size ? n : mc->block_size;
        if (gb_model_forward(m, ids + n - T, NULL, 1, T, NULL) ||
            gb_model_get_logits(m, logits, 1, T))
            goto out;
        int id = draw(logits + (T - 1) * mc->vocab_size, mc->vocab_size, a, &rng);
        ids[n++] = id;
        putchar(id < vocab->size ? vocab->bytes[id] : '?');
        fflush(stdout);
    }
    putchar('\n');
    rc = 0;
out:
    free(ids);
    free(logits);
    return rc;
}

static int run_sample(const gb_sample_args *a, const char *path, gb_checkpoint *ck)
{
    gb_diag diag = {0};
    gb_runtime rt = {0};
    gb_model *m = NULL;
    int rc = 1;
    gb_config *cfg = gb_config_load_string(ck->config_text, path, "/", &diag);
    if (cfg && !gb_runtime_resolve(&rt, cfg, a->plugin_path, &diag) &&
        !gb_runtime_start(&rt, &diag)) {
        const gb_settings *s = &rt.settings;
        gb_model_config mc = gb_model_config_of(s, ck->vocab->size);
        m = gb_model_create(&rt, &mc, 1, 0);
        if (m && !gb_checkpoint_check_model(ck, path, m, s, &diag) &&
            !gb_model_set_params(m, ck->params))
            rc = generate(m, &mc, ck->vocab, a) ? 1 : 0;
    }
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    gb_model_free(m);
    gb_runtime_free(&rt);
    gb_config_free(cfg);
    return rc;
}

int gb_cmd_sample(int argc, char **argv)
{
    if (gb_cli_wants_help(argc, argv, usage))
        return 0;
    gb_sample_args a;
    int rc = gb_cli_parse_sample(argc, argv, &a);
    if (rc)
        return rc;
    struct stat st;
    char *path = stat(a.checkpoint, &st) == 0 && S_ISDIR(st.st_mode)
                     ? gb_checkpoint_latest(a.checkpoint) : strdup(a.checkpoint);
    if (!path) {
        fprintf(stderr, "gearbox sample: no checkpoint (ckpt-*.gbk) in %s\n", a.checkpoint);
        return 1;
    }
    gb_checkpoint ck;
    gb_diag diag = {0};
    rc = 1;
    if (gb_checkpoint_read(path, &ck, &diag) == 0) {
        rc = run_sample(&a, path, &ck);
        gb_checkpoint_free(&ck);
    }
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    free(path);
    return rc;
}
