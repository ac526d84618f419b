/* Small deterministic random numbers for the core: initialisation, batch positions and
 * sampling. SplitMix64, chosen because a stream can be derived from any tuple of
 * integers (seed, purpose, step, ...) with no state to carry: the batch of step s is a
 * pure function of (seed, s), which makes resume exact by construction. */
#ifndef GB_CORE_RNG_H
#define GB_CORE_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct gb_rng {
    uint64_t state;
} gb_rng;

static inline uint64_t gb_rng_next(gb_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A generator for the stream named by (seed, a, b, c). */
static inline gb_rng gb_rng_stream(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    gb_rng r = {seed};
    uint64_t parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        r.state ^= parts[i] + 0x632be59bd9b4e019ull;
        r.state = gb_rng_next(&r);
    }
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double gb_rng_uniform(gb_rng *r)
{
    return (double)(gb_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n), n > 0. */
static inline uint64_t gb_rng_below(gb_rng *r, uint64_t n)
{
    return (uint64_t)(gb_rng_uniform(r) * (double)n) % n;
}

/* Standard normal (Box-Muller; one draw per call keeps streams simple). */
static inline double gb_rng_normal(gb_rng *r)
{
    double u1 = gb_rng_uniform(r), u2 = gb_rng_uniform(r);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

/* Purposes of derived streams; values are part of the reproducibility contract. */
enum { GB_RNG_INIT = 1, GB_RNG_TRAIN_BATCH = 2, GB_RNG_VAL_BATCH = 3, GB_RNG_EVAL_TRAIN = 4,
       GB_RNG_SAMPLE = 5, GB_RNG_DROPOUT = 6 };

#endif
