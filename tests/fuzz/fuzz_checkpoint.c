/* Fuzz target: the checkpoint reader (engine/checkpoint.c, gb_checkpoint_parse), and what
 * [train] init_from takes from a checkpoint read (gb_checkpoint_inherit_model). An input
 * whose first byte is even gets a valid checksum appended, so that the fuzzer reaches the
 * sections behind it; an odd one is read as it is, checksum included. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "config.h"
#include "fuzz.h"
#include "settings.h"

void gb_fuzz_init(void)
{
}
GB_FUZZ_INITIALIZE

/* What [train] init_from does with a checkpoint read: its saved config's [model] section
 * taken into a fine-tuning config of one key, then resolved as a run resolves it. */
static void give_model(const gb_checkpoint *ck, gb_diag *diag)
{
    gb_config *cfg = gb_config_load_string("[model]\nbias = true\n", "fuzz.ini", "/", diag);
    gb_settings s;
    if (cfg && gb_checkpoint_inherit_model(ck, "[train] init_from = fuzz.gbk", cfg, diag) == 0) {
        gb_settings_resolve(cfg, &s, diag);
        gb_settings_free(&s);   /* also what a refused config had resolved */
    }
    gb_config_free(cfg);
}

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
    if (gb_checkpoint_parse(file, n, "fuzz.gbk", &ck, &diag) == 0) {
        give_model(&ck, &diag);
        gb_checkpoint_free(&ck);
    }
    gb_diag_clear(&diag);
    free(file);
    return 0;
}
