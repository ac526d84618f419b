/* Text helpers shared by the readers of user files and by the messages about them. */
#ifndef GB_CORE_TEXT_H
#define GB_CORE_TEXT_H

#include <stddef.h>

/* The line starting at *next in NUL-terminated text, *len bytes without its ending,
 * which may be "\n", "\r\n" or a lone "\r" (old Mac files); moves *next to the line
 * after it. */
const char *gb_next_line(const char **next, size_t *len);

/* Narrows s[0..*len) to leave out the white space (isspace) at either end. */
void gb_trim_blanks(const char **s, size_t *len);

/* Copies `text` into buf (cap > 0, always terminated), writing each control byte (below
 * 0x20, and 0x7f) as \n, \r, \t or \xHH, so a message quoting a hostile file cannot move
 * the cursor, clear the screen or forge a second line. */
void gb_escape_controls(const char *text, char *buf, size_t cap);

#endif
