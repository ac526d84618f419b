/* Fuzz target: the command-line parsers of `gearbox train` and `gearbox sample`
 * (tools/cli/options.c and common.c with train's option table, cmd_sample.c) and `--set`
 * (engine/config.c). The input is the argument vector, arguments separated by NUL bytes; nothing is loaded or trained. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fuzz.h"

void gb_fuzz_init(void)
{
    /* usage errors come by the thousand: the parsers' stderr goes nowhere. Only the FILE
     * is replaced; libFuzzer kept its own copy of the old one, and the sanitizers write
     * to file descriptor 2 itself, so their reports still show. */
    FILE *nowhere = fopen("/dev/null", "w");
    if (!nowhere)
        abort();
    stderr = nowhere;
}
GB_FUZZ_INITIALIZE

#define MAX_ARGS 64

/* argv from NUL-separated text; argv[0] names the verb, as main() hands it over. */
static int split_args(char *text, size_t size, char **argv)
{
    int argc = 0;
    argv[argc++] = "train";
    for (size_t i = 0; i < size && argc < MAX_ARGS; i += strlen(text + i) + 1)
        argv[argc++] = text + i;
    argv[argc] = NULL;
    return argc;
}

/* Applies the --set values to an empty config, as gb_cli_parse_run does after loading. */
static void apply_sets(const gb_cli_run *run)
{
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load_string("", "fuzz", "/", &diag);
    for (int i = 0; cfg && i < run->n_sets; i++)
        gb_config_set(cfg, run->sets[i], &diag);
    gb_config_free(cfg);
    gb_diag_clear(&diag);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = gb_fuzz_text(data, size);
    char *argv[MAX_ARGS + 1];
    if (!text)
        return 0;
    int argc = split_args(text, size, argv);
    gb_cli_run run = {0};
    if (gb_cli_parse_run_args(&gb_cli_train_spec, argc, argv, &run, NULL, NULL) == 0)
        apply_sets(&run);
    argv[0] = "sample";
    gb_sample_args sample;
    gb_cli_parse_sample(argc, argv, &sample);
    free(text);
    return 0;
}
