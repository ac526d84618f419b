/* Small file-system helpers shared by the core. */
#ifndef GB_CORE_FSUTIL_H
#define GB_CORE_FSUTIL_H

/* mkdir -p: creates `path` and its missing parents. 0, or -1 with errno set. */
int gb_make_dirs(const char *path);

#endif
