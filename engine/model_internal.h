/* The GPT model's private half, shared by the engine/model*.c files that implement
 * model.h, one concern each: model.c creates the model and sizes its buffers (the memory
 * plan); model_params.c lays out the parameters; model_copy.c copies them and the batch
 * between host and device and initialises them; model_forward.c, model_backward.c,
 * model_recompute.c and model_update.c are the training step's passes; model_graphs.c
 * records them as device graphs; model_scaler.c places and drives the loss scaler;
 * model_figures.c brings each step's figures to the host; model_profile.c times the
 * plugin calls. Private to the engine: not installed.
 * Shapes: B batch, T tokens, C n_embd, H heads, D = C/H, V vocab, L layers, N = B*T.
 * Activations (void *) are of the precision policy's activation dtype; parameters,
 * gradients, per-row statistics and losses are f32. */
#ifndef GB_CORE_MODEL_INTERNAL_H
#define GB_CORE_MODEL_INTERNAL_H

#include "kvcache.h"
#include "model.h"

#include "loader.h"
#include "report.h"
#include "runtime.h"
#include "shard.h"

typedef struct layer_params {
    float *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb;
    float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} layer_params;

typedef struct model_params {
    float *wte, *wpe, *lnfw, *lnfb;
    layer_params *layers;
} model_params;

typedef struct layer_acts {
    void *ln1;                         /* (N, C) */
    float *ln1_mean, *ln1_rstd;        /* (N), (N) */
    void *qkv;                         /* (N, 3C) packed as (B, T, 3, H, D) */
    void *atty;                        /* (N, C) attention output, (B, T, H, D) */
    void *attn_saved;                  /* what the attention plugin keeps for backward */
    void *res2;                        /* (N, C) residual after attention */
    void *ln2;                         /* (N, C) */
    float *ln2_mean, *ln2_rstd;        /* (N), (N) */
    void *fch, *fch_gelu;              /* (N, 4C) */
    void *res3;                        /* (N, C) residual after the MLP */
} layer_acts;

/* One training step's figures on their way to the host: each micro-step's per-token
 * losses and the squared gradient norm, copied behind the step's work into host memory
 * that the host reads once `event` completed. */
typedef struct figure_slot {
    float *losses;          /* (figures_micro, B * block_size) host */
    float *norm_sq;         /* one f32 host */
    void *scaler;           /* a gb_loss_scaler host, after the step's update (device scaler) */
    void *event;            /* recorded behind the copies; NULL on a device without events */
    int64_t step;           /* the 1-based step held; 0 while empty */
    int64_t n_micro, n_tokens;
} figure_slot;

/* A piece of the training micro-step recorded as a device graph (gb_model_use_graphs),
 * and what it was recorded for: the tokens it covers and the one scalar its calls take
 * that may change (the loss gradient's scale). */
typedef struct model_graph {
    void *graph;            /* NULL until recorded */
    int64_t n;
    float scalar;
    int variant;            /* which calls the work makes (backward: whether it has the
                               loss gradient to compute) */
    int ran;                /* the piece has run once without recording */
} model_graph;

enum { GRAPH_FORWARD, GRAPH_BACKWARD };

struct gb_model {
    gb_runtime *rt;
    void *dev;                      /* the device instance, first argument of its ops */
    gb_model_config cfg;
    int64_t B;                      /* micro-batch capacity */
    int train;
    int planning_only;              /* size every buffer but allocate none (gb_model_plan) */
    gb_dtype act;                   /* activations (and matmul inputs), from the policy */
    int32_t tf32;                   /* the policy lets f32 products round inputs to TF32 */
    size_t act_size;                /* bytes per activation element */
    uint64_t seed;                  /* the run's seed (stochastic rounding and dropout
                                       draw from it) */
    uint64_t dropout_step;          /* gb_model_set_dropout_step's micro-step */
    int dropping;                   /* the last forward dropped (training with dropout) */

    gb_param_tensor *tensors;
    int n_tensors;
    int64_t n_params;
    gb_param_group *groups;         /* host, one per tensor */
    gb_shard *shard;                /* [optim] shard_state: this rank's part; else NULL */

    float *params, *grads;          /* (n_params) each, device */
    void *params_lowp;              /* (n_params) of act: the weights the matmuls read, which
                                       the optimizer writes beside the f32 master copy;
                                       NULL when act is f32 */
    void *optim_state;              /* device */
    size_t optim_state_bytes;
    void *optim_workspace;          /* device scratch of bind_params' size, or NULL */
    float *norm_sq;                 /* device scalar */
    /* The loss scaler, when the policy has one: on the device (ABI 1.4), where the kernels
     * read its scale and its update follows each step; else the precision plugin's
     * update() on the host after reading the gradient norm back. */
    gb_loss_scaler *scaler;         /* device memory, or NULL: on the host */
    char scaler_where[240];         /* gb_model_scaler_where: on the device, or on the host
                                       and why; "" without a scaler */
    int64_t scaler_skipped_base;    /* skipped_steps the device copy started from */
    int64_t skipped_steps;          /* updates skipped in this process (host scaler) */
    model_params p, g;              /* views into params and grads */

    int32_t *tokens, *targets;      /* (B, block_size) device */
    void *encoded;                  /* (N, C) */
    layer_acts *acts;
    void *proj;                     /* (N, C) forward scratch for both projections */
    void *lnf;
    float *lnf_mean, *lnf_rstd;
    void *logits;                   /* (N, logits_ld), V columns used; becomes dlogits */
    int64_t logits_ld;              /* the padded vocabulary's rows, so each row starts
                                       aligned and the head's products run at that width,
                                       on a device with cross_entropy_ld; else V */
    float *losses;                  /* (N) */
    float *host_losses;             /* (N) host */
    void *dres, *dC, *d3C, *d4C;    /* backward scratch: (N, C), (N, C), (N, 3C), (N, 4C) */
    void *attn_workspace;
    size_t attn_saved_bytes, attn_workspace_bytes;

    figure_slot figures[2];         /* the two newest steps' figures (gb_model_step_figures) */
    int next_figures;               /* the slot the current step stages into */
    int64_t figures_micro;          /* micro-steps a slot has room for; 0: not enabled */
    float *figures_host;            /* both slots' host memory (pinned where it can be) */

    gb_profile *profile;            /* kernel times by phase, or NULL */
    int recomputing;                /* kernels now run count as GB_PHASE_RECOMPUTE */
    gb_grads_ready_fn grads_ready;  /* told as backward finishes gradients; may be NULL */
    void *grads_ready_ctx;

    int use_graphs;                 /* training forward and backward as device graphs */
    model_graph graphs[2];          /* indexed by GRAPH_FORWARD, GRAPH_BACKWARD */
    int64_t graph_recordings, graph_launches;

    gb_kv_cache *kv;                /* during gb_model_forward_cached: attention over it */
    int64_t last_B, last_T;         /* shape of the last forward */
    int last_has_targets;
    unsigned fused;                 /* the gb_fusion bits in effect (wanted and possible) */
    int dlogits_ready;              /* the last forward left dlogits in place of the logits
                                       (GB_FUSE_CLASSIFIER) ... */
    float dlogits_scale;            /* ... for this dlogit scale */

    void **allocations;
    int n_allocations;
    gb_memory_plan plan;
};

/* The activation `elems` elements into `base`. */
static inline void *at(const gb_model *m, const void *base, int64_t elems)
{
    return (char *)base + (size_t)elems * m->act_size;
}

/* The copy of master parameter `w` that matmuls read: itself in f32 runs, else the same
 * element of the low-precision copy. */
static inline const void *working(const gb_model *m, const float *w)
{
    return m->params_lowp ? at(m, m->params_lowp, w - m->params) : w;
}

/* Runs one plugin call as part of `phase`; a failure ends the function with -1. */
#define TIMED_CALL(m, phase, inst, what, call)      \
    do {                                            \
        double start_ = gb_model_phase_begin(m);    \
        GB_CALL((inst), (what), (call));            \
        gb_model_phase_end((m), (phase), start_);   \
    } while (0)

/* Dropout's sites in a micro-step: the embeddings' sum, then per layer the attention
 * projection's and the MLP's output. */
enum { DROP_EMBED = 0, DROP_ATTN = 1, DROP_MLP = 2 };
#define DROP_SITE(l, which) (1 + 2 * (uint64_t)(l) + ((which) - DROP_ATTN))

/* ---- what the model's files call of each other ---- */

/* model.c */
gb_attn_problem gb_model_attn_problem(const gb_model *m, int64_t B, int64_t T);
/* Elements of the flat parameter and gradient buffers: the parameters, padded to a
 * multiple of the ranks when the optimizer state is sharded. */
int64_t gb_model_flat_count(const gb_model *m);

/* model_params.c */
void gb_model_plan_tensors(gb_model *m);
void gb_model_bind_views(gb_model *m, float *base, model_params *v);

/* model_scaler.c */
int gb_model_place_scaler(gb_model *m);
int gb_model_consult_scaler(gb_model *m, int *skip);

/* model_figures.c */
void gb_model_release_figures(gb_model *m);

/* model_profile.c */
double gb_model_phase_begin(gb_model *m);
void gb_model_phase_end(gb_model *m, gb_phase phase, double start);
void gb_model_count_flops(gb_model *m, gb_phase phase, double flops);
double gb_model_matmul_flops(const gb_matmul_args *a);
double gb_model_causal_product_flops(const gb_attn_problem *p);

/* model_copy.c */
int gb_model_copy_to_device(gb_model *m, void *dst, const void *src, size_t bytes);
int gb_model_copy_to_host(gb_model *m, void *dst, const void *src, size_t bytes);

/* model_forward.c */
gb_status gb_model_scaled_cross_entropy(gb_model *m, int64_t N, float dloss);
gb_tensor gb_model_heads_view(const gb_model *m, void *base, int64_t B, int64_t T,
                              int packed);
int gb_model_dropout(gb_model *m, gb_phase phase, void *out, const void *in, int64_t n,
                     uint64_t site);
int gb_model_layernorm_forward(gb_model *m, void *out, float *mean, float *rstd,
                               const void *x, const float *w, const float *b, int64_t N);
int gb_model_gelu_forward(gb_model *m, void *out, const void *x, int64_t n);
int gb_model_block_forward(gb_model *m, int64_t l, const void *residual, int64_t B,
                           int64_t T);
float gb_model_dlogit_scale_of(const gb_model *m, float dloss, int64_t n);

/* model_graphs.c */
typedef int (*graph_work)(gb_model *m, float scalar);
int gb_model_run_recorded(gb_model *m, model_graph *g, int64_t n, float scalar, int variant,
                          graph_work work);

/* model_recompute.c */
/* Which of a block's recomputed activations backward wants back now. */
typedef enum recompute_part { RECOMPUTE_MLP_INPUTS, RECOMPUTE_LN1 } recompute_part;
int gb_model_recompute_for_backward(gb_model *m, int64_t l, const void *residual,
                                    int64_t B, int64_t T, recompute_part part);
void gb_model_print_recompute_savings(const gb_model *m, FILE *out, const char *prefix);

#endif
