/* `gearbox`: runs the verb its first argument names, from the table of verbs.c. */
#include <stdio.h>
#include <string.h>

#include "gearbox/engine/report.h"
#include "cli.h"

int main(int argc, char **argv)
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
        return verb->run(argc - p.next, argv + p.next);
    fprintf(stderr, "gearbox: unknown verb '%s'\n\n", argv[p.next]);
    gb_cli_help(spec, stderr);
    return 2;
}
