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
