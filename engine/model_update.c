/* The update: the gradient norm, the loss scaler's say on skipping, and the optimizer's
 * step over the flat parameters (over this rank's part, then gathered, when the optimizer
 * state is sharded: shard.h). */
#include "model_internal.h"

int gb_model_update(gb_model *m, float lr, float max_norm, int64_t step, int *skipped)
{
    gb_runtime *rt = m->rt;
    gb_instance *opt = &rt->inst[GB_KIND_OPTIM];
    float scale = gb_model_loss_scale(m); /* backward's, before the scaler moves it */
    *skipped = 0;
    /* sharded: this rank's part of the gradients, then the sum over the ranks */
    const float *grads = m->grads + (m->shard ? m->shard->begin : 0);
    int64_t n = gb_shard_state_count(m->shard, m->n_params);
    if (rt->optim->grad_norm_sq)
        TIMED_CALL(m, GB_PHASE_GRAD_NORM, opt, "grad_norm_sq",
                   rt->optim->grad_norm_sq(opt->self, m->norm_sq, grads, n));
    else
        TIMED_CALL(m, GB_PHASE_GRAD_NORM, &rt->inst[GB_KIND_DEVICE], "sum_squares",
                   rt->dev->sum_squares(m->dev, m->norm_sq, grads, n));
    if (gb_shard_sum_norm(rt, m->shard, m->norm_sq) || gb_model_consult_scaler(m, skipped))
        return -1;
    if (*skipped)
        return 0;
    gb_optim_step_args args = {
        .struct_size = sizeof args,
        .params = m->params,
        .grads = m->grads,
        .state = m->optim_state,
        .n = m->n_params,
        .groups = m->groups,
        .n_groups = m->n_tensors,
        .step = step,
        .lr = lr,
        .grad_norm_sq = m->norm_sq,
        .max_norm = max_norm,
        .inv_loss_scale = 1.0f / scale,
        .loss_scale = m->scaler ? &m->scaler->scale : NULL,
        .params_lowp = m->params_lowp,
        .lowp_dtype = m->act,
        .lowp_stochastic = m->params_lowp && rt->policy.stochastic_rounding,
        .lowp_seed = m->seed,
        .workspace = m->optim_workspace,
        .lr_max = (float)rt->settings.learning_rate,
    };
    gb_shard_narrow(m->shard, &args, m->act_size);
    TIMED_CALL(m, GB_PHASE_OPTIMIZER, opt, "step", rt->optim->step(opt->self, &args));
    if (m->scaler)   /* after the step, which reads the scale it backs off or grows */
        TIMED_CALL(m, GB_PHASE_OPTIMIZER, &rt->inst[GB_KIND_DEVICE], "loss_scaler_update",
                   rt->dev->loss_scaler_update(m->dev, m->scaler, m->norm_sq));
    return gb_shard_gather_params(rt, m->shard, m->params, m->params_lowp, m->act);
}
