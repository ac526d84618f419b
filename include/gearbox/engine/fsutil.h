/* Small file-system helpers shared by the core. */
#ifndef GB_CORE_FSUTIL_H
#define GB_CORE_FSUTIL_H

#include <stddef.h>

#include "gearbox/engine/diag.h"

/* mkdir -p: creates `path` and its missing parents. 0, or -1 with errno set. */
int gb_make_dirs(const char *path);
/* mkdir -p of the folder a file at `path` goes in (nothing for a bare file name), so a
 * verb that writes a file can be given a path whose folders do not exist yet. 0, or -1
 * with errno set and the folder that could not be made in `dir` (of `cap` bytes). */
int gb_make_parent_dirs(const char *path, char *dir, size_t cap);

/* Reads the regular file at `path` whole into a malloc'ed buffer with a NUL after its
 * *size bytes, so text can be parsed in place. A folder, named pipe, socket or device is
 * refused without reading from it (a pipe would block, a folder's size is meaningless);
 * the refusal of a pipe says that this input must be a file and how to make one.
 * 0, or -1 with *why saying what is wrong in words that follow "cannot read PATH: ". */
int gb_read_regular_file(const char *path, unsigned char **data, size_t *size, const char **why);
/* Reads an input that may be a stream: "-" is the standard input; a pipe (a named pipe,
 * bash's <(...), /dev/stdin) or a terminal is read to its end (opening a named pipe waits
 * for a writer, as cat does; SIGINT and SIGTERM end the wait unless caught); a regular file
 * as gb_read_regular_file reads it. A folder, socket or other device is refused. The
 * buffer is malloc'ed with a NUL after its *size bytes. 0, or -1 with *why as above. */
int gb_read_input(const char *path, unsigned char **data, size_t *size, const char **why);
/* Whether `path` is read as a stream by gb_read_input: "-", a pipe or a terminal. */
int gb_input_is_stream(const char *path);

/* The same, adding "cannot read PATH: WHY" to `diag` when it fails. */
int gb_read_file_or_say(const char *path, unsigned char **data, size_t *size, gb_diag *diag);

/* The same file mapped read-only instead of read: memory is spent only on the pages
 * touched, whatever the file's size. An empty file gives *data NULL and *size 0. Release
 * with gb_unmap_file. */
int gb_map_regular_file(const char *path, const unsigned char **data, size_t *size,
                        const char **why);
void gb_unmap_file(const unsigned char *data, size_t size);

/* Whether a run could write into the folder `path`: it exists and is a folder in which a
 * file can be created, or the nearest folder above it that exists lets it be created.
 * Probes by creating (and removing) a temporary entry, the only test that also holds for
 * root, read-only mounts and /proc. 0, or -1 with *why in words that follow
 * "cannot write into PATH: ". Writes *why into `buf` when it needs to name a folder. */
int gb_check_writable_dir(const char *path, char *buf, size_t cap, const char **why);

#endif
