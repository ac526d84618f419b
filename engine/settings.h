/* The resolved settings as the engine's code reads them: the struct behind the handle of
 * gearbox/engine/settings.h, resolved in place (a runtime or trainer holds one by value),
 * and the limits its validation applies. */
#ifndef GB_CORE_SETTINGS_H
#define GB_CORE_SETTINGS_H

#include "gearbox/engine/settings.h"

#define GB_MAX_BATCH (1 << 20)   /* the largest [data] batch_size */
#define GB_MAX_ACCUMULATION (1 << 20)   /* the most micro-steps per optimizer step */
/* Evaluation indexes its batches as (step << 20) | i in 64 bits: at most 2^20 - 1
 * batches per loss estimate, and steps below 2^43. */
#define GB_MAX_EVAL_ITERS ((1 << 20) - 1)
#define GB_MAX_STEPS 0x1p43
#define GB_MAX_THREADS 1024   /* the largest [run] threads */

/* [run] cuda_graphs, in the order of its choices: auto (on where the device records graphs
 * and the step is graph-safe), true, false. */
enum { GB_GRAPHS_AUTO, GB_GRAPHS_ON, GB_GRAPHS_OFF };

typedef struct gb_settings {
    /* [run] */
    int64_t seed, steps, threads, log_every, eval_every, eval_iters, checkpoint_every;
    int threads_auto;         /* threads = auto: `threads` is the most; threads_auto.c picks */
    const char *out_dir;      /* absolute */
    const char *plugin_path;  /* ':'-separated absolute folders */
    uint64_t memory_budget;   /* bytes for batch_size = auto; 0: the device's memory */
    int allow_writable_plugins;
    int cuda_graphs;          /* [run] cuda_graphs: GB_GRAPHS_AUTO, _ON or _OFF */
    int64_t keep_last;        /* checkpoints kept besides the best; 0: all */
    /* [model] */
    int64_t n_layer, n_head, n_embd, block_size, vocab_size;  /* vocab 0: from the data */
    int bias;
    int64_t padded_vocab_size;  /* rows of wte; 0: vocab_size */
    int gelu_tanh;            /* gelu = tanh */
    double dropout;           /* training's drop probability; 0: none */
    /* [data] */
    const char *data_dir;     /* absolute */
    gb_tokenizer tokenizer;
    const char *vocab_path;   /* absolute, or NULL: [data] vocab unset */
    int64_t batch_size, gradient_accumulation_steps;
    int batch_auto;           /* batch_size = auto: 1 until gb_batch_auto chooses it */
    int64_t tokens_per_step;  /* 0: not set; else gradient_accumulation_steps follows it */
    int prefetch;             /* input prefetch (the engine's prefetch) where the device can */
    /* [train] */
    double learning_rate, min_lr, grad_clip;
    size_t bucket_bytes;      /* bucket_cap_mb in bytes: gradients per all-reduce */
    int ddp_always;           /* buckets and all-reduces in a world of one process too */
    int64_t warmup_iters, lr_decay_iters;  /* lr_decay_iters 0: = steps */
    int decay_lr;
    int recompute;            /* gb_recompute (gearbox/engine/model.h) */
    int fuse_classifier, fuse_gelu, fuse_bias_grad, fuse_residual_norm;  /* wanted fusions */
    const char *init_from;    /* absolute checkpoint path, or NULL */
    /* the `plugin` key of [device] [attn] [optim] [precision] [comm], indexed by gb_kind;
     * a name, or an absolute path (held in plugin_files) */
    const char *plugin[6];
    char *plugin_files[6];
} gb_settings;

/* Every section a config may contain. */
extern const char *const gb_known_sections[];
extern const size_t gb_n_known_sections;

/* gb_settings_open's work, into `out`. Returns the number of problems added to `diag`;
 * `out` strings are owned by cfg (paths are malloc'ed and must be released with
 * gb_settings_free). */
int gb_settings_resolve(gb_config *cfg, gb_settings *out, gb_diag *diag);
void gb_settings_free(gb_settings *s);
/* The [model] keys that shape a model, taken from `from` (a checkpoint's saved config)
 * into cfg as gb_config_inherit does, `origin` naming the checkpoint. Returns the number
 * of problems added to `diag`. */
int gb_settings_inherit_model(gb_config *cfg, const gb_config *from, const char *origin,
                              gb_diag *diag);

/* The learning rate at optimizer step `it` (0-based): linear warmup over warmup_iters,
 * then cosine decay to min_lr at lr_decay_iters, as nanoGPT's get_lr. */
double gb_settings_lr(const gb_settings *s, int64_t it);

#endif
