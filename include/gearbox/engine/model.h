/* The GPT model: GPT-2's architecture as nanoGPT builds it (token and position
 * embeddings, pre-LayerNorm blocks of causal self-attention and a 4x GELU MLP, a final
 * LayerNorm, an LM head tied to the token embedding, mean cross-entropy; biases
 * optional), computed through the device and attention plugins.
 *
 * All parameters live in one flat f32 buffer and all gradients in a second one (so the
 * optimizer and the all-reduce see two flat buffers); every activation buffer for one
 * micro-batch is planned and allocated in gb_model_create, so no step allocates.
 * Forward and backward follow llm.c's layout: per-layer saved activations, one residual
 * gradient stream accumulated in place, and a few scratch buffers reused by every layer.
 */
#ifndef GB_CORE_MODEL_H
#define GB_CORE_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "gearbox/optim.h"
#include "gearbox/engine/profile.h"
#include "gearbox/engine/run.h"
#include "gearbox/engine/settings.h"

/* What backward recomputes instead of keeping from forward ([train] recompute): the
 * same kernels on the same inputs, so the results keep their bits. */
typedef enum gb_recompute {
    GB_RECOMPUTE_NONE = 0,
    GB_RECOMPUTE_NORM_GELU = 1, /* LayerNorm and GELU outputs: 6 of a block's 16 C-wide rows */
    GB_RECOMPUTE_BLOCK = 2,     /* everything but each block's input: one more forward */
} gb_recompute;

/* Kernels fused for training ([train] fuse_*): each changes only how the same math is
 * scheduled, and applies where the device can (gb_model_fusions says which did). */
typedef enum gb_fusion {
    GB_FUSE_CLASSIFIER = 1 << 0,    /* the loss gradient in training forward's loss pass */
    GB_FUSE_GELU = 1 << 1,          /* GELU and its derivative as matmul epilogues */
    GB_FUSE_BIAS_GRAD = 1 << 2,     /* bias gradients as the dW matmuls' epilogue */
    GB_FUSE_RESIDUAL_NORM = 1 << 3, /* residual add and LayerNorm in one kernel */
} gb_fusion;

typedef struct gb_model_config {
    int64_t n_layer, n_head, n_embd, block_size, vocab_size;
    int bias;
    gb_recompute recompute;
    /* Rows of the token embedding, >= vocab_size (0: vocab_size). Rows past vocab_size
     * pad the table as llm.c does; the classifier reads only the first vocab_size rows,
     * so padding is never predicted and gets no gradient. On a device with ABI 1.3's
     * cross_entropy_ld the logits' rows lie this many apart, each starting aligned. */
    int64_t padded_vocab_size;
    int gelu_tanh;          /* 1: GELU's tanh form (GPT-2's); 0: the exact erf form */
    unsigned fuse;          /* gb_fusion bits wanted */
    /* Training's drop probability ([model] dropout; 0: none), applied as nanoGPT does to
     * the embeddings' sum and to each attention projection's and MLP's output, in
     * gb_model_forward_loaded and its backward only; needs a device with ABI 1.7's
     * dropout. */
    float dropout;
} gb_model_config;

/* The model a run's settings describe; `data_vocab` is the data's vocabulary size, used
 * when the config gives none. */
gb_model_config gb_model_config_of(const gb_settings *s, int64_t data_vocab);
/* Rows of the token embedding: padded_vocab_size, or vocab_size without padding. */
int64_t gb_model_table_rows(const gb_model_config *cfg);

/* One named parameter tensor inside the flat buffer. */
typedef struct gb_param_tensor {
    char name[64];          /* nanoGPT's names without "transformer.": "h.0.attn.c_attn.weight" */
    int64_t offset, numel;  /* in elements */
    int64_t rows, cols;     /* (rows, cols) for matrices; (1, cols) for vectors */
    int decay;              /* 2-D tensors decay, 1-D ones do not */
    int role;               /* gb_param_role (optim.h): what the tensor is to the model */
    int tied_head;          /* 1: wte, which is also the LM head */
} gb_param_tensor;

/* Bytes per category, for the memory plan. */
typedef struct gb_memory_plan {
    size_t params, grads, optimizer, activations, workspace;
} gb_memory_plan;

static inline size_t gb_memory_plan_total(const gb_memory_plan *p)
{
    return p->params + p->grads + p->optimizer + p->activations + p->workspace;
}

typedef struct gb_model gb_model;

/* Plans and allocates everything for micro-batches of `batch` sequences of up to
 * block_size tokens. `train` 0 skips the gradient and optimizer buffers (sampling).
 * Returns NULL after reporting why. */
gb_model *gb_model_create(gb_runtime *rt, const gb_model_config *cfg, int64_t batch, int train);
/* The memory plan gb_model_create would make for `batch`, computed by the same code but
 * allocating nothing (the attention plugin is asked about the shapes as usual). 0, or -1
 * after reporting why (e.g. the attention plugin cannot run this batch). */
int gb_model_plan(gb_runtime *rt, const gb_model_config *cfg, int64_t batch, int train,
                  gb_memory_plan *out);
void gb_model_free(gb_model *m);

const gb_param_tensor *gb_model_tensors(const gb_model *m, int *count);
/* The tensors a model of `cfg` has, where gb_model_create would put them, without a
 * runtime (for converting weights between formats); malloc'ed, NULL when out of memory. */
gb_param_tensor *gb_model_layout(const gb_model_config *cfg, int *count, int64_t *n_params);
int64_t gb_model_num_params(const gb_model *m);
gb_memory_plan gb_model_memory(const gb_model *m);
/* One line: "memory plan: TOTAL MiB = params + grads + optimizer + activations + workspace",
 * and with [train] recompute one more saying what it saves; each line starts with
 * `prefix` ("# " keeps them comments in check's INI output). */
void gb_model_print_memory(const gb_model *m, FILE *out, const char *prefix);
/* The first of those lines for a plan alone. */
void gb_memory_plan_print(const gb_memory_plan *p, FILE *out, const char *prefix);

/* nanoGPT's initialisation from `seed`: N(0, 0.02) for weights and embeddings,
 * N(0, 0.02/sqrt(2 n_layer)) for the two residual projections, LayerNorm 1/0, biases 0. */
int gb_model_init(gb_model *m, uint64_t seed);
/* Copies all parameters from/to host memory (n_params f32). */
int gb_model_set_params(gb_model *m, const float *host);
int gb_model_get_params(gb_model *m, float *host);
int gb_model_get_grads(gb_model *m, float *host);
/* Optimizer state (device buffer of the optim plugin's state_bytes) from/to host. With
 * [optim] shard_state each rank holds a part of it (gb_model_optim_state_sharded), and
 * the host side is still the whole state, laid out as unsharded (its bytes are what
 * gb_model_optim_state_bytes says): set takes this rank's part of it; get gathers every
 * rank's part, so every rank must call it (each receives the whole state). */
size_t gb_model_optim_state_bytes(const gb_model *m);
int gb_model_optim_state_sharded(const gb_model *m);
int gb_model_set_optim_state(gb_model *m, const void *host);
int gb_model_get_optim_state(gb_model *m, void *host);

/* Forward over tokens (B, T) (host memory, T <= block_size). With targets (B, T) it also
 * computes per-token losses and, when mean_loss is not NULL, reads back their mean. */
int gb_model_forward(gb_model *m, const int32_t *tokens, const int32_t *targets, int64_t B,
                     int64_t T, float *mean_loss);
/* The device buffers forward reads its batch from: tokens and targets, (batch,
 * block_size) i32 each. A caller that queues its own copies into them on the compute
 * stream (input prefetch) then runs gb_model_forward_loaded. */
void gb_model_batch_buffers(gb_model *m, int32_t **tokens, int32_t **targets);
/* Copies a (B, T) batch of tokens and targets in host memory into the batch buffers. */
int gb_model_load_batch(gb_model *m, const int32_t *tokens, const int32_t *targets, int64_t B,
                        int64_t T);
/* gb_model_forward over the (B, T) batch with targets already queued into the batch
 * buffers, for training: reads nothing back, and where GB_FUSE_CLASSIFIER is in effect
 * also computes the loss gradient (replacing the logits) with dloss, the value the
 * gb_model_backward that follows must be given. */
int gb_model_forward_loaded(gb_model *m, int64_t B, int64_t T, float dloss);
/* The training micro-step the following gb_model_forward_loaded and gb_model_backward
 * belong to: with [model] dropout their masks are drawn from the run's seed (that of
 * gb_model_init), this number and the site, so a micro-step drops the same elements
 * whenever it is run (resume, recompute) and backward regenerates forward's masks. */
void gb_model_set_dropout_step(gb_model *m, uint64_t micro_step);
/* From now on gb_model_forward_loaded and gb_model_backward run as device graphs (ABI
 * 1.4's graph entries, which the device must have): each recorded once (after one run as
 * it is) and launched from then on, recorded again when the tokens per micro-batch or the
 * loss scale change; not while a profile is attached. Their calls take nothing that
 * changes from step to step but those two (the learning rate and step count are the
 * optimizer's, which runs outside), so a launch does what running them would. Not with a
 * grads-ready callback (data-parallel runs), which the host runs during backward, nor
 * with [model] dropout, whose masks change with every micro-step (a launch would repeat
 * the recorded one's; gearbox train refuses the pair). */
void gb_model_use_graphs(gb_model *m);
/* How many graphs were recorded and launched so far. */
void gb_model_graph_counts(const gb_model *m, int64_t *recorded, int64_t *launched);
/* Logits of the last forward pass, (B, T, V) f32, copied to host (not after
 * gb_model_forward_loaded, which may have replaced them with their gradient). */
int gb_model_get_logits(gb_model *m, float *host, int64_t B, int64_t T);
/* Zeroes the parameter gradients (start of an optimizer step). */
int gb_model_zero_grads(gb_model *m);
/* Backward of the last forward (with targets), accumulating into the parameter
 * gradients; dloss is d(final loss)/d(this micro-batch's mean loss), e.g. 1/grad_accum.
 * Under a loss-scaling precision policy the gradients come out multiplied by
 * gb_model_loss_scale(), which gb_model_update divides out again. */
int gb_model_backward(gb_model *m, float dloss);
/* Told during backward, after the kernels that finish them are queued, that the
 * gradients of the flat buffer from element `first` to the end are final for this
 * backward pass; `first` only decreases within a pass and reaches 0 at its end (the
 * layout puts ln_f last and the embeddings first, the order backward finishes them).
 * Data-parallel training starts its all-reduce buckets from here. Non-zero aborts the
 * backward pass. */
typedef int (*gb_grads_ready_fn)(void *ctx, int64_t first);
/* Sets (or with NULL clears) the callback for the following backward passes. */
void gb_model_on_grads_ready(gb_model *m, gb_grads_ready_fn fn, void *ctx);
/* Clips (when max_norm > 0) and applies one optimizer step with learning rate lr;
 * step is 1-based. With a loss scaler the scaler first learns whether any gradient is
 * inf/nan and may skip the step (*skipped = 1: parameters and optimizer state untouched)
 * and move its scale. The optimizer also writes the low-precision weight copy of
 * bf16/f16 policies. */
int gb_model_update(gb_model *m, float lr, float max_norm, int64_t step, int *skipped);
/* The precision policy's current loss scale; 1 without loss scaling. With the scaler on
 * the device this is the plugin's copy, as of the last gb_model_scaler_to_host. */
float gb_model_loss_scale(const gb_model *m);
/* Where the loss scaler runs, as a phrase: on the device (ABI 1.4: the overflow check,
 * the skip and the scale's update are queued with the step, no host round trip), or on the
 * host and why; NULL without a scaler. */
const char *gb_model_scaler_where(const gb_model *m);
/* With the scaler on the device: the precision plugin's state to the device (done at
 * creation; again after the plugin loaded a saved state), and the device's state back to
 * the plugin (before the plugin saves it; waits for the device). No-ops otherwise. */
int gb_model_scaler_to_device(gb_model *m);
int gb_model_scaler_to_host(gb_model *m);
/* The figures of a training step the host wants (the progress line, metrics, the guard
 * against non-finite values), read without stalling the device: each step copies them
 * behind its own work into host memory, and the host reads them from there.
 * gb_model_enable_figures gives room for steps of up to max_micro micro-steps (once,
 * before training); gb_model_stage_loss queues the copy of the losses of the forward
 * pass just run as micro-step `micro`; gb_model_stage_step, after gb_model_update,
 * queues the gradient norm's and closes the step. gb_model_step_figures reads the newest
 * step (`newest` 1, waiting for it: for logged figures) or the newest one the host can
 * have without waiting for queued work (`newest` 0: on a device with a queue, the step
 * before the newest). */
typedef struct gb_step_figures {
    int64_t step;       /* 1-based */
    double loss;        /* mean over micro-steps of each micro-step's mean loss */
    float grad_norm;    /* the global gradient norm before clipping */
    float loss_scale;   /* the loss scale after this step's update (1 without a scaler; a
                           scaler on the host gives its scale now, the newest step's) */
    int64_t skipped_steps;  /* updates the scaler skipped in this process (likewise) */
} gb_step_figures;
int gb_model_enable_figures(gb_model *m, int64_t max_micro);
int gb_model_stage_loss(gb_model *m, int64_t micro);
int gb_model_stage_step(gb_model *m, int64_t step, int64_t n_micro);
int gb_model_step_figures(gb_model *m, int newest, gb_step_figures *out);
/* Adds the time of every following kernel call to `profile` by phase (NULL: stop). */
void gb_model_set_profile(gb_model *m, gb_profile *profile);
/* The flat gradient buffer (n_params f32, device memory), for the all-reduce. */
float *gb_model_grads(gb_model *m);
/* The flat parameter buffer (n_params f32, device memory), for the broadcast. */
float *gb_model_params(gb_model *m);

#endif
