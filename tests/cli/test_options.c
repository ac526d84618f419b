/* The option helper of every verb (tools/cli/options.c) on a table of its own: --help
 * lists every option with its short form, value and help; options and operands come back
 * in command-line order in each spelling getopt_long takes; an unknown option, a missing
 * value, a value given to a flag, an empty path and an ambiguous abbreviation exit with
 * status 2 and a message that names the verb and the option and points to `gearbox VERB
 * --help`; a verb that hands its operand on stops there. Then gearbox's own tables:
 * `gearbox --help` shows every verb with every option of the verb's table and no other,
 * and a verb's usage line names only options it takes. A single-value option given twice,
 * and a --plugin-path naming a folder that does not exist, are errors naming the option. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static int failures;

static void check(int ok, const char *what, int line)
{
    if (ok) {
        printf("ok: %s\n", what);
        return;
    }
    printf("FAIL: test_options.c:%d: %s\n", line, what);
    failures++;
}
#define CHECK(cond) check((cond), #cond, __LINE__)

enum { OPT_STEPS, OPT_SET, OPT_PROFILE, OPT_SEED, OPT_PLUGIN_PATH, OPT_OUT };

static const gb_cli_spec spec = {
    .verb = "demo",
    .usage = "gearbox demo [OPTIONS] FILE...",
    .about = "Does nothing, for the test.\n",
    .options = {
        [OPT_STEPS] = {"steps", 0, "N", "timed steps (default 10)"},
        [OPT_SET] = {"set", 's', "K=V", "a config override,\nrepeatable"},
        [OPT_PROFILE] = {"profile", 'p', NULL, "time every kernel call"},
        [OPT_SEED] = {"seed", 0, "N", "the seed"},
        [OPT_PLUGIN_PATH] = {"plugin-path", 0, "DIRS", "plugin folders"},
        [OPT_OUT] = {"out", 0, "FILE", "where to write"},
    },
    .notes = "Exit status: 0.\n",
};

/* What one parse gave: "name=value" for each option and "@operand" for each operand,
 * space-separated, then "|status" when it stopped early; stderr's text in err. */
static void parse(const gb_cli_spec *s, const char *line, char *got, size_t cap, char *err,
                  size_t err_cap)
{
    char copy[512], *argv[32];
    int argc = 0;
    snprintf(copy, sizeof copy, "%s", line);
    argv[argc++] = "demo";
    for (char *rest = copy, *word; (word = strtok_r(rest, " ", &rest));)
        argv[argc++] = word;
    argv[argc] = NULL;

    fflush(stderr);
    FILE *capture = tmpfile();
    int saved = dup(2);
    dup2(fileno(capture), 2);
    got[0] = '\0';
    gb_cli_parser p;
    gb_cli_begin(&p, s, argc, argv);
    for (int opt; (opt = gb_cli_next(&p)) != GB_CLI_END;) {
        size_t used = strlen(got);
        if (opt == GB_CLI_EXIT) {
            snprintf(got + used, cap - used, "|%d", p.status);
            break;
        }
        if (opt == GB_CLI_OPERAND)
            snprintf(got + used, cap - used, "%s@%s", used ? " " : "", p.value);
        else
            snprintf(got + used, cap - used, "%s%s=%s", used ? " " : "", s->options[opt].name,
                     p.value ? p.value : "");
    }
    if (s->stop_at_operand && p.next < argc) {
        size_t used = strlen(got);
        snprintf(got + used, cap - used, " next=%s", argv[p.next]);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(capture);
    size_t n = fread(err, 1, err_cap - 1, capture);
    err[n] = '\0';
    fclose(capture);
}

static void expect(const char *line, const char *want, const char *want_err)
{
    char got[1024], err[2048];
    parse(&spec, line, got, sizeof got, err, sizeof err);
    int ok = strcmp(got, want) == 0 && (want_err ? strstr(err, want_err) != NULL : !*err);
    if (ok && want_err)
        ok = strstr(err, "gearbox demo: ") == err && strstr(err, "`gearbox demo --help`");
    printf("%s: demo %s\n  -> %s\n%s", ok ? "ok" : "FAIL", line, got, err);
    if (!ok) {
        printf("  expected %s%s%s\n", want, want_err ? " and stderr with " : "",
               want_err ? want_err : "");
        failures++;
    }
}

/* The text gb_cli_help writes for spec, malloc'ed. */
static char *help_of(const gb_cli_spec *spec)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    gb_cli_help(spec, f);
    fclose(f);
    return text;
}

static void check_help(void)
{
    char *text = help_of(&spec);
    printf("%s", text);
    CHECK(strncmp(text, "usage: gearbox demo [OPTIONS] FILE...\n", 38) == 0);
    CHECK(strstr(text, "Does nothing, for the test.\n") && strstr(text, "Exit status: 0.\n"));
    for (const gb_cli_option *o = spec.options; o->name; o++) {
        char label[64];
        snprintf(label, sizeof label, "--%s%s%s", o->name, o->arg ? " " : "",
                 o->arg ? o->arg : "");
        check(strstr(text, label) != NULL, label, __LINE__);
        if (o->short_name) {
            snprintf(label, sizeof label, "-%c, --%s", o->short_name, o->name);
            check(strstr(text, label) != NULL, label, __LINE__);
        }
        char first_line[64];
        snprintf(first_line, sizeof first_line, "%.*s", (int)strcspn(o->help, "\n"),
                 o->help);
        check(strstr(text, first_line) != NULL, first_line, __LINE__);
    }
    CHECK(strstr(text, "-h, --help") != NULL);
    /* a help of two lines continues under the first, in the same column */
    const char *first = strstr(text, "a config override,\n");
    const char *second = first ? strstr(first, "repeatable") : NULL;
    const char *line_start = first;
    while (line_start && line_start > text && line_start[-1] != '\n')
        line_start--;
    CHECK(first && second && second - (first + strlen("a config override,\n")) ==
                                 first - line_start);
    free(text);
}

/* A table with every one of its GB_CLI_MAX_OPTIONS entries used has no empty entry after
 * the last: that last one is still parsed and listed, and nothing past it is read. */
static void check_full_table(void)
{
    static char names[GB_CLI_MAX_OPTIONS][8];
    gb_cli_spec full = {.verb = "demo", .usage = "gearbox demo"};
    for (int i = 0; i < GB_CLI_MAX_OPTIONS; i++) {
        snprintf(names[i], sizeof names[i], "o%d", i);
        full.options[i] = (gb_cli_option){names[i], 0, NULL, "an option"};
    }
    char got[256], err[1024], want[64];
    snprintf(want, sizeof want, "o%d= o0=", GB_CLI_MAX_OPTIONS - 1);
    char line[64];
    snprintf(line, sizeof line, "--o%d --o0", GB_CLI_MAX_OPTIONS - 1);
    parse(&full, line, got, sizeof got, err, sizeof err);
    printf("full table: %s\n", got);
    CHECK(strcmp(got, want) == 0 && !*err);

    char *text = help_of(&full);
    snprintf(line, sizeof line, "--o%d ", GB_CLI_MAX_OPTIONS - 1);
    CHECK(strstr(text, line) && strstr(text, "--help"));
    free(text);
}

static int takes_option(const gb_cli_spec *spec, const char *name, size_t len)
{
    for (const gb_cli_option *o = spec->options; o < spec->options + GB_CLI_MAX_OPTIONS &&
                                                 o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return 1;
    return len == 4 && strncmp(name, "help", 4) == 0;
}

/* The length of the option name after "--" at `at` (letters, digits and '-'). */
static size_t option_name_length(const char *at)
{
    size_t n = 0;
    while (isalnum((unsigned char)at[n]) || (n && at[n] == '-'))
        n++;
    return n;
}

/* Each "--NAME" in text is an option of spec; a failure names `where` and it. */
static void check_names_only_options(const char *where, const char *text,
                                     const gb_cli_spec *spec)
{
    for (const char *at = text; (at = strstr(at, "--")); at += 2) {
        size_t n = option_name_length(at + 2);
        if (n && !takes_option(spec, at + 2, n)) {
            printf("FAIL: %s names --%.*s, which `gearbox %s` does not take\n", where, (int)n,
                   at + 2, spec->verb);
            failures++;
        }
    }
}

/* Whether text names --name as a whole option name. */
static int names_option(const char *text, const char *name)
{
    for (const char *at = text; (at = strstr(at, "--")); at += 2)
        if (option_name_length(at + 2) == strlen(name) &&
            strncmp(at + 2, name, strlen(name)) == 0)
            return 1;
    return 0;
}

/* A verb's lines in its command's help, malloc'ed: from "  VERB" to the next verb's line
 * or the blank line after the last; NULL when it has none. */
static char *verb_lines(const char *help, const char *verb)
{
    char head[64];
    snprintf(head, sizeof head, "\n  %s", verb);
    const char *at = help;
    while ((at = strstr(at, head)) && !strchr(" \n", at[strlen(head)]))
        at++;
    if (!at)
        return NULL;
    const char *end = ++at;
    do
        end = strchr(end, '\n') + 1;
    while (end[0] == ' ' && end[1] == ' ' && end[2] == ' ');
    return strndup(at, (size_t)(end - at));
}

/* `gearbox --help` against every verb's table: each verb is listed with a summary and with
 * every option it takes, and with none it does not take; each verb's own usage names only
 * options it takes; the verb each line names is the one gearbox runs. A failure names the
 * verb and the option. */
static void check_gearbox_help(void)
{
    const gb_cli_spec *gearbox = &gb_cli_gearbox_spec;
    char *help = help_of(gearbox);
    printf("%s", help);
    int verbs = 0;
    for (const gb_cli_verb *v = gearbox->verbs; v->spec; v++, verbs++) {
        const gb_cli_spec *spec = v->spec;
        char where[128], summary[128];
        char *lines = verb_lines(help, spec->verb);
        snprintf(where, sizeof where, "`gearbox --help`'s lines on %s", spec->verb);
        check(lines != NULL, where, __LINE__);
        snprintf(summary, sizeof summary, "%.*s", v->summary ? (int)strcspn(v->summary, "\n")
                                                             : 0, v->summary ? v->summary : "");
        check(*summary && lines && strstr(lines, summary), "with its summary", __LINE__);
        for (const gb_cli_option *o = spec->options;
             lines && o < spec->options + GB_CLI_MAX_OPTIONS && o->name; o++)
            if (!names_option(lines, o->name)) {
                printf("FAIL: %s lack --%s, which the verb takes\n", where, o->name);
                failures++;
            }
        if (lines)
            check_names_only_options(where, lines, spec);
        snprintf(where, sizeof where, "the usage of `gearbox %s --help`", spec->verb);
        check_names_only_options(where, spec->usage, spec);
        check(gb_cli_find_verb(gearbox, spec->verb) == v, spec->verb, __LINE__);
        free(lines);
    }
    printf("%d verbs\n", verbs);
    CHECK(verbs >= 15 && gb_cli_find_verb(gearbox, "nonesuch") == NULL);
    free(help);
}

/* A command of verbs lists each with its operands, its options and its summary: an option
 * the operands name is not repeated, a long synopsis wraps under the operands and puts the
 * summary on a line of its own. */
static void check_verb_lines(void)
{
    static const gb_cli_spec many = {
        .verb = "many",
        .usage = "gearbox many",
        .options = {{"first-option", 0, "VALUE", "a"}, {"second-option", 0, "VALUE", "b"},
                    {"third-option", 0, "VALUE", "c"}, {"fourth-option", 0, NULL, "d"}}};
    static const gb_cli_verb verbs[] = {
        {&spec, NULL, "--out FILE [ARGS...]", "a verb\nof two lines"},
        {&many, NULL, "", "one line"},
        {0},
    };
    gb_cli_spec command = {.verb = "", .usage = "gearbox VERB", .verbs = verbs};
    char *help = help_of(&command);
    printf("%s", help);
    CHECK(strstr(help, "\nverbs:\n  demo --out FILE [ARGS...] [--steps N] [--set K=V] "
                       "[--profile] [--seed N]\n       [--plugin-path DIRS]\n"
                       "                                  a verb\n"
                       "                                  of two lines\n") != NULL);
    CHECK(strstr(help, "\n  many [--first-option VALUE] [--second-option VALUE] "
                       "[--third-option VALUE]\n       [--fourth-option]\n"
                       "                                  one line\n") != NULL);
    CHECK(gb_cli_find_verb(&command, "many") == &verbs[1] &&
          gb_cli_find_verb(&command, "man") == NULL);
    free(help);
}

int main(void)
{
    check_help();
    expect("a --steps 5 b --seed=6", "@a steps=5 @b seed=6", NULL);
    expect("a --steps 5 b --steps=6", "@a steps=5 @b|2",
           "option --steps is given twice (5, then 6): give it once");
    expect("--plugin-path .::/ -p", "plugin-path=.::/ profile=", NULL);
    expect("--plugin-path .:/nonexistent-gearbox", "|2",
           "--plugin-path .:/nonexistent-gearbox: /nonexistent-gearbox: No such file or "
           "directory; name folders that exist");
    expect("--plugin-path /dev/null", "|2", "/dev/null: it is not a folder");
    expect("-s x=1 -sy=2 --set z=3 -p f", "set=x=1 set=y=2 set=z=3 profile= @f", NULL);
    expect("--ste 4 --pro", "steps=4 profile=", NULL);        /* unambiguous prefixes */
    expect("--steps -3", "steps=-3", NULL);                  /* a value may start with '-' */
    expect("a -- --steps -p", "@a @--steps @-p", NULL);      /* "--" ends the options */
    expect("a --stepz 3", "@a|2", "unknown option --stepz");
    expect("-x", "|2", "unknown option -x");
    expect("--profile -px", "profile= profile=|2", "unknown option -x");  /* in a cluster */
    expect("a --steps", "@a|2", "option --steps needs a value: --steps N");
    expect("-s", "|2", "option --set needs a value: --set K=V");
    expect("--profile=yes", "|2", "option --profile takes no value (--profile=yes)");
    expect("--se 1", "|2", "option --se is ambiguous: --set or --seed?");
    expect("a --help --bogus", "@a|0", NULL);                /* the help, on stdout */
    expect("-h", "|0", NULL);
    expect("--out=", "|2", "option --out needs a FILE, not an empty value");
    expect("--seed= --out=x", "seed= out=x", NULL);          /* only a path cannot be empty */

    /* a verb whose first operand starts another command line stops there */
    gb_cli_spec dispatch = spec;
    dispatch.stop_at_operand = 1;
    char got[256], err[1024];
    parse(&dispatch, "-p attn --T 4", got, sizeof got, err, sizeof err);
    printf("stop at operand: %s\n", got);
    CHECK(strcmp(got, "profile= next=attn") == 0 && !*err);

    check_full_table();

    /* the parser starts afresh each time, as verbs parsed one after another need */
    expect("--steps 1", "steps=1", NULL);

    check_verb_lines();
    check_gearbox_help();
    return failures ? 1 : 0;
}
