/* The CPU device's streams, events and pinned memory (ABI 1.2), and its GPU-like mode.
 *
 * Plain mode: there is no queue. Every call runs when it is made, streams and events are
 * bookkeeping that is always complete, and pinned memory is ordinary host memory; the
 * results are the bits they were before 1.2.
 *
 * GPU-like mode (`[device] emulate_gpu = true`), for proving the contract where there is
 * no GPU: device memory is mapped PROT_NONE except while queued work runs, so the core,
 * a tool or a plugin that dereferences it from the host faults at once; and every kernel,
 * copy to the device, memset and enqueue_host() call is queued, then run in order only
 * when something waits on it (sync, a copy to the host, event_query/event_sync, or a
 * stream waiting on an event), so a read of pinned memory without waiting for its event
 * sees stale bytes and a missing wait shows as a wrong number. It is single-threaded and
 * slow by design; it leaves out timing (work never overlaps) and device-side faults.
 */
#ifndef GB_DEVICE_CPU_QUEUE_H
#define GB_DEVICE_CPU_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/device.h"

typedef struct cpu_work cpu_work;

/* One in-order queue. `queued` counts work ever queued, `done` work that has run. */
typedef struct cpu_stream {
    cpu_work *head, *tail;
    uint64_t queued, done;
    struct cpu_stream *next_created;   /* streams from stream_create, for sync */
} cpu_stream;

/* The point of `stream` where it had queued `at` items. */
typedef struct cpu_event {
    cpu_stream *stream;
    uint64_t at;
} cpu_event;

typedef struct cpu_region {
    void *ptr;
    size_t bytes;
} cpu_region;

typedef struct cpu_queue {
    int gpu_like;            /* the mode; 0: plain */
    cpu_stream compute;      /* the compute stream (gb_device_ctx.stream in GPU-like mode) */
    cpu_stream *created;     /* streams from stream_create, newest first */
    cpu_region *regions;     /* device allocations, protected in GPU-like mode */
    int n_regions, cap_regions;
    int running;             /* > 0 while queued work runs: memory is open and calls made
                                from that work run at once */
    gb_status failed;        /* the first failure of queued work, returned by waits */
} cpu_queue;

struct cpu_device;

/* Runs fn(arg) now (plain mode, or from inside queued work) or queues a copy of its
 * `bytes` argument bytes on `stream` (NULL: the compute stream). */
gb_status cpu_submit(struct cpu_device *dev, void *stream, gb_host_fn fn, const void *arg,
                     size_t bytes);
/* Whether calls must be queued rather than run: GPU-like mode, outside queued work. */
int cpu_deferring(const struct cpu_device *dev);
void cpu_queue_close(struct cpu_device *dev);

/* The gb_device_ops entries of memory, streams and events. */
gb_status cpu_alloc(void *self, size_t bytes, void **ptr);
void cpu_free(void *self, void *ptr);
gb_status cpu_copy(void *self, void *dst, const void *src, size_t bytes, gb_copy_kind kind);
gb_status cpu_memset_zero(void *self, void *ptr, size_t bytes);
gb_status cpu_sync(void *self);
gb_status cpu_alloc_host(void *self, size_t bytes, void **ptr);
void cpu_free_host(void *self, void *ptr);
gb_status cpu_copy_async(void *self, void *dst, const void *src, size_t bytes,
                         gb_copy_kind kind, void *stream);
gb_status cpu_stream_create(void *self, void **stream);
void cpu_stream_destroy(void *self, void *stream);
gb_status cpu_event_create(void *self, void **event);
void cpu_event_destroy(void *self, void *event);
gb_status cpu_event_record(void *self, void *event, void *stream);
gb_status cpu_stream_wait_event(void *self, void *stream, void *event);
gb_status cpu_event_query(void *self, void *event);
gb_status cpu_event_sync(void *self, void *event);
gb_status cpu_enqueue_host(void *self, void *stream, gb_host_fn fn, const void *arg,
                           size_t arg_bytes);

#endif /* GB_DEVICE_CPU_QUEUE_H */
