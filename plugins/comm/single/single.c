/* Communication for a run of one process: rank 0 of a world of 1.
 *
 * Every collective over one rank leaves the buffer as it is (a sum or an average of one
 * value is that value), so nothing touches memory and the plugin works unchanged on any
 * device. The sharded collectives (ABI 1.8) are the identity too: the one shard is the
 * whole buffer, so the core only ever calls them in place (send and recv the same). It still keeps the contract's bookkeeping, so a core that misuses requests,
 * exceeds GB_COMM_MAX_INFLIGHT or names a root other than 0 fails here as it would with
 * MPI or NCCL. No options, no threads, no device calls.
 */
#include <string.h>

#include "gearbox/toolkit/comm_checks.h"
#include "gearbox/comm.h"

typedef struct single {
    const gb_host *host;
    gb_device_ctx device;   /* kept from create(); nothing is queued: no memory is touched */
    gb_comm_request next_request;
    int n_inflight;
    gb_comm_request inflight[GB_COMM_MAX_INFLIGHT];
} single;

static gb_status single_create(const gb_host *host, const gb_value *options,
                               const gb_device_ctx *device, void **self)
{
    (void)options;
    if (!host || !self)
        return GB_ERR_INVALID_ARG;
    single *s = host->alloc(host, sizeof *s);
    if (!s) {
        host->set_error(host, "out of memory");
        return GB_ERR_NO_MEMORY;
    }
    *s = (single){.host = host, .next_request = 1};
    if (device) {
        size_t n = device->struct_size < sizeof s->device ? device->struct_size : sizeof s->device;
        memcpy(&s->device, device, n);
        s->device.struct_size = n;
    }
    *self = s;
    return GB_OK;
}

static void single_destroy(void *self)
{
    single *s = self;
    if (s)
        s->host->free(s->host, s);
}

static int single_rank(void *self)
{
    (void)self;
    return 0;
}

static int single_world(void *self)
{
    (void)self;
    return 1;
}

/* Hands out the next request, within the limit on outstanding ones. */
static gb_status start_request(single *s, gb_comm_request *request)
{
    gb_status st = gb_comm_check_room(s->host, s->n_inflight);
    if (st != GB_OK)
        return st;
    *request = s->next_request++;
    s->inflight[s->n_inflight++] = *request;
    return GB_OK;
}

static gb_status single_all_reduce_start(void *self, void *buf, int64_t count, gb_dtype dtype,
                                         gb_reduce_op op, gb_comm_request *request)
{
    single *s = self;
    gb_status st = gb_comm_check_all_reduce(s->host, buf, count, dtype, op, request);
    return st != GB_OK ? st : start_request(s, request);
}

/* Memory is never touched, so a buffer apart from the other would stay unwritten: only
 * the in-place form is accepted. */
static gb_status in_place_only(single *s, const char *call, const void *send, const void *recv,
                               int64_t count)
{
    if (count == 0 || send == recv)
        return GB_OK;
    s->host->set_error(s->host, "%s: comm/single moves no memory, so send and recv must be "
                       "the same buffer in a world of 1", call);
    return GB_ERR_UNSUPPORTED;
}

static gb_status single_reduce_scatter_start(void *self, void *send, void *recv,
                                             int64_t recv_count, gb_dtype dtype,
                                             gb_reduce_op op, gb_comm_request *request)
{
    single *s = self;
    gb_status st = gb_comm_check_all_reduce(s->host, recv, recv_count, dtype, op, request);
    if (st == GB_OK)
        st = in_place_only(s, "reduce_scatter_start", send, recv, recv_count);
    return st != GB_OK ? st : start_request(s, request);
}

static gb_status single_all_gather(void *self, const void *send, void *recv, int64_t send_count,
                                   gb_dtype dtype)
{
    single *s = self;
    gb_status st = gb_comm_check_all_gather(s->host, send, recv, send_count, dtype);
    return st != GB_OK ? st : in_place_only(s, "all_gather", send, recv, send_count);
}

static gb_status single_all_reduce_wait(void *self, gb_comm_request request)
{
    single *s = self;
    for (int i = 0; i < s->n_inflight; i++)
        if (s->inflight[i] == request) {
            s->inflight[i] = s->inflight[--s->n_inflight];
            return GB_OK;
        }
    s->host->set_error(s->host, "all_reduce_wait: request %lld is not outstanding",
                       (long long)request);
    return GB_ERR_INVALID_ARG;
}

static gb_status single_broadcast(void *self, void *buf, size_t bytes, int root)
{
    single *s = self;
    return gb_comm_check_broadcast(s->host, buf, bytes, root, 1);
}

static gb_status single_barrier(void *self)
{
    (void)self;
    return GB_OK;
}

GB_COMM_PLUGIN_FOR(GB_FAMILY_ANY, "single", "1.0.0",
                   "one process (rank 0 of 1): every collective is the identity",
                   GB_DEVICE_CPU | GB_DEVICE_CUDA | GB_DEVICE_ANY_HOST,
                   GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16) |
                       GB_DTYPE_BIT(GB_I32),
                   GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY, GB_NO_OPTIONS,
                   .create = single_create, .destroy = single_destroy, .rank = single_rank,
                   .world = single_world, .all_reduce_start = single_all_reduce_start,
                   .all_reduce_wait = single_all_reduce_wait, .broadcast = single_broadcast,
                   .barrier = single_barrier,
                   .reduce_scatter_start = single_reduce_scatter_start,
                   .all_gather = single_all_gather)
