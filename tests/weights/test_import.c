/* GPT-2 weights in and out (tools/weights/weights.c) against the files make_fixtures.py made
 * with Hugging Face's transformers:
 * - the Hugging Face folder and llm.c's .bin give PyTorch's logits and loss through the
 *   real plugins (device/cpu with GELU's tanh form, attn/math), logits within 1e-4 of
 *   the largest (the llm.c file with its padded vocabulary, whose logits rows are the
 *   padded width apart, and again on a device without ABI 1.3's cross_entropy_ld, where
 *   they are contiguous); the same weights with activation_function "gelu" give
 *   PyTorch's logits with the erf form;
 * - the bare bf16 file (no "transformer.", mask buffers present) gives the same weights
 *   rounded to bf16;
 * - export then import is bit-exact, in both formats and through a checkpoint, and what
 *   neither format can hold is refused with the reason;
 * - config.json or tensors that do not fit are refused, naming the file and tensor.
 *
 * usage: test-import FIXTURES_DIR SCRATCH_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "model.h"
#include "runtime.h"
#include "safetensors.h"
#include "weights.h"

static int failures;
static const char *fixtures, *scratch;
/* Set: the device's vtable without cross_entropy_ld, as a device built for ABI 1.2 has
 * it (the model then keeps its logits contiguous). */
static int hide_cross_entropy_ld;
static gb_device_ops device_1_2;

static void check(int ok, const char *what, const gb_diag *diag)
{
    if (ok) {
        printf("ok   %s\n", what);
        return;
    }
    fprintf(stderr, "FAIL %s%s%s\n", what, diag && diag->count ? ": " : "",
            diag && diag->count ? diag->messages[diag->count - 1] : "");
    failures++;
}

static void fixture(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", fixtures, name);
}

static void in_scratch(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", scratch, name);
}

/* A reference tensor of reference.safetensors widened to f32 (malloc'ed). */
static float *reference(const gb_safetensors *st, const char *name, int64_t *numel)
{
    const gb_st_tensor *t = gb_safetensors_find(st, name);
    float *v = t ? malloc((size_t)t->numel * sizeof *v) : NULL;
    gb_diag diag = {0};
    if (v && gb_safetensors_to_f32(t, v, "reference.safetensors", &diag)) {
        free(v);
        v = NULL;
    }
    gb_diag_clear(&diag);
    *numel = t ? t->numel : 0;
    return v;
}

/* The model of `w` on device/cpu with attn/math, its weights loaded, for training when
 * `train`; NULL on failure. */
static gb_model *make_model(gb_runtime *rt, gb_config **cfg, const gb_weights *w, int64_t batch,
                            int train)
{
    const gb_model_config *c = &w->cfg;
    char text[1024];
    snprintf(text, sizeof text,
             "[run]\nthreads = 2\n[model]\nn_layer = %lld\nn_head = %lld\nn_embd = %lld\n"
             "block_size = %lld\nvocab_size = %lld\npadded_vocab_size = %lld\nbias = %s\n"
             "gelu = %s\n[data]\nbatch_size = %lld\n", (long long)c->n_layer,
             (long long)c->n_head, (long long)c->n_embd, (long long)c->block_size,
             (long long)c->vocab_size, (long long)c->padded_vocab_size,
             c->bias ? "true" : "false", c->gelu_tanh ? "tanh" : "erf", (long long)batch);
    gb_diag diag = {0};
    *cfg = gb_config_load_string(text, "test config", "/", &diag);
    int failed = !*cfg || gb_runtime_resolve(rt, *cfg, NULL, &diag) || gb_runtime_start(rt, &diag);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    if (failed)
        return NULL;
    if (hide_cross_entropy_ld) {
        device_1_2 = *rt->dev;
        device_1_2.cross_entropy_ld = NULL;
        rt->dev = &device_1_2;
    }
    gb_model *m = gb_model_create(rt, c, batch, train);
    if (m && gb_model_set_params(m, w->params)) {
        gb_model_free(m);
        return NULL;
    }
    return m;
}

static gb_model *run_model(gb_runtime *rt, gb_config **cfg, const gb_weights *w, int64_t batch)
{
    return make_model(rt, cfg, w, batch, 0);
}

/* The gradients of one forward and backward pass over fixed tokens (malloc'ed). */
static float *gradients(const gb_weights *w)
{
    enum { B = 2 };
    int64_t T = w->cfg.block_size, V = w->cfg.vocab_size;
    int32_t tokens[B * 32], targets[B * 32];
    for (int64_t i = 0; i < B * T && i < B * 32; i++) {
        tokens[i] = (int32_t)((i * 37) % V);
        targets[i] = (int32_t)((i * 91 + 5) % V);
    }
    gb_runtime rt = {0};
    gb_config *cfg = NULL;
    gb_model *m = T <= 32 ? make_model(&rt, &cfg, w, B, 1) : NULL;
    float *grads = malloc((size_t)w->n_params * sizeof *grads);
    if (!m || !grads || gb_model_zero_grads(m) ||
        gb_model_forward(m, tokens, targets, B, T, NULL) || gb_model_backward(m, 1.0f) ||
        gb_model_get_grads(m, grads)) {
        free(grads);
        grads = NULL;
    }
    gb_model_free(m);
    gb_runtime_free(&rt);
    gb_config_free(cfg);
    return grads;
}

/* The padded model's gradients are the unpadded one's, the padding rows' zero: the
 * classifier reads only the real rows, and backward through the padded logits' rows. */
static void check_padded_gradients(const gb_weights *hf, const gb_weights *llmc)
{
    float *dense = gradients(hf), *padded = gradients(llmc);
    int64_t real = hf->cfg.vocab_size * hf->cfg.n_embd, pad = llmc->n_params - hf->n_params;
    double worst = dense && padded ? 0.0 : INFINITY;
    int pad_zero = dense && padded;
    for (int64_t i = 0; dense && padded && i < hf->n_params; i++) {
        int64_t j = i < real ? i : i + pad;   /* wte's real rows, then the same tensors */
        worst = fmax(worst, fabs((double)dense[i] - padded[j]) / (fabs(dense[i]) + 1e-6));
    }
    for (int64_t i = real; pad_zero && i < real + pad; i++)
        pad_zero = padded[i] == 0.0f;
    char line[200];
    snprintf(line, sizeof line, "backward with a padded vocabulary: the unpadded gradients "
             "(max rel diff %.3g), zero on the padding rows", worst);
    check(worst <= 1e-5 && pad_zero, line, NULL);
    free(dense);
    free(padded);
}

/* The imported weights' logits and loss against PyTorch's on the reference tokens. */
static void compare_logits(const char *what, const gb_weights *w, const char *reference_file)
{
    char path[4096], line[256];
    fixture(path, sizeof path, reference_file);
    gb_diag diag = {0};
    gb_safetensors *ref = gb_safetensors_read(path, &diag);
    int64_t n_tokens = 0, n_logits = 0, n_loss = 0, n_targets = 0;
    float *tok = ref ? reference(ref, "tokens", &n_tokens) : NULL;
    float *tgt = ref ? reference(ref, "targets", &n_targets) : NULL;
    float *want = ref ? reference(ref, "logits", &n_logits) : NULL;
    float *want_loss = ref ? reference(ref, "loss", &n_loss) : NULL;
    int64_t T = w->cfg.block_size, B = n_tokens / T;
    int32_t *tokens = malloc((size_t)n_tokens * sizeof *tokens);
    int32_t *targets = malloc((size_t)n_tokens * sizeof *targets);
    float *got = malloc((size_t)n_logits * sizeof *got);
    gb_runtime rt = {0};
    gb_config *cfg = NULL;
    gb_model *m = tok && tgt && want && want_loss && tokens && targets && got
                      ? run_model(&rt, &cfg, w, B) : NULL;
    float loss = NAN;
    double max_diff = INFINITY, scale = 0.0;
    for (int64_t i = 0; m && i < n_tokens; i++) {
        tokens[i] = (int32_t)tok[i];
        targets[i] = (int32_t)tgt[i];
    }
    if (m && n_logits == n_tokens * w->cfg.vocab_size &&
        !gb_model_forward(m, tokens, targets, B, T, &loss) && !gb_model_get_logits(m, got, B, T)) {
        max_diff = 0.0;
        for (int64_t i = 0; i < n_logits; i++) {
            max_diff = fmax(max_diff, fabs((double)got[i] - want[i]));
            scale = fmax(scale, fabs(want[i]));
        }
    }
    snprintf(line, sizeof line, "%s: logits max abs diff %.3g (largest %.3g), loss %.6f vs "
             "PyTorch's %.6f", what, max_diff, scale, loss, want_loss ? want_loss[0] : NAN);
    check(max_diff <= 1e-4 * fmax(scale, 1.0) && want_loss &&
          fabs(loss - want_loss[0]) <= 1e-5 * fabs(want_loss[0]), line, NULL);
    gb_model_free(m);
    gb_runtime_free(&rt);
    gb_config_free(cfg);
    gb_safetensors_free(ref);
    gb_diag_clear(&diag);
    float *buffers[] = {tok, tgt, want, want_loss, got};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]);
    free(tokens);
    free(targets);
}

static int same_config(const gb_model_config *a, const gb_model_config *b)
{
    return a->n_layer == b->n_layer && a->n_head == b->n_head && a->n_embd == b->n_embd &&
           a->block_size == b->block_size && a->vocab_size == b->vocab_size &&
           a->bias == b->bias && a->padded_vocab_size == b->padded_vocab_size &&
           a->gelu_tanh == b->gelu_tanh;
}

static int same_params(const gb_weights *a, const gb_weights *b)
{
    return a->n_params == b->n_params && same_config(&a->cfg, &b->cfg) &&
           memcmp(a->params, b->params, (size_t)a->n_params * sizeof *a->params) == 0;
}

/* The bf16 file without "transformer." holds the f32 weights rounded to bf16. */
static void check_bare(const gb_weights *hf)
{
    char path[4096];
    fixture(path, sizeof path, "gpt2_tiny_bare/model.safetensors");
    gb_weights bare;
    gb_diag diag = {0};
    int ok = gb_weights_read_hf(path, 0, &bare, &diag) == 0;
    for (int64_t i = 0; ok && i < hf->n_params; i++) {
        uint32_t bits;
        memcpy(&bits, &hf->params[i], 4);
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u; /* round to nearest even */
        float rounded;
        memcpy(&rounded, &bits, 4);
        ok = bare.params[i] == rounded;
    }
    check(ok, "names without \"transformer.\", bf16, mask buffers skipped: the bf16-rounded "
          "weights", &diag);
    if (ok)
        gb_weights_free(&bare);
    gb_diag_clear(&diag);
}

/* The text of a file in scratch (malloc'ed), or NULL. */
static char *scratch_text(const char *name)
{
    char path[4096];
    in_scratch(path, sizeof path, name);
    unsigned char *text = NULL;
    size_t size;
    const char *why;
    return gb_read_regular_file(path, &text, &size, &why) ? NULL : (char *)text;
}

static void check_round_trips(const gb_weights *hf, const gb_weights *llmc)
{
    char path[4096];
    gb_diag diag = {0};
    gb_weights back = {0};
    in_scratch(path, sizeof path, "exported_hf");
    int ok = !gb_weights_write_hf(path, hf, &diag) && !gb_weights_read_hf(path, 0, &back, &diag) &&
             same_params(hf, &back);
    char *config = scratch_text("exported_hf/config.json");
    check(ok && config && strstr(config, "\"activation_function\": \"gelu_new\""),
          "export to Hugging Face and import again: bit-exact, gelu_new", &diag);
    free(config);
    gb_weights_free(&back);
    in_scratch(path, sizeof path, "exported.bin");
    ok = !gb_weights_write_llmc(path, llmc, &diag) && !gb_weights_read_llmc(path, &back, &diag) &&
         same_params(llmc, &back);
    check(ok, "export to llm.c and import again: bit-exact, padding kept", &diag);
    gb_weights_free(&back);
    in_scratch(path, sizeof path, "imported.gbk");
    gb_checkpoint ck = {0};
    ok = !gb_weights_write_checkpoint(path, llmc, &diag) && !gb_checkpoint_read(path, &ck, &diag) &&
         !gb_weights_from_checkpoint(&ck, path, &back, &diag) && same_params(llmc, &back) &&
         ck.step == 0 && ck.optim_bytes == 0;
    check(ok, "a checkpoint of the imported weights reads back bit-exact at step 0", &diag);
    gb_checkpoint_free(&ck);
    gb_weights_free(&back);
    gb_diag_clear(&diag);
}

/* What the formats cannot hold is refused, with the reason. */
static void check_export_refusals(const gb_weights *hf)
{
    char path[4096];
    gb_diag diag = {0};
    gb_weights w = *hf;
    w.cfg.gelu_tanh = 0;
    in_scratch(path, sizeof path, "exported_erf");
    char *config = NULL;
    int ok = !gb_weights_write_hf(path, &w, &diag) &&
             (config = scratch_text("exported_erf/config.json")) &&
             strstr(config, "\"activation_function\": \"gelu\",");
    check(ok, "the erf GELU exports as activation_function gelu", &diag);
    free(config);
    in_scratch(path, sizeof path, "erf.bin");
    check(gb_weights_write_llmc(path, &w, &diag) && strstr(diag.messages[diag.count - 1],
                                                            "gelu = erf"),
          "llm.c export refuses the erf GELU", NULL);
    w.cfg.bias = 0;
    in_scratch(path, sizeof path, "no_bias");
    check(gb_weights_write_hf(path, &w, &diag) && strstr(diag.messages[diag.count - 1],
                                                          "bias = false"),
          "Hugging Face export refuses a model without biases", NULL);
    gb_diag_clear(&diag);
}

/* A folder in scratch: the exported model, its config.json with `from` replaced by `to`
 * (when given) and `extra` added as another tensor (when given). */
static void altered_copy(const char *dir, const gb_weights *hf, const char *from, const char *to,
                         const char *extra)
{
    char path[4096];
    gb_diag diag = {0};
    in_scratch(path, sizeof path, dir);
    gb_weights_write_hf(path, hf, &diag);
    char *config = scratch_text("exported_hf/config.json");
    char *hit = config && from ? strstr(config, from) : NULL;
    snprintf(path, sizeof path, "%s/%s/config.json", scratch, dir);
    FILE *f = fopen(path, "w");
    if (f && config) {
        fprintf(f, "%.*s%s%s", hit ? (int)(hit - config) : (int)strlen(config), config,
                hit ? to : "", hit ? hit + strlen(from) : "");
        fclose(f);
    }
    free(config);
    if (extra) {
        float one = 1.0f;
        gb_st_out t = {extra, 1, {1}, &one};
        static const char *const meta[] = {"format", "pt"};
        snprintf(path, sizeof path, "%s/%s/model.safetensors", scratch, dir);
        gb_safetensors *st = gb_safetensors_read(path, &diag);
        gb_st_out *all = calloc((size_t)st->count + 1, sizeof *all);
        for (int i = 0; i < st->count; i++) {
            all[i] = (gb_st_out){st->tensors[i].name, st->tensors[i].ndim, {0},
                                 (const float *)st->tensors[i].data};
            memcpy(all[i].shape, st->tensors[i].shape, sizeof all[i].shape);
        }
        all[st->count] = t;
        gb_safetensors_write(path, all, st->count + 1, meta, 1, &diag);
        free(all);
        gb_safetensors_free(st);
    }
    gb_diag_clear(&diag);
}

static void expect_refusal(const char *dir, const char *message, const char *what)
{
    char path[4096];
    in_scratch(path, sizeof path, dir);
    gb_weights w;
    gb_diag diag = {0};
    int refused = gb_weights_read_hf(path, 0, &w, &diag) != 0;
    const char *said = diag.count ? diag.messages[0] : "";
    char line[600];
    snprintf(line, sizeof line, "%s (%s)", what, said);
    check(refused && strstr(said, message), line, NULL);
    if (!refused)
        gb_weights_free(&w);
    gb_diag_clear(&diag);
}

static void check_import_refusals(const gb_weights *hf)
{
    altered_copy("more_layers", hf, "\"n_layer\": 2", "\"n_layer\": 3", NULL);
    expect_refusal("more_layers", "no tensor h.2.ln_1.weight", "a tensor config.json needs "
                   "is missing");
    altered_copy("wider", hf, "\"n_embd\": 64", "\"n_embd\": 32", NULL);
    expect_refusal("wider", "has shape [200, 64], config.json's model needs [200, 32]",
                   "a tensor of another shape");
    altered_copy("relu", hf, "\"gelu_new\"", "\"relu\"", NULL);
    expect_refusal("relu", "\"activation_function\": \"relu\"", "an activation gearbox lacks");
    altered_copy("extra", hf, NULL, NULL, "transformer.h.0.mlp.gate.weight");
    expect_refusal("extra", "tensor transformer.h.0.mlp.gate.weight is not part of GPT-2",
                   "a tensor GPT-2 does not have");
    expect_refusal("nowhere", "nowhere: No such file", "a path that is not there");
    altered_copy("no_config", hf, NULL, NULL, NULL);
    char path[4096];
    in_scratch(path, sizeof path, "no_config/config.json");
    remove(path);
    expect_refusal("no_config", "config.json: No such file", "a folder without config.json");
}

/* A device without GELU's tanh kernels (optional in ABI 1.2) makes no tanh model, and
 * says so naming the key and the plugin: device/cpu's vtable with those entries NULL. */
static void check_tanh_refusal(const gb_weights *hf)
{
    gb_runtime rt = {0};
    gb_config *cfg = NULL;
    gb_model *m = run_model(&rt, &cfg, hf, 1);
    char log[4096], line[700];
    in_scratch(log, sizeof log, "refusal.txt");
    gb_device_ops without_tanh = *rt.dev;
    without_tanh.gelu_tanh_forward = NULL;
    without_tanh.gelu_tanh_backward = NULL;
    rt.dev = &without_tanh;
    FILE *saved = fdopen(dup(fileno(stderr)), "w");
    gb_model *refused = freopen(log, "w", stderr) ? gb_model_create(&rt, &hf->cfg, 1, 0) : NULL;
    fflush(stderr);
    dup2(fileno(saved), fileno(stderr));
    fclose(saved);
    char *said = scratch_text("refusal.txt");
    snprintf(line, sizeof line, "a device without the tanh kernels refuses gelu = tanh (%.500s)",
             said ? said : "");
    check(m && !refused && said && strstr(said, "[model] gelu = tanh: [device] plugin = cpu"),
          line, NULL);
    free(said);
    gb_model_free(refused);
    gb_model_free(m);
    gb_runtime_free(&rt);
    gb_config_free(cfg);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s FIXTURES_DIR SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    fixtures = argv[1];
    scratch = argv[2];
    char path[4096];
    gb_weights hf, llmc;
    gb_diag diag = {0};
    fixture(path, sizeof path, "gpt2_tiny");
    int have_hf = gb_weights_read_hf(path, 0, &hf, &diag) == 0;
    check(have_hf, "import the Hugging Face folder", &diag);
    fixture(path, sizeof path, "gpt2_tiny_llmc.bin");
    int have_llmc = gb_weights_is_llmc(path) && gb_weights_read_llmc(path, &llmc, &diag) == 0;
    check(have_llmc && llmc.cfg.padded_vocab_size == 256 && llmc.cfg.gelu_tanh,
          "import llm.c's .bin (Vp 256, tanh)", &diag);
    gb_diag_clear(&diag);
    if (!have_hf || !have_llmc)
        return 1;
    compare_logits("Hugging Face's safetensors", &hf, "reference.safetensors");
    compare_logits("llm.c's .bin, vocabulary padded to 256", &llmc, "reference.safetensors");
    hide_cross_entropy_ld = 1;
    compare_logits("the same on a device without cross_entropy_ld (ABI 1.2)", &llmc,
                   "reference.safetensors");
    hide_cross_entropy_ld = 0;
    gb_weights erf;
    fixture(path, sizeof path, "gpt2_tiny_erf");
    check(gb_weights_read_hf(path, 0, &erf, &diag) == 0 && !erf.cfg.gelu_tanh,
          "import activation_function gelu as GELU's erf form", &diag);
    if (erf.params) {
        compare_logits("the same weights with GELU's erf form", &erf, "reference_erf.safetensors");
        gb_weights_free(&erf);
    }
    check_padded_gradients(&hf, &llmc);
    check_bare(&hf);
    check_round_trips(&hf, &llmc);
    check_export_refusals(&hf);
    check_import_refusals(&hf);
    check_tanh_refusal(&hf);
    gb_weights_free(&hf);
    gb_weights_free(&llmc);
    return failures ? 1 : 0;
}
