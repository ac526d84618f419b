/* `gearbox test-plugin PLUGIN.so`: the conformance kit (tools/conformance/) on one file. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "conformance/conformance.h"
#include "gearbox/engine/loader.h"

#define MAX_SETS 16

enum { OPT_PLUGIN_PATH, OPT_DEVICE, OPT_THREADS, OPT_SET, OPT_STRICT };

const gb_cli_spec gb_cli_test_plugin_spec = {
    .verb = "test-plugin",
    .usage = "gearbox test-plugin PLUGIN.so [--plugin-path DIRS] [--device NAME] [--threads N]\n"
             "                           [--set KEY=VALUE]... [--strict]",
    .about =
        "Checks that a plugin keeps the gearbox plugin contract. It is loaded as a run loads it\n"
        "(descriptor, ABI, vtable), its file name and config schema are checked, and then the\n"
        "checks of its kind run on the same inputs as gearbox's reference plugin:\n"
        "  attn       forward and backward against attn/math on a table of shapes (1e-5 abs +\n"
        "             1e-4 rel), causality, determinism\n"
        "  optim      state save/load round trip, lr 0, weight decay per group, loss scale and\n"
        "             clipping as optim.h says, the optional entries; against optim/adamw when\n"
        "             the name starts with adamw\n"
        "  precision  the policy; the loss scaler's backoff, growth and state round trip\n"
        "  comm       rank and world, all-reduce and broadcast of known buffers, barrier\n"
        "  device     memory, and the kernels against device/cpu\n"
        "One row per check: PASS, FAIL, or UNSUPPORTED when the plugin declined (it answered\n"
        "GB_ERR_UNSUPPORTED, or said a problem is not eligible), which is not a failure. The\n"
        "exit status is 1 when a check failed or when no check of its kind passed, 77 when the\n"
        "plugin's device is not available on this machine (a skip, to meson), else 0.\n",
    .options = {
        [OPT_PLUGIN_PATH] = {"plugin-path", 0, "DIRS", "':'-separated folders searched first for "
                             "the reference plugins\n(then GEARBOX_PLUGIN_PATH, then the built-in "
                             "folder)"},
        [OPT_DEVICE] = {"device", 0, "NAME", "the device plugin the checks run on (default: cpu "
                        "when the\nplugin runs there)"},
        [OPT_THREADS] = {"threads", 0, "N", "CPU threads, 1 to 1024 (default: every online CPU)"},
        [OPT_SET] = {"set", 0, "KEY=VALUE", "an option of the plugin's own section (repeatable, at "
                     "most 16),\nso one file can be checked with several tile sizes"},
        [OPT_STRICT] = {"strict", 0, NULL, "add the promises gearbox's own plugins make beyond the "
                        "contract;\nfor attn: the same bits at 1, 2 and 3 threads and for every "
                        "choice\nof an `isa` option, causal outputs bit-identical when later keys\n"
                        "change, bf16 eligible, refusals of i32, bad strides and shapes that\n"
                        "name their cause, saved and workspace memory linear in T (but\n"
                        "attn/math, which keeps (T, T) scores)"},
    },
};

typedef struct test_args {
    const char *path, *plugin_path, *device, *sets[MAX_SETS];
    int n_sets, strict;
    long threads;
} test_args;

/* One option with its value into a: 0, or the exit status of a usage error. */
static int parse_option(void *ctx, int opt, const char *value)
{
    test_args *a = ctx;
    unsigned long long n = 0;
    switch (opt) {
    case OPT_PLUGIN_PATH:
        a->plugin_path = value;
        return 0;
    case OPT_DEVICE:
        a->device = value;
        return 0;
    case OPT_THREADS:
        if (gb_cli_parse_count("test-plugin", "--threads", value, 1, 1024, &n))
            return 2;
        a->threads = (long)n;
        return 0;
    case OPT_SET:
        if (!strchr(value, '='))
            return gb_cli_usage_error("test-plugin", "--set %s: expected KEY=VALUE", value);
        return gb_cli_append("test-plugin", "--set options", a->sets, &a->n_sets, MAX_SETS,
                             value);
    default: /* OPT_STRICT */
        a->strict = 1;
        return 0;
    }
}

/* 0, -1 after --help, or the exit status of a usage error. */
static int parse_args(int argc, char **argv, test_args *a)
{
    return gb_cli_parse_operands(&gb_cli_test_plugin_spec, argc, argv, parse_option, a, 1, 1,
                                 "PLUGIN.so", &a->path);
}

int gb_cmd_test_plugin(int argc, char **argv)
{
    test_args a = {.threads = sysconf(_SC_NPROCESSORS_ONLN)};
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (a.threads < 1)
        a.threads = 1;
    omp_set_num_threads((int)a.threads);
    gb_loader *loader = gb_loader_new();
    if (!loader) {
        fprintf(stderr, "gearbox test-plugin: out of memory\n");
        return 1;
    }
    gb_loader_add_path(loader, a.plugin_path);
    gb_loader_add_path(loader, getenv("GEARBOX_PLUGIN_PATH"));
    gb_loader_add_default_path(loader);
    printf("gearbox test-plugin %s (references from %s; %ld thread%s", a.path,
           gb_loader_path_string(loader), a.threads, a.threads == 1 ? "" : "s");
    for (int i = 0; i < a.n_sets; i++)
        printf("%s%s", i ? ", " : "; ", a.sets[i]);
    printf("%s)\n\n", a.strict ? "; strict" : "");
    rc = gb_conformance_run(loader, a.path, a.device, (int)a.threads, a.sets, a.n_sets,
                            a.strict);
    gb_loader_free(loader);
    return rc;
}
