/* metrics.jsonl on resume (engine/metrics.c): rewinding to step 4 keeps the lines of steps
 * up to 4 and what it does not recognise, and drops later steps and evaluations however
 * they are spaced, the summary, and a last line cut short; a missing file stays missing.
 *
 *   test_rewind SCRATCH_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "metrics.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_rewind SCRATCH_DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/rewind.jsonl", argv[1]);
    static const char logged[] =
        "{\"step\": 3, \"loss\": 4.1, \"ms\": 1.5}\n"
        "{\"step\": 4, \"loss\": 4.0, \"ms\": 1.5}\n"
        "{\"step\": 4, \"train_loss\": 4.0, \"val_loss\": 4.1}\n"
        "not JSON, kept as it is\n"
        "{\"step\":5,\"loss\":3.9}\n"
        "{ \"loss\": 3.8, \"step\": 6 }\n"
        "{\"summary\": true, \"steps\": 6}\n"
        "{\"step\": 7, \"lo";
    static const char kept[] =
        "{\"step\": 3, \"loss\": 4.1, \"ms\": 1.5}\n"
        "{\"step\": 4, \"loss\": 4.0, \"ms\": 1.5}\n"
        "{\"step\": 4, \"train_loss\": 4.0, \"val_loss\": 4.1}\n"
        "not JSON, kept as it is\n";
    FILE *f = fopen(path, "w");
    if (!f || fputs(logged, f) < 0 || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    gb_diag diag = {0};
    int failures = 0;
    if (gb_metrics_rewind(path, 4, &diag) != 0) {
        gb_diag_print(&diag, stdout);
        failures++;
    }
    unsigned char *text = NULL;
    size_t size = 0;
    const char *why;
    if (gb_read_regular_file(path, &text, &size, &why) != 0 || size != strlen(kept) ||
        memcmp(text, kept, size) != 0) {
        printf("FAIL: after rewinding to step 4 the file holds\n%.*s\nexpected\n%s",
               (int)size, text ? (const char *)text : "", kept);
        failures++;
    } else {
        printf("ok: steps up to 4 and the unrecognised line kept, the rest dropped\n");
    }
    free(text);
    unlink(path);
    if (gb_metrics_rewind(path, 4, &diag) != 0 || access(path, F_OK) == 0) {
        printf("FAIL: rewinding a missing file\n");
        failures++;
    } else {
        printf("ok: a missing file stays missing\n");
    }
    gb_diag_clear(&diag);
    return failures ? 1 : 0;
}
