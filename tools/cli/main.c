/* `gearbox`: dispatches to one verb per subcommand. */
#include <stdio.h>
#include <string.h>

#include "gearbox/engine/report.h"
#include "gearbox/plugin.h"
#include "cli.h"

static const char verbs_text[] =
    "  train CONFIG [--set section.key=value]... [--resume CHECKPOINT]\n"
    "                                  train a GPT as the INI file says\n"
    "  check CONFIG [--set section.key=value]...\n"
    "                                  validate a config, resolve its plugins, print the\n"
    "                                  effective configuration\n"
    "  prepare [--tokenizer gpt2 --vocab PATH] TEXT OUTDIR\n"
    "                                  make token files from a text file: character-level,\n"
    "                                  or GPT-2 BPE in nanoGPT's layout\n"
    "  sample CHECKPOINT [--prompt S | --prompt-file FILE] [--tokens N] [--num-samples N]\n"
    "         [--temperature T] [--top-k K] [--top-p P] [--seed N] [--keep-going]\n"
    "         [--no-cache] [--vocab PATH]\n"
    "                                  generate text from a checkpoint (over a KV cache)\n"
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

enum { OPT_VERSION };

static const gb_cli_spec spec = {
    .verb = "",
    .usage = "gearbox [--version] VERB [ARGS...]",
    .about = verbs_text,
    .options = {
        [OPT_VERSION] = {"version", 0, NULL, "print gearbox's version and plugin ABI and exit"},
    },
    .stop_at_operand = 1,
};

int main(int argc, char **argv)
{
    gb_cli_bound_openmp_spin(argv);
    /* what the engine reports reaches the screen as the engine's default printer writes it */
    gb_engine_set_reporter(gb_report_print, NULL);
    gb_cli_parser p;
    gb_cli_begin(&p, &spec, argc, argv);
    int opt = gb_cli_next(&p);
    if (opt == GB_CLI_EXIT)
        return p.status;
    if (opt == OPT_VERSION) {
        printf("gearbox %s (plugin ABI %d.%d)\n", GB_VERSION, GB_ABI_MAJOR, GB_ABI_MINOR);
        return 0;
    }
    if (p.next == argc) {
        gb_cli_help(&spec, stderr);
        return 2;
    }
    if (strcmp(argv[p.next], "help") == 0) {
        gb_cli_help(&spec, stdout);
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
        if (strcmp(argv[p.next], verbs[i].name) == 0)
            return verbs[i].run(argc - p.next, argv + p.next);
    fprintf(stderr, "gearbox: unknown verb '%s'\n\n", argv[p.next]);
    gb_cli_help(&spec, stderr);
    return 2;
}
