/* `gearbox sample`: text from a checkpoint. The prompt runs through the model once, then
 * each new token runs through it alone over a KV cache of every earlier position's keys
 * and values (gearbox/engine/kvcache.h; --no-cache recomputes the window of block_size
 * tokens for every token instead); --num-samples draws several texts as one batch. Text
 * becomes ids and back as the run's data had it: bytes through the checkpoint's
 * vocabulary, or GPT-2 BPE when its config says [data] tokenizer = gpt2, in which case a
 * text ends at <|endoftext|>. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/engine/bpe.h"
#include "gearbox/engine/checkpoint.h"
#include "gearbox/engine/clock.h"
#include "gearbox/engine/kvcache.h"
#include "cli.h"
#include "gearbox/engine/model.h"
#include "options.h"
#include "gearbox/engine/rng.h"
#include "gearbox/engine/run.h"
#include "text_codec.h"

enum { OPT_PROMPT, OPT_PROMPT_FILE, OPT_TOKENS, OPT_NUM_SAMPLES, OPT_TEMPERATURE, OPT_TOP_K,
       OPT_TOP_P, OPT_SEED, OPT_KEEP_GOING, OPT_NO_CACHE, OPT_VOCAB, OPT_PLUGIN_PATH };

/* The most texts one batch draws: each takes its own KV cache and activations. */
#define MAX_SAMPLES 1024

const gb_cli_spec gb_cli_sample_spec = {
    .verb = "sample",
    .usage = "gearbox sample CHECKPOINT [OPTIONS]",
    .about = "Generates text from CHECKPOINT (a .gbk file, or an out_dir: its newest checkpoint),\n"
             "using the model, vocabulary and plugins recorded in it. The same --seed gives the\n"
             "same text. The prompt runs through the model once; each new token then runs alone\n"
             "over a KV cache of the keys and values before it. Tokens per second go to the\n"
             "standard error.\n",
    .options = {
        [OPT_PROMPT] = {"prompt", 0, "S", "text to continue (default: a newline); an empty one\n"
                        "starts from <|endoftext|> with a GPT-2 vocabulary"},
        [OPT_PROMPT_FILE] = {"prompt-file", 0, "FILE", "the prompt is FILE's text (- for the "
                             "standard input)"},
        [OPT_TOKENS] = {"tokens", 0, "N", "tokens to generate (default 500)"},
        [OPT_NUM_SAMPLES] = {"num-samples", 0, "N", "texts to draw from the prompt, as one "
                             "batch (default 1;\nat most 1024); each is printed after the "
                             "others, ended\nby a line of dashes"},
        [OPT_TEMPERATURE] = {"temperature", 0, "T", "softmax temperature (default 0.8); 0 "
                             "is greedy:\nthe likeliest token each time, as --top-k 1; above 0,\n"
                             "at least 1e-30"},
        [OPT_TOP_K] = {"top-k", 0, "K", "sample among the K likeliest tokens; 0 for all\n"
                       "(default 200)"},
        [OPT_TOP_P] = {"top-p", 0, "P", "nucleus sampling: among the likeliest tokens whose\n"
                       "probabilities add up to P, in (0, 1] (default 1: all)"},
        [OPT_SEED] = {"seed", 0, "N", "random seed (default 1337)"},
        [OPT_KEEP_GOING] = {"keep-going", 0, NULL, "with a GPT-2 vocabulary, go on past "
                            "<|endoftext|>\n(default: a text ends there)"},
        [OPT_NO_CACHE] = {"no-cache", 0, NULL, "no KV cache: run the model over the whole "
                          "window\nfor every token (slower; to compare with)"},
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

/* --top-p: a probability mass in (0, 1]; 0 would keep no token. */
static int parse_top_p(const char *text, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(text, &end);
    if (!errno && end != text && !*end && *out > 0.0 && *out <= 1.0)
        return 0;
    return gb_cli_usage_error("sample", "--top-p %s: expected a number in (0, 1], the "
                              "probability mass to sample from (1 keeps every token)", text);
}

static int on_option(void *ctx, int index, const char *v)
{
    gb_sample_args *a = ctx;
    unsigned long long n = 0;
    int rc = 0;
    switch (index) {
    case OPT_PROMPT: a->prompt = v; a->prompt_given = 1; break;
    case OPT_PROMPT_FILE: a->prompt_file = v; break;
    case OPT_VOCAB: a->vocab = v; break;
    case OPT_PLUGIN_PATH: a->plugin_path = v; break;
    case OPT_KEEP_GOING: a->keep_going = 1; break;
    case OPT_NO_CACHE: a->no_cache = 1; break;
    case OPT_TOKENS:
        rc = gb_cli_parse_count("sample", "--tokens", v, 0, 1000000000, &n);
        a->tokens = (long)n;
        break;
    case OPT_NUM_SAMPLES:
        rc = gb_cli_parse_count("sample", "--num-samples", v, 1, MAX_SAMPLES, &n);
        a->num_samples = (long)n;
        break;
    case OPT_TOP_K:
        rc = gb_cli_parse_count("sample", "--top-k", v, 0, 1000000000, &n);
        a->top_k = (long)n;
        break;
    case OPT_SEED: rc = gb_cli_parse_count("sample", "--seed", v, 0, ULLONG_MAX, &a->seed); break;
    case OPT_TEMPERATURE: rc = parse_temperature(v, &a->temperature); break;
    case OPT_TOP_P: rc = parse_top_p(v, &a->top_p); break;
    }
    return rc ? 2 : 0;
}

int gb_cli_parse_sample(int argc, char **argv, gb_sample_args *a)
{
    *a = (gb_sample_args){.prompt = "\n", .tokens = 500, .top_k = 200, .num_samples = 1,
                          .temperature = 0.8, .top_p = 1.0, .seed = 1337};
    int rc = gb_cli_parse_operands(&gb_cli_sample_spec, argc, argv, on_option, a, 1, 1, "CHECKPOINT",
                                   &a->checkpoint);
    if (rc == 0 && a->prompt_given && a->prompt_file)
        rc = gb_cli_usage_error("sample", "--prompt and --prompt-file %s: give the prompt one "
                                "way", a->prompt_file);
    return rc;
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

/* The smallest logit a draw keeps: the K-th largest under top-k, raised under top-p to
 * that of the last token the mass P needs, the likeliest first (tokens as likely as the
 * last one kept are kept too); -INFINITY keeps all. `max` is the largest logit. */
static float cutoff_of(const float *logits, int64_t V, double max, const gb_sample_args *a)
{
    const int by_k = a->top_k > 0 && a->top_k < V, by_p = a->top_p < 1.0;
    float *sorted = by_k || by_p ? malloc((size_t)V * sizeof *sorted) : NULL;
    if (!sorted)
        return -INFINITY;
    memcpy(sorted, logits, (size_t)V * sizeof *sorted);
    qsort(sorted, (size_t)V, sizeof *sorted, descending);
    float cutoff = sorted[(by_k ? a->top_k : V) - 1];
    double total = 0.0, mass = 0.0;
    for (int64_t j = 0; by_p && j < V && sorted[j] >= cutoff; j++)
        total += exp(sorted[j] - max);
    for (int64_t j = 0; by_p && j < V && sorted[j] >= cutoff; j++)
        if ((mass += exp(sorted[j] - max)) >= a->top_p * total) {
            cutoff = sorted[j];
            break;
        }
    free(sorted);
    return cutoff;
}

/* Draws a token from logits (V) with temperature, top-k and top-p; temperature 0 and
 * top-k 1 are greedy, drawing nothing. -1 after saying that the scaled logits overflowed. */
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
    const float cutoff = cutoff_of(logits, V, max, a);
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

/* The prompt's ids into *ids (*cap room, grown if need be), each below V; `source` names
 * where the prompt came from in messages. The codec: the checkpoint's byte vocabulary, or
 * GPT-2's BPE. */
static int encode_prompt(const gb_cli_codec *c, const char *prompt, const char *source,
                         int64_t V, int32_t **ids, int64_t *n, int64_t *cap)
{
    gb_diag diag = {0};
    *n = 0;
    int rc = gb_cli_encode(c, prompt, "the prompt", V, ids, n, cap, &diag);
    if (diag.count)
        fprintf(stderr, "gearbox sample: %s: %s\n", source, diag.messages[0]);
    gb_diag_clear(&diag);
    return rc;
}

/* Writes what token `id` stands for; an id the vocabulary lacks (the padding of a model
 * wider than its tokenizer) shows as '?'. */
static void put_token(const gb_cli_codec *c, int id)
{
    size_t len = 1;
    const char *bytes = c->bpe ? gb_bpe_token_bytes(c->bpe, id, &len)
                               : id < c->vocab->size ? (const char *)&c->vocab->bytes[id] : NULL;
    fwrite(bytes ? bytes : "?", 1, bytes ? len : 1, stdout);
}

/* The texts of one batch as they are drawn: each sample's new ids (N of them, `tokens`
 * apart) until it ends, and its random stream. */
typedef struct batch_texts {
    int64_t N, tokens;
    int32_t *ids;          /* (N, tokens) */
    int64_t *count;        /* (N) ids drawn so far */
    int *ended;            /* (N) drew <|endoftext|> */
    gb_rng *rng;           /* (N) */
} batch_texts;

static void batch_texts_free(batch_texts *t)
{
    free(t->ids);
    free(t->count);
    free(t->ended);
    free(t->rng);
}

/* Room for N texts of `tokens` ids; sample s draws from stream s of the seed (the first
 * sample's text is the one a single sample gives). */
static int batch_texts_alloc(batch_texts *t, int64_t N, int64_t tokens, uint64_t seed)
{
    *t = (batch_texts){N, tokens, malloc((size_t)(N * (tokens ? tokens : 1)) * sizeof *t->ids),
                       calloc((size_t)N, sizeof *t->count), calloc((size_t)N, sizeof *t->ended),
                       malloc((size_t)N * sizeof *t->rng)};
    if (!t->ids || !t->count || !t->ended || !t->rng)
        return -1;
    for (int64_t s = 0; s < N; s++)
        t->rng[s] = gb_rng_stream(seed, GB_RNG_SAMPLE, (uint64_t)s, 0);
    return 0;
}

/* The prompt's ids, each below V: <|endoftext|> for an empty prompt of a GPT-2 model, where
 * GPT-2 starts a text; -1 after saying why. */
static int prompt_ids(const gb_cli_codec *codec, const char *prompt, const char *source,
                      int64_t V, int32_t **ids, int64_t *n)
{
    int64_t cap = (int64_t)strlen(prompt) + 1;
    *ids = malloc((size_t)cap * sizeof **ids);
    if (!*ids || encode_prompt(codec, prompt, source, V, ids, n, &cap))
        return -1;
    if (*n == 0)
        (*ids)[(*n)++] = codec->bpe ? gb_bpe_end_of_text(codec->bpe) : 0;
    return 0;   /* <|endoftext|> is below V: the vocabulary fits the model (open_codec) */
}

/* Draws each sample's next token from its row of `logits` (N, V) into next (N); a single
 * sample's is printed at once. 1 when every sample has ended at <|endoftext|>; -1 after
 * saying why none can be drawn or printed. */
static int draw_next(batch_texts *t, float *logits, int64_t V, const gb_cli_codec *codec,
                     const gb_sample_args *a, int32_t *next)
{
    const int32_t end = codec->bpe && !a->keep_going ? gb_bpe_end_of_text(codec->bpe) : -1;
    int running = 0;
    for (int64_t s = 0; s < t->N; s++) {
        if ((next[s] = draw(logits + s * V, V, a, &t->rng[s])) < 0)
            return -1;
        if (t->ended[s] || (t->ended[s] = next[s] == end))
            continue;
        running = 1;
        t->ids[s * t->tokens + t->count[s]++] = next[s];
        if (t->N == 1) {
            put_token(codec, next[s]);
            if (gb_cli_flush_stdout("sample"))   /* a full disk or a closed pipe ends it */
                return -1;
        }
    }
    return !running;
}

/* Prints each of several samples whole: the prompt, its text, a line of dashes. */
static void print_texts(const batch_texts *t, const gb_cli_codec *codec, const char *prompt)
{
    for (int64_t s = 0; s < t->N; s++) {
        fputs(prompt, stdout);
        for (int64_t i = 0; i < t->count[s]; i++)
            put_token(codec, t->ids[s * t->tokens + i]);
        fputs("\n---------------\n", stdout);
    }
}

/* Runs the batch: the prompt once through the cache, then one token per sample per step. */
static int generate(gb_kv_cache *kv, const gb_model_config *mc, const gb_cli_codec *codec,
                    const gb_sample_args *a, const char *prompt)
{
    char source[4096];
    snprintf(source, sizeof source, a->prompt_file ? "--prompt-file %s" : "--prompt",
             a->prompt_file && strcmp(a->prompt_file, "-") ? a->prompt_file
                                                           : "- (the standard input)");
    const int64_t N = a->num_samples, V = mc->vocab_size;
    int32_t *ids = NULL, *batch = NULL;
    int64_t n = 0;
    batch_texts texts = {0};
    float *logits = malloc((size_t)(N * V) * sizeof *logits);
    int rc = -1;
    if (!logits || batch_texts_alloc(&texts, N, a->tokens, a->seed) ||
        prompt_ids(codec, prompt, source, V, &ids, &n) ||
        !(batch = malloc((size_t)(N * (n > 1 ? n : 1)) * sizeof *batch)))
        goto out;
    for (int64_t s = 0; s < N; s++)
        memcpy(batch + s * n, ids, (size_t)n * sizeof *batch);
    if (N == 1)
        fputs(prompt, stdout);
    const double start = gb_now_ms();
    int64_t steps = 0;
    for (int ended = 0; steps < a->tokens && !ended; steps++) {
        if (gb_kv_cache_forward(kv, batch, steps ? 1 : n, logits))
            goto out;
        if ((ended = draw_next(&texts, logits, V, codec, a, batch)) < 0)
            goto out;
    }
    const double seconds = (gb_now_ms() - start) / 1000.0;
    if (N == 1)
        putchar('\n');
    else
        print_texts(&texts, codec, prompt);
    if (gb_cli_flush_stdout("sample"))   /* the text ends before the figures on stderr */
        goto out;
    char how[256];
    gb_kv_cache_incremental(kv, how);
    fprintf(stderr, "sample: %lld tokens x %lld sample%s in %.2f s: %.1f tokens/s (%s)\n",
            (long long)steps, (long long)N, N == 1 ? "" : "s", seconds,
            seconds > 0.0 ? (double)(steps * N) / seconds : 0.0, how);
    rc = 0;
out:
    free(ids);
    free(batch);
    free(logits);
    batch_texts_free(&texts);
    return rc;
}

/* The codec of the run's data: GPT-2's BPE when its [data] tokenizer says gpt2, from
 * --vocab or the run's [data] vocab; else the checkpoint's bytes. Either must fit the
 * model's `model_ids`. -1 after saying what is missing or does not fit. */
static int open_codec(gb_cli_codec *c, int64_t model_ids, const gb_settings *s,
                      const gb_checkpoint *ck, const gb_sample_args *a, const char *path,
                      gb_diag *diag)
{
    char what[4200];
    *c = (gb_cli_codec){ck->vocab, NULL};
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

static int run_sample(const gb_sample_args *a, const char *prompt, const char *path,
                      gb_checkpoint *ck)
{
    gb_diag diag = {0};
    gb_runtime *rt = NULL;
    gb_model *m = NULL;
    gb_kv_cache *kv = NULL;
    int rc = 1;
    gb_config *cfg = gb_config_load_string(ck->config_text, path, "/", &diag);
    if (cfg && (rt = gb_runtime_open(cfg, a->plugin_path, &diag)) &&
        !gb_runtime_start(rt, &diag)) {
        const gb_settings *s = gb_runtime_settings(rt);
        gb_model_config mc = gb_model_config_of(s, ck->vocab->size);
        gb_cli_codec codec = {0};
        if (!open_codec(&codec, mc.vocab_size, s, ck, a, path, &diag))
            m = gb_model_create(rt, &mc, a->num_samples, 0);
        if (m && !gb_checkpoint_check_model(ck, path, m, s, &diag) &&
            !gb_model_set_params(m, ck->params) &&
            (kv = gb_kv_cache_create(m, rt, &mc, a->num_samples, !a->no_cache)))
            rc = generate(kv, &mc, &codec, a, prompt) ? 1 : 0;
        gb_bpe_free(codec.bpe);
    }
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    gb_kv_cache_free(kv);
    gb_model_free(m);
    gb_runtime_close(rt);
    gb_config_free(cfg);
    return rc;
}

/* The prompt of --prompt-file (the standard input for "-"), or NULL after saying why:
 * text, so a NUL byte, which would end it early, is refused. */
static char *read_prompt_file(const char *path)
{
    size_t len = 0;
    char *text = gb_cli_read_input("sample", path, &len);
    const char *nul = text ? memchr(text, '\0', len) : NULL;
    if (!nul)
        return text;
    fprintf(stderr, "gearbox sample: --prompt-file %s: byte %zu is NUL; a prompt is text "
            "(GPT-2 BPE or the model's characters), not binary data\n",
            strcmp(path, "-") ? path : "- (the standard input)", (size_t)(nul - text));
    free(text);
    return NULL;
}

int gb_cmd_sample(int argc, char **argv)
{
    gb_sample_args a;
    int rc = gb_cli_parse_sample(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    char *prompt = a.prompt_file ? read_prompt_file(a.prompt_file) : strdup(a.prompt);
    if (!prompt)
        return 1;
    char *path = gb_cli_checkpoint_path(a.checkpoint);
    if (!path) {
        free(prompt);
        return 1;
    }
    gb_checkpoint ck;
    gb_diag diag = {0};
    rc = 1;
    if (gb_checkpoint_read(path, &ck, &diag) == 0) {
        rc = run_sample(&a, prompt, path, &ck);
        gb_checkpoint_free(&ck);
    }
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    free(path);
    free(prompt);
    return rc;
}
