/* The do-nothing entries of the test fixture plugins: a fixture that is broken on purpose
 * (or never starts) writes only the entries that make it so and takes the rest from here.
 * Each is refused (GB_ERR_UNSUPPORTED) or does nothing, so a loader or kit that reaches
 * one where the fixture should have been refused shows it. */
#ifndef GEARBOX_TESTS_FIXTURE_STUBS_H
#define GEARBOX_TESTS_FIXTURE_STUBS_H

#include "gearbox/optim.h"

static inline gb_status stub_create(const gb_host *host, const gb_value *options,
                                    const gb_device_ctx *device, void **self)
{
    (void)host, (void)options, (void)device;
    *self = NULL;
    return GB_OK;
}

static inline void stub_destroy(void *self)
{
    (void)self;
}

static inline size_t stub_state_bytes(void *self, int64_t n)
{
    (void)self, (void)n;
    return 0;
}

static inline gb_status stub_step(void *self, const gb_optim_step_args *args)
{
    (void)self, (void)args;
    return GB_ERR_UNSUPPORTED;
}

#endif
