/* The verbs of `gearbox`: the one table that main runs them from and that `gearbox --help`
 * lists them from. Each verb's line in that help is its operands, then every option of the
 * verb's own table (options.h), so an option a verb gains shows there by itself; its
 * summary is written here, beside the function that runs it. Also `gearbox version`. */
#include <stdio.h>

#include "gearbox/engine/machine.h"
#include "gearbox/plugin.h"
#include "cli.h"

void gb_cli_print_version(void)
{
    printf("gearbox %s (git %s), plugin ABI %d.%d\n", GB_VERSION, gb_git_revision,
           GB_ABI_MAJOR, GB_ABI_MINOR);
}

static const gb_cli_spec version_spec = {
    .verb = "version",
    .usage = "gearbox version",
    .about = "Prints gearbox's version, the git revision it was built from and the plugin ABI\n"
             "it loads (major.minor: plugins built for this major and any minor up to this\n"
             "one load), as `gearbox --version` does.\n",
};

static int run_version(int argc, char **argv)
{
    int rc = gb_cli_parse_operands(&version_spec, argc, argv, NULL, NULL, 0, 0, "nothing",
                                   NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    gb_cli_print_version();
    return 0;
}

static const gb_cli_verb verbs[] = {
    {&gb_cli_train_spec, gb_cmd_train, "CONFIG", "train a GPT as the INI file says"},
    {&gb_cli_check_spec, gb_cmd_check, "CONFIG|CHECKPOINT",
     "validate a config, resolve its plugins, print the\neffective configuration; or a "
     "checkpoint's shape,\nparameters and memory plan"},
    {&gb_cli_prepare_spec, gb_cmd_prepare, "TEXT|- OUTDIR",
     "make token files from a text file: character-level,\nor GPT-2 BPE in nanoGPT's layout"},
    {&gb_cli_sample_spec, gb_cmd_sample, "CHECKPOINT", "generate text from a checkpoint"},
    {&gb_cli_eval_spec, gb_cmd_eval, "CONFIG",
     "a checkpoint's validation loss, and multiple-choice\naccuracy on a HellaSwag JSONL file"},
    {&gb_cli_encode_spec, gb_cmd_encode, "--vocab PATH [TEXT]",
     "GPT-2 BPE ids of a text, a file or the standard\ninput, as numbers or a token file"},
    {&gb_cli_decode_spec, gb_cmd_decode, "--vocab PATH [ID...]",
     "the bytes of GPT-2 BPE ids, from numbers or a token\nfile"},
    {&gb_cli_import_spec, gb_cmd_import, "SOURCE CHECKPOINT",
     "GPT-2 weights from Hugging Face (model.safetensors +\nconfig.json) or llm.c (.bin) into "
     "a checkpoint"},
    {&gb_cli_export_spec, gb_cmd_export, "CHECKPOINT DEST",
     "a checkpoint's weights for Hugging Face or llm.c"},
    {&gb_cli_plugins_spec, gb_cmd_plugins, "[KIND | show NAME]",
     "the plugins found on the search path, or one\nplugin's details and every config key"},
    {&gb_cli_bench_spec, gb_cmd_bench, "KIND [OPTIONS]",
     "microbenchmarks: attn, optim, matmul, step (each\none's options: `gearbox bench KIND "
     "--help`)"},
    {&gb_cli_doctor_spec, gb_cmd_doctor, "[CONFIG]",
     "what this machine and build offer a run, and what\nto fix"},
    {&gb_cli_ab_spec, gb_cmd_ab, "CONFIG --variant NAME:OVERRIDES... | A.ini B.ini [MORE.ini...]",
     "train variants side by side and compare speed,\nmemory and loss against a baseline"},
    {&gb_cli_new_plugin_spec, gb_cmd_new_plugin, "KIND NAME DIR",
     "write a plugin that builds and loads, to start from"},
    {&gb_cli_test_plugin_spec, gb_cmd_test_plugin, "PLUGIN.so",
     "check a plugin against the contract and gearbox's\nreference plugin of its kind"},
    {&version_spec, run_version, "", "print gearbox's version and plugin ABI"},
    {0},
};

const gb_cli_spec gb_cli_gearbox_spec = {
    .verb = "",
    .usage = "gearbox [--version] VERB [ARGS...]",
    .options = {
        {"version", 0, NULL, "print gearbox's version and plugin ABI and exit"},
    },
    .notes = "Every verb takes --help, which says what each of its options does. --plugin-path\n"
             "DIRS (':'-separated) is searched before GEARBOX_PLUGIN_PATH, the config's [run]\n"
             "plugin_path and the built-in plugin folder.\n",
    .stop_at_operand = 1,
    .verbs = verbs,
};
