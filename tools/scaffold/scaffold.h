/* The templates behind `gearbox new-plugin`, compiled into the binary from the *.in files
 * of this folder by embed.c. In a template, @KIND@, @NAME@ and @MODULE@ stand for the
 * plugin's kind, its name and its file name without ".so". */
#ifndef GB_SCAFFOLD_H
#define GB_SCAFFOLD_H

#include <stddef.h>

typedef struct gb_scaffold_file {
    const char *name;   /* the template's file name, e.g. "attn.c.in" */
    const char *text;
} gb_scaffold_file;

extern const gb_scaffold_file gb_scaffold_files[];
extern const size_t gb_scaffold_n_files;

#endif
