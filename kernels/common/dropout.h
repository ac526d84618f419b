/* Dropout's mask, a pure function of a seed and an element's index, shared by the CPU and
 * the CUDA device so that both drop the same elements for the same seed, and so that
 * backward regenerates forward's mask instead of storing it.
 *
 * The draw for element i is splitmix64's output for the counter seed + (i + 1) * golden
 * ratio (Steele, Lea and Flood, 2014): a counter-based generator, so any thread computes
 * any element's draw without a state to pass along. Its top 32 bits are compared with
 * p * 2^32: the element is kept when they are not below it, a probability of 1 - p within
 * 2^-32. A kept element is multiplied by 1 / (1 - p), one f32 division and one f32
 * product (no fused multiply-add), the same bits on both devices. Header-only.
 */
#ifndef GEARBOX_KERNELS_COMMON_DROPOUT_H
#define GEARBOX_KERNELS_COMMON_DROPOUT_H

#include <stdint.h>

#include "hostdevice.h"

GB_HD_FN uint64_t gb_dropout_draw(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The threshold the draws' top 32 bits are compared with for drop probability p. */
GB_HD_FN uint64_t gb_dropout_threshold(float p)
{
    return p <= 0.0f ? 0u : (uint64_t)((double)p * 4294967296.0);
}

/* What element i of dropout(x) is, given gb_dropout_threshold(p) and 1 / (1 - p). */
GB_HD_FN float gb_dropout_apply(float x, uint64_t seed, uint64_t i, uint64_t threshold,
                                float scale)
{
    return (gb_dropout_draw(seed, i) >> 32) >= threshold ? x * scale : 0.0f;
}

/* 1 / (1 - p), in f32 as both devices compute it. */
GB_HD_FN float gb_dropout_scale(float p)
{
    return 1.0f / (1.0f - p);
}

#endif /* GEARBOX_KERNELS_COMMON_DROPOUT_H */
