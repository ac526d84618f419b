/* Input prefetch ([data] prefetch): while micro-step i computes, the host draws the batch
 * of micro-step i + 1 into pinned memory and a stream of its own copies it to the device,
 * so the step never waits for the host's data work or for a host-to-device copy.
 *
 * Two slots alternate, each a pinned host buffer and a device staging buffer with two
 * events: `copied`, recorded on the side stream behind the copy into the staging buffer,
 * and `consumed`, recorded on the compute stream behind the copy out of it. The order:
 * - the compute stream waits for `copied` before it copies the batch into the model's
 *   batch buffers (device to device, queued like any kernel);
 * - the side stream waits for `consumed` before it overwrites a staging buffer that the
 *   compute stream may not have read yet;
 * - the host waits for `copied` before it refills a pinned buffer a pending copy reads.
 * The model's batch buffers keep their addresses, so the step's own work is the same with
 * and without prefetch, and the losses keep their bits.
 *
 * It needs ABI 1.2's pinned memory, streams and events (gb_prefetch_possible); on an older
 * device the trainer reads batches in line as before. */
#ifndef GB_CORE_PREFETCH_H
#define GB_CORE_PREFETCH_H

#include <stdint.h>

#include "runtime.h"

/* Writes the batch of micro-step `index` into tokens and targets (`count` i32 each). 0, or
 * -1 after reporting why. */
typedef int (*gb_batch_fill_fn)(void *ctx, uint64_t index, int32_t *tokens, int32_t *targets);

typedef struct gb_prefetch gb_prefetch;

/* Whether the run's device has what prefetch needs. */
int gb_prefetch_possible(const gb_runtime *rt);
/* Prefetch of batches of `count` tokens filled by fill(ctx, ...), into `tokens` and
 * `targets`, device buffers of at least `count` i32. NULL after reporting why. */
gb_prefetch *gb_prefetch_create(gb_runtime *rt, int64_t count, int32_t *tokens,
                                int32_t *targets, gb_batch_fill_fn fill, void *ctx);
/* Queues on the compute stream the copy of batch `index` into the device buffers; a batch
 * not already on its way (the first, or after a jump in indexes) is drawn and sent now. */
int gb_prefetch_load(gb_prefetch *p, uint64_t index);
/* Draws batch `index` and sends it on the side stream (call after queueing the work of
 * the micro-step before it, so the host's work overlaps the device's). */
int gb_prefetch_send(gb_prefetch *p, uint64_t index);
/* Waits for pending copies and frees everything. */
void gb_prefetch_free(gb_prefetch *p);

#endif
