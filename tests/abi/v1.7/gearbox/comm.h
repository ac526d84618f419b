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
} gb_comm_ops;

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_COMM_H */
