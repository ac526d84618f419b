/* Fuzz target: vocab.txt (engine/data.c, gb_vocab_parse). */
#include <stdlib.h>

#include "data.h"
#include "fuzz.h"

void gb_fuzz_init(void)
{
}
GB_FUZZ_INITIALIZE

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gb_vocab vocab;   /* 64 KiB: not on the stack */
    char *text = gb_fuzz_text(data, size);
    gb_diag diag = {0};
    if (text)
        gb_vocab_parse(text, size, "vocab.txt", &vocab, &diag);
    gb_diag_clear(&diag);
    free(text);
    return 0;
}
