/* Configuration: INI text parsed with inih into entries that remember where they came
 * from, `--set` overrides, and validation of sections against gb_option tables; see
 * config.h.
 *
 * inih does the tokenising. Our reader hands it the text one line at a time, which is how
 * every entry learns its line number (Debian's inih passes none to handlers). The reader
 * strips leading blanks, which switches inih's multi-line values off: an indented
 * "key = value" is a key of its own, never the continuation of the previous value.
 * Left out on purpose: multi-line values, quoting, includes and interpolation. A value
 * cannot hold an inline comment (';' or '#' at its start or after a blank), so that every
 * value written by gb_config_write reads back the same, and a line cannot be longer than
 * inih's line buffer (198 characters in Debian's build); a longer one is reported.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <ini.h>

#include "fsutil.h"
#include "text.h"

#define NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_"
#define COMMENT_CHARS ";#"
#define UTF8_BOM "\xEF\xBB\xBF"

typedef struct gb_section {
    const char *name;
    const char *place;   /* "PATH:LINE" of its first header, or the --set that made it */
} gb_section;

typedef struct gb_entry {
    const char *section, *key, *value;
    const char *place;   /* "PATH:LINE" or "--set section.key=value" */
    int line;            /* 0 for --set */
} gb_entry;

/* One effective value, as gb_config_write prints it. */
typedef struct gb_setting {
    const char *section, *key, *text;
} gb_setting;

struct gb_config {
    const char *dir;
    gb_section *sections;
    size_t n_sections, cap_sections;
    gb_entry *entries;
    size_t n_entries, cap_entries;
    const char **validated;   /* section names in the order they were first validated */
    size_t n_validated, cap_validated;
    gb_setting *settings;
    size_t n_settings, cap_settings;
    char **strings;           /* every string the above point to */
    size_t n_strings, cap_strings;
};

/* ---- storage ------------------------------------------------------------------------- */

/* `items` with room for one more than `count`: the same pointer, a moved one, or NULL when
 * out of memory (the old array is then untouched). */
static void *reserve(void *items, size_t *cap, size_t count, size_t item_size)
{
    if (count < *cap)
        return items;
    size_t grown_cap = *cap ? *cap * 2 : 8;
    void *grown = realloc(items, grown_cap * item_size);
    if (grown)
        *cap = grown_cap;
    return grown;
}

/* Hands a malloc'ed string to cfg, which frees it in gb_config_free. */
static char *adopt(gb_config *cfg, char *s)
{
    char **strings = s ? reserve(cfg->strings, &cfg->cap_strings, cfg->n_strings,
                                 sizeof *strings)
                       : NULL;
    if (!strings) {
        free(s);
        return NULL;
    }
    cfg->strings = strings;
    strings[cfg->n_strings++] = s;
    return s;
}

static char *keep(gb_config *cfg, const char *s, size_t len)
{
    return adopt(cfg, strndup(s, len));
}

static char *keep_string(gb_config *cfg, const char *s)
{
    return keep(cfg, s, strlen(s));
}

static char *keep_format(gb_config *cfg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *keep_format(gb_config *cfg, const char *fmt, ...)
{
    char *s;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : adopt(cfg, s);
}

static char *keep_trimmed(gb_config *cfg, const char *s, size_t len)
{
    gb_trim_blanks(&s, &len);
    return keep(cfg, s, len);
}

static gb_section *find_section(const gb_config *cfg, const char *name, size_t len)
{
    for (size_t i = 0; i < cfg->n_sections; i++)
        if (strlen(cfg->sections[i].name) == len && memcmp(cfg->sections[i].name, name, len) == 0)
            return &cfg->sections[i];
    return NULL;
}

/* The section called name[0..len), added with `place` unless it exists; NULL when out of
 * memory. */
static gb_section *enter(gb_config *cfg, const char *name, size_t len, const char *place)
{
    gb_section *found = find_section(cfg, name, len);
    if (found)
        return found;
    gb_section *sections = reserve(cfg->sections, &cfg->cap_sections, cfg->n_sections,
                                   sizeof *sections);
    if (!sections)
        return NULL;
    cfg->sections = sections;
    const char *kept = keep(cfg, name, len);
    if (!kept)
        return NULL;
    sections[cfg->n_sections] = (gb_section){.name = kept, .place = place};
    return &sections[cfg->n_sections++];
}

static gb_entry *find_entry(const gb_config *cfg, const char *section, const char *key)
{
    for (size_t i = 0; i < cfg->n_entries; i++)
        if (strcmp(cfg->entries[i].section, section) == 0 && strcmp(cfg->entries[i].key, key) == 0)
            return &cfg->entries[i];
    return NULL;
}

static bool add_entry(gb_config *cfg, gb_entry entry)
{
    gb_entry *entries = reserve(cfg->entries, &cfg->cap_entries, cfg->n_entries, sizeof *entries);
    if (!entries)
        return false;
    cfg->entries = entries;
    entries[cfg->n_entries++] = entry;
    return true;
}

/* Where an inline comment starts in `s`: a comment character at its start or after a
 * blank (inih's rule for ';'), or NULL. */
static const char *find_inline_comment(const char *s)
{
    for (const char *c = s; *c; c++)
        if (strchr(COMMENT_CHARS, *c) && (c == s || isblank((unsigned char)c[-1])))
            return c;
    return NULL;
}

static bool contains(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

/* "a, b, c" into buf (cut short if it does not fit). */
static void join_names(const char *const *names, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", names[i]);
}

/* ---- parsing ------------------------------------------------------------------------- */

typedef struct gb_parser {
    gb_config *cfg;
    gb_diag *diag;
    const char *origin;    /* the path as given, or load_string's origin */
    const char *next;      /* the text not read yet */
    int lineno;
    const char *line;      /* the current line without its surrounding blanks */
    size_t line_len;
    const char *section;   /* the current section's name, NULL before the first header */
    int problems;
} gb_parser;

/* Takes the line at *next without its ending ("\n", "\r\n" or "\r"), its surrounding
 * blanks and, on the first line, a UTF-8 byte-order mark; moves *next to the following
 * line. */
static const char *take_line(const char **next, bool first, size_t *len)
{
    size_t n;
    const char *line = gb_next_line(next, &n);
    if (first && n >= strlen(UTF8_BOM) && strncmp(line, UTF8_BOM, strlen(UTF8_BOM)) == 0) {
        line += strlen(UTF8_BOM);
        n -= strlen(UTF8_BOM);
    }
    gb_trim_blanks(&line, &n);
    *len = n;
    return line;
}

static void report_syntax_error(gb_parser *p, int lineno, const char *text, size_t len)
{
    gb_diag_add(p->diag, "%s:%d: syntax error: %.*s; expected 'key = value' or '[section]'",
                p->origin, lineno, (int)len, text);
    p->problems++;
}

/* Returns the number of problems it adds, 1. */
static int report_out_of_memory(gb_diag *diag)
{
    gb_diag_add(diag, "out of memory while reading the configuration");
    return 1;
}

/* Follows a "[name]" line the way inih reads it (the name is everything up to the first
 * ']'), so that sections without keys are known too. */
static void enter_section_line(gb_parser *p)
{
    const char *close = memchr(p->line, ']', p->line_len);
    /* Without ']' inih reports a syntax error; taking the rest of the line as the name
     * keeps the keys below from being reported as outside any section as well. */
    const char *end = close ? close : p->line + p->line_len;
    const char *place = keep_format(p->cfg, "%s:%d", p->origin, p->lineno);
    const gb_section *section =
        place ? enter(p->cfg, p->line + 1, (size_t)(end - p->line - 1), place) : NULL;
    if (!section) {
        p->problems += report_out_of_memory(p->diag);
        return;
    }
    p->section = section->name;
    const char *rest = close ? close + 1 : end;
    size_t rest_len = p->line_len - (size_t)(rest - p->line);
    gb_trim_blanks(&rest, &rest_len);
    /* inih would drop the rest silently, e.g. a key written on the header line */
    if (rest_len && !strchr(COMMENT_CHARS, *rest))
        report_syntax_error(p, p->lineno, p->line, p->line_len);
}

/* inih's line reader (fgets-like). */
static char *read_line(char *buf, int size, void *stream)
{
    gb_parser *p = stream;
    if (!*p->next)
        return NULL;
    p->lineno++;
    p->line = take_line(&p->next, p->lineno == 1, &p->line_len);
    size_t len = p->line_len;
    /* inih's buffer holds `size` bytes: the line, its '\n' and a NUL. inih would read a
     * longer line as two, so it gets an empty one instead. */
    if (len + 2 > (size_t)size) {
        gb_diag_add(p->diag, "%s:%d: the line is %zu characters long; at most %d are supported",
                    p->origin, p->lineno, len, size - 2);
        p->problems++;
        len = 0;
    } else if (len && p->line[0] == '[') {
        enter_section_line(p);
    }
    memcpy(buf, p->line, len);
    strcpy(buf + len, "\n");
    return buf;
}

/* inih's handler, called for each "key = value" line. Returns 1 even for problems, which
 * are reported here, so that inih's own error count means syntax errors only. */
static int on_key_value(void *user, const char *section, const char *name, const char *value)
{
    (void)section; /* the reader tracks sections, including their header lines */
    (void)name;    /* inih also splits at ':' and truncates long names: read the line itself */
    gb_parser *p = user;
    size_t key_len = 0;
    while (key_len < p->line_len && !strchr("=:", p->line[key_len]))
        key_len++;
    const char *key_text = p->line;
    size_t key_text_len = key_len;
    gb_trim_blanks(&key_text, &key_text_len);
    if (key_len == p->line_len || p->line[key_len] != '=' || !key_text_len) {
        report_syntax_error(p, p->lineno, p->line, p->line_len);
        return 1;
    }
    if (!p->section) {
        gb_diag_add(p->diag, "%s:%d: key '%.*s' is outside any [section]; add a [section] line "
                    "above it", p->origin, p->lineno, (int)key_text_len, key_text);
        p->problems++;
        return 1;
    }
    const char *comment = find_inline_comment(value);
    gb_entry entry = {
        .section = p->section,
        .key = keep(p->cfg, key_text, key_text_len),
        .value = keep_trimmed(p->cfg, value, comment ? (size_t)(comment - value) : strlen(value)),
        .place = keep_format(p->cfg, "%s:%d", p->origin, p->lineno),
        .line = p->lineno,
    };
    if (!entry.key || !entry.value || !entry.place) {
        p->problems += report_out_of_memory(p->diag);
        return 1;
    }
    const gb_entry *first = find_entry(p->cfg, entry.section, entry.key);
    if (first) {
        gb_diag_add(p->diag, "%s: [%s] %s is set twice, on lines %d and %d; keep one",
                    entry.place, entry.section, entry.key, first->line, entry.line);
        p->problems++;
    } else if (!add_entry(p->cfg, entry)) {
        p->problems += report_out_of_memory(p->diag);
    }
    return 1;
}

/* A reader that hands inih nothing but notes the size of inih's line buffer. */
static char *note_buffer_size(char *buf, int size, void *stream)
{
    (void)buf;
    *(int *)stream = size;
    return NULL;
}

/* The longest line inih reads whole: its buffer (fixed when inih was built, so learnt
 * from inih itself) less the line's '\n' and NUL. */
static size_t max_line_length(void)
{
    static int buffer_size;
    if (!buffer_size)
        ini_parse_stream(note_buffer_size, &buffer_size, on_key_value, NULL);
    return buffer_size > 2 ? (size_t)buffer_size - 2 : 0;
}

/* Whether "key=value" fits on a line that reads back (gb_config_write writes it so when
 * "key = value" would not). */
static bool fits_a_line(const char *key, const char *value)
{
    return strlen(key) + 1 + strlen(value) <= max_line_length();
}

static const char *line_at(const char *text, int lineno, size_t *len)
{
    const char *line = text;
    for (int i = 1; i <= lineno; i++)
        line = take_line(&text, i == 1, len);
    return line;
}

/* Parses `text`; `dir` (malloc'ed) becomes the config's folder. */
static gb_config *parse_text(const char *text, const char *origin, char *dir, gb_diag *diag)
{
    gb_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) {
        free(dir);
        report_out_of_memory(diag);
        return NULL;
    }
    cfg->dir = adopt(cfg, dir);
    if (!cfg->dir) {
        gb_config_free(cfg);
        report_out_of_memory(diag);
        return NULL;
    }
    gb_parser p = {.cfg = cfg, .diag = diag, .origin = origin, .next = text};
    int first_error = ini_parse_stream(read_line, &p, on_key_value, &p);
    if (first_error > 0) {
        size_t len;
        const char *line = line_at(text, first_error, &len);
        report_syntax_error(&p, first_error, line, len);
    } else if (first_error < 0) {
        p.problems += report_out_of_memory(diag);
    }
    if (p.problems) {
        gb_config_free(cfg);
        return NULL;
    }
    return cfg;
}

/* The whole file, or stream (gb_read_input), as one string, or NULL with the reason in
 * `diag`. */
static char *read_file(const char *path, gb_diag *diag)
{
    unsigned char *text;
    size_t len;
    const char *why;
    if (gb_read_input(path, &text, &len, &why) != 0) {
        gb_diag_add(diag, "%s: cannot open: %s", path, why);
        return NULL;
    }
    if (strlen((char *)text) != len) {
        gb_diag_add(diag, "%s: not a text file (it contains NUL bytes)", path);
        free(text);
        return NULL;
    }
    return (char *)text;
}

static char *join_path(const char *dir, const char *name)
{
    size_t len = strlen(dir);
    char *joined;
    if (asprintf(&joined, "%s%s%s", dir, len && dir[len - 1] == '/' ? "" : "/", name) < 0)
        return NULL;
    return joined;
}

/* The absolute folder holding `path`, malloc'ed, or NULL with the reason in `diag`. */
static char *folder_of(const char *path, gb_diag *diag)
{
    char *copy = strdup(path);
    char *folder = copy ? realpath(dirname(copy), NULL) : NULL;
    int error = copy ? errno : ENOMEM;
    free(copy);
    if (!folder)
        gb_diag_add(diag, "%s: cannot find its folder: %s", path, strerror(error));
    return folder;
}

gb_config *gb_config_load(const char *path, gb_diag *diag)
{
    /* a stream has no folder of its own (bash's <(...) is /dev/fd/63): its relative paths
     * resolve against the working folder */
    int stream = gb_input_is_stream(path);
    char *text = read_file(path, diag);
    if (!text)
        return NULL;
    char *dir = stream ? getcwd(NULL, 0) : folder_of(path, diag);
    if (!dir && stream)
        gb_diag_add(diag, "%s: cannot find the working folder: %s", path, strerror(errno));
    gb_config *cfg = dir ? parse_text(text, path, dir, diag) : NULL;
    free(text);
    return cfg;
}

gb_config *gb_config_load_string(const char *text, const char *origin, const char *base_dir,
                                 gb_diag *diag)
{
    char *dir;
    if (base_dir[0] == '/') {
        dir = strdup(base_dir);
    } else {
        char *cwd = getcwd(NULL, 0);
        dir = cwd ? join_path(cwd, base_dir) : NULL;
        free(cwd);
    }
    if (!dir) {
        gb_diag_add(diag, "%s: cannot make the folder '%s' absolute: %s", origin, base_dir,
                    strerror(errno));
        return NULL;
    }
    return parse_text(text, origin, dir, diag);
}

void gb_config_free(gb_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n_strings; i++)
        free(cfg->strings[i]);
    free(cfg->strings);
    free(cfg->sections);
    free(cfg->entries);
    free(cfg->validated);
    free(cfg->settings);
    free(cfg);
}

/* ---- access and overrides ------------------------------------------------------------ */

int gb_config_set(gb_config *cfg, const char *assignment, gb_diag *diag)
{
    size_t section_len = strspn(assignment, NAME_CHARS);
    bool has_dot = assignment[section_len] == '.';
    const char *key = assignment + section_len + has_dot;
    size_t key_len = strspn(key, NAME_CHARS);
    if (!section_len || !has_dot || !key_len || key[key_len] != '=') {
        gb_diag_add(diag, "--set '%s': expected section.key=value", assignment);
        return -1;
    }
    const char *value = key + key_len + 1;
    size_t value_len = strlen(value);
    gb_trim_blanks(&value, &value_len);
    const char *kept_value = keep(cfg, value, value_len);
    if (kept_value && (strpbrk(kept_value, "\r\n") || find_inline_comment(kept_value))) {
        gb_diag_add(diag, "--set '%s': the value cannot hold a line break, nor ';' or '#' at its "
                    "start or after a blank (an INI file could not store it)", assignment);
        return -1;
    }
    if (kept_value && !fits_a_line(key, kept_value)) {
        gb_diag_add(diag, "--set '%.60s...': the value is %zu characters long; a config line, "
                    "and so the config a checkpoint saves, holds at most %zu", assignment,
                    strlen(kept_value), max_line_length() - key_len - 1);
        return -1;
    }
    const char *place = kept_value ? keep_format(cfg, "--set %s", assignment) : NULL;
    const gb_section *section = place ? enter(cfg, assignment, section_len, place) : NULL;
    const char *kept_key = section ? keep(cfg, key, key_len) : NULL;
    if (!kept_key) {
        report_out_of_memory(diag);
        return -1;
    }
    gb_entry entry = {.section = section->name, .key = kept_key, .value = kept_value,
                      .place = place, .line = 0};
    gb_entry *existing = find_entry(cfg, entry.section, entry.key);
    if (existing) {
        *existing = entry;
    } else if (!add_entry(cfg, entry)) {
        report_out_of_memory(diag);
        return -1;
    }
    return 0;
}

const char *gb_config_get(const gb_config *cfg, const char *section, const char *key)
{
    const gb_entry *entry = find_entry(cfg, section, key);
    return entry ? entry->value : NULL;
}

const char *gb_config_dir(const gb_config *cfg)
{
    return cfg->dir;
}

char *gb_config_resolve_path(const gb_config *cfg, const char *section, const char *key,
                             const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    const gb_entry *entry = find_entry(cfg, section, key);
    if (!entry || entry->line > 0)
        return join_path(cfg->dir, path);
    /* typed on the command line: relative to where the shell is, as for any command */
    char *cwd = getcwd(NULL, 0);
    char *joined = cwd ? join_path(cwd, path) : NULL;
    free(cwd);
    return joined;
}

/* ---- validation ---------------------------------------------------------------------- */

int gb_config_check_sections(const gb_config *cfg, const char *const *known, size_t n_known,
                             gb_diag *diag)
{
    char known_list[1024];
    join_names(known, n_known, known_list, sizeof known_list);
    int problems = 0;
    for (size_t i = 0; i < cfg->n_sections; i++) {
        const gb_section *s = &cfg->sections[i];
        if (contains(known, n_known, s->name))
            continue;
        const char *suggestion = gb_suggest(s->name, known, n_known);
        if (suggestion)
            gb_diag_add(diag, "%s: unknown section [%s]; did you mean [%s]? Known sections: %s",
                        s->place, s->name, suggestion, known_list);
        else
            gb_diag_add(diag, "%s: unknown section [%s]; known sections: %s", s->place, s->name,
                        known_list);
        problems++;
    }
    return problems;
}

static int report_unknown_keys(const gb_config *cfg, const char *section,
                               const gb_option *options, size_t n_options,
                               const char *const *ignore, size_t n_ignore, gb_diag *diag)
{
    size_t n_valid = n_options + n_ignore;
    const char **valid = malloc((n_valid + 1) * sizeof *valid);
    if (!valid)
        return report_out_of_memory(diag);
    for (size_t i = 0; i < n_options; i++)
        valid[i] = options[i].key;
    for (size_t i = 0; i < n_ignore; i++)
        valid[n_options + i] = ignore[i];
    char valid_list[1024];
    join_names(valid, n_valid, valid_list, sizeof valid_list);
    int problems = 0;
    for (size_t i = 0; i < cfg->n_entries; i++) {
        const gb_entry *e = &cfg->entries[i];
        if (strcmp(e->section, section) != 0 || contains(valid, n_valid, e->key))
            continue;
        const char *suggestion = gb_suggest(e->key, valid, n_valid);
        if (suggestion)
            gb_diag_add(diag, "%s: [%s] unknown key '%s'; did you mean '%s'?", e->place,
                        section, e->key, suggestion);
        else if (n_valid)
            gb_diag_add(diag, "%s: [%s] unknown key '%s'; valid keys: %s", e->place, section,
                        e->key, valid_list);
        else
            gb_diag_add(diag, "%s: [%s] unknown key '%s'; this section takes no keys", e->place,
                        section, e->key);
        problems++;
    }
    free(valid);
    return problems;
}

/* The shortest "%g" text, from 6 digits up (so 10 reads "10", not "1e+01"), that reads
 * back as exactly `x`. */
static void format_double(char *buf, size_t size, double x)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

/* Bounds are doubles; integer options show them as integers while doubles hold them exactly. */
static void format_bound(char *buf, size_t size, gb_option_type type, double x)
{
    if (type == GB_OPT_INT && x == floor(x) && fabs(x) < 0x1p53)
        snprintf(buf, size, "%.0f", x);
    else
        format_double(buf, size, x);
}

typedef enum value_check { VALUE_OK, VALUE_MALFORMED, VALUE_OUT_OF_RANGE } value_check;

static value_check out_of_range(const gb_option *opt, char *why, size_t size)
{
    char lo[32], hi[32];
    format_bound(lo, sizeof lo, opt->type, opt->min);
    format_bound(hi, sizeof hi, opt->type, opt->max);
    snprintf(why, size, "out of range [%s, %s]", lo, hi);
    return VALUE_OUT_OF_RANGE;
}

static value_check malformed(char *why, size_t size, const char *expected)
{
    snprintf(why, size, "expected %s", expected);
    return VALUE_MALFORMED;
}

static value_check parse_int(const gb_option *opt, const char *text, gb_value *out, char *why,
                             size_t size)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end)
        return malformed(why, size, "an integer");
    if (errno == ERANGE || (double)v < opt->min || (double)v > opt->max)
        return out_of_range(opt, why, size);
    out->i = v;
    return VALUE_OK;
}

static value_check parse_float(const gb_option *opt, const char *text, gb_value *out, char *why,
                               size_t size)
{
    char *end;
    double v = strtod(text, &end);
    if (!*text || *end || !isfinite(v))
        return malformed(why, size, "a number");
    if (v < opt->min || v > opt->max)
        return out_of_range(opt, why, size);
    out->f = v;
    return VALUE_OK;
}

static value_check parse_bool(const char *text, gb_value *out, char *why, size_t size)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(text, yes[i]) == 0 || strcasecmp(text, no[i]) == 0) {
            out->i = strcasecmp(text, yes[i]) == 0;
            return VALUE_OK;
        }
    }
    return malformed(why, size, "true or false (or yes/no, on/off, 1/0)");
}

static value_check parse_enum(const gb_option *opt, const char *text, gb_value *out, char *why,
                              size_t size)
{
    const char *choices = opt->choices ? opt->choices : "";
    size_t used = (size_t)snprintf(why, size, "expected one of ");
    int64_t index = 0;
    for (const char *choice = choices; *choice; index++) {
        size_t len = strcspn(choice, "|");
        if (len && len == strlen(text) && memcmp(choice, text, len) == 0) {
            out->i = index;
            return VALUE_OK;
        }
        if (used < size)
            used += (size_t)snprintf(why + used, size - used, "%s%.*s", index ? ", " : "",
                                     (int)len, choice);
        choice += len + (choice[len] == '|');
    }
    return VALUE_MALFORMED;
}

/* Parses `text` as `opt` asks; otherwise says in `why` what is wrong. */
static value_check parse_value(const gb_option *opt, const char *text, gb_value *out, char *why,
                               size_t size)
{
    switch (opt->type) {
    case GB_OPT_INT: return parse_int(opt, text, out, why, size);
    case GB_OPT_FLOAT: return parse_float(opt, text, out, why, size);
    case GB_OPT_BOOL: return parse_bool(text, out, why, size);
    case GB_OPT_ENUM: return parse_enum(opt, text, out, why, size);
    case GB_OPT_STRING: out->s = text; return VALUE_OK;
    }
    snprintf(why, size, "the option has an unknown type (%d)", (int)opt->type);
    return VALUE_MALFORMED;
}

/* The canonical text of a parsed value, so that writing and reading it back gives the same
 * value. Points into buf, the option's choices, or the value's own string. */
static const char *canonical_text(const gb_option *opt, gb_value value, char *buf, size_t size)
{
    switch (opt->type) {
    case GB_OPT_INT:
        snprintf(buf, size, "%" PRId64, value.i);
        return buf;
    case GB_OPT_FLOAT:
        format_double(buf, size, value.f);
        return buf;
    case GB_OPT_BOOL:
        return value.i ? "true" : "false";
    case GB_OPT_ENUM: {
        const char *choice = opt->choices;
        for (int64_t i = 0; i < value.i; i++)
            choice += strcspn(choice, "|") + 1;
        snprintf(buf, size, "%.*s", (int)strcspn(choice, "|"), choice);
        return buf;
    }
    case GB_OPT_STRING:
        break;
    }
    return value.s;
}

/* Starts (or restarts) the record of a section's effective values; returns its name as
 * cfg keeps it, NULL when out of memory. */
static const char *restart_settings(gb_config *cfg, const char *section)
{
    for (size_t i = 0; i < cfg->n_validated; i++) {
        if (strcmp(cfg->validated[i], section) != 0)
            continue;
        size_t kept = 0;
        for (size_t j = 0; j < cfg->n_settings; j++)
            if (cfg->settings[j].section != cfg->validated[i])
                cfg->settings[kept++] = cfg->settings[j];
        cfg->n_settings = kept;
        return cfg->validated[i];
    }
    const char **validated =
        reserve(cfg->validated, &cfg->cap_validated, cfg->n_validated, sizeof *validated);
    if (!validated)
        return NULL;
    cfg->validated = validated;
    const char *name = keep_string(cfg, section);
    if (!name)
        return NULL;
    validated[cfg->n_validated++] = name;
    return name;
}

/* Records one effective value; returns cfg's copy of `text`, NULL when out of memory. */
static const char *record_setting(gb_config *cfg, const char *section, const char *key,
                                  const char *text)
{
    gb_setting *settings =
        reserve(cfg->settings, &cfg->cap_settings, cfg->n_settings, sizeof *settings);
    if (!settings)
        return NULL;
    cfg->settings = settings;
    gb_setting setting = {.section = section, .key = keep_string(cfg, key)};
    setting.text = setting.key ? keep_string(cfg, text) : NULL;
    if (!setting.text)
        return NULL;
    settings[cfg->n_settings++] = setting;
    return setting.text;
}

/* Resolves one option from its entry or its default; returns the number of problems. */
static int resolve_option(gb_config *cfg, const char *section, const gb_option *opt,
                          gb_value *value, gb_diag *diag)
{
    const gb_entry *entry = find_entry(cfg, section, opt->key);
    const char *text = entry ? entry->value : opt->default_value;
    char why[512], buf[64];
    value_check check = parse_value(opt, text, value, why, sizeof why);
    if (check == VALUE_OK) {
        const char *kept = record_setting(cfg, section, opt->key,
                                          canonical_text(opt, *value, buf, sizeof buf));
        if (!kept)
            return report_out_of_memory(diag);
        if (opt->type == GB_OPT_STRING)
            value->s = kept;
        return 0;
    }
    *value = (gb_value){0};
    if (!entry)
        gb_diag_add(diag, "internal error: [%s] %s: the default value '%s' is invalid: %s",
                    section, opt->key, text, why);
    else if (check == VALUE_MALFORMED)
        gb_diag_add(diag, "%s: [%s] %s = '%s': %s", entry->place, section, opt->key, text, why);
    else
        gb_diag_add(diag, "%s: [%s] %s = %s: %s", entry->place, section, opt->key, text, why);
    return 1;
}

int gb_config_validate_section(gb_config *cfg, const char *section, const gb_option *options,
                               size_t n_options, const char *const *ignore, size_t n_ignore,
                               gb_value *values, gb_diag *diag)
{
    for (size_t i = 0; i < n_options; i++)
        values[i] = (gb_value){0}; /* what is left where a problem is reported */
    int problems = report_unknown_keys(cfg, section, options, n_options, ignore, n_ignore, diag);
    const char *name = restart_settings(cfg, section);
    if (!name)
        return problems + report_out_of_memory(diag);
    for (size_t i = 0; i < n_ignore; i++) {
        const gb_entry *entry = find_entry(cfg, name, ignore[i]);
        if (entry && !record_setting(cfg, name, entry->key, entry->value))
            problems += report_out_of_memory(diag);
    }
    for (size_t i = 0; i < n_options; i++)
        problems += resolve_option(cfg, name, &options[i], &values[i], diag);
    return problems;
}

/* Whether `a` and `b`, parsed as `opt` asks, are the same value ("yes" is "true"). */
static bool same_value(const gb_option *opt, const char *a, const char *b)
{
    gb_value va, vb;
    char why[512];
    if (parse_value(opt, a, &va, why, sizeof why) != VALUE_OK ||
        parse_value(opt, b, &vb, why, sizeof why) != VALUE_OK)
        return strcmp(a, b) == 0;   /* validation reports the malformed one */
    switch (opt->type) {
    case GB_OPT_FLOAT: return va.f == vb.f;
    case GB_OPT_STRING: return strcmp(va.s, vb.s) == 0;
    default: return va.i == vb.i;
    }
}

int gb_config_inherit(gb_config *cfg, const gb_config *from, const char *section,
                      const gb_option *options, size_t n_options, const char *origin,
                      gb_diag *diag)
{
    int problems = 0;
    const char *place = keep_string(cfg, origin);
    const gb_section *kept = place ? enter(cfg, section, strlen(section), place) : NULL;
    if (!kept)
        return report_out_of_memory(diag);
    for (size_t i = 0; i < n_options; i++) {
        const char *theirs = gb_config_get(from, section, options[i].key);
        const gb_entry *ours = find_entry(cfg, section, options[i].key);
        if (!theirs || (ours && same_value(&options[i], ours->value, theirs)))
            continue;
        if (ours) {
            gb_diag_add(diag, "%s: [%s] %s = %s, but %s holds a model with %s = %s; remove "
                        "the key (the checkpoint's value is taken) or start from another "
                        "checkpoint", ours->place, section, options[i].key, ours->value,
                        origin, options[i].key, theirs);
            problems++;
            continue;
        }
        gb_entry entry = {.section = kept->name, .key = keep_string(cfg, options[i].key),
                          .value = keep_string(cfg, theirs), .place = place, .line = 0};
        if (!entry.key || !entry.value || !add_entry(cfg, entry))
            return problems + report_out_of_memory(diag);
    }
    return problems;
}

int gb_config_set_effective(gb_config *cfg, const char *section, const char *key,
                            const char *text)
{
    const char *kept = fits_a_line(key, text) ? keep_string(cfg, text) : NULL;
    for (size_t i = 0; kept && i < cfg->n_settings; i++) {
        gb_setting *setting = &cfg->settings[i];
        if (strcmp(setting->section, section) == 0 && strcmp(setting->key, key) == 0) {
            setting->text = kept;
            return 0;
        }
    }
    return -1;
}

/* "key = value", or without the blanks where only that fits a line that reads back. */
static void write_setting(FILE *out, const char *key, const char *text)
{
    bool spaced = strlen(key) + 3 + strlen(text) <= max_line_length();
    fprintf(out, spaced ? "%s = %s\n" : "%s=%s\n", key, text);
}

void gb_config_write(const gb_config *cfg, FILE *out)
{
    for (size_t i = 0; i < cfg->n_validated; i++) {
        fprintf(out, "%s[%s]\n", i ? "\n" : "", cfg->validated[i]);
        for (size_t j = 0; j < cfg->n_settings; j++)
            if (cfg->settings[j].section == cfg->validated[i])
                write_setting(out, cfg->settings[j].key, cfg->settings[j].text);
    }
}

char *gb_config_text(const gb_config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    gb_config_write(cfg, f);
    fclose(f);
    return text;
}

/* ---- suggestions --------------------------------------------------------------------- */

/* Levenshtein distance in which swapping two adjacent characters counts as one edit
 * (optimal string alignment), the commonest typo; SIZE_MAX when out of memory. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t m = strlen(a), n = strlen(b);
    size_t *rows = malloc(3 * (n + 1) * sizeof *rows);
    if (!rows)
        return SIZE_MAX;
    size_t *before = rows, *prev = rows + (n + 1), *cur = rows + 2 * (n + 1);
    for (size_t j = 0; j <= n; j++)
        prev[j] = j;
    for (size_t i = 1; i <= m; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= n; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            cur[j] = best;
        }
        size_t *oldest = before;
        before = prev;
        prev = cur;
        cur = oldest;
    }
    size_t distance = prev[n];
    free(rows);
    return distance;
}

const char *gb_suggest(const char *word, const char *const *candidates, size_t n)
{
    size_t len = strlen(word);
    size_t limit = len / 3 > 1 ? len / 3 : 1;
    const char *best = NULL;
    size_t best_distance = limit + 1;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, candidates[i]);
        if (d < best_distance) {
            best = candidates[i];
            best_distance = d;
        }
    }
    return best;
}
