/* gearbox communication plugins: the collectives of data-parallel training.
 *
 * One instance per process. rank() and world() say where this process stands; the core
 * gives each rank its share of every batch, averages gradients with all_reduce, starts
 * every rank from rank 0's parameters with broadcast, and lets only rank 0 write output.
 * Buffers are device memory of the run's device (the plugin is told which at create()).
 *
 * Asynchronous all-reduce exists so the core can overlap communication with the rest of
 * backward: all_reduce_start returns at once with a request, all_reduce_wait completes
 * it. Blocking all_reduce is all_reduce_start + all_reduce_wait. At most
 * GB_COMM_MAX_INFLIGHT requests may be outstanding.
 *
 * Ordering (ABI 1.2 states what 1.0 left implicit), on a device with a queue:
 * - all_reduce_start reduces what `buf` holds after all work queued on the compute stream
 *   before the call (a GPU plugin records an event there and makes its own stream, from
 *   the device's stream_create, wait on it) and returns without blocking the host, so the
 *   reduction overlaps the rest of backward;
 * - all_reduce_wait makes work queued on the compute stream after the call see the
 *   result (stream_wait_event on the plugin's event); it does not block the host. On a
 *   device without a queue (host_access and no GPU-like mode) it blocks until done;
 * - broadcast and barrier are blocking: done, on every rank, when they return.
 * A CPU comm plugin on a GPU-like device queues its part with gb_device_run_host().
 *
 * Sharded collectives (ABI 1.8, optional), for `[optim] shard_state` (ZeRO-1: each rank
 * keeps and updates 1/world() of the optimizer state): reduce_scatter_start hands each
 * rank its contiguous shard of a reduction, in the order all_reduce_start has (its request
 * is completed by all_reduce_wait and counts against GB_COMM_MAX_INFLIGHT), and all_gather
 * puts every rank's shard on every rank, ordered as all_reduce_start followed at once by
 * all_reduce_wait. Without them (NULL, or a plugin built before 1.8) the core refuses
 * shard_state = true.
 *
 * What the core does on failure: a non-GB_OK status (a peer died, a timeout expired)
 * aborts the run on this rank with the plugin's message, which names the peer at fault.
 */
#ifndef GEARBOX_COMM_H
#define GEARBOX_COMM_H

#include "gearbox/device.h"
#include "gearbox/plugin.h"
#include "gearbox/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GB_COMM_MAX_INFLIGHT 64

typedef enum gb_reduce_op {
    GB_REDUCE_SUM = 0,
    GB_REDUCE_AVG = 1     /* sum divided by world() */
} gb_reduce_op;

/* Identifies one outstanding asynchronous operation; meaning is the plugin's. */
typedef int64_t gb_comm_request;

typedef struct gb_comm_ops {
    size_t struct_size;

    /* ---- lifetime (ABI 1.0) ---- */
    gb_status (*create)(const gb_host *host, const gb_value *options,
                        const gb_device_ctx *device, void **self);
    void (*destroy)(void *self);

    /* ---- topology (ABI 1.0) ---- */
    int (*rank)(void *self);
    int (*world)(void *self);

    /* ---- collectives (ABI 1.0) ---- */
    /* In place: buf (count) of dtype becomes the reduction over all ranks. */
    gb_status (*all_reduce_start)(void *self, void *buf, int64_t count, gb_dtype dtype,
                                  gb_reduce_op op, gb_comm_request *request);
    gb_status (*all_reduce_wait)(void *self, gb_comm_request request);
    /* buf (bytes) on every rank becomes rank `root`'s. */
    gb_status (*broadcast)(void *self, void *buf, size_t bytes, int root);
    gb_status (*barrier)(void *self);

    /* ---- ABI 1.8 ---- */
    /* recv (recv_count) becomes elements [rank * recv_count, (rank + 1) * recv_count) of the
     * reduction over all ranks of send (world() * recv_count). In place when recv is
     * send + rank * recv_count; otherwise the two do not overlap. send's other elements are
     * undefined afterwards. Ordered like all_reduce_start; all_reduce_wait completes the
     * request. Optional (NULL: no sharded optimizer state). */
    gb_status (*reduce_scatter_start)(void *self, void *send, void *recv, int64_t recv_count,
                                      gb_dtype dtype, gb_reduce_op op,
                                      gb_comm_request *request);
    /* recv (world() * send_count) gets each rank r's send (send_count) at r * send_count,
     * the same on every rank. In place when send is recv + rank * send_count; otherwise the
     * two do not overlap. Any dtype (it moves bytes). Reads send after the work queued on
     * the compute stream before the call; work queued after sees recv (it may block the
     * host until done). Optional, with reduce_scatter_start. */
    gb_status (*all_gather)(void *self, const void *send, void *recv, int64_t send_count,
                            gb_dtype dtype);
} gb_comm_ops;

/* Whether a comm vtable has optional entry `entry` (ABI 1.8 on), judged by its struct_size:
 * a plugin built before 1.8 has a smaller vtable. */
#define GB_COMM_HAS(ops, entry)                                                          \
    ((ops)->struct_size >= offsetof(gb_comm_ops, entry) + sizeof((ops)->entry) &&       \
     (ops)->entry != NULL)

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_COMM_H */
