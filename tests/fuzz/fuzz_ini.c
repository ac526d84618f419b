/* Fuzz target: the INI reader and the core's settings (engine/config.c, settings.c).
 * Besides not crashing, a config that resolves must survive its own round trip: the
 * effective config it writes (what a checkpoint saves) reads back, resolves, and writes
 * the same text again; otherwise a resume from that checkpoint would fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "settings.h"

void gb_fuzz_init(void)
{
}
GB_FUZZ_INITIALIZE

/* The effective config of `text` (NULL when it does not resolve), malloc'ed. */
static char *effective_of(const char *text)
{
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load_string(text, "fuzz.ini", "/", &diag);
    gb_settings s;
    char *written = NULL;
    size_t len = 0;
    if (cfg && gb_settings_resolve(cfg, &s, &diag) == 0) {
        FILE *f = open_memstream(&written, &len);
        if (f) {
            gb_config_write(cfg, f);
            fclose(f);
        }
    }
    if (cfg)
        gb_settings_free(&s);
    gb_config_free(cfg);
    gb_diag_clear(&diag);
    return written;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = gb_fuzz_text(data, size);
    char *first = text ? effective_of(text) : NULL;
    char *second = first ? effective_of(first) : NULL;
    if (first && (!second || strcmp(first, second) != 0)) {
        fprintf(stderr, "effective config does not round-trip:\n%s\n---- read back as ----\n%s\n",
                first, second ? second : "(refused)");
        abort();
    }
    free(second);
    free(first);
    free(text);
    return 0;
}
