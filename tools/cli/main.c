/* `gearbox`: runs the verb its first argument names, from the table of verbs.c, then checks
 * that what it printed reached the standard output. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/engine/report.h"
#include "cli.h"

/* The verb's exit status, made an error when its standard output was lost. */
static int finish(const char *verb, int status)
{
    return gb_cli_flush_stdout(verb) && status == 0 ? 1 : status;
}

static int run(int argc, char **argv)
{
    gb_cli_bound_openmp_spin(argv);
    /* what the engine reports reaches the screen as the engine's default printer writes it */
    gb_engine_set_reporter(gb_report_print, NULL);
    const gb_cli_spec *spec = &gb_cli_gearbox_spec;
    gb_cli_parser p;
    gb_cli_begin(&p, spec, argc, argv);
    int opt = gb_cli_next(&p);
    if (opt == GB_CLI_EXIT)
        return p.status;
    if (opt != GB_CLI_END) {   /* --version, the one option before a verb */
        gb_cli_print_version();
        return 0;
    }
    if (p.next == argc) {
        gb_cli_help(spec, stderr);
        return 2;
    }
    if (strcmp(argv[p.next], "help") == 0) {
        gb_cli_help(spec, stdout);
        return 0;
    }
    const gb_cli_verb *verb = gb_cli_find_verb(spec, argv[p.next]);
    if (verb)
        return finish(verb->spec->verb, verb->run(argc - p.next, argv + p.next));
    fprintf(stderr, "gearbox: unknown verb '%s'\n\n", argv[p.next]);
    gb_cli_help(spec, stderr);
    return 2;
}

int main(int argc, char **argv)
{
    /* a reader that went away is a write error each verb reports (EPIPE), not a silent
     * death by SIGPIPE */
    signal(SIGPIPE, SIG_IGN);
    return finish("", run(argc, argv));
}
