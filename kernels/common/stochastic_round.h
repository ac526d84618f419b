/* Stochastic rounding of f32 to bf16 with reproducible random bits: the scheme the
 * optimizers use for the bf16 working copy of the parameters (gb_optim_step_args
 * lowp_stochastic), shared by the CPU and the CUDA plugins so that both make the same
 * rounding decision for every element.
 *
 * The 16 random bits of element `index` (its position in the flat parameter buffer) at
 * optimizer step `step` are a SplitMix64 finaliser over (seed, step, index): they depend
 * on nothing else, not on threads, vector width, launch shape or device, and a run is
 * reproducible from its seed. Integer arithmetic only, so the host and the device agree
 * exactly. The rounding itself is gearbox/convert.h's gb_bf16_from_f32_stochastic: up
 * with probability (dropped bits / 2^16). Header-only.
 */
#ifndef GEARBOX_KERNELS_STOCHASTIC_ROUND_H
#define GEARBOX_KERNELS_STOCHASTIC_ROUND_H

#include <stdint.h>

#include "gearbox/convert.h"
#include "hostdevice.h"

/* 16 random bits for element `index` at `step`. */
GB_HD_FN uint16_t gb_random16(uint64_t seed, int64_t step, int64_t index)
{
    uint64_t z = seed + (uint64_t)step * 0x9e3779b97f4a7c15u +
                 (uint64_t)index * 0xd1b54a32d192ed03u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return (uint16_t)(z >> 48);
}

/* x rounded stochastically to a bf16 bit pattern, with element `index`'s bits at `step`. */
GB_HD_FN uint16_t gb_bf16_stochastic_at(float x, uint64_t seed, int64_t step, int64_t index)
{
    return gb_bf16_from_f32_stochastic(x, gb_random16(seed, step, index));
}

/* The working copy's pattern of parameter x at flat index `index`: bf16 or f16 rounded to
 * nearest even, or bf16 rounded stochastically (gb_optim_step_args.lowp_stochastic). */
GB_HD_FN uint16_t gb_lowp_at(float x, gb_dtype dtype, int stochastic, uint64_t seed,
                             int64_t step, int64_t index)
{
    if (stochastic)
        return gb_bf16_stochastic_at(x, seed, step, index);
    return dtype == GB_BF16 ? gb_bf16_from_f32(x) : gb_f16_from_f32(x);
}

#endif /* GEARBOX_KERNELS_STOCHASTIC_ROUND_H */
