/* Fuzz target: HellaSwag JSONL files (engine/hellaswag.c, gb_hellaswag_parse), which
 * `gearbox eval --hellaswag` reads. */
#include <stdlib.h>

#include "fuzz.h"
#include "hellaswag.h"

void gb_fuzz_init(void)
{
}
GB_FUZZ_INITIALIZE

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = gb_fuzz_text(data, size);
    gb_diag diag = {0};
    gb_hellaswag set;
    if (text && gb_hellaswag_parse(text, size, "items.jsonl", &set, &diag) == 0)
        gb_hellaswag_free(&set);
    gb_diag_clear(&diag);
    free(text);
    return 0;
}
