/* attn_flash_math.h, the per-element steps of attn/flash's CUDA kernels, on the CPU: the
 * edge cases of the online softmax (rows that have seen no key stay finite), which tiles
 * a block visits (every visible pair, for any T and both masks), and a whole forward and
 * backward composed of the helpers the way the kernels compose them (key tiles streamed
 * past a row with the online softmax; probabilities recomputed from the saved base-2
 * log-sum-exp; dS from D = dO . O) against attention in double precision, on T that
 * leave partial tiles. What the GPU makes of the same formulas is checked by the gpu
 * suite (attn-conformance-cuda).
 */
#include <math.h>
#include <stdio.h>

#include "attn_flash_math.h"
#include "kernel_test.h"

static void test_edges(void)
{
    kt_expect(attn_rescale(-INFINITY, -INFINITY) == 1.0f, "a row without keys rescales by %g",
              attn_rescale(-INFINITY, -INFINITY));
    kt_expect(attn_rescale(-INFINITY, 3.0f) == 0.0f, "a row's first key rescales by %g",
              attn_rescale(-INFINITY, 3.0f));
    kt_expect(attn_rescale(2.0f, 3.0f) == 0.5f, "rescale(2, 3) = %g", attn_rescale(2.0f, 3.0f));
    kt_expect(attn_prob_running(-INFINITY, 2.0f) == 0.0f, "a masked score has probability %g",
              attn_prob_running(-INFINITY, 2.0f));
    kt_expect(attn_prob_running(-INFINITY, -INFINITY) == 0.0f,
              "a row without keys has probability %g", attn_prob_running(-INFINITY, -INFINITY));
    kt_expect(attn_prob_running(4.0f, 4.0f) == 1.0f, "the maximum's probability is %g",
              attn_prob_running(4.0f, 4.0f));
    kt_expect(attn_lse2(3.0f, 4.0f) == 5.0f, "lse2(3, 4) = %g", attn_lse2(3.0f, 4.0f));
    kt_expect(attn_prob_saved(5.0f, 5.0f) == 1.0f && attn_prob_saved(4.0f, 5.0f) == 0.5f,
              "probabilities from lse2 are wrong");
    kt_expect(attn_dscore(0.5f, 3.0f, 1.0f) == 1.0f, "dscore(0.5, 3, 1) = %g",
              attn_dscore(0.5f, 3.0f, 1.0f));
    kt_expect(fabsf(attn_score_scale_log2(64) - 1.4426950408889634f / 8.0f) < 1e-7f,
              "scale * log2(e) at head_dim 64 is %.9g", attn_score_scale_log2(64));
    const int mask_ok = attn_visible(3, 3, 5, 1) && !attn_visible(3, 4, 5, 1) &&
                        attn_visible(3, 4, 5, 0) && !attn_visible(5, 0, 5, 0) &&
                        !attn_visible(0, 5, 5, 0);
    kt_expect(mask_ok, "attn_visible disagrees with the mask");
}

/* Every visible (query, key) pair lies in a tile the kernels visit: forward and dQ take
 * keys [0, attn_keys_end) for a block of `rows` queries; dK/dV take query tiles of `cols`
 * from attn_queries_begin for a block of `rows` keys. */
static void test_tiles(void)
{
    static const int64_t Ts[] = {1, 7, 31, 32, 33, 64, 65, 100, 257};
    static const int64_t sizes[][2] = {{32, 32}, {64, 64}, {64, 32}};
    int missed = 0;
    for (size_t a = 0; a < sizeof Ts / sizeof Ts[0]; a++)
        for (size_t b = 0; b < 3; b++)
            for (int causal = 0; causal < 2; causal++) {
                const int64_t T = Ts[a], rows = sizes[b][0], cols = sizes[b][1];
                for (int64_t t = 0; t < T; t++)
                    for (int64_t j = 0; j < T; j++) {
                        if (!attn_visible(t, j, T, causal))
                            continue;
                        const int64_t t0 = t / rows * rows, j0 = j / rows * rows;
                        const int64_t end = attn_keys_end(t0, rows, T, causal);
                        const int64_t begin = attn_queries_begin(j0, cols, causal);
                        missed += j >= end || end > T || t < begin || begin % cols != 0;
                    }
            }
    kt_expect(missed == 0, "%d visible pairs fall outside the tiles the kernels visit", missed);
}

static float dot(const float *a, const float *b, int64_t D)
{
    float s = 0.0f;
    for (int64_t d = 0; d < D; d++)
        s += a[d] * b[d];
    return s;
}

/* Forward as the kernels do it: for each query (padding rows past T included), tiles of
 * `cols` keys up to attn_keys_end with the online softmax; out (T, D), lse2 (T). */
static void flash_forward(const kt_head *h, int64_t rows, int64_t cols, float *out, float *lse2)
{
    const float sl2 = attn_score_scale_log2(h->D);
    const int64_t padded = (h->T + rows - 1) / rows * rows;
    float *o = kt_floats((size_t)h->D);
    for (int64_t t = 0; t < padded; t++) {
        float m = -INFINITY, l = 0.0f;
        for (int64_t d = 0; d < h->D; d++)
            o[d] = 0.0f;
        const int64_t end = attn_keys_end(t / rows * rows, rows, h->T, h->causal);
        for (int64_t j0 = 0; j0 < end; j0 += cols) {
            float top = -INFINITY;
            for (int64_t j = j0; j < j0 + cols; j++)
                if (attn_visible(t, j, h->T, h->causal))
                    top = fmaxf(top, dot(h->q + t * h->D, h->k + j * h->D, h->D) * sl2);
            const float m_new = fmaxf(m, top), rescale = attn_rescale(m, m_new);
            l *= rescale;
            for (int64_t d = 0; d < h->D; d++)
                o[d] *= rescale;
            for (int64_t j = j0; j < j0 + cols; j++) {
                const int vis = attn_visible(t, j, h->T, h->causal);
                const float s2 = vis ? dot(h->q + t * h->D, h->k + j * h->D, h->D) * sl2
                                     : -INFINITY;
                const float p = attn_prob_running(s2, m_new);
                l += p;
                for (int64_t d = 0; d < h->D && vis; d++)
                    o[d] += p * h->v[j * h->D + d];
            }
            m = m_new;
        }
        int finite = isfinite(l);
        for (int64_t d = 0; d < h->D; d++)
            finite &= isfinite(o[d]);
        kt_expect(finite, "row %lld (T %lld) is not finite", (long long)t, (long long)h->T);
        if (t >= h->T)
            continue;
        for (int64_t d = 0; d < h->D; d++)
            out[t * h->D + d] = o[d] / l;
        lse2[t] = attn_lse2(m, l);
    }
}

/* Backward as the kernels do it, from lse2 and D = dO . O: dq, dk, dv (T, D). */
static void flash_backward(const kt_head *h, const float *out, const float *lse2, float *dq,
                           float *dk, float *dv)
{
    const int64_t T = h->T, D = h->D;
    const float sl2 = attn_score_scale_log2(D), scale = 1.0f / sqrtf((float)D);
    for (int64_t i = 0; i < T * D; i++)
        dq[i] = dk[i] = dv[i] = 0.0f;
    for (int64_t t = 0; t < T; t++) {
        const float delta = dot(h->dout + t * D, out + t * D, D);
        for (int64_t j = 0; j < T; j++) {
            if (!attn_visible(t, j, T, h->causal))
                continue;
            const float p = attn_prob_saved(dot(h->q + t * D, h->k + j * D, D) * sl2, lse2[t]);
            const float ds = attn_dscore(p, dot(h->dout + t * D, h->v + j * D, D), delta);
            for (int64_t d = 0; d < D; d++) {
                dq[t * D + d] += scale * ds * h->k[j * D + d];
                dk[j * D + d] += scale * ds * h->q[t * D + d];
                dv[j * D + d] += p * h->dout[t * D + d];
            }
        }
    }
}

/* out, dq, dk, dv within 1e-5 abs + 1e-4 rel of double precision (the conformance kit's
 * f32 tolerance), on tiles of `rows` x `cols`. */
static void test_composed(int64_t T, int64_t D, int causal, int64_t rows, int64_t cols)
{
    const size_t n = (size_t)(T * D);
    kt_head h = {T, D, causal, kt_floats(n), kt_floats(n), kt_floats(n), kt_floats(n)};
    kt_rng rng = kt_seed((uint64_t)(T * 131 + D * 7 + causal));
    kt_fill(&rng, h.q, n, -2.0, 2.0);
    kt_fill(&rng, h.k, n, -2.0, 2.0);
    kt_fill(&rng, h.v, n, -1.0, 1.0);
    kt_fill(&rng, h.dout, n, -1.0, 1.0);
    float *f = kt_floats(4 * n), *lse2 = kt_floats((size_t)T);
    double *r = kt_doubles(4 * n);
    flash_forward(&h, rows, cols, f, lse2);
    flash_backward(&h, f, lse2, f + n, f + 2 * n, f + 3 * n);
    kt_attn_reference(&h, r, r + n, r + 2 * n, r + 3 * n);
    kt_section("T %lld, head_dim %lld, %s, tiles of %lld x %lld", (long long)T, (long long)D,
               causal ? "causal" : "not causal", (long long)rows, (long long)cols);
    static const char *names[] = {"out", "dq", "dk", "dv"};
    for (int i = 0; i < 4; i++)
        kt_compare(names[i], f + i * n, r + i * n, n, 1e-5, 1e-4);
}

int main(void)
{
    kt_section("edge cases and tiles");
    test_edges();
    test_tiles();
    test_composed(1, 8, 1, 64, 64);
    test_composed(33, 48, 1, 32, 32);
    test_composed(65, 64, 0, 64, 64);
    test_composed(100, 80, 1, 64, 32);
    test_composed(130, 128, 0, 64, 32);
    int rc = kt_exit_code();
    kt_free_all();
    return rc;
}
