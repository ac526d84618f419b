/* Fuzz target: the safetensors reader (tools/weights/safetensors.c, gb_safetensors_parse) and
 * the widening of what it accepts to f32. A file it accepts must keep every tensor
 * inside the data section, which the widening then reads whole. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "safetensors.h"

void gb_fuzz_init(void)
{
}
GB_FUZZ_INITIALIZE

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *file = malloc(size + 1);
    if (!file)
        return 0;
    memcpy(file, data, size);
    gb_diag diag = {0};
    gb_safetensors *st = gb_safetensors_parse(file, size, "fuzz.safetensors", &diag);
    for (int i = 0; st && i < st->count; i++) {
        const gb_st_tensor *t = &st->tensors[i];
        if (t->data < st->file || t->data + t->bytes > st->file + st->size)
            abort();
        float *values = malloc((size_t)t->numel * sizeof *values + 1);
        if (values)
            gb_safetensors_to_f32(t, values, "fuzz.safetensors", &diag);
        free(values);
    }
    gb_safetensors_free(st);
    gb_diag_clear(&diag);
    return 0;
}
