/* The conformance kit: what `gearbox test-plugin` runs against one plugin file.
 *
 * The plugin is loaded as the core loads it, its schema is checked, and the checks of
 * its kind compare it with gearbox's reference plugin of that kind on the same inputs
 * (attn/math, optim/adamw, device/cpu) or with the contract's own rules where no
 * reference applies (precision, comm). The outcome is a table on stdout, one row per
 * check: PASS, FAIL, or UNSUPPORTED when the plugin answered GB_ERR_UNSUPPORTED (or
 * declined a problem as ineligible), which is not a failure.
 */
#ifndef GB_CONFORMANCE_H
#define GB_CONFORMANCE_H

#include "gearbox/engine/loader.h"

/* The exit status of a run that could not check anything here: the plugin's device is
 * missing (a GPU plugin on a machine without one). Meson counts it as a skip. */
#define GB_CONFORMANCE_SKIPPED 77

/* Checks the plugin file at `path`. Reference plugins are found on `loader`'s search
 * path; the plugin runs on the device plugin called `device_name` (NULL: cpu when the
 * plugin runs there, else its own device) with `threads` threads, created with the
 * `n_sets` "key=value" options `sets` of its own section. `strict` adds the checks of
 * what gearbox's own plugins promise beyond the contract (for attention: the same bits
 * at 1, 2 and 3 threads and for every `isa` choice, bit-exact causality, refusals that
 * name their cause, memory linear in T). Returns 0 when no check
 * failed and at least one check of the kind's contract passed, GB_CONFORMANCE_SKIPPED
 * when the device is not available, else 1. */
int gb_conformance_run(gb_loader *loader, const char *path, const char *device_name,
                       int threads, const char *const *sets, int n_sets, int strict);

#endif
