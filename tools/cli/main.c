/* `gearbox`: dispatches to one verb per subcommand. */
#include <stdio.h>
#include <string.h>

#include "gearbox/plugin.h"
#include "cli.h"

static const char usage[] =
    "usage: gearbox VERB [ARGS...]\n"
    "\n"
    "  train CONFIG [--set section.key=value]... [--resume CHECKPOINT]\n"
    "                                  train a GPT as the INI file says\n"
    "  check CONFIG [--set section.key=value]...\n"
    "                                  validate a config, resolve its plugins, print the\n"
    "                                  effective configuration\n"
    "  prepare [--tokenizer gpt2 --vocab PATH] TEXT OUTDIR\n"
    "                                  make token files from a text file: character-level,\n"
    "                                  or GPT-2 BPE in nanoGPT's layout\n"
    "  sample CHECKPOINT [--prompt S] [--tokens N] [--temperature T] [--top-k K] [--seed N]\n"
    "         [--vocab PATH]\n"
    "                                  generate text from a checkpoint\n"
    "  encode --vocab PATH [TEXT | --input FILE] [--output FILE]\n"
    "                                  GPT-2 BPE ids of a text or file, as numbers or a\n"
    "                                  token file\n"
    "  decode --vocab PATH [ID... | --input FILE] [--dtype D]\n"
    "                                  the bytes of GPT-2 BPE ids\n"
    "  import SOURCE CHECKPOINT        GPT-2 weights from Hugging Face (model.safetensors +\n"
    "                                  config.json) or llm.c (.bin) into a checkpoint\n"
    "  export CHECKPOINT DEST [--format hf|llm.c]\n"
    "                                  a checkpoint's weights for Hugging Face or llm.c\n"
    "  plugins [KIND]                  list the plugins found on the search path\n"
    "  plugins show NAME               a plugin's details and every config key\n"
    "  bench KIND [OPTIONS]            microbenchmarks: attn, optim, matmul, step\n"
    "  doctor [CONFIG]                 what this machine and build offer a run, and what\n"
    "                                  to fix\n"
    "  ab CONFIG --variant NAME:section.key=value[,...] --variant ... | ab A.ini B.ini\n"
    "                                  train variants side by side and compare speed,\n"
    "                                  memory and loss against a baseline\n"
    "  new-plugin KIND NAME DIR        write a plugin that builds and loads, to start from\n"
    "  test-plugin PLUGIN.so           check a plugin against the contract and gearbox's\n"
    "                                  reference plugin of its kind\n"
    "\n"
    "Every verb takes --help. train, check and plugins take --plugin-path DIRS\n"
    "(':'-separated), searched before GEARBOX_PLUGIN_PATH, the config's [run] plugin_path\n"
    "and the built-in plugin folder.\n";

int main(int argc, char **argv)
{
    gb_cli_bound_openmp_spin(argv);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("gearbox %s (plugin ABI %d.%d)\n", GB_VERSION, GB_ABI_MAJOR, GB_ABI_MINOR);
        return 0;
    }
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } verbs[] = {
        {"train", gb_cmd_train},     {"check", gb_cmd_check},     {"prepare", gb_cmd_prepare},
        {"sample", gb_cmd_sample},   {"plugins", gb_cmd_plugins}, {"bench", gb_cmd_bench},
        {"doctor", gb_cmd_doctor},
        {"ab", gb_cmd_ab},           {"import", gb_cmd_import},   {"export", gb_cmd_export},
        {"encode", gb_cmd_encode},   {"decode", gb_cmd_decode},
        {"new-plugin", gb_cmd_new_plugin}, {"test-plugin", gb_cmd_test_plugin},
    };
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (strcmp(argv[1], verbs[i].name) == 0)
            return verbs[i].run(argc - 1, argv + 1);
    fprintf(stderr, "gearbox: unknown verb '%s'\n\n%s", argv[1], usage);
    return 2;
}
