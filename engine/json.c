/* JSON reader; see json.h. Recursive descent over the text, bounded by its length (the
 * text need not end in NUL) and by GB_JSON_MAX_DEPTH. */
#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *start, *p, *end;
    char *err;
    size_t err_cap;
    int failed;
} parser;

__attribute__((format(printf, 2, 3))) static void fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(ps->err, ps->err_cap, "%s at byte %zu", what, (size_t)(ps->p - ps->start));
}

static void skip_blanks(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
                               *ps->p == '\r'))
        ps->p++;
}

static int take_literal(parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return 0;
    ps->p += n;
    return 1;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The four hex digits after "\u"; -1 when malformed. */
static long take_hex4(parser *ps)
{
    if (ps->end - ps->p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(ps->p[i]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    ps->p += 4;
    return v;
}

static void put_utf8(char **out, unsigned long c)
{
    unsigned char *o = (unsigned char *)*out;
    if (c < 0x80) {
        *o++ = (unsigned char)c;
    } else if (c < 0x800) {
        *o++ = (unsigned char)(0xC0 | (c >> 6));
        *o++ = (unsigned char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *o++ = (unsigned char)(0xE0 | (c >> 12));
        *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (c & 0x3F));
    } else {
        *o++ = (unsigned char)(0xF0 | (c >> 18));
        *o++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
        *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (c & 0x3F));
    }
    *out = (char *)o;
}

/* The code point of a "\uXXXX" escape (a surrogate pair joined); -1 when malformed. */
static long take_unicode_escape(parser *ps)
{
    long c = take_hex4(ps);
    if (c < 0xD800 || c > 0xDFFF)
        return c;
    if (c > 0xDBFF || !take_literal(ps, "\\u"))
        return -1;
    long low = take_hex4(ps);
    if (low < 0xDC00 || low > 0xDFFF)
        return -1;
    return 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
}

/* Bytes of the UTF-8 sequence starting at s (at most n long), or 0 when it is not one. */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
               : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n || (len == 2 && s[0] < 0xC2) || (len == 4 && s[0] > 0xF4))
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((len == 3 && s[0] == 0xE0 && s[1] < 0xA0) || (len == 3 && s[0] == 0xED && s[1] > 0x9F) ||
        (len == 4 && s[0] == 0xF0 && s[1] < 0x90) || (len == 4 && s[0] == 0xF4 && s[1] > 0x8F))
        return 0; /* overlong, surrogate, or beyond U+10FFFF */
    return len;
}

/* One escape after the backslash, written to *out. 0, or -1 after failing. */
static int unescape(parser *ps, char **out)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *hit = ps->p < ps->end && *ps->p ? strchr(from, *ps->p) : NULL;
    if (hit) {
        *(*out)++ = to[hit - from];
        ps->p++;
        return 0;
    }
    if (ps->p < ps->end && *ps->p == 'u') {
        ps->p++;
        long c = take_unicode_escape(ps);
        if (c > 0) {
            put_utf8(out, (unsigned long)c);
            return 0;
        }
        fail(ps, c == 0 ? "\\u0000 in a string" : "malformed \\u escape");
        return -1;
    }
    fail(ps, "unknown escape in a string");
    return -1;
}

/* The string whose opening quote was just taken, malloc'ed and unescaped; NULL after
 * failing. */
static char *take_string(parser *ps)
{
    char *s = malloc((size_t)(ps->end - ps->p) + 1), *out = s; /* unescaping only shrinks */
    if (!s) {
        fail(ps, "out of memory");
        return NULL;
    }
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        size_t len = c == '\\' ? 1 : utf8_length((const unsigned char *)ps->p,
                                                 (size_t)(ps->end - ps->p));
        if (c < 0x20 || len == 0) {
            fail(ps, c < 0x20 ? "control character in a string" : "invalid UTF-8 in a string");
            break;
        }
        if (c == '\\') {
            ps->p++;
            if (unescape(ps, &out))
                break;
            continue;
        }
        memcpy(out, ps->p, len);
        out += len;
        ps->p += len;
    }
    if (!ps->failed && ps->p >= ps->end)
        fail(ps, "unterminated string");
    if (ps->failed) {
        free(s);
        return NULL;
    }
    ps->p++; /* the closing quote */
    *out = '\0';
    return s;
}

static size_t digits(parser *ps)
{
    const char *from = ps->p;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
        ps->p++;
    return (size_t)(ps->p - from);
}

static void take_number(parser *ps, gb_json *v)
{
    const char *from = ps->p;
    int integral = 1;
    if (ps->p < ps->end && *ps->p == '-')
        ps->p++;
    const char *int_start = ps->p;
    size_t n = digits(ps);
    int ok = n > 0 && !(n > 1 && *int_start == '0');
    if (ok && ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        integral = 0;
        ok = digits(ps) > 0;
    }
    if (ok && ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        integral = 0;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        ok = digits(ps) > 0;
    }
    char text[64];
    size_t len = (size_t)(ps->p - from);
    if (!ok || len >= sizeof text) {
        ps->p = from;
        fail(ps, ok ? "number longer than 63 characters" : "malformed number");
        return;
    }
    memcpy(text, from, len);
    text[len] = '\0';
    v->type = GB_JSON_NUMBER;
    v->number = strtod(text, NULL);
    errno = 0;
    long long i = integral ? strtoll(text, NULL, 10) : 0;
    v->is_integer = integral && errno == 0;
    v->integer = v->is_integer ? i : 0;
}

static void parse_value(parser *ps, gb_json *v, int depth);

static gb_json *add_item(parser *ps, gb_json *container, size_t *cap)
{
    if (container->count == *cap) {
        size_t grown = *cap ? 2 * *cap : 4;
        gb_json *items = realloc(container->items, grown * sizeof *items);
        if (!items) {
            fail(ps, "out of memory");
            return NULL;
        }
        container->items = items;
        *cap = grown;
    }
    gb_json *item = &container->items[container->count++];
    memset(item, 0, sizeof *item);
    return item;
}

/* Members or elements up to the closing `close`, the opening bracket just taken. */
static void parse_container(parser *ps, gb_json *v, char close, int depth)
{
    size_t cap = 0;
    v->type = close == '}' ? GB_JSON_OBJECT : GB_JSON_ARRAY;
    skip_blanks(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return;
    }
    while (!ps->failed) {
        gb_json *item = add_item(ps, v, &cap);
        if (!item)
            return;
        skip_blanks(ps);
        if (close == '}') {
            if (!take_literal(ps, "\"")) {
                fail(ps, "expected a member name in quotes");
                return;
            }
            if (!(item->key = take_string(ps)))
                return;
            skip_blanks(ps);
            if (!take_literal(ps, ":")) {
                fail(ps, "expected ':' after a member name");
                return;
            }
        }
        parse_value(ps, item, depth + 1);
        skip_blanks(ps);
        if (take_literal(ps, ","))
            continue;
        if (!ps->failed && !take_literal(ps, close == '}' ? "}" : "]"))
            fail(ps, "expected ',' or '%c'", close);
        return;
    }
}

static void parse_value(parser *ps, gb_json *v, int depth)
{
    if (depth > GB_JSON_MAX_DEPTH) {
        fail(ps, "nested deeper than %d", GB_JSON_MAX_DEPTH);
        return;
    }
    skip_blanks(ps);
    if (take_literal(ps, "{")) {
        parse_container(ps, v, '}', depth);
    } else if (take_literal(ps, "[")) {
        parse_container(ps, v, ']', depth);
    } else if (take_literal(ps, "\"")) {
        v->string = take_string(ps);
        v->type = v->string ? GB_JSON_STRING : GB_JSON_NULL;
    } else if (take_literal(ps, "true")) {
        v->type = GB_JSON_BOOL;
        v->number = 1.0;
    } else if (take_literal(ps, "false")) {
        v->type = GB_JSON_BOOL;
    } else if (take_literal(ps, "null")) {
        v->type = GB_JSON_NULL;
    } else if (ps->p < ps->end && (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))) {
        take_number(ps, v);
    } else {
        fail(ps, ps->p < ps->end ? "unexpected character" : "unexpected end of text");
    }
}

static void free_members(gb_json *v)
{
    for (size_t i = 0; i < v->count; i++)
        free_members(&v->items[i]);
    free(v->items);
    free(v->key);
    free(v->string);
}

void gb_json_free(gb_json *value)
{
    if (!value)
        return;
    free_members(value);
    free(value);
}

gb_json *gb_json_parse(const char *text, size_t len, char *err, size_t err_cap)
{
    parser ps = {text, text, text + len, err, err_cap, 0};
    gb_json *root = calloc(1, sizeof *root);
    if (!root) {
        snprintf(err, err_cap, "out of memory");
        return NULL;
    }
    parse_value(&ps, root, 0);
    skip_blanks(&ps);
    if (!ps.failed && ps.p != ps.end)
        fail(&ps, "text after the value");
    if (ps.failed) {
        gb_json_free(root);
        return NULL;
    }
    return root;
}

const gb_json *gb_json_member(const gb_json *object, const char *key)
{
    if (!object || object->type != GB_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < object->count; i++)
        if (strcmp(object->items[i].key, key) == 0)
            return &object->items[i];
    return NULL;
}
