/* File-system helpers; see fsutil.h. */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int gb_make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return (mkdir(buf, 0777) != 0 && errno != EEXIST) ? -1 : 0;
}

int gb_make_parent_dirs(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (size_t)(slash - path) : 0;
    if (len >= cap) {
        snprintf(dir, cap, "%s", path);
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dir, path, len);
    dir[len] = '\0';
    return len == 0 ? 0 : gb_make_dirs(dir);
}

/* Why a file of this type cannot be read as a file, or NULL for a regular file. */
static const char *not_a_file(mode_t mode)
{
    if (S_ISREG(mode))
        return NULL;
    if (S_ISDIR(mode))
        return "it is a folder, not a file";
    if (S_ISFIFO(mode))
        return "it is a named pipe, not a regular file, and this input must be a file that can "
               "be sized and read again (or mapped), which a pipe cannot; copy what it carries "
               "into a file first";
    return "it is not a regular file (a socket or device)";
}

/* Reads exactly `size` bytes; the file growing or shrinking meanwhile is an error. */
static const char *read_exactly(int fd, unsigned char *data, size_t size)
{
    size_t done = 0;
    while (done < size) {
        ssize_t got = read(fd, data + done, size - done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return strerror(errno);
        if (got == 0)
            return "it became shorter while being read";
        done += (size_t)got;
    }
    unsigned char extra;
    return read(fd, &extra, 1) > 0 ? "it grew while being read" : NULL;
}

/* Opens `path` for reading if it is a regular file: its descriptor and *st, or -1 with
 * *why saying what is wrong. */
static int open_regular_file(const char *path, struct stat *st, const char **why)
{
    /* O_NONBLOCK: opening a named pipe must not wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    *why = fstat(fd, st) != 0 ? strerror(errno) : not_a_file(st->st_mode);
    if (*why) {
        close(fd);
        return -1;
    }
    return fd;
}

int gb_read_regular_file(const char *path, unsigned char **data, size_t *size, const char **why)
{
    *data = NULL;
    *size = 0;
    struct stat st;
    int fd = open_regular_file(path, &st, why);
    if (fd < 0)
        return -1;
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    *why = buf ? read_exactly(fd, buf, (size_t)st.st_size) : "out of memory for its contents";
    close(fd);
    if (*why) {
        free(buf);
        return -1;
    }
    buf[st.st_size] = '\0';
    *data = buf;
    *size = (size_t)st.st_size;
    return 0;
}

/* Reads the stream `fd` to its end into a malloc'ed buffer with a NUL after it. */
static const char *read_stream(int fd, unsigned char **data, size_t *size)
{
    size_t cap = 0, len = 0;
    unsigned char *buf = NULL;
    for (;;) {
        if (len == cap) {
            size_t grown_cap = cap ? 2 * cap : 1 << 16;
            unsigned char *grown = realloc(buf, grown_cap + 1);
            if (!grown) {
                free(buf);
                return "out of memory for its contents";
            }
            buf = grown;
            cap = grown_cap;
        }
        ssize_t got = read(fd, buf + len, cap - len);
        if (got == 0)
            break;
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            const char *why = strerror(errno);
            free(buf);
            return why;
        }
        len += (size_t)got;
    }
    buf[len] = '\0';
    *data = buf;
    *size = len;
    return NULL;
}

/* Whether the open descriptor `fd` (of type `mode`) is read as a stream. */
static int is_stream(int fd, mode_t mode)
{
    return S_ISFIFO(mode) || (S_ISCHR(mode) && isatty(fd));
}

int gb_input_is_stream(const char *path)
{
    struct stat st;
    if (strcmp(path, "-") == 0)
        return 1;
    if (stat(path, &st) != 0)
        return 0;
    if (!S_ISCHR(st.st_mode))
        return S_ISFIFO(st.st_mode);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    int stream = fd >= 0 && isatty(fd);
    if (fd >= 0)
        close(fd);
    return stream;
}

int gb_read_input(const char *path, unsigned char **data, size_t *size, const char **why)
{
    *data = NULL;
    *size = 0;
    if (!gb_input_is_stream(path))
        return gb_read_regular_file(path, data, size, why);
    int standard = strcmp(path, "-") == 0;
    /* blocking: a named pipe's open waits for its writer */
    int fd = standard ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    *why = fd < 0 || fstat(fd, &st) != 0 ? strerror(errno)
           : is_stream(fd, st.st_mode) || S_ISREG(st.st_mode) ? read_stream(fd, data, size)
           : not_a_file(st.st_mode);
    if (fd >= 0 && !standard)
        close(fd);
    return *why ? -1 : 0;
}

int gb_map_regular_file(const char *path, const unsigned char **data, size_t *size,
                        const char **why)
{
    *data = NULL;
    *size = 0;
    struct stat st;
    int fd = open_regular_file(path, &st, why);
    if (fd < 0)
        return -1;
    void *map = NULL;
    if (st.st_size > 0) {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        *why = map == MAP_FAILED ? strerror(errno) : NULL;
    }
    close(fd);
    if (*why)
        return -1;
    if (map)   /* windows are drawn at random: read-ahead would only fill memory */
        madvise(map, (size_t)st.st_size, MADV_RANDOM);
    *data = map;
    *size = (size_t)st.st_size;
    return 0;
}

void gb_unmap_file(const unsigned char *data, size_t size)
{
    if (data)
        munmap((void *)data, size);
}

/* Creates and removes a temporary folder inside the existing folder `dir`. */
static const char *probe_dir(const char *dir)
{
    char probe[PATH_MAX];
    if (snprintf(probe, sizeof probe, "%s/.gearbox-probe-XXXXXX", dir) >= (int)sizeof probe)
        return strerror(ENAMETOOLONG);
    if (!mkdtemp(probe))
        return strerror(errno);
    rmdir(probe);
    return NULL;
}

int gb_check_writable_dir(const char *path, char *buf, size_t cap, const char **why)
{
    char existing[PATH_MAX];
    struct stat st;
    if (snprintf(existing, sizeof existing, "%s", path) >= (int)sizeof existing) {
        *why = strerror(ENAMETOOLONG);
        return -1;
    }
    /* the nearest folder that exists: the run creates the rest below it */
    while (stat(existing, &st) != 0) {
        char *slash = strrchr(existing, '/');
        if ((errno != ENOENT && errno != ENOTDIR) || !slash) {
            *why = strerror(errno);
            return -1;
        }
        slash[slash == existing] = '\0';
    }
    if (!S_ISDIR(st.st_mode)) {
        *why = "it is a file, not a folder";
        if (strcmp(existing, path) != 0) {
            snprintf(buf, cap, "%s is a file, not a folder", existing);
            *why = buf;
        }
        return -1;
    }
    const char *probe = probe_dir(existing);
    if (!probe)
        return 0;
    if (strcmp(existing, path) == 0) {
        *why = probe;
    } else {
        snprintf(buf, cap, "cannot create folders in %s: %s", existing, probe);
        *why = buf;
    }
    return -1;
}

int gb_read_file_or_say(const char *path, unsigned char **data, size_t *size, gb_diag *diag)
{
    const char *why;
    if (gb_read_regular_file(path, data, size, &why) == 0)
        return 0;
    gb_diag_add(diag, "cannot read %s: %s", path, why);
    return -1;
}
