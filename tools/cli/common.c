/* Option handling shared by the verbs; see cli.h. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/engine/checkpoint.h"
#include "gearbox/engine/fsutil.h"
#include "gearbox/engine/text.h"

int gb_cli_make_parents(const char *verb, const char *path)
{
    char dir[4096];
    if (gb_make_parent_dirs(path, dir, sizeof dir) == 0)
        return 0;
    fprintf(stderr, "gearbox %s: cannot create the folder %s for %s: %s; choose a path you can "
            "write\n", verb, dir, path, strerror(errno));
    return 1;
}

int gb_cli_flush_stdout(const char *verb)
{
    int failed_before = ferror(stdout);
    errno = 0;
    if (fflush(stdout) == 0 && !failed_before)
        return 0;
    /* glibc keeps what it could not write, so the flush fails again and says why */
    const char *why = errno ? strerror(errno)
                            : "an earlier write failed (a full disk, or a pipe whose reader "
                              "is gone)";
    const char *space = *verb ? " " : "";
    fprintf(stderr, "gearbox%s%s: cannot write the standard output: %s; what it printed is "
            "incomplete\n", space, verb, why);
    __fpurge(stdout);   /* what could not be written is dropped, not tried again at exit */
    clearerr(stdout);
    return 1;
}

void gb_cli_print_problems(const char *verb, const gb_diag *diag)
{
    for (int i = 0; i < diag->count; i++)
        fprintf(stderr, "gearbox %s: %s\n", verb, diag->messages[i]);
}

int gb_cli_parse_count(const char *verb, const char *flag, const char *text,
                       unsigned long long lo, unsigned long long hi, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = text[0] >= '0' && text[0] <= '9' ? strtoull(text, &end, 10) : 0;
    if (text[0] < '0' || text[0] > '9' || errno || *end || v < lo || v > hi)
        return gb_cli_usage_error(verb, "%s %s: expected a whole number from %llu to %llu",
                                  flag, text, lo, hi);
    *out = v;
    return 0;
}

int gb_cli_append(const char *verb, const char *what, const char **items, int *n, int max,
                  const char *value)
{
    if (*n == max)
        return gb_cli_usage_error(verb, "too many %s (at most %d)", what, max);
    items[(*n)++] = value;
    return 0;
}

int gb_cli_usage_error(const char *verb, const char *fmt, ...)
{
    char raw[2048], shown[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    gb_escape_controls(raw, shown, sizeof shown);   /* it quotes the arguments */
    const char *space = *verb ? " " : "";   /* "" is gearbox itself, before a verb */
    fprintf(stderr, "gearbox%s%s: %s\n(see `gearbox%s%s --help`)\n", space, verb, shown, space,
            verb);
    return 2;
}

/* One of the run options set, plugin-path and resume into run: 0, 1 when `name` is
 * another option, or the exit status of a usage error. */
static int run_option(const char *verb, const char *name, const char *value, gb_cli_run *run)
{
    if (strcmp(name, "set") == 0) {
        return gb_cli_append(verb, "--set options", run->sets, &run->n_sets, GB_CLI_MAX_SETS,
                             value);
    } else if (strcmp(name, "plugin-path") == 0) {
        run->plugin_path = value;
    } else if (strcmp(name, "resume") == 0) {
        run->resume = value;
    } else {
        return 1;
    }
    return 0;
}

int gb_cli_parse_run_args(const gb_cli_spec *spec, int argc, char **argv, gb_cli_run *run,
                          gb_cli_option_fn own, void *ctx)
{
    int named = 0, rc = 0;
    gb_cli_parser p;
    gb_cli_begin(&p, spec, argc, argv);
    for (int opt; rc == 0 && (opt = gb_cli_next(&p)) != GB_CLI_END;) {
        if (opt == GB_CLI_EXIT)
            return p.status ? p.status : -1;
        if (opt == GB_CLI_OPERAND && named)
            return gb_cli_usage_error(spec->verb, "unexpected argument %s (one CONFIG only)",
                                      p.value);
        if (opt == GB_CLI_OPERAND) {
            run->config_path = p.value;
            named = 1;
        } else if ((rc = run_option(spec->verb, spec->options[opt].name, p.value, run)) == 1) {
            rc = own(ctx, opt, p.value);
        }
    }
    if (rc == 0 && (!run->config_path || !*run->config_path))
        return gb_cli_usage_error(spec->verb, "%s CONFIG (an INI file such as "
                                  "examples/shakespeare_char.ini)",
                                  run->config_path ? "empty argument for" : "missing");
    return rc;
}

int gb_cli_parse_run(const gb_cli_spec *spec, int argc, char **argv, gb_cli_run *run,
                     gb_cli_option_fn own, void *ctx)
{
    int rc = gb_cli_parse_run_args(spec, argc, argv, run, own, ctx);
    return rc ? rc : gb_cli_load_run(run);
}

int gb_cli_load_run(gb_cli_run *run)
{
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

char *gb_cli_checkpoint_path(const char *given)
{
    char *newest = gb_checkpoint_latest(given);
    return newest ? newest : strdup(given);
}

void gb_cli_print_model(FILE *out, const char *prefix, const gb_model_config *c,
                        int64_t n_params)
{
    fprintf(out, "%s%lld parameters | n_layer %lld, n_head %lld, n_embd %lld, block_size %lld, "
            "vocab %lld (%lld rows), bias %s, gelu %s\n", prefix, (long long)n_params,
            (long long)c->n_layer, (long long)c->n_head, (long long)c->n_embd,
            (long long)c->block_size, (long long)c->vocab_size,
            (long long)gb_model_table_rows(c), c->bias ? "true" : "false",
            c->gelu_tanh ? "tanh" : "erf");
}
