/* Text helpers; see text.h. */
#include "text.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

const char *gb_next_line(const char **next, size_t *len)
{
    const char *line = *next;
    size_t n = strcspn(line, "\r\n");
    const char *after = line + n;
    if (*after == '\r')
        after++;
    if (*after == '\n')
        after++;
    *len = n;
    *next = after;
    return line;
}

void gb_trim_blanks(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && isspace((unsigned char)(*s)[*len - 1]))
        (*len)--;
}

/* The escape of control byte c into out (room for 5 bytes); its length. */
static size_t escape_one(unsigned char c, char *out)
{
    static const char named[] = {['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
    if (c < sizeof named && named[c]) {
        out[0] = '\\';
        out[1] = named[c];
        return 2;
    }
    snprintf(out, 5, "\\x%02x", c);
    return 4;
}

void gb_escape_controls(const char *text, char *buf, size_t cap)
{
    size_t used = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char piece[5] = {(char)*p};
        size_t n = (*p < 0x20 || *p == 0x7f) ? escape_one(*p, piece) : 1;
        if (used + n >= cap)
            break;
        memcpy(buf + used, piece, n);
        used += n;
    }
    buf[used] = '\0';
}
