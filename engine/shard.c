/* Sharded optimizer state (ZeRO-1): the part each rank keeps, the refusals, and the
 * collectives of a sharded step and of a sharded checkpoint; see shard.h. */
#include "shard.h"

#include <stdlib.h>
#include <string.h>

#include "gearbox/comm.h"

/* The optimizer section's core keys: `plugin`, then `shard_state` (instance.c). */
enum { OPTIM_KEY_SHARD_STATE = 1 };

int gb_shard_wanted(const gb_runtime *rt)
{
    const gb_instance *opt = &rt->inst[GB_KIND_OPTIM];
    return opt->values && opt->n_core > OPTIM_KEY_SHARD_STATE &&
           opt->values[OPTIM_KEY_SHARD_STATE].i != 0;
}

/* The optimizer's state per element: state_bytes(n) = planes * 4n for every n, judged at
 * two sizes; 0 when it is not. */
static int state_planes(const gb_runtime *rt, int64_t n)
{
    void *self = rt->inst[GB_KIND_OPTIM].self;
    size_t one = rt->optim->state_bytes(self, n), two = rt->optim->state_bytes(self, 2 * n);
    size_t plane = (size_t)n * sizeof(float);
    if (one % plane != 0 || two != 2 * one)
        return 0;
    return (int)(one / plane);
}

int gb_shard_check(const gb_runtime *rt, gb_diag *diag)
{
    if (!gb_shard_wanted(rt))
        return 0;
    const gb_plugin *comm = rt->inst[GB_KIND_COMM].plugin, *opt = rt->inst[GB_KIND_OPTIM].plugin;
    int problems = 0;
    if (!GB_COMM_HAS(rt->comm, reduce_scatter_start) || !GB_COMM_HAS(rt->comm, all_gather)) {
        gb_diag_add(diag, "[optim] shard_state = true: [comm] plugin = %s (%s, ABI %d.%d) has no "
                    "reduce_scatter_start and all_gather (ABI 1.8's sharded collectives); use "
                    "a comm plugin that has them (single, mpi, nccl), or set shard_state = false",
                    comm->desc->name, comm->path, comm->desc->abi_major, comm->desc->abi_minor);
        problems++;
    }
    uint32_t caps = gb_plugin_caps(opt->desc);
    if ((caps & GB_CAPS_UNDECLARED) || !(caps & GB_CAP_RANGE_STEP)) {
        gb_diag_add(diag, "[optim] shard_state = true: [optim] plugin = %s (%s) does not declare "
                    "GB_CAP_RANGE_STEP, so it may not step on a rank's part of the parameters "
                    "alone (an optimizer that needs whole matrices cannot); use one that "
                    "declares it (adamw, adamw_fused), or set shard_state = false",
                    opt->desc->name, opt->path);
        problems++;
    } else if (!state_planes(rt, 1024)) {
        gb_diag_add(diag, "[optim] shard_state = true: [optim] plugin = %s (%s) declares "
                    "GB_CAP_RANGE_STEP, but its state_bytes(n) is not a whole number of f32 "
                    "planes of n; fix the plugin, or set shard_state = false", opt->desc->name,
                    opt->path);
        problems++;
    }
    return problems ? -1 : 0;
}

/* The model's groups clipped to [begin, begin + per_rank) and moved to start at 0, then
 * one group without decay over the part's padding (beyond n). */
static int clip_groups(gb_shard *s, const gb_param_group *groups, int64_t n_groups)
{
    s->groups = calloc((size_t)n_groups + 1, sizeof *s->groups);
    if (!s->groups)
        return -1;
    const int64_t begin = s->begin, end = begin + s->per_rank;
    for (int64_t i = 0; i < n_groups; i++) {
        int64_t from = groups[i].offset > begin ? groups[i].offset : begin;
        int64_t to = groups[i].offset + groups[i].count;
        to = to < end ? to : end;
        if (from < to)
            s->groups[s->n_groups++] = (gb_param_group){from - begin, to - from, groups[i].decay};
    }
    int64_t real = s->n > begin ? (s->n < end ? s->n : end) - begin : 0;
    if (real < s->per_rank)
        s->groups[s->n_groups++] = (gb_param_group){real, s->per_rank - real, 0};
    return 0;
}

gb_shard *gb_shard_create(const gb_runtime *rt, int64_t n, const gb_param_group *groups,
                          int64_t n_groups)
{
    gb_shard *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    void *comm = rt->inst[GB_KIND_COMM].self;
    s->rank = rt->comm->rank(comm);
    s->world = rt->comm->world(comm);
    s->n = n;
    s->per_rank = (n + s->world - 1) / s->world;
    s->begin = (int64_t)s->rank * s->per_rank;
    s->planes = state_planes(rt, s->per_rank > 0 ? s->per_rank : 1);
    if (clip_groups(s, groups, n_groups)) {
        gb_shard_free(s);
        return NULL;
    }
    return s;
}

void gb_shard_free(gb_shard *s)
{
    if (!s)
        return;
    free(s->groups);
    free(s);
}

int64_t gb_shard_padded(const gb_shard *s, int64_t n)
{
    return s ? s->per_rank * s->world : n;
}

int64_t gb_shard_state_count(const gb_shard *s, int64_t n)
{
    return s ? s->per_rank : n;
}

void gb_shard_narrow(const gb_shard *s, gb_optim_step_args *args, size_t lowp_size)
{
    if (!s)
        return;
    args->params += s->begin;
    args->grads += s->begin;
    if (args->params_lowp)
        args->params_lowp = (char *)args->params_lowp + (size_t)s->begin * lowp_size;
    args->n = s->per_rank;
    args->groups = s->groups;
    args->n_groups = s->n_groups;
}

static gb_instance *comm_of(gb_runtime *rt)
{
    return &rt->inst[GB_KIND_COMM];
}

int gb_shard_sum_norm(gb_runtime *rt, const gb_shard *s, float *norm_sq)
{
    if (!s)
        return 0;
    gb_comm_request req;
    GB_CALL(comm_of(rt), "all-reduce of the squared gradient norm",
            rt->comm->all_reduce_start(comm_of(rt)->self, norm_sq, 1, GB_F32, GB_REDUCE_SUM,
                                       &req));
    GB_CALL(comm_of(rt), "all-reduce of the squared gradient norm",
            rt->comm->all_reduce_wait(comm_of(rt)->self, req));
    return 0;
}

/* Every rank's part of buf (elements of dtype), gathered in place. */
static int gather_in_place(gb_runtime *rt, const gb_shard *s, void *buf, gb_dtype dtype,
                           const char *what)
{
    void *mine = (char *)buf + (size_t)s->begin * gb_dtype_size(dtype);
    GB_CALL(comm_of(rt), what, rt->comm->all_gather(comm_of(rt)->self, mine, buf, s->per_rank,
                                                    dtype));
    return 0;
}

int gb_shard_gather_params(gb_runtime *rt, const gb_shard *s, float *params, void *lowp,
                           gb_dtype lowp_dtype)
{
    if (!s)
        return 0;
    if (gather_in_place(rt, s, params, GB_F32, "all-gather of the updated parameters"))
        return -1;
    return lowp ? gather_in_place(rt, s, lowp, lowp_dtype,
                                  "all-gather of the parameters' working copy")
                : 0;
}

int gb_shard_get_state(gb_runtime *rt, const gb_shard *s, const void *state,
                       float *scratch, void *host)
{
    const gb_device_ops *dev = rt->dev;
    gb_instance *d = &rt->inst[GB_KIND_DEVICE];
    const size_t part = (size_t)s->per_rank * sizeof(float);
    for (int j = 0; j < s->planes; j++) {
        GB_CALL(d, "copy of an optimizer state part",
                dev->copy(d->self, scratch + s->begin, (const char *)state + (size_t)j * part,
                          part, GB_COPY_DEVICE_TO_DEVICE));
        if (gather_in_place(rt, s, scratch, GB_F32, "all-gather of the optimizer state"))
            return -1;
        GB_CALL(d, "sync", dev->sync(d->self));
        GB_CALL(d, "copy to host",
                dev->copy(d->self, (float *)host + (size_t)j * (size_t)s->n, scratch,
                          (size_t)s->n * sizeof(float), GB_COPY_DEVICE_TO_HOST));
    }
    return 0;
}

int gb_shard_set_state(gb_runtime *rt, const gb_shard *s, void *state, const void *host)
{
    const gb_device_ops *dev = rt->dev;
    gb_instance *d = &rt->inst[GB_KIND_DEVICE];
    const size_t part = (size_t)s->per_rank * sizeof(float);
    GB_CALL(d, "memset_zero", dev->memset_zero(d->self, state, (size_t)s->planes * part));
    int64_t real = s->n > s->begin ? s->n - s->begin : 0;
    real = real < s->per_rank ? real : s->per_rank;
    for (int j = 0; real > 0 && j < s->planes; j++)
        GB_CALL(d, "copy to device",
                dev->copy(d->self, (char *)state + (size_t)j * part,
                          (const float *)host + (size_t)j * (size_t)s->n + s->begin,
                          (size_t)real * sizeof(float), GB_COPY_HOST_TO_DEVICE));
    return 0;
}
