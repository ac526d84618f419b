/* The configuration keys every AdamW plugin of this tree takes (optim/adamw and
 * optim/adamw_fused, on each device), with the same defaults and ranges, and their
 * reading into the hyperparameters of kernels/common/adamw.h. One table, so that a config
 * written for one of them runs unchanged with any other. Header-only.
 */
#ifndef GB_PLUGINS_OPTIM_ADAMW_OPTIONS_H
#define GB_PLUGINS_OPTIM_ADAMW_OPTIONS_H

#include "adamw.h"
#include "gearbox/plugin.h"

enum { ADAMW_OPT_BETA1, ADAMW_OPT_BETA2, ADAMW_OPT_EPS, ADAMW_OPT_WEIGHT_DECAY };

/* The rows of the table, for a plugin whose own table starts with them (optim/muon's
 * AdamW part). */
#define ADAMW_OPTION_ROWS                                                                  \
    {"beta1", GB_OPT_FLOAT, "0.9", 0, 1, NULL,                                             \
     "decay rate of the first moment (mean of gradients), in [0, 1)"},                     \
    {"beta2", GB_OPT_FLOAT, "0.95", 0, 1, NULL,                                            \
     "decay rate of the second moment (mean of squared gradients), in [0, 1)"},            \
    {"eps", GB_OPT_FLOAT, "1e-8", 0, 1, NULL,                                              \
     "added to the denominator for numerical stability, in (0, 1]"},                       \
    {"weight_decay", GB_OPT_FLOAT, "0.1", 0, 10, NULL,                                     \
     "decoupled weight decay for groups that decay, in [0, 10]"}

static const gb_option adamw_options[] = {ADAMW_OPTION_ROWS};

/* The hyperparameters of `options` (parallel to adamw_options), or 0 with the host told
 * why. The schema's ranges are inclusive, so the open ends are refused here: beta = 1
 * would freeze a moment at zero and eps = 0 divides by zero wherever a gradient is zero. */
static inline int adamw_read_options(const gb_host *host, const gb_value *options,
                                     adamw_hparams *out)
{
    for (int k = ADAMW_OPT_BETA1; k <= ADAMW_OPT_BETA2; k++)
        if (!(options[k].f < 1.0)) {
            host->set_error(host, "%s must be below 1 (got %g)", adamw_options[k].key,
                            options[k].f);
            return 0;
        }
    if (!(options[ADAMW_OPT_EPS].f > 0.0)) {
        host->set_error(host, "eps must be above 0 (got %g)", options[ADAMW_OPT_EPS].f);
        return 0;
    }
    out->beta1 = options[ADAMW_OPT_BETA1].f;
    out->beta2 = options[ADAMW_OPT_BETA2].f;
    out->eps = options[ADAMW_OPT_EPS].f;
    out->weight_decay = options[ADAMW_OPT_WEIGHT_DECAY].f;
    return 1;
}

#endif /* GB_PLUGINS_OPTIM_ADAMW_OPTIONS_H */
