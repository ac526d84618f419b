/* `gearbox sample`: text from a checkpoint, one token at a time over a sliding window of
 * block_size tokens (no KV cache: the models this runs on CPU are small). Text becomes
 * ids and back as the run's data had it: bytes through the checkpoint's vocabulary, or
 * GPT-2 BPE when its config says [data] tokenizer = gpt2. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/engine/bpe.h"
#include "gearbox/engine/checkpoint.h"
#include "cli.h"
#include "gearbox/engine/model.h"
#include "options.h"
#include "gearbox/engine/rng.h"
#include "gearbox/engine/run.h"

enum { OPT_PROMPT, OPT_TOKENS, OPT_TEMPERATURE, OPT_TOP_K, OPT_SEED, OPT_VOCAB,
       OPT_PLUGIN_PATH };

const gb_cli_spec gb_cli_sample_spec = {
    .verb = "sample",
    .usage = "gearbox sample CHECKPOINT [OPTIONS]",
    .about = "Generates text from CHECKPOINT (a .gbk file, or an out_dir: its newest checkpoint),\n"
             "using the model, vocabulary and plugins recorded in it. The same --seed gives the\n"
             "same text.\n",
    .options = {
        [OPT_PROMPT] = {"prompt", 0, "S", "text to continue (default: a newline); an empty one\n"
                        "starts from <|endoftext|> with a GPT-2 vocabulary"},
        [OPT_TOKENS] = {"tokens", 0, "N", "tokens to generate (default 500)"},
        [OPT_TEMPERATURE] = {"temperature", 0, "T", "softmax temperature (default 0.8); 0 "
                             "is greedy:\nthe likeliest token each time, as --top-k 1; above 0,\n"
                             "at least 1e-30"},
        [OPT_TOP_K] = {"top-k", 0, "K", "sample among the K likeliest tokens; 0 for all\n"
                       "(default 200)"},
        [OPT_SEED] = {"seed", 0, "N", "random seed (default 1337)"},
        [OPT_VOCAB] = {"vocab", 0, "PATH", "GPT-2's vocabulary, for a model trained on GPT-2 BPE\n"
                       "tokens: a folder with encoder.json and vocab.bpe, or a\n"
                       "tiktoken file (default: the run's [data] vocab, or the\n"
                       "one `gearbox prepare` noted in its data folder)"},
        [OPT_PLUGIN_PATH] = GB_CLI_OPTION_PLUGIN_PATH,
    }};

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

/* The smallest temperature above 0: logits divided by less would overflow a float
 * (|logit| up to 3.4e8 stays finite divided by 1e-30); 0 is greedy. */
#define MIN_TEMPERATURE 1e-30

static int parse_temperature(const char *text, double *out)
{
    if (parse_real("--temperature", text, 0.0, 1e6, out))
        return 2;
    if (*out == 0.0 || *out >= MIN_TEMPERATURE)
        return 0;
    return gb_cli_usage_error("sample", "--temperature %s: too small to compute with (the "
                              "logits divided by it overflow); the smallest is %g, or 0 for "
                              "greedy", text, MIN_TEMPERATURE);
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

static int on_option(void *ctx, int index, const char *v)
{
    gb_sample_args *a = ctx;
    unsigned long long n = 0;
    int rc = 0;
    switch (index) {
    case OPT_PROMPT: a->prompt = v; break;
    case OPT_VOCAB: a->vocab = v; break;
    case OPT_PLUGIN_PATH: a->plugin_path = v; break;
    case OPT_TOKENS:
        rc = parse_count("--tokens", v, 1000000000, &n);
        a->tokens = (long)n;
        break;
    case OPT_TOP_K:
        rc = parse_count("--top-k", v, 1000000000, &n);
        a->top_k = (long)n;
        break;
    case OPT_SEED: rc = parse_count("--seed", v, ULLONG_MAX, &a->seed); break;
    case OPT_TEMPERATURE: rc = parse_temperature(v, &a->temperature); break;
    }
    return rc ? 2 : 0;
}

int gb_cli_parse_sample(int argc, char **argv, gb_sample_args *a)
{
    *a = (gb_sample_args){NULL, "\n", NULL, NULL, 500, 200, 0.8, 1337};
    return gb_cli_parse_operands(&gb_cli_sample_spec, argc, argv, on_option, a, 1, 1,
                                 "CHECKPOINT", &a->checkpoint);
}

static int descending(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a < b) - (a > b);
}

/* The likeliest token; the lowest id among equals. */
static int likeliest(const float *logits, int64_t V)
{
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best])
            best = i;
    return (int)best;
}

/* Draws a token from logits (V) with temperature and top-k; temperature 0 and top-k 1
 * are greedy, drawing nothing. -1 after saying that the scaled logits overflowed. */
static int draw(float *logits, int64_t V, const gb_sample_args *a, gb_rng *rng)
{
    if (a->temperature == 0.0 || a->top_k == 1)
        return likeliest(logits, V);
    double max = -INFINITY;
    for (int64_t i = 0; i < V; i++) {
        float scaled = (float)(logits[i] / a->temperature);
        if (!isfinite(scaled) && isfinite(logits[i])) {
            fprintf(stderr, "gearbox sample: --temperature %g: token %lld's logit %g divided "
                    "by it overflows; raise the temperature, or give 0 for greedy\n",
                    a->temperature, (long long)i, logits[i]);
            return -1;
        }
        logits[i] = scaled;
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

/* How text becomes ids and back: the checkpoint's byte vocabulary, or GPT-2's BPE. */
typedef struct text_codec {
    const gb_vocab *vocab;
    gb_bpe *bpe;               /* NULL for byte tokens */
} text_codec;

static int encode_bytes(const char *prompt, const gb_vocab *vocab, int32_t *ids, int64_t *n)
{
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

/* The prompt's ids into *ids (*cap room, grown if need be), each below V. */
static int encode_prompt(const text_codec *c, const char *prompt, int64_t V, int32_t **ids,
                         int64_t *n, int64_t *cap)
{
    gb_diag diag = {0};
    *n = 0;
    int rc = c->bpe ? gb_bpe_encode(c->bpe, prompt, strlen(prompt), ids, n, cap, &diag)
                    : encode_bytes(prompt, c->vocab, *ids, n);
    for (int64_t i = 0; !rc && i < *n; i++)
        if ((*ids)[i] >= V) {
            gb_diag_add(&diag, "the prompt's token %lld has id %d, beyond the model's "
                        "vocabulary of %lld ids", (long long)i, (*ids)[i], (long long)V);
            rc = -1;
        }
    if (diag.count)
        fprintf(stderr, "gearbox sample: --prompt: %s\n", diag.messages[0]);
    gb_diag_clear(&diag);
    return rc;
}

/* Writes what token `id` stands for; an id the vocabulary lacks (the padding of a model
 * wider than its tokenizer) shows as '?'. */
static void put_token(const text_codec *c, int id)
{
    size_t len = 1;
    const char *bytes = c->bpe ? gb_bpe_token_bytes(c->bpe, id, &len)
                               : id < c->vocab->size ? (const char *)&c->vocab->bytes[id] : NULL;
    fwrite(bytes ? bytes : "?", 1, bytes ? len : 1, stdout);
}

static int generate(gb_model *m, const gb_model_config *mc, const text_codec *codec,
                    const gb_sample_args *a)
{
    int64_t cap = (int64_t)strlen(a->prompt) + a->tokens + 1, n;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    float *logits = malloc((size_t)(mc->block_size * mc->vocab_size) * sizeof *logits);
    int rc = -1;
    if (!ids || !logits || encode_prompt(codec, a->prompt, mc->vocab_size, &ids, &n, &cap))
        goto out;
    if (n == 0)   /* GPT-2 starts a text after <|endoftext|> */
        ids[n++] = codec->bpe ? gb_bpe_end_of_text(codec->bpe) : 0;
    fputs(a->prompt, stdout);
    gb_rng rng = gb_rng_stream(a->seed, GB_RNG_SAMPLE, 0, 0);
    for (long i = 0; i < a->tokens; i++) {
        int64_t T = n < mc->block_size ? n : mc->block_size;
        if (gb_model_forward(m, ids + n - T, NULL, 1, T, NULL) ||
            gb_model_get_logits(m, logits, 1, T))
            goto out;
        int id = draw(logits + (T - 1) * mc->vocab_size, mc->vocab_size, a, &rng);
        if (id < 0)
            goto out;
        ids[n++] = id;
        put_token(codec, id);
        if (gb_cli_flush_stdout("sample"))   /* a full disk or a closed pipe ends it */
            goto out;
    }
    putchar('\n');
    rc = 0;
out:
    free(ids);
    free(logits);
    return rc;
}

/* The codec of the run's data: GPT-2's BPE when its [data] tokenizer says gpt2, from
 * --vocab or the run's [data] vocab; else the checkpoint's bytes. Either must fit the
 * model's `model_ids`. -1 after saying what is missing or does not fit. */
static int open_codec(text_codec *c, int64_t model_ids, const gb_settings *s,
                      const gb_checkpoint *ck, const gb_sample_args *a, const char *path,
                      gb_diag *diag)
{
    char what[4200];
    *c = (text_codec){ck->vocab, NULL};
    if (gb_settings_tokenizer(s) != GB_TOKENIZER_GPT2 && a->vocab) {
        gb_diag_add(diag, "--vocab %s: %s holds a model of byte tokens, whose vocabulary it "
                    "carries; --vocab is for GPT-2 BPE models: drop it", a->vocab, path);
        return -1;
    }
    if (gb_settings_tokenizer(s) != GB_TOKENIZER_GPT2) {
        snprintf(what, sizeof what, "%s: its byte vocabulary", path);
        return gb_vocab_check_fit(model_ids, ck->vocab->size, what, "the checkpoint was "
                                  "written with a vocabulary its model cannot use", diag);
    }
    const char *vocab = a->vocab ? a->vocab : gb_settings_vocab_path(s);
    if (!vocab) {
        gb_diag_add(diag, "%s: the model was trained on GPT-2 BPE tokens ([data] tokenizer = "
                    "gpt2), but its run named no vocabulary to decode them with: pass --vocab "
                    "PATH (a folder with GPT-2's encoder.json and vocab.bpe, or a tiktoken "
                    "gpt2 file)", path);
        return -1;
    }
    c->bpe = gb_bpe_load(vocab, diag);
    snprintf(what, sizeof what, "%s %s", a->vocab ? "--vocab" : "the run's [data] vocab =",
             vocab);
    return c->bpe ? gb_vocab_check_fit(model_ids, gb_bpe_vocab_size(c->bpe), what,
                                       "give the vocabulary the model was trained with", diag)
                  : -1;
}

static int run_sample(const gb_sample_args *a, const char *path, gb_checkpoint *ck)
{
    gb_diag diag = {0};
    gb_runtime *rt = NULL;
    gb_model *m = NULL;
    int rc = 1;
    gb_config *cfg = gb_config_load_string(ck->config_text, path, "/", &diag);
    if (cfg && (rt = gb_runtime_open(cfg, a->plugin_path, &diag)) &&
        !gb_runtime_start(rt, &diag)) {
        const gb_settings *s = gb_runtime_settings(rt);
        gb_model_config mc = gb_model_config_of(s, ck->vocab->size);
        text_codec codec = {0};
        if (!open_codec(&codec, mc.vocab_size, s, ck, a, path, &diag))
            m = gb_model_create(rt, &mc, 1, 0);
        if (m && !gb_checkpoint_check_model(ck, path, m, s, &diag) &&
            !gb_model_set_params(m, ck->params))
            rc = generate(m, &mc, &codec, a) ? 1 : 0;
        gb_bpe_free(codec.bpe);
    }
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    gb_model_free(m);
    gb_runtime_close(rt);
    gb_config_free(cfg);
    return rc;
}

int gb_cmd_sample(int argc, char **argv)
{
    gb_sample_args a;
    int rc = gb_cli_parse_sample(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    char *path = gb_cli_checkpoint_path(a.checkpoint);
    if (!path)
        return 1;
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
