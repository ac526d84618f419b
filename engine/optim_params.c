/* The optimizer's table of tensors (ABI 1.8's gb_optim_params), built from the model's
 * layout: one entry per gb_param_tensor, in the same order, with its shape, role, decay
 * flag and the dtype of the working copy the optimizer writes. The tied LM head is wte
 * itself (optim.h says how it is reported), so no entry has role GB_PARAM_HEAD in a GPT-2.
 */
#include "optim_params.h"

#include <stdlib.h>

#include "gearbox/engine/instance.h"
#include "report.h"

static gb_optim_param param_of(const gb_param_tensor *t, gb_dtype working)
{
    return (gb_optim_param){
        .name = t->name,
        .offset = t->offset,
        .rows = t->rows,
        .cols = t->cols,
        .role = t->role,
        .decay = t->decay,
        .dtype = working,
        .tied_head = t->tied_head,
    };
}

int gb_optim_bind_params(gb_runtime *rt, const gb_param_tensor *tensors, int count, int64_t n,
                         gb_dtype working, size_t *workspace_bytes)
{
    *workspace_bytes = 0;
    if (!GB_OPTIM_HAS(rt->optim, bind_params))
        return 0;
    gb_optim_param *params = calloc((size_t)(count > 0 ? count : 1), sizeof *params);
    if (!params) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: error: out of memory for the "
                  "optimizer's table of %d tensors", count);
        return -1;
    }
    for (int i = 0; i < count; i++)
        params[i] = param_of(&tensors[i], working);
    gb_optim_params table = {sizeof table, params, count, sizeof *params, n};
    gb_instance *opt = &rt->inst[GB_KIND_OPTIM];
    gb_status st = rt->optim->bind_params(opt->self, &table, workspace_bytes);
    free(params);
    return st == GB_OK ? 0 : gb_call_failed(opt, st, "bind_params");
}
