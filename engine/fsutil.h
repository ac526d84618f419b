/* Small file-system helpers shared by the core. */
#ifndef GB_CORE_FSUTIL_H
#define GB_CORE_FSUTIL_H

#include <stddef.h>

#include "diag.h"

/* mkdir -p: creates `path` and its missing parents. 0, or -1 with errno set. */
int gb_make_dirs(const char *path);

/* The whole of the regular file `path`, NUL-terminated after its *len bytes (free() it);
 * NULL after adding to `diag` why (missing, a folder or other non-regular file, which
 * could block or have no size; unreadable; no memory). `what` names the file's role in
 * the message, e.g. "the tokenizer's encoder.json". */
char *gb_read_file(const char *path, const char *what, size_t *len, gb_diag *diag);

#endif
