/* The core's configuration schema and its resolution; see settings.h.
 * Names follow nanoGPT's train.py where one exists, so recipes carry over. */
#include "settings.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader.h"
#include "text.h"

const char *const gb_known_sections[] = {"run", "model", "data", "train", "device",
                                         "attn", "optim", "precision", "comm"};
const size_t gb_n_known_sections = sizeof gb_known_sections / sizeof gb_known_sections[0];

#define BIG 1e15

enum { RUN_SEED, RUN_STEPS, RUN_OUT_DIR, RUN_THREADS, RUN_LOG_EVERY, RUN_EVAL_EVERY,
       RUN_EVAL_ITERS, RUN_CHECKPOINT_EVERY, RUN_PLUGIN_PATH, RUN_MEMORY_BUDGET,
       RUN_ALLOW_WRITABLE_PLUGINS, RUN_CUDA_GRAPHS, RUN_KEEP_LAST };
static const gb_option run_options[] = {
    [RUN_SEED] = {"seed", GB_OPT_INT, "1337", 0, BIG, NULL,
                  "fixes initialisation and the order of batches"},
    [RUN_STEPS] = {"steps", GB_OPT_INT, "2000", 1, GB_MAX_STEPS, NULL,
                   "optimizer steps to train"},
    [RUN_OUT_DIR] = {"out_dir", GB_OPT_STRING, "out", 0, 0, NULL,
                     "folder for metrics.jsonl and checkpoints (relative to the config file)"},
    [RUN_THREADS] = {"threads", GB_OPT_INT, "auto", 0, GB_MAX_THREADS, NULL,
                     "CPU threads for the one OpenMP pool: auto (the default) runs all "
                     "online CPUs, or fewer while fewer step faster (other processes "
                     "busy on the machine), measured at the start and now and then; a "
                     "number fixes the pool; 0 is every online CPU, fixed. Both share "
                     "the CPUs among the processes a launcher starts on this machine, "
                     "and a data-parallel run keeps its share fixed"},
    [RUN_LOG_EVERY] = {"log_every", GB_OPT_INT, "10", 1, BIG, NULL,
                       "print a progress line and record metrics every N steps"},
    [RUN_EVAL_EVERY] = {"eval_every", GB_OPT_INT, "250", 0, BIG, NULL,
                        "estimate train and val loss every N steps (0: only at the end)"},
    [RUN_EVAL_ITERS] = {"eval_iters", GB_OPT_INT, "20", 1, GB_MAX_EVAL_ITERS, NULL,
                        "batches averaged per loss estimate"},
    [RUN_CHECKPOINT_EVERY] = {"checkpoint_every", GB_OPT_INT, "0", 0, BIG, NULL,
                              "write a checkpoint every N steps (0: only at the end)"},
    [RUN_PLUGIN_PATH] = {"plugin_path", GB_OPT_STRING, "", 0, 0, NULL,
                         "extra ':'-separated plugin folders, searched after --plugin-path "
                         "and GEARBOX_PLUGIN_PATH (relative to the config file)"},
    [RUN_MEMORY_BUDGET] = {"memory_budget", GB_OPT_STRING, "0", 0, 0, NULL,
                           "memory for batch_size = auto: bytes, or with a suffix as in "
                           "512MiB, 1.5GiB, 800MB (0: 95% of the device's free memory; not "
                           "on cpu)"},
    [RUN_ALLOW_WRITABLE_PLUGINS] = {"allow_writable_plugins", GB_OPT_BOOL, "false", 0, 0, NULL,
                                    "load plugin files and folders that others than their "
                                    "owner may write (refused by default)"},
    [RUN_CUDA_GRAPHS] = {"cuda_graphs", GB_OPT_ENUM, "auto", 0, 0, "auto|true|false",
                         "record each micro-step's forward and backward once as CUDA graphs "
                         "and launch them from then on (a device with graphs, ABI 1.4: cuda; "
                         "not with data-parallel runs or dropout); auto: on where the run "
                         "allows them and the emulated suite checks them, the plan says why "
                         "not elsewhere"},
    [RUN_KEEP_LAST] = {"keep_last", GB_OPT_INT, "0", 0, BIG, NULL,
                       "after each checkpoint, delete out_dir's older ones but the newest N and "
                       "the one with the best val loss (0: keep all)"},
};

enum { MODEL_N_LAYER, MODEL_N_HEAD, MODEL_N_EMBD, MODEL_BLOCK_SIZE, MODEL_VOCAB_SIZE,
       MODEL_BIAS, MODEL_PADDED_VOCAB_SIZE, MODEL_GELU, MODEL_DROPOUT };
static const gb_option model_options[] = {
    [MODEL_N_LAYER] = {"n_layer", GB_OPT_INT, "4", 1, 1024, NULL, "transformer blocks"},
    [MODEL_N_HEAD] = {"n_head", GB_OPT_INT, "4", 1, 1024, NULL, "attention heads per block"},
    [MODEL_N_EMBD] = {"n_embd", GB_OPT_INT, "128", 1, 65536, NULL,
                      "embedding width; a multiple of n_head"},
    [MODEL_BLOCK_SIZE] = {"block_size", GB_OPT_INT, "64", 1, 1 << 20, NULL,
                          "context length in tokens"},
    [MODEL_VOCAB_SIZE] = {"vocab_size", GB_OPT_INT, "0", 0, 1 << 20, NULL,
                          "vocabulary size (0: the data's: its vocab.txt, or the GPT-2 "
                          "tokenizer's)"},
    [MODEL_BIAS] = {"bias", GB_OPT_BOOL, "false", 0, 0, NULL,
                    "biases in linear layers and LayerNorms (nanoGPT's default: false)"},
    [MODEL_PADDED_VOCAB_SIZE] = {"padded_vocab_size", GB_OPT_INT, "0", 0, 1 << 20, NULL,
                                 "rows of the token embedding, vocab_size rounded up for "
                                 "faster matmuls (llm.c: GPT-2's 50257 to 50304); the extra "
                                 "rows are never predicted (0: vocab_size)"},
    [MODEL_GELU] = {"gelu", GB_OPT_ENUM, "erf", 0, 0, "erf|tanh",
                    "GELU's form: erf, exact (PyTorch's F.gelu, nanoGPT); tanh, GPT-2's "
                    "approximation (Hugging Face's gelu_new, llm.c)"},
    [MODEL_DROPOUT] = {"dropout", GB_OPT_FLOAT, "0", 0, 0.95, NULL,
                       "training's drop probability on the embeddings' sum and after each "
                       "attention projection and MLP, as nanoGPT (not on attention's "
                       "probabilities); off in evaluation and sampling; needs a device with "
                       "dropout (ABI 1.7: cpu, cuda)"},
};

enum { DATA_DIR, DATA_TOKENIZER, DATA_VOCAB, DATA_BATCH_SIZE, DATA_GRAD_ACCUM,
       DATA_TOKENS_PER_STEP, DATA_PREFETCH };
static const gb_option data_options[] = {
    [DATA_DIR] = {"dir", GB_OPT_STRING, "data", 0, 0, NULL,
                  "token folder: `gearbox prepare`'s (train.bin, val.bin, vocab.txt), "
                  "nanoGPT's (train.bin, val.bin) or llm.c's (*_train_*.bin, *_val_*.bin)"},
    [DATA_TOKENIZER] = {"tokenizer", GB_OPT_ENUM, "auto", 0, 0, "auto|bytes|gpt2",
                        "what the token ids stand for: bytes (the folder's vocab.txt), gpt2 "
                        "(GPT-2 BPE), or auto: bytes when the folder has a vocab.txt, else gpt2"},
    [DATA_VOCAB] = {"vocab", GB_OPT_STRING, "", 0, 0, NULL,
                    "GPT-2 vocabulary for tokenizer gpt2: a folder with encoder.json and "
                    "vocab.bpe, or a tiktoken ranks file (empty: the one `gearbox prepare` "
                    "noted in the folder, if any)"},
    [DATA_BATCH_SIZE] = {"batch_size", GB_OPT_INT, "12", 1, GB_MAX_BATCH, NULL,
                         "sequences per micro-step, or auto: the most that fit "
                         "[run] memory_budget"},
    [DATA_GRAD_ACCUM] = {"gradient_accumulation_steps", GB_OPT_INT, "1", 1, GB_MAX_ACCUMULATION,
                         NULL,
                         "micro-steps whose gradients are summed per optimizer step"},
    [DATA_TOKENS_PER_STEP] = {"tokens_per_step", GB_OPT_INT, "0", 0, BIG, NULL,
                              "tokens per optimizer step, a multiple of block_size * "
                              "batch_size; overrides gradient_accumulation_steps (0: unset)"},
    [DATA_PREFETCH] = {"prefetch", GB_OPT_BOOL, "true", 0, 0, NULL,
                       "draw the next batch into pinned memory and copy it to the device on a "
                       "stream of its own while the current micro-step computes (on devices "
                       "with streams, ABI 1.2; false: draw and copy each batch in line)"},
};
/* The [model] keys that make a model what it is: its parameters' shapes and every loss
 * (n_head changes no shape). A checkpoint's model is these; keys added for training
 * alone are not among them. */
static const int shape_keys[] = {MODEL_N_LAYER, MODEL_N_HEAD, MODEL_N_EMBD, MODEL_BLOCK_SIZE,
                                 MODEL_VOCAB_SIZE, MODEL_BIAS, MODEL_PADDED_VOCAB_SIZE,
                                 MODEL_GELU};

int gb_settings_inherit_model(gb_config *cfg, const gb_config *from, const char *origin,
                              gb_diag *diag)
{
    gb_option shape[sizeof shape_keys / sizeof shape_keys[0]];
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++)
        shape[i] = model_options[shape_keys[i]];
    return gb_config_inherit(cfg, from, "model", shape, sizeof shape / sizeof shape[0], origin,
                             diag);
}

/* `batch_size = auto` is validated against this entry in place of the numeric one. */
static const gb_option batch_size_auto = {"batch_size", GB_OPT_ENUM, "auto", 0, 0, "auto",
                                          "the most sequences that fit [run] memory_budget"};

enum { TRAIN_LR, TRAIN_MIN_LR, TRAIN_WARMUP, TRAIN_DECAY_ITERS, TRAIN_DECAY_LR, TRAIN_CLIP,
       TRAIN_BUCKET_CAP_MB, TRAIN_DDP_ALWAYS, TRAIN_RECOMPUTE, TRAIN_INIT_FROM,
       TRAIN_FUSE_CLASSIFIER, TRAIN_FUSE_GELU, TRAIN_FUSE_BIAS_GRAD, TRAIN_FUSE_RESIDUAL_NORM };
static const gb_option train_options[] = {
    [TRAIN_LR] = {"learning_rate", GB_OPT_FLOAT, "1e-3", 0, 10, NULL, "peak learning rate"},
    [TRAIN_MIN_LR] = {"min_lr", GB_OPT_FLOAT, "1e-4", 0, 10, NULL,
                      "learning rate at the end of the cosine decay"},
    [TRAIN_WARMUP] = {"warmup_iters", GB_OPT_INT, "100", 0, BIG, NULL,
                      "steps of linear warmup"},
    [TRAIN_DECAY_ITERS] = {"lr_decay_iters", GB_OPT_INT, "0", 0, BIG, NULL,
                           "step where the cosine decay reaches min_lr (0: [run] steps)"},
    [TRAIN_DECAY_LR] = {"decay_lr", GB_OPT_BOOL, "true", 0, 0, NULL,
                        "warmup + cosine decay; false: constant learning_rate"},
    [TRAIN_CLIP] = {"grad_clip", GB_OPT_FLOAT, "1.0", 0, 1e9, NULL,
                    "clip the global gradient norm to this (0: no clipping)"},
    [TRAIN_BUCKET_CAP_MB] = {"bucket_cap_mb", GB_OPT_FLOAT, "25", 0.001, 1e6, NULL,
                             "data-parallel runs: MiB of gradients per all-reduce bucket "
                             "(PyTorch DDP's bucket_cap_mb)"},
    [TRAIN_DDP_ALWAYS] = {"ddp_always", GB_OPT_BOOL, "false", 0, 0, NULL,
                          "all-reduce the gradients in buckets even in a world of one process, "
                          "as a data-parallel run does (checks the comm plugin and its overlap "
                          "on one device, at the cost of the all-reduces)"},
    [TRAIN_RECOMPUTE] = {"recompute", GB_OPT_ENUM, "none", 0, 0, "none|norm_gelu|block",
                         "activations recomputed in backward instead of kept: none; norm_gelu "
                         "(LayerNorm and GELU outputs); block (all but each block's input)"},
    [TRAIN_INIT_FROM] = {"init_from", GB_OPT_STRING, "", 0, 0, NULL,
                         "a checkpoint (e.g. from `gearbox import`) whose weights start the "
                         "run at step 0 with a fresh optimizer (relative to the config "
                         "file; empty: random initialisation)"},
    [TRAIN_FUSE_CLASSIFIER] = {"fuse_classifier", GB_OPT_BOOL, "true", 0, 0, NULL,
                               "training forward writes the loss gradient over the logits in "
                               "the pass that computes the loss (llm.c's fused classifier); "
                               "false: backward reads the logits a second time"},
    [TRAIN_FUSE_GELU] = {"fuse_gelu", GB_OPT_BOOL, "true", 0, 0, NULL,
                         "GELU and its derivative in the MLP matmuls' epilogues, where the "
                         "device has epilogues (cuda) and recompute is not norm_gelu; false: "
                         "GELU kernels of their own"},
    [TRAIN_FUSE_BIAS_GRAD] = {"fuse_bias_grad", GB_OPT_BOOL, "true", 0, 0, NULL,
                              "bias gradients in the weight-gradient matmuls' epilogues, where "
                              "the device has epilogues (cuda); false: a bias_backward kernel"},
    [TRAIN_FUSE_RESIDUAL_NORM] = {"fuse_residual_norm", GB_OPT_BOOL, "true", 0, 0, NULL,
                                  "each residual add and the LayerNorm after it in one kernel, "
                                  "where the device has add_layernorm_forward (ABI 1.5: cuda); "
                                  "false: an add kernel, then LayerNorm"},
};

/* Processes of this job on this machine, as the launcher (mpirun, torchrun) states it. */
static long local_processes(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        long n = v ? strtol(v, NULL, 10) : 0;
        if (n > 0)
            return n;
    }
    return 1;
}

/* threads = 0: the online CPUs shared out among this machine's processes of the job, so
 * ranks started side by side do not oversubscribe the cores. */
static int64_t default_threads(void)
{
    long share = sysconf(_SC_NPROCESSORS_ONLN) / local_processes();
    return share > 0 ? share : 1;
}

static const char *const default_plugins[] = {NULL, "cpu", "math", "adamw", "fp32", "single"};
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Each kind's plugin; one named by path (it holds a '/') is made absolute: relative to
 * the config file when written there, to the working directory when given with --set. */
static int resolve_plugin_names(gb_config *cfg, gb_settings *s, gb_diag *diag)
{
    for (int k = GB_KIND_DEVICE; k <= GB_KIND_COMM; k++) {
        const char *section = gb_kind_name((gb_kind)k);
        const char *name = gb_config_get(cfg, section, "plugin");
        s->plugin[k] = (name && *name) ? name : default_plugins[k];
        if (!strchr(s->plugin[k], '/'))
            continue;
        s->plugin_files[k] = gb_config_resolve_path(cfg, section, "plugin", s->plugin[k]);
        if (!s->plugin_files[k]) {
            gb_diag_add(diag, "out of memory");
            return 1;
        }
        s->plugin[k] = s->plugin_files[k];
    }
    return 0;
}

/* Records `absolute`, the value `given` of [section] key made absolute, as the key's
 * effective value; 1 after reporting it too long for a config line. */
static int record_absolute(gb_config *cfg, const char *section, const char *key,
                           const char *given, const char *absolute, const char *shorter,
                           gb_diag *diag)
{
    if (gb_config_set_effective(cfg, section, key, absolute) == 0)
        return 0;
    gb_diag_add(diag, "[%s] %s = %s: made absolute it is %zu characters long, more than a "
                "config line (and so the config a checkpoint saves) may hold; use %s",
                section, key, given, strlen(absolute), shorter);
    return 1;
}

/* [run] plugin_path with each relative folder made absolute as for any path key (':'
 * separates folders; blanks around them and empty pieces are dropped). The effective
 * config records the result, so a checkpoint's saved config finds the same folders
 * wherever it is read. */
static int resolve_plugin_path(gb_config *cfg, gb_settings *s, const char *path, gb_diag *diag)
{
    char *joined = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&joined, &len);
    const char *separator = "";
    for (const char *piece = path; out && *piece;) {
        size_t n = strcspn(piece, ":"), len = n;
        const char *name = piece;
        gb_trim_blanks(&name, &len);   /* as a value read back loses its outer blanks */
        char *folder = len ? strndup(name, len) : NULL;
        char *absolute = folder ? gb_config_resolve_path(cfg, "run", "plugin_path", folder) : NULL;
        if (absolute) {
            fprintf(out, "%s%s", separator, absolute);
            separator = ":";
        }
        free(folder);
        free(absolute);
        piece += n + (piece[n] == ':');
    }
    if (!out || fclose(out) != 0 || !joined) {
        free(joined);
        gb_diag_add(diag, "out of memory");
        return 1;
    }
    s->plugin_path = joined;
    return record_absolute(cfg, "run", "plugin_path", path, joined, "fewer or shorter folders",
                           diag);
}

/* [data] vocab made absolute and recorded so, as [run] plugin_path, for the config a
 * checkpoint saves: `gearbox sample` then finds the vocabulary from anywhere. */
static int resolve_vocab_path(gb_config *cfg, gb_settings *s, const char *path, gb_diag *diag)
{
    char *absolute = gb_config_resolve_path(cfg, "data", "vocab", path);
    if (!absolute) {
        gb_diag_add(diag, "out of memory");
        return 1;
    }
    s->vocab_path = absolute;
    return record_absolute(cfg, "data", "vocab", path, absolute, "a shorter path", diag);
}

/* Bytes from "1073741824", "512MiB", "1.5GiB", "800MB", "2G" (binary unless the suffix
 * is KB/MB/GB/TB). -1 when malformed. */
static int parse_bytes(const char *text, uint64_t *out)
{
    static const struct {
        const char *suffix;
        double scale;
    } units[] = {{"", 1.0}, {"B", 1.0}, {"K", 0x1p10}, {"KiB", 0x1p10}, {"KB", 1e3},
                 {"M", 0x1p20}, {"MiB", 0x1p20}, {"MB", 1e6}, {"G", 0x1p30},
                 {"GiB", 0x1p30}, {"GB", 1e9}, {"T", 0x1p40}, {"TiB", 0x1p40},
                 {"TB", 1e12}};
    char *end;
    double v = strtod(text, &end);
    if (end == text || !(v >= 0.0))
        return -1;
    end += strspn(end, " ");
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].suffix) == 0 && v * units[i].scale < 0x1p63) {
            *out = (uint64_t)(v * units[i].scale);
            return 0;
        }
    return -1;
}

/* tokens_per_step fixes the sequences per optimizer step and overrides
 * gradient_accumulation_steps, which follows from the micro-batch (here, or in
 * gb_batch_auto once the batch is chosen). Overriding rather than refusing both keys
 * keeps effective configs, which list every key, loadable. */
static int resolve_tokens_per_step(gb_settings *s, gb_diag *diag)
{
    if (!s->tokens_per_step)
        return 0;
    if (s->tokens_per_step % s->block_size != 0) {
        gb_diag_add(diag, "[data] tokens_per_step = %lld is not a multiple of [model] "
                    "block_size = %lld; each micro-step trains whole sequences",
                    (long long)s->tokens_per_step, (long long)s->block_size);
        return 1;
    }
    int64_t sequences = s->tokens_per_step / s->block_size;
    if (!s->batch_auto && sequences % s->batch_size != 0) {
        gb_diag_add(diag, "[data] tokens_per_step = %lld is %lld sequences of %lld tokens, "
                    "not a multiple of batch_size = %lld", (long long)s->tokens_per_step,
                    (long long)sequences, (long long)s->block_size, (long long)s->batch_size);
        return 1;
    }
    /* batch_size = auto chooses the batch later, at most GB_MAX_BATCH */
    int64_t batch = s->batch_auto ? GB_MAX_BATCH : s->batch_size;
    int64_t accumulation = sequences / batch;
    if (accumulation > GB_MAX_ACCUMULATION) {
        gb_diag_add(diag, "[data] tokens_per_step = %lld needs %lld micro-steps of %lld "
                    "sequences of %lld tokens, more than the %d gradient accumulation allows; "
                    "lower tokens_per_step or raise batch_size", (long long)s->tokens_per_step,
                    (long long)accumulation, (long long)batch, (long long)s->block_size,
                    GB_MAX_ACCUMULATION);
        return 1;
    }
    if (!s->batch_auto)
        s->gradient_accumulation_steps = accumulation;
    return 0;
}

/* Batch indices count every micro-step of the run (step * accumulation + micro) in a
 * signed 64-bit integer, which must not overflow. */
static int check_run_length(const gb_settings *s, gb_diag *diag)
{
    double micro_steps = (double)s->steps * (double)s->gradient_accumulation_steps;
    if (micro_steps < 0x1p62)
        return 0;
    gb_diag_add(diag, "[run] steps = %lld with %lld gradient accumulation steps each makes %.3g "
                "micro-steps, more than the %.3g gearbox can count; lower [run] steps",
                (long long)s->steps, (long long)s->gradient_accumulation_steps, micro_steps,
                0x1p62);
    return 1;
}

/* Sizes are multiplied together when the model plans its buffers; a config whose
 * activations alone could not be held by any machine is refused here, before a product
 * overflows. Counts f32 values, roughly: every layer's saved activations and the
 * attention scores of the math kernel, and the logits. */
static int check_activation_size(const gb_settings *s, gb_diag *diag)
{
    double B = (double)s->batch_size, T = (double)s->block_size, C = (double)s->n_embd;
    double L = (double)s->n_layer, H = (double)s->n_head;
    double V = s->vocab_size ? (double)s->vocab_size : 65536.0; /* 0: the data's, <= 65536 */
    double values = B * T * (16.0 * C * L + V) + B * H * T * T * L;
    if (values * 4.0 < 0x1p52)
        return 0;
    gb_diag_add(diag, "[data] batch_size = %lld and [model] block_size = %lld, n_embd = %lld, "
                "n_layer = %lld, n_head = %lld need about %.3g bytes of activations, beyond any "
                "machine; lower batch_size or block_size", (long long)s->batch_size,
                (long long)s->block_size, (long long)s->n_embd, (long long)s->n_layer,
                (long long)s->n_head, values * 4.0);
    return 1;
}

static int check_consistency(gb_settings *s, gb_diag *diag)
{
    if (s->padded_vocab_size && s->padded_vocab_size < s->vocab_size) {
        gb_diag_add(diag, "[model] padded_vocab_size = %lld is smaller than vocab_size = %lld; "
                    "pad up (e.g. to a multiple of 128) or set 0", (long long)s->padded_vocab_size,
                    (long long)s->vocab_size);
        return 1;
    }
    if (s->n_embd % s->n_head != 0) {
        gb_diag_add(diag, "[model] n_embd = %lld is not a multiple of n_head = %lld; "
                    "choose n_embd = n_head * head_dim", (long long)s->n_embd,
                    (long long)s->n_head);
        return 1;
    }
    if (resolve_tokens_per_step(s, diag))
        return 1;
    return check_run_length(s, diag) + check_activation_size(s, diag);
}

/* `threads = auto` is validated against this entry in place of the numeric one; other
 * text that is no count against a string entry, and then refused by
 * gb_settings_resolve with both forms named. */
static const gb_option threads_auto = {"threads", GB_OPT_ENUM, "auto", 0, 0, "auto",
                                       "all threads, or fewer where faster, measured"};
static const gb_option threads_text = {"threads", GB_OPT_STRING, "0", 0, 0, NULL, ""};

/* The [run] schema for the config's `threads`: a count, auto (also when unset), or
 * something else. */
static void run_schema(const gb_config *cfg, gb_option *schema, int *automatic)
{
    const char *threads = gb_config_get(cfg, "run", "threads");
    memcpy(schema, run_options, sizeof run_options);
    *automatic = !threads || strcmp(threads, "auto") == 0;
    char *end = NULL;
    if (!*automatic)
        (void)strtoll(threads, &end, 10);
    if (*automatic)
        schema[RUN_THREADS] = threads_auto;
    else if (!*threads || *end)
        schema[RUN_THREADS] = threads_text;
}

/* The [data] schema, with `batch_size = auto` accepted where the config says so. */
static void data_schema(const gb_config *cfg, gb_option *schema, int *automatic)
{
    const char *batch = gb_config_get(cfg, "data", "batch_size");
    memcpy(schema, data_options, sizeof data_options);
    *automatic = batch && strcmp(batch, "auto") == 0;
    if (*automatic)
        schema[DATA_BATCH_SIZE] = batch_size_auto;
}

int gb_settings_resolve(gb_config *cfg, gb_settings *s, gb_diag *diag)
{
    memset(s, 0, sizeof *s);
    gb_value run[N(run_options)], model[N(model_options)], data[N(data_options)],
        train[N(train_options)];
    gb_option run_table[N(run_options)], data_table[N(data_options)];
    int threads_auto_set, batch_auto;
    run_schema(cfg, run_table, &threads_auto_set);
    data_schema(cfg, data_table, &batch_auto);
    int problems = gb_config_check_sections(cfg, gb_known_sections, gb_n_known_sections, diag);
    problems += gb_config_validate_section(cfg, "run", run_table, N(run_options), NULL, 0,
                                           run, diag);
    if (run_table[RUN_THREADS].type == GB_OPT_STRING) {
        gb_diag_add(diag, "[run] threads = '%s': expected a number of threads from 0 (every "
                    "online CPU) to %d, or auto (all, or fewer where faster, measured)",
                    run[RUN_THREADS].s, GB_MAX_THREADS);
        problems++;
    }
    problems += gb_config_validate_section(cfg, "model", model_options, N(model_options), NULL,
                                           0, model, diag);
    problems += gb_config_validate_section(cfg, "data", data_table, N(data_options), NULL, 0,
                                           data, diag);
    problems += gb_config_validate_section(cfg, "train", train_options, N(train_options), NULL,
                                           0, train, diag);
    if (problems)
        return problems;
    s->seed = run[RUN_SEED].i;
    s->steps = run[RUN_STEPS].i;
    s->out_dir = gb_config_resolve_path(cfg, "run", "out_dir", run[RUN_OUT_DIR].s);
    s->threads_auto = threads_auto_set;
    s->threads = !threads_auto_set && run[RUN_THREADS].i ? run[RUN_THREADS].i
                                                          : default_threads();
    s->log_every = run[RUN_LOG_EVERY].i;
    s->eval_every = run[RUN_EVAL_EVERY].i;
    s->eval_iters = run[RUN_EVAL_ITERS].i;
    s->checkpoint_every = run[RUN_CHECKPOINT_EVERY].i;
    s->keep_last = run[RUN_KEEP_LAST].i;
    problems += resolve_plugin_path(cfg, s, run[RUN_PLUGIN_PATH].s, diag);
    s->allow_writable_plugins = (int)run[RUN_ALLOW_WRITABLE_PLUGINS].i;
    s->cuda_graphs = (int)run[RUN_CUDA_GRAPHS].i;
    if (parse_bytes(run[RUN_MEMORY_BUDGET].s, &s->memory_budget)) {
        gb_diag_add(diag, "[run] memory_budget = '%s': expected bytes, e.g. 536870912, "
                    "512MiB, 1.5GiB or 800MB", run[RUN_MEMORY_BUDGET].s);
        problems++;
    }
    s->n_layer = model[MODEL_N_LAYER].i;
    s->n_head = model[MODEL_N_HEAD].i;
    s->n_embd = model[MODEL_N_EMBD].i;
    s->block_size = model[MODEL_BLOCK_SIZE].i;
    s->vocab_size = model[MODEL_VOCAB_SIZE].i;
    s->bias = (int)model[MODEL_BIAS].i;
    s->padded_vocab_size = model[MODEL_PADDED_VOCAB_SIZE].i;
    s->gelu_tanh = model[MODEL_GELU].i == 1;
    s->dropout = model[MODEL_DROPOUT].f;
    s->data_dir = gb_config_resolve_path(cfg, "data", "dir", data[DATA_DIR].s);
    s->tokenizer = (gb_tokenizer)data[DATA_TOKENIZER].i;
    if (*data[DATA_VOCAB].s)
        problems += resolve_vocab_path(cfg, s, data[DATA_VOCAB].s, diag);
    s->batch_auto = batch_auto;
    s->batch_size = batch_auto ? 1 : data[DATA_BATCH_SIZE].i;
    s->gradient_accumulation_steps = data[DATA_GRAD_ACCUM].i;
    s->tokens_per_step = data[DATA_TOKENS_PER_STEP].i;
    s->prefetch = (int)data[DATA_PREFETCH].i;
    s->learning_rate = train[TRAIN_LR].f;
    s->min_lr = train[TRAIN_MIN_LR].f;
    s->warmup_iters = train[TRAIN_WARMUP].i;
    s->lr_decay_iters = train[TRAIN_DECAY_ITERS].i ? train[TRAIN_DECAY_ITERS].i : s->steps;
    s->decay_lr = (int)train[TRAIN_DECAY_LR].i;
    s->grad_clip = train[TRAIN_CLIP].f;
    s->bucket_bytes = (size_t)(train[TRAIN_BUCKET_CAP_MB].f * 1024.0 * 1024.0);
    s->ddp_always = (int)train[TRAIN_DDP_ALWAYS].i;
    s->recompute = (int)train[TRAIN_RECOMPUTE].i;
    s->fuse_classifier = (int)train[TRAIN_FUSE_CLASSIFIER].i;
    s->fuse_gelu = (int)train[TRAIN_FUSE_GELU].i;
    s->fuse_bias_grad = (int)train[TRAIN_FUSE_BIAS_GRAD].i;
    s->fuse_residual_norm = (int)train[TRAIN_FUSE_RESIDUAL_NORM].i;
    if (*train[TRAIN_INIT_FROM].s)
        s->init_from = gb_config_resolve_path(cfg, "train", "init_from", train[TRAIN_INIT_FROM].s);
    problems += resolve_plugin_names(cfg, s, diag);
    return problems + check_consistency(s, diag);
}

void gb_settings_free(gb_settings *s)
{
    free((char *)s->out_dir);
    free((char *)s->data_dir);
    free((char *)s->plugin_path);
    free((char *)s->vocab_path);
    s->out_dir = s->data_dir = s->plugin_path = s->vocab_path = NULL;
    free((char *)s->init_from);
    s->out_dir = s->data_dir = s->plugin_path = s->init_from = NULL;
    for (int k = 0; k < 6; k++) {
        free(s->plugin_files[k]);
        s->plugin_files[k] = NULL;
    }
}

double gb_settings_lr(const gb_settings *s, int64_t it)
{
    if (!s->decay_lr)
        return s->learning_rate;
    if (it < s->warmup_iters)
        return s->learning_rate * (double)(it + 1) / (double)(s->warmup_iters + 1);
    if (it >= s->lr_decay_iters) /* also keeps the ratio below finite */
        return s->min_lr;
    double ratio = (double)(it - s->warmup_iters) / (double)(s->lr_decay_iters - s->warmup_iters);
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return s->min_lr + coeff * (s->learning_rate - s->min_lr);
}
