/* Fuzz target: the checkpoint reader (engine/checkpoint.c, gb_checkpoint_parse). An input
 * whose first byte is even gets a valid checksum appended, so that the fuzzer reaches the
 * sections behind it; an odd one is read as it is, checksum included. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "fuzz.h"

void gb_fuzz_init(void)
{
}
GB_FUZZ_INITIALIZE

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int seal = size > 0 && data[0] % 2 == 0;
    const uint8_t *body = data + (size > 0);
    size_t n = size - (size > 0);
    unsigned char *file = malloc(n + sizeof(uint64_t) + 1);
    if (!file)
        return 0;
    memcpy(file, body, n);
    if (seal) {
        uint64_t hash = gb_checkpoint_checksum(file, n);
        memcpy(file + n, &hash, sizeof hash);
        n += sizeof hash;
    }
    gb_checkpoint ck;
    gb_diag diag = {0};
    if (gb_checkpoint_parse(file, n, "fuzz.gbk", &ck, &diag) == 0)
        gb_checkpoint_free(&ck);
    gb_diag_clear(&diag);
    free(file);
    return 0;
}
