/* Option handling shared by the verbs; see cli.h. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gb_cli_usage_error(const char *verb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gearbox %s: ", verb);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see `gearbox %s --help`)\n", verb);
    return 2;
}

int gb_cli_wants_help(int argc, char **argv, const char *usage)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return 1;
        }
    }
    return 0;
}

const char *gb_cli_flag_value(int argc, char **argv, int *i, const char *flag, int *missing)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

int gb_cli_parse_run(int argc, char **argv, const char *usage, int allow_resume,
                     gb_cli_run *run)
{
    const char *verb = argv[0];
    const char *sets[256];
    int n_sets = 0;
    memset(run, 0, sizeof *run);
    if (gb_cli_wants_help(argc, argv, usage))
        return -1;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = gb_cli_flag_value(argc, argv, &i, "--set", &missing))) {
            if (n_sets == 256)
                return gb_cli_usage_error(verb, "too many --set flags");
            sets[n_sets++] = v;
        } else if ((v = gb_cli_flag_value(argc, argv, &i, "--plugin-path", &missing))) {
            run->plugin_path = v;
        } else if (allow_resume && (v = gb_cli_flag_value(argc, argv, &i, "--resume", &missing))) {
            run->resume = v;
        } else if (missing) {
            return gb_cli_usage_error(verb, "%s needs a value", argv[i]);
        } else if (argv[i][0] == '-') {
            return gb_cli_usage_error(verb, "unknown option %s", argv[i]);
        } else if (!run->config_path) {
            run->config_path = argv[i];
        } else {
            return gb_cli_usage_error(verb, "unexpected argument %s", argv[i]);
        }
    }
    if (!run->config_path)
        return gb_cli_usage_error(verb, "missing CONFIG (an INI file such as "
                                  "examples/shakespeare_char.ini)");
    gb_diag diag = {0};
    run->cfg = gb_config_load(run->config_path, &diag);
    for (int i = 0; run->cfg && i < n_sets; i++)
        gb_config_set(run->cfg, sets[i], &diag);
    gb_diag_print(&diag, stderr);
    int failed = diag.count > 0;
    gb_diag_clear(&diag);
    if (failed) {
        gb_config_free(run->cfg);
        run->cfg = NULL;
        return 2;
    }
    return 0;
}
