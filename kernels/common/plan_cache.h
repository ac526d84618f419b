/* The cache of matmul plans that device/cpu (oneDNN primitives) and device/cuda
 * (cuBLASLt descriptors and algorithms) keep: a fixed array of slots, looked up by key
 * and replaced least recently used first. What a plan is, how it is built and how it is
 * freed are the device's hooks; the lookup and the replacement are here. Host code only,
 * header-only.
 *
 * A device's slot type starts with a gb_plan_head and its key right after it (check with
 * GB_PLAN_KEY_AFTER_HEAD); a key is all int64 fields, so it has no padding and compares
 * with memcmp.
 */
#ifndef GEARBOX_KERNELS_COMMON_PLAN_CACHE_H
#define GEARBOX_KERNELS_COMMON_PLAN_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gearbox/device.h"

/* What every device's matmul plan is specialised for, from the call's arguments; a
 * device's key starts with it and adds its own fields. */
typedef struct gb_matmul_shape {
    int64_t m, n, k, lda, ldb, ldc;
    int64_t trans_a, trans_b, dtype_ab, dtype_c;
} gb_matmul_shape;

static inline gb_matmul_shape gb_matmul_shape_of(const gb_matmul_args *a)
{
    return (gb_matmul_shape){.m = a->m, .n = a->n, .k = a->k,
                             .lda = a->lda, .ldb = a->ldb, .ldc = a->ldc,
                             .trans_a = a->trans_a != 0, .trans_b = a->trans_b != 0,
                             .dtype_ab = a->dtype_a, .dtype_c = a->dtype_c};
}

typedef struct gb_plan_head {
    uint64_t last_use;   /* 0: the slot is empty */
} gb_plan_head;

#define GB_PLAN_KEY_AFTER_HEAD(slot_type)                                                   \
    _Static_assert(offsetof(slot_type, key) == sizeof(gb_plan_head),                       \
                   #slot_type ": the key must follow the gb_plan_head")

typedef struct gb_plan_cache {
    void *slots;        /* count slots of slot_size bytes */
    size_t slot_size, key_size;
    int count;
    uint64_t clock;     /* the last use stamped */
    /* Frees what a slot holds and zeroes it; nothing for an empty slot. */
    void (*release)(void *slot);
} gb_plan_cache;

static inline void gb_plan_cache_init(gb_plan_cache *cache, void *slots, size_t slot_size,
                                      int count, size_t key_size, void (*release)(void *slot))
{
    *cache = (gb_plan_cache){.slots = slots, .slot_size = slot_size, .key_size = key_size,
                             .count = count, .release = release};
}

static inline gb_plan_head *gb_plan_slot(const gb_plan_cache *cache, int i)
{
    return (gb_plan_head *)((char *)cache->slots + (size_t)i * cache->slot_size);
}

/* The slot holding `key`. On a miss the least recently used slot is released, given the
 * key and built by build(ctx, slot); a slot whose build fails is released again and the
 * build's status returned. */
static inline gb_status gb_plan_cache_get(gb_plan_cache *cache, const void *key,
                                          gb_status (*build)(void *ctx, void *slot),
                                          void *ctx, void **out)
{
    gb_plan_head *victim = gb_plan_slot(cache, 0);
    for (int i = 0; i < cache->count; i++) {
        gb_plan_head *slot = gb_plan_slot(cache, i);
        if (slot->last_use && memcmp(slot + 1, key, cache->key_size) == 0) {
            slot->last_use = ++cache->clock;
            *out = slot;
            return GB_OK;
        }
        if (slot->last_use < victim->last_use)
            victim = slot;
    }
    cache->release(victim);
    memcpy(victim + 1, key, cache->key_size);
    gb_status status = build(ctx, victim);
    if (status != GB_OK) {
        cache->release(victim);
        return status;
    }
    victim->last_use = ++cache->clock;
    *out = victim;
    return GB_OK;
}

/* Releases every slot. */
static inline void gb_plan_cache_clear(gb_plan_cache *cache)
{
    for (int i = 0; i < cache->count; i++)
        cache->release(gb_plan_slot(cache, i));
}

#endif /* GEARBOX_KERNELS_COMMON_PLAN_CACHE_H */
