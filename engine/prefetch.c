/* Input prefetch; see prefetch.h. */
#include "prefetch.h"

#include <stddef.h>
#include <stdlib.h>

typedef struct prefetch_slot {
    int32_t *host;        /* pinned: tokens then targets, count i32 each */
    int32_t *staging;     /* device: the same layout */
    void *copied;         /* side stream, behind the copy into staging */
    void *consumed;       /* compute stream, behind the copy out of staging */
    uint64_t index;       /* the batch it holds or is sending */
    int sent;             /* a copy into staging was queued (copied has been recorded) */
    int loaded;           /* the batch was copied out to the model since it was sent */
} prefetch_slot;

struct gb_prefetch {
    gb_runtime *rt;
    gb_instance *dev;
    const gb_device_ops *ops;
    void *stream;
    int64_t count;
    int32_t *tokens, *targets;   /* the model's batch buffers */
    gb_batch_fill_fn fill;
    void *ctx;
    prefetch_slot slot[2];
    int last;                    /* the slot loaded last */
};

int gb_prefetch_possible(const gb_runtime *rt)
{
    const gb_device_ops *ops = rt->dev;
    return GB_DEVICE_HAS(ops, alloc_host) && GB_DEVICE_HAS(ops, copy_async) &&
           GB_DEVICE_HAS(ops, stream_create) && GB_DEVICE_HAS(ops, event_record) &&
           GB_DEVICE_HAS(ops, stream_wait_event) && GB_DEVICE_HAS(ops, event_sync);
}

static size_t slot_bytes(const gb_prefetch *p)
{
    return 2 * (size_t)p->count * sizeof(int32_t);
}

static int open_slot(gb_prefetch *p, prefetch_slot *s)
{
    void *self = p->dev->self;
    GB_CALL(p->dev, "alloc_host", p->ops->alloc_host(self, slot_bytes(p), (void **)&s->host));
    GB_CALL(p->dev, "alloc", p->ops->alloc(self, slot_bytes(p), (void **)&s->staging));
    GB_CALL(p->dev, "event_create", p->ops->event_create(self, &s->copied));
    GB_CALL(p->dev, "event_create", p->ops->event_create(self, &s->consumed));
    return 0;
}

gb_prefetch *gb_prefetch_create(gb_runtime *rt, int64_t count, int32_t *tokens,
                                int32_t *targets, gb_batch_fill_fn fill, void *ctx)
{
    gb_prefetch *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    *p = (gb_prefetch){.rt = rt, .dev = &rt->inst[GB_KIND_DEVICE], .ops = rt->dev,
                       .count = count, .tokens = tokens, .targets = targets, .fill = fill,
                       .ctx = ctx, .last = 1};
    gb_status st = p->ops->stream_create(p->dev->self, &p->stream);
    if (st != GB_OK) {
        gb_call_failed(p->dev, st, "stream_create");
        free(p);
        return NULL;
    }
    if (open_slot(p, &p->slot[0]) || open_slot(p, &p->slot[1])) {
        gb_prefetch_free(p);
        return NULL;
    }
    return p;
}

/* Batch `index` into slot `k`: drawn into its pinned buffer once the copy that last read
 * it is done, then copied on the side stream once the compute stream has copied the
 * staging buffer's previous batch out. */
static int send_into(gb_prefetch *p, int k, uint64_t index)
{
    prefetch_slot *s = &p->slot[k];
    void *self = p->dev->self;
    if (s->sent)
        GB_CALL(p->dev, "event_sync", p->ops->event_sync(self, s->copied));
    s->sent = s->loaded = 0;
    if (p->fill(p->ctx, index, s->host, s->host + p->count))
        return -1;
    GB_CALL(p->dev, "stream_wait_event", p->ops->stream_wait_event(self, p->stream, s->consumed));
    GB_CALL(p->dev, "copy_async", p->ops->copy_async(self, s->staging, s->host, slot_bytes(p),
                                                     GB_COPY_HOST_TO_DEVICE, p->stream));
    GB_CALL(p->dev, "event_record", p->ops->event_record(self, s->copied, p->stream));
    s->index = index;
    s->sent = 1;
    return 0;
}

int gb_prefetch_send(gb_prefetch *p, uint64_t index)
{
    return send_into(p, p->last ^ 1, index);
}

static int waiting_slot(const gb_prefetch *p, uint64_t index)
{
    for (int k = 0; k < 2; k++)
        if (p->slot[k].sent && !p->slot[k].loaded && p->slot[k].index == index)
            return k;
    return -1;
}

int gb_prefetch_load(gb_prefetch *p, uint64_t index)
{
    int k = waiting_slot(p, index);
    if (k < 0) {
        k = p->last ^ 1;
        if (send_into(p, k, index))
            return -1;
    }
    prefetch_slot *s = &p->slot[k];
    void *self = p->dev->self;
    size_t bytes = (size_t)p->count * sizeof(int32_t);
    GB_CALL(p->dev, "stream_wait_event", p->ops->stream_wait_event(self, NULL, s->copied));
    GB_CALL(p->dev, "copy", p->ops->copy(self, p->tokens, s->staging, bytes,
                                         GB_COPY_DEVICE_TO_DEVICE));
    GB_CALL(p->dev, "copy", p->ops->copy(self, p->targets, s->staging + p->count, bytes,
                                         GB_COPY_DEVICE_TO_DEVICE));
    GB_CALL(p->dev, "event_record", p->ops->event_record(self, s->consumed, NULL));
    s->loaded = 1;
    p->last = k;
    return 0;
}

void gb_prefetch_free(gb_prefetch *p)
{
    if (!p)
        return;
    void *self = p->dev->self;
    for (int k = 0; k < 2; k++) {
        prefetch_slot *s = &p->slot[k];
        if (s->sent)
            p->ops->event_sync(self, s->copied);
        if (s->copied)
            p->ops->event_destroy(self, s->copied);
        if (s->consumed)
            p->ops->event_destroy(self, s->consumed);
        if (s->staging)
            p->ops->free(self, s->staging);
        if (s->host)
            p->ops->free_host(self, s->host);
    }
    if (p->stream)
        p->ops->stream_destroy(self, p->stream);
    free(p);
}
