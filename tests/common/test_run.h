/* What the tests that build a model through the engine share: the [device] section their
 * environment asks for, and a runtime started from a config written in the test.
 *
 * GEARBOX_TEST_DEVICE names a device plugin (cuda: the gpu suites, on a GPU or the
 * emulator); GEARBOX_TEST_GPU_LIKE=1 asks for the CPU device's GPU-like mode (device.h:
 * no host access to device memory, work queued until waited for); neither: device/cpu.
 */
#ifndef GEARBOX_TESTS_TEST_RUN_H
#define GEARBOX_TESTS_TEST_RUN_H

#include <stddef.h>

#include "runtime.h"

/* The [device] section (possibly empty) into out, which is returned. */
const char *gb_test_device_section(char *out, size_t cap);

/* Loads the config `text` (`name` in messages) into *cfg, then resolves and starts its
 * runtime into rt (released with gb_runtime_free when this returned 0). 0, or -1 after
 * printing the problems. */
int gb_test_start_runtime(gb_runtime *rt, gb_config **cfg, const char *text, const char *name);

#endif
