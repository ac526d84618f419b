/* Option handling shared by the verbs; see cli.h. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "text.h"

int gb_cli_make_parents(const char *verb, const char *path)
{
    char dir[4096];
    if (gb_make_parent_dirs(path, dir, sizeof dir) == 0)
        return 0;
    fprintf(stderr, "gearbox %s: cannot create the folder %s for %s: %s; choose a path you can "
            "write\n", verb, dir, path, strerror(errno));
    return 1;
}

int gb_cli_usage_error(const char *verb, const char *fmt, ...)
{
    char raw[2048], shown[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    gb_escape_controls(raw, shown, sizeof shown);   /* it quotes the arguments */
    fprintf(stderr, "gearbox %s: %s\n(see `gearbox %s --help`)\n", verb, shown, verb);
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

int gb_cli_parse_run_args(int argc, char **argv, int allow_resume, gb_cli_run *run)
{
    const char *verb = argv[0];
    memset(run, 0, sizeof *run);
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = gb_cli_flag_value(argc, argv, &i, "--set", &missing))) {
            if (run->n_sets == GB_CLI_MAX_SETS)
                return gb_cli_usage_error(verb, "too many --set flags");
            run->sets[run->n_sets++] = v;
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
    return 0;
}

int gb_cli_parse_run(int argc, char **argv, const char *usage, int allow_resume,
                     gb_cli_run *run)
{
    memset(run, 0, sizeof *run);
    if (gb_cli_wants_help(argc, argv, usage))
        return -1;
    int rc = gb_cli_parse_run_args(argc, argv, allow_resume, run);
    if (rc)
        return rc;
    gb_diag diag = {0};
    run->cfg = gb_config_load(run->config_path, &diag);
    for (int i = 0; run->cfg && i < run->n_sets; i++)
        gb_config_set(run->cfg, run->sets[i], &diag);
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

/* One option's help: "  LEFT  help", each line of the help in one column from
 * column 24 (under LEFT when LEFT is wider). */
static void print_option(const char *left, const char *help)
{
    printf(strlen(left) < 22 ? "  %-22s" : "  %s\n%24s", left, "");
    for (const char *line = help; line;) {
        const char *end = strchr(line, '\n');
        printf("%s%.*s\n", line == help ? "" : "                        ",
               end ? (int)(end - line) : (int)strlen(line), line);
        line = end ? end + 1 : NULL;
    }
}

/* intro, then the options' table. */
static void print_help(const char *intro, const gb_cli_option *options, int count)
{
    fputs(intro, stdout);
    fputs("\nOptions:\n", stdout);
    for (int i = 0; i < count; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", options[i].name, options[i].value ? " " : "",
                 options[i].value ? options[i].value : "");
        print_option(left, options[i].help);
    }
    print_option("-h, --help", "this help");
}

int gb_cli_getopt(int argc, char **argv, const char *verb, const char *intro,
                  const gb_cli_option *options, int count, gb_cli_on_option on_option,
                  void *ctx, int *first)
{
    struct option *longs = calloc((size_t)count + 2, sizeof *longs);
    if (!longs)
        return gb_cli_usage_error(verb, "out of memory");
    for (int i = 0; i < count; i++)
        longs[i] = (struct option){options[i].name,
                                   options[i].value ? required_argument : no_argument, NULL,
                                   256 + i};
    longs[count] = (struct option){"help", no_argument, NULL, 'h'};
    int rc = 0, c;
    optind = 0;   /* glibc: start afresh, as a second parse in one process must */
    opterr = 0;   /* the messages below say more */
    while (rc == 0 && (c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        if (c == 'h') {
            print_help(intro, options, count);
            rc = -1;
        } else if (c == ':') {
            rc = gb_cli_usage_error(verb, "%s needs a value", argv[optind - 1]);
        } else if (c == '?') {
            rc = gb_cli_usage_error(verb, "unknown option %s", argv[optind - 1]);
        } else {
            rc = on_option(c - 256, optarg, ctx);
        }
    }
    *first = optind;
    free(longs);
    return rc;
}
