/* The per-element steps of FlashAttention-2 as attn/flash's CUDA kernels compute them
 * (plugins/attn/flash/cuda.cu): which keys a query sees, which tiles a block visits, the
 * online softmax's rescaling, the log-sum-exp saved for backward and the probabilities and
 * score gradients backward recomputes from it. Written once with GB_HD_FN, so the CPU test
 * (tests/common/test_flash_math.c) checks the formulas the GPU runs.
 *
 * Scores live in base 2: s2 = (q . k) * scale * log2(e), so each exponential is a single
 * exp2 (the GPU's ex2 instruction) and the saved log-sum-exp is the base-2 one,
 * lse2 = log2(sum_j 2^s2_j). A row that has seen no key yet has the running maximum
 * -inf; the helpers keep such a row at probability 0 and rescale 1 instead of letting
 * -inf - -inf make a NaN (the padding rows of a partial tile are such rows). Header-only;
 * compiles as C and as CUDA C++. Not the same bits on both: the GPU's exponential
 * (attn_exp2) and log2f differ from glibc's in the last ulp or two, and the exponential
 * flushes results below 2^-126 to zero there.
 */
#ifndef GB_ATTN_FLASH_MATH_H
#define GB_ATTN_FLASH_MATH_H

#include <math.h>
#include <stdint.h>

#include "hostdevice.h"

#define ATTN_LOG2E 1.44269504088896341f

/* 1 when query t of a sequence of T sees key j: both exist, and with the causal mask the
 * key is not after the query. */
GB_HD_FN int attn_visible(int64_t t, int64_t j, int64_t T, int causal)
{
    return t < T && j < T && (!causal || j <= t);
}

/* scale * log2(e), scale = 1/sqrt(head_dim): the factor from a raw score q . k to s2. */
GB_HD_FN float attn_score_scale_log2(int64_t head_dim)
{
    return ATTN_LOG2E / sqrtf((float)head_dim);
}

/* The end of the keys a block of queries [t0, t0 + rows) visits: the keys its last query
 * sees, so tiles wholly above the causal diagonal are never loaded. */
GB_HD_FN int64_t attn_keys_end(int64_t t0, int64_t rows, int64_t T, int causal)
{
    if (!causal)
        return T;
    return t0 + rows < T ? t0 + rows : T;
}

/* The first query a block of keys starting at j0 is seen by, rounded down to a tile of
 * `tile` queries: query tiles before it see none of the block's keys. */
GB_HD_FN int64_t attn_queries_begin(int64_t j0, int64_t tile, int causal)
{
    return causal ? j0 / tile * tile : 0;
}

/* 2^x. In device code the SFU's ex2 with subnormal results flushed to zero: one
 * instruction, where exp2f keeps them with a compare and two multiplies around it, which
 * the attention kernels would pay on every score; a probability or rescale below 2^-126
 * changes no 16-bit or f32 output. Elsewhere (the CPU, the emulator) exp2f. */
GB_HD_FN float attn_exp2(float x)
{
#ifdef __CUDA_ARCH__
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}

/* What the running sum and output of a row are multiplied by when its maximum goes from
 * m_old to m_new >= m_old: 0 on a row's first visible key (m_old = -inf), 1 while the
 * row has seen none. */
GB_HD_FN float attn_rescale(float m_old, float m_new)
{
    return m_new == -INFINITY ? 1.0f : attn_exp2(m_old - m_new);
}

/* The unnormalised probability of score s2 against the running maximum m: 0 for a
 * masked score (s2 = -inf) and on a row that has seen no key. */
GB_HD_FN float attn_prob_running(float s2, float m)
{
    return m == -INFINITY ? 0.0f : attn_exp2(s2 - m);
}

/* The base-2 log-sum-exp of a row from its final running maximum m and sum l. */
GB_HD_FN float attn_lse2(float m, float l)
{
    return m + log2f(l);
}

/* The probability of score s2 recomputed from the row's saved lse2. */
GB_HD_FN float attn_prob_saved(float s2, float lse2)
{
    return attn_exp2(s2 - lse2);
}

/* dS = P (dP - D), with D = dO . O of the row: softmax's gradient, FlashAttention-2's way
 * (D stands in for rowsum(P dP), which equals it). */
GB_HD_FN float attn_dscore(float p, float dp, float delta)
{
    return p * (dp - delta);
}

#endif /* GB_ATTN_FLASH_MATH_H */
