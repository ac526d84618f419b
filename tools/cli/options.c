/* Options from one table per verb; see options.h. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* getopt_long hands back this plus the option's index for every long option, clear of
 * the values it uses itself (1 for an operand, '?', ':', the short letters). */
#define LONG_BASE 0x100

/* Options whose every value counts, in every verb's table: they may be given again. */
static const char *const repeatable[] = {"set", "variant"};

static const gb_cli_option help_option = {"help", 'h', NULL, "print this help and exit"};

static const gb_cli_option *option_at(const gb_cli_parser *p, int i)
{
    return i == p->n_options ? &help_option : &p->spec->options[i];
}

/* The entries of spec's table: those before the first without a name (a full table has
 * none without). */
static int count_options(const gb_cli_spec *spec)
{
    int n = 0;
    while (n < GB_CLI_MAX_OPTIONS && spec->options[n].name)
        n++;
    return n;
}

void gb_cli_begin(gb_cli_parser *p, const gb_cli_spec *spec, int argc, char **argv)
{
    memset(p, 0, sizeof *p);
    p->spec = spec;
    p->argc = argc;
    p->argv = argv;
    p->n_options = count_options(spec);
    /* '-': operands come back in order, argv is not permuted (`gearbox ab` quotes it in
     * its report); '+': stop at the first operand; ':': a missing value is reported as
     * such rather than as an unknown option */
    char *s = p->shortopts;
    *s++ = spec->stop_at_operand ? '+' : '-';
    *s++ = ':';
    for (int i = 0; i <= p->n_options; i++) {
        const gb_cli_option *o = option_at(p, i);
        p->longopts[i] = (struct option){o->name, o->arg ? required_argument : no_argument,
                                         NULL, LONG_BASE + i};
        if (o->short_name) {
            *s++ = o->short_name;
            if (o->arg)
                *s++ = ':';
        }
    }
    *s = '\0';
    p->longopts[p->n_options + 1] = (struct option){0};
    optind = 0;   /* glibc: start afresh (another verb's parse may have run before) */
    opterr = 0;
}

static int index_of_short(const gb_cli_parser *p, int c)
{
    for (int i = 0; i <= p->n_options; i++)
        if (option_at(p, i)->short_name == c)
            return i;
    return -1;
}

/* How many options the long argument `arg` ("--na" or "--na=v") abbreviates. */
static int prefix_matches(const gb_cli_parser *p, const char *arg, char *names, size_t cap)
{
    size_t len = strcspn(arg + 2, "=");
    int n = 0;
    names[0] = '\0';
    for (int i = 0; i <= p->n_options; i++) {
        const char *name = option_at(p, i)->name;
        if (strncmp(name, arg + 2, len) == 0) {
            size_t used = strlen(names);
            snprintf(names + used, cap - used, "%s--%s", n ? " or " : "", name);
            n++;
        }
    }
    return n;
}

/* The usage error for what getopt_long refused: optopt holds the short letter, or for a
 * long option its value from longopts (0 when unknown or ambiguous), which was then the
 * last argument read. */
static int refused(gb_cli_parser *p, int code)
{
    const char *verb = p->spec->verb;
    int is_short = optopt > 0 && optopt < LONG_BASE;
    int i = is_short ? index_of_short(p, optopt) : optopt ? optopt - LONG_BASE : -1;
    const gb_cli_option *o = i >= 0 ? option_at(p, i) : NULL;
    if (code == ':' && o)
        return gb_cli_usage_error(verb, "option --%s needs a value: --%s %s", o->name, o->name,
                                  o->arg);
    if (is_short)
        return gb_cli_usage_error(verb, "unknown option -%c", optopt);
    const char *arg = p->argv[optind - 1];
    if (o)
        return gb_cli_usage_error(verb, "option --%s takes no value (%s)", o->name, arg);
    char names[512];
    if (prefix_matches(p, arg, names, sizeof names) > 1)
        return gb_cli_usage_error(verb, "option %s is ambiguous: %s?", arg, names);
    return gb_cli_usage_error(verb, "unknown option %s", arg);
}

/* The first entry of the ':'-separated list `dirs` that is not a folder: 0, or the exit
 * status of a usage error naming it (an empty entry, as in "a::b", names nothing and
 * passes). */
static int check_folders(const gb_cli_parser *p, const gb_cli_option *o, const char *dirs)
{
    for (const char *entry = dirs; *entry;) {
        size_t len = strcspn(entry, ":");
        char dir[4096];
        struct stat st;
        snprintf(dir, sizeof dir, "%.*s", (int)len, entry);
        const char *why = stat(dir, &st) != 0 ? strerror(errno)
                          : S_ISDIR(st.st_mode) ? NULL : "it is not a folder";
        if (len && why)
            return gb_cli_usage_error(p->spec->verb, "--%s %s: %s: %s; name folders that exist",
                                      o->name, dirs, dir, why);
        entry += len + (entry[len] == ':');
    }
    return 0;
}

/* Refuses what the value of option i may not be: a second value of a single-value option
 * (which would silently replace the first), a folder list naming a missing folder. 0, or
 * the exit status of the usage error. */
static int check_value(gb_cli_parser *p, int i)
{
    const gb_cli_option *o = option_at(p, i);
    int repeats = 0;
    for (size_t k = 0; k < sizeof repeatable / sizeof repeatable[0]; k++)
        repeats |= strcmp(o->name, repeatable[k]) == 0;
    if (!o->arg || repeats)
        return 0;
    if (p->given[i])
        return gb_cli_usage_error(p->spec->verb, "option --%s is given twice (%s, then %s): "
                                  "give it once", o->name, p->given[i], p->value);
    p->given[i] = p->value;
    return strcmp(o->name, "plugin-path") == 0 ? check_folders(p, o, p->value) : 0;
}

/* Whether an option's value named `arg` in --help is a path, which an empty value never is. */
static int names_a_file(const char *arg)
{
    static const char *const paths[] = {"FILE", "PATH", "DIR", "CHECKPOINT"};
    for (size_t i = 0; arg && i < sizeof paths / sizeof paths[0]; i++)
        if (strcmp(arg, paths[i]) == 0)
            return 1;
    return 0;
}

int gb_cli_next(gb_cli_parser *p)
{
    if (p->after_dashes) {   /* getopt_long leaves what follows "--" in argv */
        if (p->next == p->argc)
            return GB_CLI_END;
        p->value = p->argv[p->next++];
        return GB_CLI_OPERAND;
    }
    int code = getopt_long(p->argc, p->argv, p->shortopts, p->longopts, NULL);
    p->value = optarg;
    int i = code >= LONG_BASE ? code - LONG_BASE : code > 1 ? index_of_short(p, code) : -1;
    if (code == -1) {
        p->next = optind;
        if (p->spec->stop_at_operand)
            return GB_CLI_END;
        p->after_dashes = 1;
        return gb_cli_next(p);
    }
    if (code == 1)
        return GB_CLI_OPERAND;
    if (code == '?' || code == ':' || i < 0) {
        p->status = refused(p, code);
        return GB_CLI_EXIT;
    }
    if (i == p->n_options) {
        gb_cli_help(p->spec, stdout);
        p->status = 0;
        return GB_CLI_EXIT;
    }
    const gb_cli_option *o = option_at(p, i);
    if (p->value && !*p->value && names_a_file(o->arg)) {
        p->status = gb_cli_usage_error(p->spec->verb, "option --%s needs a %s, not an empty "
                                       "value", o->name, o->arg);
        return GB_CLI_EXIT;
    }
    if ((p->status = check_value(p, i)) != 0)
        return GB_CLI_EXIT;
    return i;
}

/* "  -s, --set section.key=value" */
static void label_of(const gb_cli_option *o, char *buf, size_t cap)
{
    char letter[8] = "    ";
    if (o->short_name)
        snprintf(letter, sizeof letter, "-%c, ", o->short_name);
    snprintf(buf, cap, "  %s--%s%s%s", letter, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

/* `text` from column `column`, where the line written so far ends at column `at`: on
 * this line when there is room for it, else on the next; each of its lines indented to
 * the column. */
static void print_at_column(FILE *f, int at, const char *text, int column)
{
    if (at + 2 > column)
        fprintf(f, "\n%*s", column, "");
    else
        fprintf(f, "%*s", column - at, "");
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        fwrite(line, 1, len, f);
        fputc('\n', f);
        line += len;
        if (*line == '\n' && *++line)
            fprintf(f, "%*s", column, "");
    }
}

/* The help of one option from column `column`, each of its lines indented to it. */
static void print_option(FILE *f, const gb_cli_option *o, int column)
{
    char label[160];
    label_of(o, label, sizeof label);
    fputs(label, f);
    print_at_column(f, (int)strlen(label), o->help, column);
}

enum { HELP_WIDTH = 90, SUMMARY_COLUMN = 34 };

/* A synopsis being written: the columns of its last line, where a wrapped line starts. */
typedef struct synopsis {
    FILE *f;
    int at, indent, wrapped;
} synopsis;

/* Writes `word` after a blank, or on a new line when it would pass HELP_WIDTH. */
static void put_word(synopsis *s, const char *word)
{
    int len = (int)strlen(word);
    if (s->at > s->indent && s->at + 1 + len > HELP_WIDTH) {
        fprintf(s->f, "\n%*s", s->indent, "");
        s->at = s->indent;
        s->wrapped = 1;
    } else {
        fputc(' ', s->f);
        s->at++;
    }
    fputs(word, s->f);
    s->at += len;
}

/* Whether `text` names the option --`name` (not only one it starts, such as --name-x). */
static int names_option(const char *text, const char *name)
{
    size_t len = strlen(name);
    for (const char *at = text; (at = strstr(at, "--")); at += 2)
        if (strncmp(at + 2, name, len) == 0 && !isalnum((unsigned char)at[2 + len]) &&
            at[2 + len] != '-')
            return 1;
    return 0;
}

/* A verb's lines in its command's --help: "  VERB OPERANDS [--option VALUE]...", every
 * option of its table that the operands do not name, wrapped under the operands; then
 * its summary from SUMMARY_COLUMN, beside a one-line synopsis or under a longer one. */
static void print_verb(FILE *f, const gb_cli_verb *v)
{
    const gb_cli_spec *spec = v->spec;
    synopsis s = {f, fprintf(f, "  %s", spec->verb), 0, 0};
    s.indent = s.at + 1;
    const char *operands = v->operands ? v->operands : "";
    if (*operands)
        put_word(&s, operands);
    for (int i = 0; i < count_options(spec); i++) {
        const gb_cli_option *o = &spec->options[i];
        char word[160];
        snprintf(word, sizeof word, "[--%s%s%s]", o->name, o->arg ? " " : "",
                 o->arg ? o->arg : "");
        if (!names_option(operands, o->name))
            put_word(&s, word);
    }
    if (v->summary)
        print_at_column(f, s.wrapped ? HELP_WIDTH : s.at, v->summary, SUMMARY_COLUMN);
    else
        fputc('\n', f);
}

void gb_cli_help(const gb_cli_spec *spec, FILE *f)
{
    enum { MAX_COLUMN = 30 };
    int column = 0, n = count_options(spec);
    char label[160];
    for (int i = 0; i < n; i++) {
        label_of(&spec->options[i], label, sizeof label);
        int width = (int)strlen(label) + 2;
        if (width <= MAX_COLUMN && width > column)
            column = width;
    }
    label_of(&help_option, label, sizeof label);
    if ((int)strlen(label) + 2 > column)
        column = (int)strlen(label) + 2;
    fprintf(f, "usage: %s\n", spec->usage);
    if (spec->about)
        fprintf(f, "\n%s", spec->about);
    if (spec->verbs)
        fputs("\nverbs:\n", f);
    for (const gb_cli_verb *v = spec->verbs; v && v->spec; v++)
        print_verb(f, v);
    fputs("\noptions:\n", f);
    for (int i = 0; i < n; i++)
        print_option(f, &spec->options[i], column);
    print_option(f, &help_option, column);
    if (spec->notes)
        fprintf(f, "\n%s", spec->notes);
}

const gb_cli_verb *gb_cli_find_verb(const gb_cli_spec *spec, const char *name)
{
    for (const gb_cli_verb *v = spec->verbs; v && v->spec; v++)
        if (strcmp(v->spec->verb, name) == 0)
            return v;
    return NULL;
}

int gb_cli_parse(const gb_cli_spec *spec, int argc, char **argv,
                 int (*on_option)(void *ctx, int index, const char *value), void *ctx,
                 int *first)
{
    char **operands = malloc((size_t)argc * sizeof *operands);
    if (!operands)
        return gb_cli_usage_error(spec->verb, "out of memory");
    gb_cli_parser p;
    gb_cli_begin(&p, spec, argc, argv);
    int n = 0, rc = 0;
    for (int opt; rc == 0 && (opt = gb_cli_next(&p)) != GB_CLI_END;) {
        if (opt == GB_CLI_OPERAND)
            operands[n++] = (char *)p.value;
        else if (opt == GB_CLI_EXIT)
            rc = p.status ? p.status : -1;
        else
            rc = on_option(ctx, opt, p.value);
    }
    *first = argc - n;
    if (rc == 0)
        memcpy(argv + *first, operands, (size_t)n * sizeof *operands);
    free(operands);
    return rc;
}

/* Word `i` of the blank-separated `names` into buf. */
static const char *word_of(const char *names, int i, char *buf, size_t cap)
{
    for (; i > 0 && strchr(names, ' '); i--)
        names = strchr(names, ' ') + 1;
    snprintf(buf, cap, "%.*s", (int)strcspn(names, " "), names);
    return buf;
}

int gb_cli_parse_operands(const gb_cli_spec *spec, int argc, char **argv,
                          int (*on_option)(void *ctx, int index, const char *value), void *ctx,
                          int min, int max, const char *names, const char **operands)
{
    int first;
    int rc = gb_cli_parse(spec, argc, argv, on_option, ctx, &first);
    const int given = argc - first;
    if (rc)
        return rc;
    if (given > max)
        return gb_cli_usage_error(spec->verb, "unexpected argument %s (expected %s)",
                                  argv[first + max], names);
    if (given < min)
        return gb_cli_usage_error(spec->verb, "missing %s (%d of %d given)", names, given,
                                  min);
    for (int i = 0; i < given; i++)
        if (!*argv[first + i]) {
            char name[64];
            return gb_cli_usage_error(spec->verb, "the argument for %s is empty (expected %s)",
                                      word_of(names, i, name, sizeof name), names);
        }
    for (int i = 0; i < max; i++)
        operands[i] = i < given ? argv[first + i] : NULL;
    return 0;
}

int gb_cli_keep_value(void *ctx, int index, const char *value)
{
    (void)index;
    *(const char **)ctx = value;
    return 0;
}
