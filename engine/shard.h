/* Sharded optimizer state (ZeRO-1), for `[optim] shard_state = true`.
 *
 * Each of the W ranks keeps and updates one contiguous part of the flat parameter buffer:
 * the buffers (parameters, their low-precision copy, gradients) are padded with zeros to
 * W * per_rank elements, rank r owns [r * per_rank, (r + 1) * per_rank), and its optimizer
 * state is that of per_rank parameters only. After backward the gradients are
 * reduce-scattered (ddp.c), so each rank holds the average of its part; the squared
 * gradient norm is summed over the part and all-reduced, so clipping sees the global norm;
 * the optimizer steps on the part, with the model's parameter groups clipped to it (plus
 * one group without decay over the padding, whose gradients are zero, so it stays zero);
 * then every rank's part is all-gathered into the parameters and the working copy.
 *
 * The optimizer's state must be per element (GB_CAP_RANGE_STEP: k planes of f32, plane j
 * of element i at float j * n + i), which is how a checkpoint holds the whole state: the
 * planes are gathered into the unsharded layout, so a sharded run's checkpoint resumes
 * unsharded or on another world size, and the other way round.
 *
 * A model without shard_state has no gb_shard; the functions that take one accept NULL
 * and then do what an unsharded model does (nothing, or the whole buffer).
 */
#ifndef GB_CORE_SHARD_H
#define GB_CORE_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "gearbox/optim.h"
#include "model.h"
#include "runtime.h"

typedef struct gb_shard {
    int rank, world;
    int64_t n;               /* the model's parameters */
    int64_t per_rank;        /* each rank's part: n / world rounded up */
    int64_t begin;           /* rank * per_rank: where this rank's part starts */
    gb_param_group *groups;  /* the model's groups clipped to the part, from its start,
                                then the padding's; host */
    int64_t n_groups;
    int planes;              /* f32 planes of optimizer state per element */
} gb_shard;

/* The model's shard (model.c), or NULL when its optimizer state is not sharded. */
const gb_shard *gb_model_shard(const gb_model *m);

/* Whether the run asks for sharded optimizer state ([optim] shard_state). */
int gb_shard_wanted(const gb_runtime *rt);
/* 0 when the run's comm and optimizer plugins can shard (or it does not ask to); else -1
 * with the plugin at fault and the fix in diag. Called once the plugins are created. */
int gb_shard_check(const gb_runtime *rt, gb_diag *diag);

/* The layout of this rank's part of n parameters in `groups`; NULL when out of memory. */
gb_shard *gb_shard_create(const gb_runtime *rt, int64_t n, const gb_param_group *groups,
                          int64_t n_groups);
void gb_shard_free(gb_shard *s);

/* Elements of the padded flat buffers: W * per_rank, or n without a shard. */
int64_t gb_shard_padded(const gb_shard *s, int64_t n);
/* Parameters whose optimizer state this rank keeps: per_rank, or n without a shard. */
int64_t gb_shard_state_count(const gb_shard *s, int64_t n);

/* The step's arguments narrowed to this rank's part (params, grads, params_lowp with
 * elements of lowp_size bytes, n, groups). Nothing without a shard. */
void gb_shard_narrow(const gb_shard *s, gb_optim_step_args *args, size_t lowp_size);
/* *norm_sq (a device scalar, the part's sum of squares) becomes the sum over all ranks. */
int gb_shard_sum_norm(gb_runtime *rt, const gb_shard *s, float *norm_sq);
/* Every rank's part of params (f32) and of lowp (lowp_dtype; NULL: none) to every rank. */
int gb_shard_gather_params(gb_runtime *rt, const gb_shard *s, float *params, void *lowp,
                           gb_dtype lowp_dtype);

/* The whole optimizer state in the unsharded layout (planes of n) into host memory, on
 * every rank: each plane's parts are gathered through `scratch`, device memory of
 * gb_shard_padded() f32 (the gradients serve: they are free between steps). Collective:
 * every rank calls it. */
int gb_shard_get_state(gb_runtime *rt, const gb_shard *s, const void *state,
                       float *scratch, void *host);
/* This rank's part of the whole state `host` (planes of n) into `state`; local. */
int gb_shard_set_state(gb_runtime *rt, const gb_shard *s, void *state, const void *host);

#endif
