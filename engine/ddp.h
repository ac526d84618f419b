/* Data-parallel training with PyTorch DDP's semantics, over the comm plugin.
 *
 * Every rank holds the whole model and trains on its own rows of each global batch; after
 * backward the gradients are averaged over the ranks, so every rank applies the same
 * update and the result does not depend on the number of processes. As in DDP the flat
 * gradient buffer is cut into buckets of bucket_cap_mb (taken from its end, the order
 * backward finishes gradients in); each bucket's all-reduce starts as soon as backward
 * has finished its gradients, so communication overlaps the rest of backward, and only
 * the last micro-step of gradient accumulation communicates (DDP's no_sync).
 *
 * With [optim] shard_state (shard.h) there are no buckets: gb_ddp_finish reduce-scatters
 * the whole gradient buffer once backward is done, so each rank holds the average of its
 * own part (the one its optimizer updates); it does not overlap backward.
 *
 * A world of one process needs none of this: gb_ddp_create returns NULL for it (unless
 * [train] ddp_always asks for the buckets anyway, to check a comm plugin on one device) and
 * every function here accepts NULL and does nothing, so comm/single costs nothing.
 */
#ifndef GB_CORE_DDP_H
#define GB_CORE_DDP_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "runtime.h"

typedef struct gb_ddp gb_ddp;

/* The reducer for `model`'s gradients with buckets of at most bucket_bytes. NULL when
 * the comm plugin's world is 1 (nothing to do) without [train] ddp_always and, with
 * *failed set, on failure. */
gb_ddp *gb_ddp_create(gb_runtime *rt, gb_model *model, size_t bucket_bytes, int *failed);
void gb_ddp_free(gb_ddp *d);

/* Makes every rank's parameters rank 0's. */
int gb_ddp_broadcast_params(gb_ddp *d);
/* The next backward pass is the last micro-step of an optimizer step: start each bucket's
 * all-reduce as backward finishes it. */
void gb_ddp_arm(gb_ddp *d);
/* Starts what is left, waits for every bucket and disarms: the gradients are averaged. */
int gb_ddp_finish(gb_ddp *d);
/* Replaces each of vals[0..n) (host, n <= 8) by its mean over the ranks. */
int gb_ddp_average(gb_ddp *d, double *vals, int n);

/* Buckets per step (0 when sharded: one reduce-scatter) and the bytes all-reduced (or
 * reduce-scattered) per optimizer step. */
int gb_ddp_buckets(const gb_ddp *d);
size_t gb_ddp_bytes_per_step(const gb_ddp *d);

#endif
