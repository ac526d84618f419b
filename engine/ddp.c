/* Bucketed gradient all-reduce for data-parallel training; see ddp.h. */
#include "ddp.h"

#include <stdio.h>
#include <stdlib.h>

#include "report.h"
#include "shard.h"

typedef struct bucket {
    int64_t begin, end;          /* elements of the flat gradient buffer */
    gb_comm_request request;
} bucket;

struct gb_ddp {
    gb_runtime *rt;
    gb_model *model;
    float *grads;
    int64_t n_params;
    bucket *buckets;             /* buckets[0] ends at n_params: backward finishes it first */
    int n_buckets;
    int next;                    /* first bucket not started in this pass */
    int oldest;                  /* first bucket not waited for in this pass */
    float *scratch;              /* 8 f32 of device memory for gb_ddp_average */
    const gb_shard *shard;       /* [optim] shard_state: one reduce-scatter, no buckets */
};

static gb_instance *comm_inst(gb_ddp *d)
{
    return &d->rt->inst[GB_KIND_COMM];
}

static int make_buckets(gb_ddp *d, size_t bucket_bytes)
{
    int64_t per_bucket = (int64_t)(bucket_bytes / sizeof(float));
    if (per_bucket < 1)
        per_bucket = 1;
    d->n_buckets = (int)((d->n_params + per_bucket - 1) / per_bucket);
    d->buckets = calloc((size_t)d->n_buckets, sizeof *d->buckets);
    if (!d->buckets)
        return -1;
    for (int i = 0; i < d->n_buckets; i++) {
        d->buckets[i].end = d->n_params - (int64_t)i * per_bucket;
        d->buckets[i].begin = d->buckets[i].end > per_bucket ? d->buckets[i].end - per_bucket : 0;
    }
    return 0;
}

gb_ddp *gb_ddp_create(gb_runtime *rt, gb_model *model, size_t bucket_bytes, int *failed)
{
    *failed = 0;
    if (rt->comm->world(rt->inst[GB_KIND_COMM].self) == 1 && !rt->settings.ddp_always)
        return NULL;
    gb_ddp *d = calloc(1, sizeof *d);
    void *scratch = NULL;
    if (d && rt->dev->alloc(rt->inst[GB_KIND_DEVICE].self, 8 * sizeof(float), &scratch) ==
                 GB_OK) {
        *d = (gb_ddp){.rt = rt, .model = model, .grads = gb_model_grads(model),
                      .n_params = gb_model_num_params(model), .scratch = scratch,
                      .shard = gb_model_shard(model)};
        if (make_buckets(d, bucket_bytes) == 0)
            return d;
    }
    gb_report(GB_REPORT_ERROR, "ddp", "gearbox: error: out of memory setting up the gradient "
              "all-reduce");
    gb_ddp_free(d);
    *failed = 1;
    return NULL;
}

void gb_ddp_free(gb_ddp *d)
{
    if (!d)
        return;
    if (d->scratch)
        d->rt->dev->free(d->rt->inst[GB_KIND_DEVICE].self, d->scratch);
    free(d->buckets);
    free(d);
}

int gb_ddp_broadcast_params(gb_ddp *d)
{
    if (!d)
        return 0;
    GB_CALL(comm_inst(d), "broadcast of the parameters from rank 0",
            d->rt->comm->broadcast(comm_inst(d)->self, gb_model_params(d->model),
                                   (size_t)d->n_params * sizeof(float), 0));
    return 0;
}

static int wait_oldest(gb_ddp *d)
{
    bucket *b = &d->buckets[d->oldest++];
    GB_CALL(comm_inst(d), "gradient all-reduce",
            d->rt->comm->all_reduce_wait(comm_inst(d)->self, b->request));
    return 0;
}

static int start_bucket(gb_ddp *d)
{
    /* keep within the plugin's limit on outstanding requests */
    if (d->next - d->oldest == GB_COMM_MAX_INFLIGHT && wait_oldest(d))
        return -1;
    bucket *b = &d->buckets[d->next++];
    GB_CALL(comm_inst(d), "gradient all-reduce",
            d->rt->comm->all_reduce_start(comm_inst(d)->self, d->grads + b->begin,
                                          b->end - b->begin, GB_F32, GB_REDUCE_AVG,
                                          &b->request));
    return 0;
}

static int on_grads_ready(void *ctx, int64_t first)
{
    gb_ddp *d = ctx;
    while (d->next < d->n_buckets && d->buckets[d->next].begin >= first)
        if (start_bucket(d))
            return -1;
    return 0;
}

void gb_ddp_arm(gb_ddp *d)
{
    if (!d || d->shard)
        return;
    d->next = d->oldest = 0;
    gb_model_on_grads_ready(d->model, on_grads_ready, d);
}

/* Each rank's part of the averaged gradients, in place (shard.h). */
static int reduce_scatter(gb_ddp *d)
{
    const gb_shard *s = d->shard;
    gb_comm_request req;
    GB_CALL(comm_inst(d), "gradient reduce-scatter",
            d->rt->comm->reduce_scatter_start(comm_inst(d)->self, d->grads,
                                              d->grads + s->begin, s->per_rank, GB_F32,
                                              GB_REDUCE_AVG, &req));
    GB_CALL(comm_inst(d), "gradient reduce-scatter",
            d->rt->comm->all_reduce_wait(comm_inst(d)->self, req));
    return 0;
}

int gb_ddp_finish(gb_ddp *d)
{
    if (!d)
        return 0;
    if (d->shard)
        return reduce_scatter(d);
    gb_model_on_grads_ready(d->model, NULL, NULL);
    while (d->next < d->n_buckets)
        if (start_bucket(d))
            return -1;
    while (d->oldest < d->next)
        if (wait_oldest(d))
            return -1;
    return 0;
}

int gb_ddp_average(gb_ddp *d, double *vals, int n)
{
    if (!d)
        return 0;
    const gb_device_ops *dev = d->rt->dev;
    gb_instance *dev_inst = &d->rt->inst[GB_KIND_DEVICE];
    float host[8];
    for (int i = 0; i < n; i++)
        host[i] = (float)vals[i];
    gb_comm_request req;
    GB_CALL(dev_inst, "copy to device", dev->copy(dev_inst->self, d->scratch, host,
                                                  (size_t)n * sizeof(float),
                                                  GB_COPY_HOST_TO_DEVICE));
    GB_CALL(comm_inst(d), "all-reduce of the losses",
            d->rt->comm->all_reduce_start(comm_inst(d)->self, d->scratch, n, GB_F32,
                                          GB_REDUCE_AVG, &req));
    GB_CALL(comm_inst(d), "all-reduce of the losses",
            d->rt->comm->all_reduce_wait(comm_inst(d)->self, req));
    GB_CALL(dev_inst, "sync", dev->sync(dev_inst->self));
    GB_CALL(dev_inst, "copy to host", dev->copy(dev_inst->self, host, d->scratch,
                                                (size_t)n * sizeof(float),
                                                GB_COPY_DEVICE_TO_HOST));
    for (int i = 0; i < n; i++)
        vals[i] = host[i];
    return 0;
}

int gb_ddp_buckets(const gb_ddp *d)
{
    return d && !d->shard ? d->n_buckets : 0;
}

size_t gb_ddp_bytes_per_step(const gb_ddp *d)
{
    return d ? (size_t)gb_shard_padded(d->shard, d->n_params) * sizeof(float) : 0;
}
