/* The step profile: each plugin call timed under its phase (TIMED_CALL, queued work
 * finished first) and the FLOPs of matmuls and attention counted, when a profile is
 * attached. */
#include "model_internal.h"

#include "clock.h"

void gb_model_set_profile(gb_model *m, gb_profile *profile)
{
    m->profile = profile;
}

/* The start of a timed call: queued work is finished first so it is not counted. */
double gb_model_phase_begin(gb_model *m)
{
    if (!m->profile)
        return 0.0;
    m->rt->dev->sync(m->dev);
    return gb_now_ms();
}

void gb_model_phase_end(gb_model *m, gb_phase phase, double start)
{
    if (!m->profile)
        return;
    m->rt->dev->sync(m->dev);
    if (m->recomputing)
        phase = GB_PHASE_RECOMPUTE;
    m->profile->ms[phase] += gb_now_ms() - start;
    m->profile->calls[phase]++;
}

/* Adds `flops` executed by a call of `phase` to the profile, when one is attached. */
void gb_model_count_flops(gb_model *m, gb_phase phase, double flops)
{
    if (!m->profile)
        return;
    m->profile->flops[m->recomputing ? GB_PHASE_RECOMPUTE : phase] += flops;
}

double gb_model_matmul_flops(const gb_matmul_args *a)
{
    return 2.0 * (double)a->m * (double)a->n * (double)a->k * (double)(a->batch > 1 ? a->batch : 1);
}

/* One (T, T) x (T, D) product per head over the causal triangle, diagonal included. */
double gb_model_causal_product_flops(const gb_attn_problem *p)
{
    double T = (double)p->seq_len;
    return 2.0 * (double)p->batch * (double)p->heads * (double)p->head_dim * T * (T + 1.0) / 2.0;
}
