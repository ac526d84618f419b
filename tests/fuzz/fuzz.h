/* What every fuzz target defines: libFuzzer's entry point, and a set-up it calls once
 * (from LLVMFuzzerInitialize under libFuzzer, from main in the replay driver). Each
 * target feeds one parser arbitrary bytes; anything but a clean refusal or success (a
 * crash, a sanitizer report, an abort of a checked property) is a finding. */
#ifndef GB_FUZZ_H
#define GB_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void gb_fuzz_init(void);

/* The input as a NUL-terminated string (cut at its first NUL, as a C reader would see
 * it), malloc'ed; NULL when out of memory. */
static inline char *gb_fuzz_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text) {
        memcpy(text, data, size);
        text[size] = '\0';
    }
    return text;
}

/* For the targets that read real files (fuzz_files.c): a scratch folder made once per
 * process (in TMPDIR, else /tmp) and removed at exit, whose path is returned; a file of
 * it written with `n` bytes, or removed; and the next piece of the input, prefixed by
 * its u16 little-endian length (fewer bytes at the input's end). */
const char *gb_fuzz_scratch_folder(void);
void gb_fuzz_write_file(const char *name, const uint8_t *bytes, size_t n);
void gb_fuzz_remove_file(const char *name);
const uint8_t *gb_fuzz_take_piece(const uint8_t **data, size_t *size, size_t *len);

/* Defines libFuzzer's once-per-process hook in terms of gb_fuzz_init. */
#define GB_FUZZ_INITIALIZE                                    \
    int LLVMFuzzerInitialize(int *argc, char ***argv);        \
    int LLVMFuzzerInitialize(int *argc, char ***argv)         \
    {                                                         \
        (void)argc;                                           \
        (void)argv;                                           \
        gb_fuzz_init();                                       \
        return 0;                                             \
    }

#endif
