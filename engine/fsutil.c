/* File-system helpers; see fsutil.h. */
#include "fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

char *gb_read_file(const char *path, const char *what, size_t *len, gb_diag *diag)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        gb_diag_add(diag, "%s %s: %s", what, path, strerror(errno));
        if (f)
            fclose(f);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        gb_diag_add(diag, "%s %s is not a regular file (a folder, pipe or device); name a file",
                    what, path);
        fclose(f);
        return NULL;
    }
    char *data = malloc((size_t)st.st_size + 1);
    size_t got = data ? fread(data, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!data || got != (size_t)st.st_size) {
        gb_diag_add(diag, "%s %s: %s %lld bytes", what, path,
                    data ? "could not read its" : "no memory for its", (long long)st.st_size);
        free(data);
        return NULL;
    }
    data[got] = '\0';
    *len = got;
    return data;
}
