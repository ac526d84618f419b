/* Command-line options from one table per subcommand, parsed with getopt_long.
 *
 * A verb describes its options once, in the options array of its gb_cli_spec, one entry
 * per option from index 0 on (the entries past the last are zero: no terminator is
 * written). From that table gb_cli_begin builds getopt_long's `struct option` array and
 * its short option string, and gb_cli_help prints the --help text (the usage lines, the
 * text about the verb, every option with its argument and help, then the notes), so what
 * the verb accepts and what --help says come from the same lines. Every table gets
 * --help (and -h) without listing it. Errors name the verb and the option and point to
 * `gearbox VERB --help`; they exit with status 2.
 *
 *     enum { OPT_STEPS, OPT_PROFILE };
 *     static const gb_cli_spec spec = {
 *         .verb = "bench step", .usage = "gearbox bench step [CONFIG] [OPTIONS]",
 *         .about = "Runs training steps of CONFIG ...",
 *         .options = {
 *             [OPT_STEPS] = {"steps", 0, "N", "timed steps (default 10)"},
 *             [OPT_PROFILE] = {"profile", 'p', NULL, "also time every kernel call"},
 *         }};
 *
 *     gb_cli_parser p;
 *     gb_cli_begin(&p, &spec, argc, argv);      // argv[0] is the verb, as main passes it
 *     for (int opt; (opt = gb_cli_next(&p)) != GB_CLI_END;) {
 *         switch (opt) {
 *         case OPT_STEPS: ... p.value ...; break;
 *         case OPT_PROFILE: ...; break;
 *         case GB_CLI_OPERAND: ... p.value is the next non-option argument ...; break;
 *         default: return p.status;             // GB_CLI_EXIT: --help (0) or an error (2)
 *         }
 *     }
 *
 * Options and operands come back in command-line order (they may be mixed); `--` ends
 * the options. Long options take their value as `--name VALUE` or `--name=VALUE`, and
 * may be shortened to any unambiguous prefix, as getopt_long allows. An option that takes a
 * value may be given once (a second value would silently replace the first), except those
 * whose every value counts, which mean the same in every verb: --set and --variant. The
 * folders of --plugin-path (':'-separated) must exist. A verb whose
 * operand starts another command line (`gearbox bench KIND ...`) sets stop_at_operand:
 * parsing then ends at the first operand, which is argv[p.next]. A value whose name in
 * --help is FILE, PATH, DIR or CHECKPOINT names a file, and an empty one is refused, naming
 * the option (a shell variable left unset, not a path).
 *
 * A command whose first operand names a verb (`gearbox` itself) lists its verbs in `verbs`:
 * its --help then shows each verb's synopsis (its operands, then every option of the verb's
 * own table) and its summary, so the overview cannot leave out an option a verb takes;
 * gb_cli_find_verb finds the one to run.
 */
#ifndef GB_CLI_OPTIONS_H
#define GB_CLI_OPTIONS_H

#include <getopt.h>
#include <stdio.h>

typedef struct gb_cli_option {
    const char *name;      /* the long name, without "--" */
    char short_name;       /* its one-letter form, or 0 */
    const char *arg;       /* the value's name in --help ("N", "DIRS"); NULL: a flag */
    const char *help;      /* what it does; '\n' starts another line of help */
} gb_cli_option;

/* The most options one verb takes: a table with more does not compile. */
#define GB_CLI_MAX_OPTIONS 32

struct gb_cli_verb;

typedef struct gb_cli_spec {
    const char *verb;            /* as messages name it: "train", "bench attn" */
    const char *usage;           /* "gearbox VERB ..." lines, without "usage: " */
    const char *about;           /* the paragraphs before the options (ending in '\n'), or NULL */
    gb_cli_option options[GB_CLI_MAX_OPTIONS];   /* from index 0 to the first without a name */
    const char *notes;           /* the paragraphs after them (ending in '\n'), or NULL */
    int stop_at_operand;         /* 1: the first operand ends the parse (see above) */
    /* a command of verbs: its verbs, ending with one whose spec is NULL; else NULL */
    const struct gb_cli_verb *verbs;
} gb_cli_spec;

/* A verb of a command, as the command runs it and lists it in its --help. */
typedef struct gb_cli_verb {
    const gb_cli_spec *spec;     /* its options, its name (spec->verb) and its own --help */
    int (*run)(int argc, char **argv);   /* argv[0] is the verb */
    const char *operands;        /* the synopsis before its options: "SOURCE CHECKPOINT";
                                  * an option named here ("--vocab PATH") is not repeated */
    const char *summary;         /* what it does, in a line or two ('\n' between them) */
} gb_cli_verb;

enum {
    GB_CLI_END = -1,       /* no more arguments (or, with stop_at_operand, an operand) */
    GB_CLI_OPERAND = -2,   /* p.value is an operand */
    GB_CLI_EXIT = -3,      /* stop, returning p.status: 0 after --help, 2 after an error */
};

typedef struct gb_cli_parser {
    const gb_cli_spec *spec;
    int argc;
    char **argv;
    const char *value;     /* the option's value, or the operand */
    int status;            /* with GB_CLI_EXIT */
    int next;              /* after GB_CLI_END: the index of the first argument not parsed */
    int after_dashes;      /* handing out the operands after "--" */
    int n_options;
    const char *given[GB_CLI_MAX_OPTIONS];   /* each single-value option's value so far */
    struct option longopts[GB_CLI_MAX_OPTIONS + 2];
    char shortopts[3 * GB_CLI_MAX_OPTIONS + 8];
} gb_cli_parser;

/* Prepares to parse argv[1..argc) against spec. */
void gb_cli_begin(gb_cli_parser *p, const gb_cli_spec *spec, int argc, char **argv);

/* The index in spec->options of the next option given, GB_CLI_OPERAND, GB_CLI_END, or
 * GB_CLI_EXIT after printing the help (status 0) or a usage error (status 2). */
int gb_cli_next(gb_cli_parser *p);

/* Writes spec's --help text to f. */
void gb_cli_help(const gb_cli_spec *spec, FILE *f);

/* The verb of spec->verbs named `name`, or NULL. */
const gb_cli_verb *gb_cli_find_verb(const gb_cli_spec *spec, const char *name);

/* For a verb whose operands are a plain list: runs the parse, handing each option to
 * on_option(ctx, index, value) in command-line order, and moves the operands, in their
 * order, to the end of argv, from argv[*first] on (where getopt_long's default ordering
 * leaves them). 0; -1 after printing --help; else the exit status after printing the
 * problem (2), on_option's included. */
int gb_cli_parse(const gb_cli_spec *spec, int argc, char **argv,
                 int (*on_option)(void *ctx, int index, const char *value), void *ctx,
                 int *first);

/* gb_cli_parse for a verb of `min` to `max` operands, which messages name as `names`
 * (its usage's words: "TEXT OUTDIR"): operands[0 .. max) get them in order, NULL past
 * the last one given. 0; -1 after --help; else the exit status after printing the
 * problem (2): an operand too many, or too few. */
int gb_cli_parse_operands(const gb_cli_spec *spec, int argc, char **argv,
                          int (*on_option)(void *ctx, int index, const char *value), void *ctx,
                          int min, int max, const char *names, const char **operands);

/* An on_option for a verb whose one option takes a value: *(const char **)ctx = value. */
int gb_cli_keep_value(void *ctx, int index, const char *value);

#endif
