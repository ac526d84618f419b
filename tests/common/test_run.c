/* The tests' device section and runtime from a config text; see test_run.h. */
#include "test_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gb_test_device_section(char *out, size_t cap)
{
    const char *device = getenv("GEARBOX_TEST_DEVICE"), *like = getenv("GEARBOX_TEST_GPU_LIKE");
    if (device && *device)
        snprintf(out, cap, "[device]\nplugin = %s\n", device);
    else
        snprintf(out, cap, "%s", like && strcmp(like, "1") == 0
                                     ? "[device]\nemulate_gpu = true\n" : "");
    return out;
}

int gb_test_start_runtime(gb_runtime *rt, gb_config **cfg, const char *text, const char *name)
{
    gb_diag diag = {0};
    *cfg = gb_config_load_string(text, name, "/", &diag);
    int failed = !*cfg || gb_runtime_resolve(rt, *cfg, NULL, &diag) ||
                 gb_runtime_start(rt, &diag);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    return failed ? -1 : 0;
}
