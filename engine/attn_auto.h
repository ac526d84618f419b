/* `[attn] plugin = auto`: the attention plugin a run uses, chosen by timing. */
#ifndef GB_CORE_ATTN_AUTO_H
#define GB_CORE_ATTN_AUTO_H

#include "diag.h"
#include "runtime.h"

/* `[attn] plugin = auto`: creates every attention plugin on the search path that runs on
 * the device, asks each whether it can run this run's problem, times forward+backward of
 * the eligible ones on it, binds the fastest to rt->inst[GB_KIND_ATTN] and reports the
 * choice with the reason every other one was passed over. 0, or -1 with diag. */
int gb_attn_auto(gb_runtime *rt, gb_diag *diag);

#endif
