/* gearbox optimizer plugins: one update of all parameters from their gradients.
 *
 * The core keeps every parameter in one flat f32 buffer and every gradient in a second
 * one of the same length (device memory), described by parameter groups: contiguous
 * ranges that share a weight-decay setting (decay on matmul weights and embeddings, none
 * on biases and LayerNorm parameters, as nanoGPT groups them). The optimizer owns an
 * opaque state buffer whose size it states up front; the core allocates it, zeroes it
 * before the first step, saves it verbatim in checkpoints and restores it on resume, so a
 * plugin's state must be position-independent plain data.
 *
 * The learning rate comes from the core's schedule on every step; the plugin's own keys
 * (betas, eps, weight decay...) come from its config section.
 *
 * Gradient clipping and loss-scale removal are folded into the step: the core passes the
 * squared global gradient norm as a device scalar (computed by the device's sum_squares)
 * so no host round trip is needed, and the plugin multiplies each gradient by
 *     g_scale = inv_loss_scale * min(1, max_norm / (sqrt(norm_sq) * inv_loss_scale + 1e-6))
 * (max_norm <= 0 disables clipping) before using it, as torch.nn.utils.clip_grad_norm_.
 *
 * Where it runs (ABI 1.2): step() and grad_norm_sq() queue their work on the device's
 * compute stream and return without waiting (GPU kernels on ctx->stream, or
 * gb_device_run_host() for a CPU plugin). grad_norm_sq is device memory like the rest:
 * it is read by that queued work, never dereferenced by the calling thread, so the clip
 * factor needs no host round trip.
 *
 * The parameters as tensors (ABI 1.8): an optimizer that treats tensors by their shape
 * and role (Muon orthogonalises the 2-D hidden weights) gives bind_params, which the core
 * calls with the model's table of tensors before each state_bytes, so the state's size
 * may depend on the shapes; it also returns the bytes of scratch memory a step needs,
 * which the core plans beside the state and passes as gb_optim_step_args.workspace (not
 * saved, contents undefined between steps). An optimizer without it sees only the flat
 * buffers and their groups, as before.
 *
 * What the core does on failure: a non-GB_OK status from step() aborts the run with the
 * plugin's message; parameters must then be considered undefined.
 */
#ifndef GEARBOX_OPTIM_H
#define GEARBOX_OPTIM_H

#include "gearbox/device.h"
#include "gearbox/plugin.h"
#include "gearbox/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A contiguous range [offset, offset + count) of the flat buffers. */
typedef struct gb_param_group {
    int64_t offset, count;   /* in elements */
    int32_t decay;           /* 1: apply the optimizer's weight decay; 0: never */
} gb_param_group;

/* What a tensor is to the model (ABI 1.8). Values are frozen; new ones may be added, so
 * an optimizer treats a role it does not know as it treats its most careful one. */
typedef enum gb_param_role {
    GB_PARAM_MATRIX = 0,     /* a hidden 2-D weight: attention's and the MLP's projections */
    GB_PARAM_EMBEDDING = 1,  /* a lookup table: the token (wte) and position (wpe) embeddings */
    GB_PARAM_HEAD = 2,       /* the LM head's own weight, where it is not tied to wte */
    GB_PARAM_BIAS = 3,       /* a bias vector */
    GB_PARAM_NORM = 4        /* a LayerNorm's weight */
} gb_param_role;

/* One tensor of the flat buffers (ABI 1.8). A head tied to the token embedding (GPT-2's,
 * and gearbox's) is not a tensor of its own: it is wte, listed once with role
 * GB_PARAM_EMBEDDING and tied_head = 1, its gradient the sum of both uses. */
typedef struct gb_optim_param {
    const char *name;          /* nanoGPT's name without "transformer.": "h.0.mlp.c_fc.weight" */
    int64_t offset;            /* first element in params and grads */
    int64_t rows, cols;        /* row-major (rows, cols); a vector is (1, cols) */
    int32_t role;              /* gb_param_role */
    int32_t decay;             /* the weight-decay flag of its gb_param_group */
    gb_dtype dtype;            /* the working copy's dtype: lowp_dtype where step() writes
                                  params_lowp, else GB_F32 */
    int32_t tied_head;         /* 1: also the LM head (role GB_PARAM_EMBEDDING) */
} gb_optim_param;

/* The model's tensors for bind_params (ABI 1.8), host memory valid during the call only (a
 * plugin copies what it keeps). Sorted by offset, covering [0, n) without overlap; the
 * same ranges as step()'s groups. Entries lie `param_size` bytes apart, so the entry may
 * grow by appending: read a field added later only when param_size covers it. */
typedef struct gb_optim_params {
    size_t struct_size;
    const gb_optim_param *params;
    int64_t count;
    size_t param_size;         /* sizeof(gb_optim_param) of the core */
    int64_t n;                 /* elements in all */
} gb_optim_params;

/* The entry i of a table, by its stride. */
static inline const gb_optim_param *gb_optim_param_at(const gb_optim_params *t, int64_t i)
{
    return (const gb_optim_param *)((const char *)t->params + (size_t)i * t->param_size);
}

/* Everything one step needs. */
typedef struct gb_optim_step_args {
    size_t struct_size;
    float *params;                 /* (n) f32, updated in place */
    const float *grads;            /* (n) f32, raw (still multiplied by the loss scale) */
    void *state;                   /* state_bytes(n) bytes, zeroed before step 1 */
    int64_t n;
    const gb_param_group *groups;  /* host memory; covers [0, n) without overlap */
    int64_t n_groups;
    int64_t step;                  /* 1 for the first update (bias correction uses it) */
    float lr;                      /* from the core's schedule */
    const float *grad_norm_sq;     /* device scalar: sum of squares of grads, or NULL */
    float max_norm;                /* clip threshold; <= 0: no clipping */
    float inv_loss_scale;          /* 1 / loss scale (1 without loss scaling) */
    void *params_lowp;             /* (n) low-precision working copy of params to write in
                                      the same pass (precision policy with master weights),
                                      or NULL */
    gb_dtype lowp_dtype;           /* GB_BF16 or GB_F16 when params_lowp is set */

    /* ---- ABI 1.1 ---- */
    int32_t lowp_stochastic;       /* 1: round the bf16 params_lowp copy stochastically:
                                      up with probability (dropped bits / 2^16), from
                                      random bits that are a function of (lowp_seed, step,
                                      element index) only, so runs stay reproducible. An
                                      optimizer built for 1.1 that writes params_lowp
                                      honours it or refuses it (GB_ERR_UNSUPPORTED). */
    uint64_t lowp_seed;

    /* ---- ABI 1.4 ---- */
    const float *loss_scale;       /* device scalar, or NULL. When set (only for an
                                      optimizer whose caps declare GB_CAP_DEVICE_LOSS_SCALE):
                                      the loss scale is read there (1 / *loss_scale replaces
                                      inv_loss_scale, computed in f32), and a step whose
                                      grad_norm_sq is not finite is skipped on the device:
                                      params, state and params_lowp stay as they are (the
                                      device's loss scaler counts it). */

    /* ---- ABI 1.8 ---- */
    void *workspace;               /* device memory of the bytes bind_params asked for, or
                                      NULL (none asked, or no bind_params) */
    float lr_max;                  /* the schedule's peak ([train] learning_rate): an
                                      optimizer with learning rates of its own scales them
                                      by lr / lr_max, the schedule's factor; 0: unknown */
} gb_optim_step_args;
/* (1.2 adds no field here; it adds the capabilities GB_CAP_LOWP_COPY and
 * GB_CAP_STOCHASTIC_ROUNDING, by which the core knows before step 1 whether an optimizer
 * can write params_lowp and honour lowp_stochastic.) */

typedef struct gb_optim_ops {
    size_t struct_size;

    /* ---- lifetime (ABI 1.0) ---- */
    gb_status (*create)(const gb_host *host, const gb_value *options,
                        const gb_device_ctx *device, void **self);
    void (*destroy)(void *self);

    /* ---- planning (ABI 1.0) ---- */
    /* Bytes of optimizer state for n parameters (e.g. 8n for AdamW's two moments). */
    size_t (*state_bytes)(void *self, int64_t n);

    /* ---- compute (ABI 1.0) ---- */
    /* Updates params (and params_lowp when set). A plugin that cannot write params_lowp
     * returns GB_ERR_UNSUPPORTED when it is set. */
    gb_status (*step)(void *self, const gb_optim_step_args *args);
    /* Optional (NULL: the core uses the device's sum_squares). *out (a device scalar) =
     * sum of grads[i]^2, computed the optimizer's way, e.g. fused with its own passes. */
    gb_status (*grad_norm_sq)(void *self, float *out, const float *grads, int64_t n);

    /* ---- ABI 1.8 ---- */
    /* Optional (NULL: the plugin sees the flat buffers alone). Called after create() and
     * before every state_bytes, with the model's tensors (the core may plan a model more
     * than once, e.g. for batch_size = auto; the last call describes the buffers step()
     * gets); *workspace_bytes (zeroed by the core) receives the scratch memory a step
     * needs. A failure aborts the run before the optimizer's buffers are allocated, with
     * the plugin's message. */
    gb_status (*bind_params)(void *self, const gb_optim_params *params,
                             size_t *workspace_bytes);
} gb_optim_ops;

/* Whether `ops` has the optional entry `entry` (within its struct_size, and set): the test
 * of an entry added after 1.0, on the vtable the core hands out (cut at the plugin's minor). */
#define GB_OPTIM_HAS(ops, entry)                                                          \
    ((ops)->struct_size >= offsetof(gb_optim_ops, entry) + sizeof((ops)->entry) &&       \
     (ops)->entry != NULL)

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_OPTIM_H */
