/* GPT-2 weights from and to Hugging Face's and llm.c's files; see weights.h. */
#include "weights.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "gearbox/convert.h"

#include "gearbox/engine/checkpoint.h"
#include "gearbox/engine/config.h"
#include "gearbox/engine/fsutil.h"
#include "safetensors.h"

#define LLMC_MAGIC 20240326
#define LLMC_HEADER_INTS 256

/* gearbox's tensors for a model shape, and the flat buffer they index. */
typedef struct layout {
    gb_param_tensor *tensors;
    int count;
} layout;

static int make_layout(gb_weights *w, layout *l, gb_diag *diag)
{
    l->tensors = gb_model_layout(&w->cfg, &l->count, &w->n_params);
    w->params = l->tensors ? calloc((size_t)w->n_params, sizeof *w->params) : NULL;
    if (!w->params) {
        free(l->tensors);
        l->tensors = NULL;
        gb_diag_add(diag, "out of memory for %lld parameters", (long long)w->n_params);
        return -1;
    }
    return 0;
}

void gb_weights_free(gb_weights *w)
{
    free(w->params);
    w->params = NULL;
}

static int is_folder(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- Hugging Face --------------------------------------------------------------------- */

/* Linear layers Hugging Face's GPT-2 stores as Conv1D, (in, out). */
static int is_conv1d(const char *name)
{
    static const char *const suffixes[] = {"c_attn.weight", "c_proj.weight", "c_fc.weight"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t k = strlen(suffixes[i]);
        if (n >= k && strcmp(name + n - k, suffixes[i]) == 0)
            return 1;
    }
    return 0;
}

/* Hugging Face's name of a gearbox tensor, without "transformer.". */
static void hf_name(char *out, size_t cap, const char *name)
{
    int embedding = strcmp(name, "wte") == 0 || strcmp(name, "wpe") == 0;
    /* the guard: gcc 12 with -fsanitize=undefined sees a null name past strcmp's check */
    snprintf(out, cap, "%s%s", name ? name : "", embedding ? ".weight" : "");
}

/* The rows a gearbox tensor has in Hugging Face's files: wte's real rows only. */
static int64_t hf_rows(const gb_weights *w, const gb_param_tensor *t)
{
    return strcmp(t->name, "wte") == 0 ? w->cfg.vocab_size : t->rows;
}

/* A config.json number that must be a whole number >= 1 (Hugging Face's default when
 * absent). 0, or -1 with diag. */
static int hf_count(const json_t *cfg, const char *key, int64_t fallback, int64_t *out,
                    const char *path, gb_diag *diag)
{
    const json_t *v = json_object_get(cfg, key);
    *out = v ? (json_is_integer(v) ? json_integer_value(v) : 0) : fallback;
    if (*out >= 1 && *out <= (1 << 20))
        return 0;
    gb_diag_add(diag, "%s: \"%s\" must be a whole number from 1 to 1048576", path, key);
    return -1;
}

/* A config.json setting GPT-2 as gearbox builds it needs at `want` (true/false). */
static int hf_flag_is(const json_t *cfg, const char *key, int want, const char *path,
                      gb_diag *diag)
{
    const json_t *v = json_object_get(cfg, key);
    if (!json_is_boolean(v) || json_is_true(v) == want)
        return 0;
    gb_diag_add(diag, "%s: \"%s\": %s is a variant of GPT-2 gearbox does not build", path, key,
                want ? "false" : "true");
    return -1;
}

/* The GELU form of "activation_function". 0, or -1 with diag. */
static int hf_gelu(const json_t *cfg, int *tanh_form, const char *path, gb_diag *diag)
{
    const json_t *v = json_object_get(cfg, "activation_function");
    const char *f = json_is_string(v) ? json_string_value(v) : v ? "" : "gelu_new";
    *tanh_form = strcmp(f, "gelu_new") == 0 || strcmp(f, "gelu_pytorch_tanh") == 0;
    if (*tanh_form || strcmp(f, "gelu") == 0)
        return 0;
    gb_diag_add(diag, "%s: \"activation_function\": \"%s\": gearbox has GELU's erf form "
                "(\"gelu\") and its tanh form (\"gelu_new\", \"gelu_pytorch_tanh\")", path, f);
    return -1;
}

static int hf_epsilon(const json_t *cfg, const char *path, gb_diag *diag)
{
    const json_t *v = json_object_get(cfg, "layer_norm_epsilon");
    if (!v || (json_is_number(v) && fabs(json_number_value(v) - 1e-5) < 1e-12))
        return 0;
    gb_diag_add(diag, "%s: \"layer_norm_epsilon\" must be 1e-05, the LayerNorm eps gearbox "
                "computes with", path);
    return -1;
}

/* config.json's shape of the model. 0, or -1 with diag. */
static int read_hf_config(const char *path, gb_model_config *cfg, gb_diag *diag)
{
    unsigned char *text;
    size_t size;
    if (gb_read_file_or_say(path, &text, &size, diag))
        return -1;
    json_error_t err;
    json_t *json = json_loadb((const char *)text, size, JSON_REJECT_DUPLICATES, &err);
    free(text);
    if (!json_is_object(json)) {
        if (json)
            gb_diag_add(diag, "%s: not a JSON object; Hugging Face's config.json is one", path);
        else
            gb_diag_add(diag, "%s:%d:%d: not JSON: %s", path, err.line, err.column, err.text);
        json_decref(json);
        return -1;
    }
    int64_t inner = 0;
    const json_t *n_inner = json_object_get(json, "n_inner");
    int problems = hf_count(json, "n_layer", 12, &cfg->n_layer, path, diag) +
                   hf_count(json, "n_head", 12, &cfg->n_head, path, diag) +
                   hf_count(json, "n_embd", 768, &cfg->n_embd, path, diag) +
                   hf_count(json, "n_positions", 1024, &cfg->block_size, path, diag) +
                   hf_count(json, "vocab_size", 50257, &cfg->vocab_size, path, diag) +
                   hf_gelu(json, &cfg->gelu_tanh, path, diag) + hf_epsilon(json, path, diag) +
                   hf_flag_is(json, "scale_attn_weights", 1, path, diag) +
                   hf_flag_is(json, "scale_attn_by_inverse_layer_idx", 0, path, diag) +
                   hf_flag_is(json, "reorder_and_upcast_attn", 0, path, diag) +
                   hf_flag_is(json, "tie_word_embeddings", 1, path, diag);
    if (n_inner && !json_is_null(n_inner) &&
        (hf_count(json, "n_inner", 0, &inner, path, diag) || inner != 4 * cfg->n_embd)) {
        gb_diag_add(diag, "%s: \"n_inner\" must be null or 4 * n_embd, gearbox's MLP width", path);
        problems++;
    }
    if (!problems && cfg->n_embd % cfg->n_head) {
        gb_diag_add(diag, "%s: n_embd %lld is not a multiple of n_head %lld", path,
                    (long long)cfg->n_embd, (long long)cfg->n_head);
        problems++;
    }
    cfg->bias = 1;
    json_decref(json);
    return problems ? -1 : 0;
}

/* The file's tensor for gearbox's `name`, with or without "transformer.". */
static const gb_st_tensor *find_hf(const gb_safetensors *st, const char *name)
{
    char prefixed[160];
    snprintf(prefixed, sizeof prefixed, "transformer.%s", name);
    const gb_st_tensor *t = gb_safetensors_find(st, prefixed);
    return t ? t : gb_safetensors_find(st, name);
}

/* dst (cols, rows) = src (rows, cols) transposed. */
static void transpose(float *dst, const float *src, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[c * rows + r] = src[r * cols + c];
}

/* One gearbox tensor from the file, shape checked, Conv1D weights transposed. */
static int read_hf_tensor(const gb_safetensors *st, const char *file, gb_weights *w,
                          const gb_param_tensor *t, float *scratch, gb_diag *diag)
{
    char name[128];
    hf_name(name, sizeof name, t->name);
    const gb_st_tensor *src = find_hf(st, name);
    int64_t rows = hf_rows(w, t), cols = t->cols;
    int conv = is_conv1d(t->name), vector = t->rows == 1;
    int64_t want0 = vector ? cols : conv ? cols : rows, want1 = conv ? rows : cols;
    if (!src) {
        gb_diag_add(diag, "%s: no tensor %s (or transformer.%s); is it a GPT-2 checkpoint?",
                    file, name, name);
        return -1;
    }
    if (src->ndim != (vector ? 1 : 2) || src->shape[0] != want0 ||
        (!vector && src->shape[1] != want1)) {
        gb_diag_add(diag, "%s: tensor %s has shape [%lld%s%lld], config.json's model needs "
                    "[%lld%s%lld]", file, src->name, (long long)src->shape[0],
                    src->ndim > 1 ? ", " : "", src->ndim > 1 ? (long long)src->shape[1] : 0LL,
                    (long long)want0, vector ? "" : ", ", vector ? 0LL : (long long)want1);
        return -1;
    }
    float *dst = w->params + t->offset;
    if (gb_safetensors_to_f32(src, conv ? scratch : dst, file, diag))
        return -1;
    if (conv)
        transpose(dst, scratch, want0, want1);
    return 0;
}

/* A tensor of the file that is not a parameter gearbox reads: the attention mask buffers
 * are skipped, a tied LM head must equal wte, anything else is refused. */
static int check_extra_tensor(const gb_safetensors *st, const gb_st_tensor *t,
                              const gb_weights *w, const char *file, gb_diag *diag)
{
    const char *name = strncmp(t->name, "transformer.", 12) == 0 ? t->name + 12 : t->name;
    size_t n = strlen(name);
    if ((n > 10 && strcmp(name + n - 10, ".attn.bias") == 0) ||
        (n > 17 && strcmp(name + n - 17, ".attn.masked_bias") == 0))
        return 0;
    if (strcmp(name, "lm_head.weight") == 0) {
        const gb_st_tensor *wte = find_hf(st, "wte.weight");
        size_t bytes = (size_t)(w->cfg.vocab_size * w->cfg.n_embd) * sizeof(float);
        if (wte && t->bytes == wte->bytes && memcmp(t->data, wte->data, t->bytes) == 0)
            return 0;
        if (strcmp(t->dtype, "F32") == 0 && t->bytes == bytes &&
            memcmp(t->data, w->params, bytes) == 0)
            return 0;
        gb_diag_add(diag, "%s: lm_head.weight differs from wte.weight; gearbox's GPT-2 ties "
                    "them and cannot hold a separate LM head", file);
        return -1;
    }
    gb_diag_add(diag, "%s: tensor %s is not part of GPT-2 as gearbox builds it; is it a "
                "GPT2LMHeadModel checkpoint?", file, t->name);
    return -1;
}

/* Every gearbox tensor found in the file, each file tensor accounted for. */
static int read_hf_tensors(const gb_safetensors *st, const char *file, gb_weights *w,
                           const layout *l, gb_diag *diag)
{
    int64_t largest = 0;
    for (int i = 0; i < l->count; i++)
        largest = l->tensors[i].numel > largest ? l->tensors[i].numel : largest;
    float *scratch = malloc((size_t)largest * sizeof *scratch);
    int problems = scratch ? 0 : 1;
    for (int i = 0; !problems && i < l->count; i++)
        problems += read_hf_tensor(st, file, w, &l->tensors[i], scratch, diag) != 0;
    free(scratch);
    int known = 0;
    for (int i = 0; !problems && i < st->count; i++) {
        const char *name = st->tensors[i].name;
        const char *bare = strncmp(name, "transformer.", 12) == 0 ? name + 12 : name;
        int is_param = 0;
        for (int k = 0; k < l->count && !is_param; k++) {
            char hf[128];
            hf_name(hf, sizeof hf, l->tensors[k].name);
            is_param = strcmp(hf, bare) == 0;
        }
        known += is_param;
        if (!is_param)
            problems += check_extra_tensor(st, &st->tensors[i], w, file, diag) != 0;
    }
    if (!problems && known != l->count) {
        gb_diag_add(diag, "%s holds some tensors both with and without \"transformer.\"", file);
        problems++;
    }
    return problems ? -1 : 0;
}

int gb_weights_read_hf(const char *path, int64_t padded_vocab, gb_weights *w, gb_diag *diag)
{
    char file[4096], config[4096];
    memset(w, 0, sizeof *w);
    snprintf(file, sizeof file, is_folder(path) ? "%s/model.safetensors" : "%s", path);
    const char *slash = strrchr(file, '/');
    snprintf(config, sizeof config, "%.*sconfig.json", slash ? (int)(slash - file + 1) : 0, file);
    gb_safetensors *st = gb_safetensors_read(file, diag);
    if (!st || read_hf_config(config, &w->cfg, diag)) {
        gb_safetensors_free(st);
        return -1;
    }
    if (padded_vocab && padded_vocab < w->cfg.vocab_size) {
        gb_diag_add(diag, "--padded-vocab-size %lld is smaller than the vocabulary of %s (%lld)",
                    (long long)padded_vocab, config, (long long)w->cfg.vocab_size);
        gb_safetensors_free(st);
        return -1;
    }
    w->cfg.padded_vocab_size = padded_vocab;
    layout l = {0};
    int rc = make_layout(w, &l, diag) ? -1 : read_hf_tensors(st, file, w, &l, diag);
    free(l.tensors);
    gb_safetensors_free(st);
    if (rc)
        gb_weights_free(w);
    return rc;
}

/* <|endoftext|>, which GPT-2 begins and ends texts with: the last id of a GPT-2 BPE
 * vocabulary; null for a model of bytes, so that transformers assumes no GPT-2 id. */
static json_t *end_of_text(const gb_weights *w)
{
    return w->cfg.vocab_size > 256 || w->gpt2_tokens ? json_integer(w->cfg.vocab_size - 1)
                                                      : json_null();
}

static int write_hf_config(const char *path, const gb_weights *w, gb_diag *diag)
{
    const gb_model_config *c = &w->cfg;
    json_t *cfg = json_pack("{s:[s], s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:n, s:s, s:f, s:f, "
                            "s:f, s:f, s:f, s:b, s:o, s:o, s:s}",
                            "architectures", "GPT2LMHeadModel", "model_type", "gpt2",
                            "vocab_size", (json_int_t)c->vocab_size,
                            "n_positions", (json_int_t)c->block_size,
                            "n_ctx", (json_int_t)c->block_size, "n_embd", (json_int_t)c->n_embd,
                            "n_layer", (json_int_t)c->n_layer, "n_head", (json_int_t)c->n_head,
                            "n_inner", "activation_function", c->gelu_tanh ? "gelu_new" : "gelu",
                            "layer_norm_epsilon", 1e-5, "resid_pdrop", 0.0, "embd_pdrop", 0.0,
                            "attn_pdrop", 0.0, "initializer_range", 0.02,
                            "tie_word_embeddings", 1, "bos_token_id", end_of_text(w),
                            "eos_token_id", end_of_text(w), "torch_dtype", "float32");
    int rc = cfg ? json_dump_file(cfg, path, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) : -1;
    if (rc)
        gb_diag_add(diag, "cannot write %s: %s", path, cfg ? strerror(errno) : "out of memory");
    json_decref(cfg);
    return rc ? -1 : 0;
}

/* The file's tensors, named as GPT2LMHeadModel.save_pretrained names them; Conv1D
 * weights transposed into `scratch` (n_params floats). */
static void hf_tensors(const gb_weights *w, const layout *l, float *scratch, gb_st_out *out,
                       char (*names)[128])
{
    for (int i = 0; i < l->count; i++) {
        const gb_param_tensor *t = &l->tensors[i];
        char bare[112];
        hf_name(bare, sizeof bare, t->name);
        snprintf(names[i], sizeof names[i], "transformer.%s", bare);
        const float *src = w->params + t->offset;
        gb_st_out o = {.name = names[i], .ndim = t->rows == 1 ? 1 : 2,
                       .shape = {t->rows == 1 ? t->cols : hf_rows(w, t), t->cols}, .data = src};
        if (is_conv1d(t->name)) {
            transpose(scratch + t->offset, src, t->rows, t->cols);
            o.shape[0] = t->cols;
            o.shape[1] = t->rows;
            o.data = scratch + t->offset;
        }
        out[i] = o;
    }
}

int gb_weights_write_hf(const char *dir, const gb_weights *w, gb_diag *diag)
{
    if (!w->cfg.bias) {
        gb_diag_add(diag, "this model has no biases ([model] bias = false); Hugging Face's "
                    "GPT-2 has them in every linear layer and LayerNorm and cannot hold it");
        return -1;
    }
    if (gb_make_dirs(dir)) {
        gb_diag_add(diag, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    layout l;
    int64_t n_params;
    l.tensors = gb_model_layout(&w->cfg, &l.count, &n_params);
    float *scratch = malloc((size_t)w->n_params * sizeof *scratch);
    gb_st_out *out = calloc((size_t)l.count + 1, sizeof *out);
    char (*names)[128] = calloc((size_t)l.count + 1, sizeof *names);
    int rc = -1;
    char path[4200];
    static const char *const metadata[] = {"format", "pt"};
    if (l.tensors && scratch && out && names) {
        hf_tensors(w, &l, scratch, out, names);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        rc = gb_safetensors_write(path, out, l.count, metadata, 1, diag);
        snprintf(path, sizeof path, "%s/config.json", dir);
        rc = rc ? rc : write_hf_config(path, w, diag);
    } else {
        gb_diag_add(diag, "out of memory");
    }
    free(l.tensors);
    free(scratch);
    free(out);
    free(names);
    return rc;
}

/* ---- llm.c ---------------------------------------------------------------------------- */

/* llm.c's order: every layer's tensor of one kind, kind after kind. */
static const char *const llmc_layer_order[] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
    "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};

static const gb_param_tensor *find_tensor(const layout *l, const char *name)
{
    for (int i = 0; i < l->count; i++)
        if (strcmp(l->tensors[i].name, name) == 0)
            return &l->tensors[i];
    return NULL;
}

/* gearbox's tensors in llm.c's order into `order` (l->count entries). */
static void llmc_order(const layout *l, int64_t n_layer, const gb_param_tensor **order)
{
    int k = 0;
    order[k++] = find_tensor(l, "wte");
    order[k++] = find_tensor(l, "wpe");
    for (size_t kind = 0; kind < sizeof llmc_layer_order / sizeof llmc_layer_order[0]; kind++)
        for (int64_t layer = 0; layer < n_layer; layer++) {
            char name[64];
            snprintf(name, sizeof name, "h.%lld.%s", (long long)layer, llmc_layer_order[kind]);
            order[k++] = find_tensor(l, name);
        }
    order[k++] = find_tensor(l, "ln_f.weight");
    order[k++] = find_tensor(l, "ln_f.bias");
}

/* llm.c's files other than a model's, by the magic number each starts with. */
static const struct {
    int32_t magic;
    const char *what;
} llmc_others[] = {
    {20240327, "llm.c's debug state (gpt2_124M_debug_state.bin: inputs, logits, gradients)"},
    {20240328, "llm.c's tokenizer (gpt2_tokenizer.bin)"},
    {20240520, "llm.c's token data (a shard of dev/data: ids, no weights)"},
    {20240801, "llm.c's LLaMA 3 token data"},
};

/* The first n bytes of the file at path into buf: 1, or 0 when it has fewer or cannot
 * be read. */
static int read_head(const char *path, void *buf, size_t n)
{
    /* mapped, not opened with fopen: a named pipe is refused rather than waited on */
    const unsigned char *data;
    size_t size;
    const char *why;
    int read = gb_map_regular_file(path, &data, &size, &why) == 0 && size >= n;
    if (read)
        memcpy(buf, data, n);
    gb_unmap_file(data, size);
    return read;
}

int gb_weights_is_checkpoint(const char *path)
{
    char head[sizeof GB_CHECKPOINT_MAGIC - 1];
    return read_head(path, head, sizeof head) &&
           memcmp(head, GB_CHECKPOINT_MAGIC, sizeof head) == 0;
}

int gb_weights_llmc_kind(const char *path, const char **other)
{
    int32_t magic = 0;
    int read = read_head(path, &magic, sizeof magic);
    for (size_t i = 0; read && other && i < sizeof llmc_others / sizeof llmc_others[0]; i++)
        if (magic == llmc_others[i].magic) {
            *other = llmc_others[i].what;
            return -1;
        }
    return read && magic == LLMC_MAGIC;
}

int gb_weights_is_llmc(const char *path)
{
    return gb_weights_llmc_kind(path, NULL) == 1;
}

/* The shape of llm.c's header. 0, or -1 with diag. */
static int llmc_shape(const int32_t *h, const char *path, gb_model_config *cfg, gb_diag *diag)
{
    if (h[0] != LLMC_MAGIC) {
        gb_diag_add(diag, "%s: magic %d: not llm.c's model file (magic %d): give llm.c's "
                    "gpt2_124M.bin as its train_gpt2.py writes it",
                    path, h[0], LLMC_MAGIC);
        return -1;
    }
    if (h[1] != 3 && h[1] != 5) {
        gb_diag_add(diag, "%s: llm.c model file of version %d; gearbox reads version 3 (f32, "
                    "gpt2_124M.bin) and 5 (bf16, gpt2_124M_bf16.bin): write it again with "
                    "llm.c's train_gpt2.py", path, h[1]);
        return -1;
    }
    for (int i = 2; i <= 7; i++)
        if (h[i] < 1 || h[i] > (1 << 20)) {
            gb_diag_add(diag, "%s: header int %d is %d; llm.c's maxT, V, L, NH, C and Vp must "
                        "be 1 to 1048576", path, i, h[i]);
            return -1;
        }
    *cfg = (gb_model_config){.n_layer = h[4], .n_head = h[5], .n_embd = h[6],
                             .block_size = h[2], .vocab_size = h[3], .bias = 1,
                             .padded_vocab_size = h[7], .gelu_tanh = 1};
    if (h[6] % h[5]) {
        gb_diag_add(diag, "%s: header: the width C %d is not a multiple of the head count NH "
                    "%d, as every head must be as wide; the file is damaged or not GPT-2's",
                    path, h[6], h[5]);
        return -1;
    }
    if (h[7] < h[3]) {
        gb_diag_add(diag, "%s: header: the padded vocabulary Vp %d is below the vocabulary V "
                    "%d, which it holds; the file is damaged or not GPT-2's", path, h[7], h[3]);
        return -1;
    }
    return 0;
}

/* The parameters after the header, in llm.c's order, widened from bf16 in version 5. */
static void llmc_unpack(gb_weights *w, const layout *l, const unsigned char *body, int bf16)
{
    const gb_param_tensor **order = malloc((size_t)l->count * sizeof *order);
    if (!order)
        return;
    llmc_order(l, w->cfg.n_layer, order);
    int64_t at = 0;   /* elements of the file before the tensor */
    for (int i = 0; i < l->count; i++) {
        float *dst = w->params + order[i]->offset;
        for (int64_t j = 0; j < order[i]->numel; j++) {
            uint16_t h;
            if (bf16) {
                memcpy(&h, body + 2 * (at + j), 2);
                dst[j] = gb_f32_from_bf16(h);
            } else {
                memcpy(&dst[j], body + 4 * (at + j), 4);
            }
        }
        at += order[i]->numel;
    }
    free(order);
}

int gb_weights_read_llmc(const char *path, gb_weights *w, gb_diag *diag)
{
    memset(w, 0, sizeof *w);
    unsigned char *data;
    size_t size;
    if (gb_read_file_or_say(path, &data, &size, diag))
        return -1;
    int32_t h[LLMC_HEADER_INTS] = {0};
    memcpy(h, data, size < sizeof h ? size : sizeof h);
    layout l = {0};
    int cut_short = size < sizeof h && h[0] == LLMC_MAGIC;   /* else the magic is wrong */
    int rc = cut_short ? -1 : llmc_shape(h, path, &w->cfg, diag);
    if (cut_short)
        gb_diag_add(diag, "%s: shorter than llm.c's 1024-byte header: the file is cut short",
                    path);
    rc = rc ? rc : make_layout(w, &l, diag);
    size_t elem = h[1] == 5 ? 2 : 4;
    if (!rc && (size - sizeof h) / elem != (size_t)w->n_params) {
        gb_diag_add(diag, "%s: %zu bytes of parameters, the header's shape needs %lld %s values",
                    path, size - sizeof h, (long long)w->n_params, elem == 2 ? "bf16" : "f32");
        rc = -1;
    }
    if (!rc)
        llmc_unpack(w, &l, data + sizeof h, elem == 2);
    free(l.tensors);
    free(data);
    if (rc)
        gb_weights_free(w);
    return rc;
}

int gb_weights_write_llmc(const char *path, const gb_weights *w, gb_diag *diag)
{
    const gb_model_config *c = &w->cfg;
    if (!c->bias || !c->gelu_tanh) {
        gb_diag_add(diag, "llm.c's GPT-2 has biases and GELU's tanh form; this model has %s",
                    !c->bias ? "[model] bias = false" : "[model] gelu = erf");
        return -1;
    }
    layout l;
    int64_t n_params;
    l.tensors = gb_model_layout(c, &l.count, &n_params);
    const gb_param_tensor **order = malloc((size_t)l.count * sizeof *order + 1);
    FILE *f = l.tensors && order ? fopen(path, "wb") : NULL;
    if (!f) {
        gb_diag_add(diag, "cannot write %s: %s", path, order ? strerror(errno) : "out of memory");
        free(l.tensors);
        free(order);
        return -1;
    }
    int32_t h[LLMC_HEADER_INTS] = {LLMC_MAGIC, 3, (int32_t)c->block_size,
                                   (int32_t)c->vocab_size, (int32_t)c->n_layer,
                                   (int32_t)c->n_head, (int32_t)c->n_embd,
                                   (int32_t)gb_model_table_rows(c)};
    llmc_order(&l, c->n_layer, order);
    int failed = fwrite(h, sizeof h, 1, f) != 1;
    for (int i = 0; i < l.count && !failed; i++)
        failed = fwrite(w->params + order[i]->offset, sizeof(float), (size_t)order[i]->numel,
                        f) != (size_t)order[i]->numel;
    failed |= fclose(f) != 0;
    if (failed)
        gb_diag_add(diag, "cannot write %s: %s", path, strerror(errno));
    free(l.tensors);
    free(order);
    return failed ? -1 : 0;
}

/* ---- gearbox checkpoints -------------------------------------------------------------- */

int gb_weights_from_checkpoint(const gb_checkpoint *ck, const char *path, gb_weights *w,
                               gb_diag *diag)
{
    memset(w, 0, sizeof *w);
    gb_config *cfg = gb_config_load_string(ck->config_text, path, "/", diag);
    gb_settings *s = cfg ? gb_settings_open(cfg, diag) : NULL;
    if (!s) {
        gb_diag_add(diag, "%s: its saved configuration does not read back", path);
        gb_config_free(cfg);
        return -1;
    }
    w->cfg = gb_model_config_of(s, ck->vocab->size);
    w->gpt2_tokens = gb_settings_tokenizer(s) == GB_TOKENIZER_GPT2;
    gb_settings_close(s);
    gb_config_free(cfg);
    int count;
    free(gb_model_layout(&w->cfg, &count, &w->n_params));
    if (w->n_params != ck->n_params) {
        gb_diag_add(diag, "%s holds %lld parameters, its [model] section describes %lld", path,
                    (long long)ck->n_params, (long long)w->n_params);
        return -1;
    }
    w->params = malloc((size_t)w->n_params * sizeof *w->params);
    if (!w->params) {
        gb_diag_add(diag, "out of memory");
        return -1;
    }
    memcpy(w->params, ck->params, (size_t)w->n_params * sizeof *w->params);
    return 0;
}

/* GPT-2's byte tokens: ids 0 to 255 stand for the bytes in the order of its byte encoder
 * (the printable ones from '!', then the rest ascending). */
static void gpt2_byte_tokens(gb_vocab *vocab)
{
    int n = 0;
    for (int b = 0; b < 256; b++)
        if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)
            vocab->bytes[n++] = (unsigned char)b;
    for (int b = 0; b < 256; b++)
        if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE))
            vocab->bytes[n++] = (unsigned char)b;
    vocab->size = n;
}

/* The [model] section of the imported model, as a config file (malloc'ed). */
static char *model_config_text(const gb_model_config *c)
{
    char text[512];
    snprintf(text, sizeof text, "# written by gearbox import\n[model]\nn_layer = %lld\n"
             "n_head = %lld\nn_embd = %lld\nblock_size = %lld\nvocab_size = %lld\n"
             "padded_vocab_size = %lld\nbias = %s\ngelu = %s\n"
             "# GPT-2's ids are BPE tokens: `gearbox sample --vocab PATH` decodes them\n"
             "[data]\ntokenizer = gpt2\n", (long long)c->n_layer,
             (long long)c->n_head, (long long)c->n_embd, (long long)c->block_size,
             (long long)c->vocab_size, (long long)c->padded_vocab_size,
             c->bias ? "true" : "false", c->gelu_tanh ? "tanh" : "erf");
    return strdup(text);
}

int gb_weights_write_checkpoint(const char *path, const gb_weights *w, gb_diag *diag)
{
    static gb_vocab vocab;
    gpt2_byte_tokens(&vocab);
    if (vocab.size > w->cfg.vocab_size)
        vocab.size = (int)w->cfg.vocab_size;
    gb_checkpoint ck = {.config_text = model_config_text(&w->cfg), .vocab = &vocab,
                        .n_params = w->n_params, .params = w->params};
    if (!ck.config_text) {
        gb_diag_add(diag, "out of memory");
        return -1;
    }
    int rc = gb_checkpoint_write(path, &ck, diag);
    free(ck.config_text);
    return rc;
}
