/* `gearbox test-plugin PLUGIN.so`: the conformance kit (tools/conformance/) on one file. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "conformance/conformance.h"
#include "loader.h"

static const char usage[] =
    "usage: gearbox test-plugin PLUGIN.so [--plugin-path DIRS] [--device NAME] [--threads N]\n"
    "                           [--set KEY=VALUE]... [--strict]\n"
    "\n"
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
    "plugin's device is not available on this machine (a skip, to meson), else 0.\n"
    "\n"
    "Reference plugins are found like any plugin: --plugin-path, GEARBOX_PLUGIN_PATH, then\n"
    "the built-in folder. --device names the device plugin the checks run on (default: cpu\n"
    "when the plugin runs there); --threads the CPU threads (default: every online CPU).\n"
    "--set KEY=VALUE sets an option of the plugin's own section (repeatable), so one file\n"
    "can be checked with several tile sizes. --strict adds the promises gearbox's own\n"
    "plugins make beyond the contract; for attn: the same bits at 1, 2 and 3 threads and\n"
    "for every choice of an `isa` option, causal outputs bit-identical when later keys\n"
    "change, bf16 eligible, refusals of i32, bad strides and shapes that name their cause,\n"
    "saved and workspace memory linear in T (but attn/math, which keeps (T, T) scores).\n";

#define MAX_SETS 16

int gb_cmd_test_plugin(int argc, char **argv)
{
    if (gb_cli_wants_help(argc, argv, usage))
        return 0;
    const char *path = NULL, *plugin_path = NULL, *device = NULL, *sets[MAX_SETS];
    int n_sets = 0, strict = 0;
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        int has_value = i + 1 < argc;
        if (strcmp(argv[i], "--plugin-path") == 0 && has_value) {
            plugin_path = argv[++i];
        } else if (strcmp(argv[i], "--device") == 0 && has_value) {
            device = argv[++i];
        } else if (strcmp(argv[i], "--threads") == 0 && has_value) {
            char *end;
            threads = strtol(argv[++i], &end, 10);
            if (*end || threads < 1 || threads > 1024)
                return gb_cli_usage_error("test-plugin", "--threads %s: expected 1 to 1024",
                                          argv[i]);
        } else if (strcmp(argv[i], "--set") == 0 && has_value) {
            if (n_sets == MAX_SETS || !strchr(argv[i + 1], '='))
                return gb_cli_usage_error("test-plugin", "--set %s: expected KEY=VALUE, at "
                                          "most %d of them", argv[i + 1], MAX_SETS);
            sets[n_sets++] = argv[++i];
        } else if (strcmp(argv[i], "--strict") == 0) {
            strict = 1;
        } else if (argv[i][0] == '-') {
            return gb_cli_usage_error("test-plugin", "unknown option %s (or it lacks a value)",
                                      argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            return gb_cli_usage_error("test-plugin", "unexpected argument %s", argv[i]);
        }
    }
    if (!path)
        return gb_cli_usage_error("test-plugin", "missing PLUGIN.so (the plugin file to check)");
    if (threads < 1)
        threads = 1;
    omp_set_num_threads((int)threads);
    gb_loader *loader = gb_loader_new();
    if (!loader) {
        fprintf(stderr, "gearbox test-plugin: out of memory\n");
        return 1;
    }
    gb_loader_add_path(loader, plugin_path);
    gb_loader_add_path(loader, getenv("GEARBOX_PLUGIN_PATH"));
    gb_loader_add_default_path(loader);
    printf("gearbox test-plugin %s (references from %s; %ld thread%s", path,
           gb_loader_path_string(loader), threads, threads == 1 ? "" : "s");
    for (int i = 0; i < n_sets; i++)
        printf("%s%s", i ? ", " : "; ", sets[i]);
    printf("%s)\n\n", strict ? "; strict" : "");
    int rc = gb_conformance_run(loader, path, device, (int)threads, sets, n_sets, strict);
    gb_loader_free(loader);
    return rc;
}
