/* `gearbox train` and `gearbox check`. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "gearbox/engine/data.h"
#include "gearbox/engine/fsutil.h"
#include "gearbox/engine/autobatch.h"
#include "gearbox/engine/loader.h"
#include "gearbox/engine/model.h"
#include "gearbox/engine/run.h"
#include "gearbox/engine/train.h"

const gb_cli_spec gb_cli_train_spec = {
    .verb = "train",
    .usage = "gearbox train CONFIG [--set section.key=value]... [--resume CHECKPOINT]\n"
             "                     [--plugin-path DIRS]",
    .about =
        "Trains the GPT described by the INI file CONFIG (see examples/shakespeare_char.ini).\n"
        "Relative paths in CONFIG resolve against CONFIG's folder. Every section and key is\n"
        "validated before any work starts; `gearbox check CONFIG` shows the effective values.\n",
    .options = {
        GB_CLI_OPTION_SET,
        {"resume", 0, "CHECKPOINT", "continue a run from a checkpoint it wrote; the steps that\n"
         "follow give the same losses as the uninterrupted run"},
        GB_CLI_OPTION_PLUGIN_PATH,
    },
    .notes =
        "Writes OUT_DIR/metrics.jsonl (one JSON object per logged step and per evaluation, and\n"
        "a summary with the memory figures at the end), OUT_DIR/manifest.json and\n"
        "OUT_DIR/ckpt-STEP.gbk every [run] checkpoint_every steps and at the end. Ctrl-C or\n"
        "SIGTERM (a scheduler preempting the job) stops after the current step and writes a\n"
        "checkpoint; before the config is read (a named pipe waiting for its writer) they end\n"
        "gearbox at once.\n"
        "Data-parallel: start it under mpirun with --set comm.plugin=mpi; [data] batch_size is\n"
        "then the global batch and only rank 0 prints and writes (docs/distributed.md).\n"
        "Exit status: 0 done, 1 failed while training, 2 refused before starting, 130\n"
        "interrupted.\n",
};

int gb_cmd_train(int argc, char **argv)
{
    /* SIGINT and SIGTERM are caught only once the config is read (gb_train): until then
     * they end gearbox, which may wait for the writer of a config that is a named pipe */
    gb_cli_run run = {0};
    int rc = gb_cli_parse_run(&gb_cli_train_spec, argc, argv, &run, NULL, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    gb_train_options opts = {run.plugin_path, run.resume};
    rc = gb_train(run.cfg, &opts);
    gb_config_free(run.cfg);
    return rc;
}

const gb_cli_spec gb_cli_check_spec = {
    .verb = "check",
    .usage = "gearbox check CONFIG [--set section.key=value]... [--plugin-path DIRS]",
    .about =
        "Validates CONFIG as `gearbox train` would (every section and key, the data folder,\n"
        "every plugin: found, loadable, right ABI, kind and device, able to start), then prints\n"
        "the plugins chosen, the data folder's layout (gearbox, nanoGPT or llm.c) with the\n"
        "tokens of each split, the memory plan, and the effective configuration with every\n"
        "default filled in.\n",
    .options = {
        GB_CLI_OPTION_SET,
        GB_CLI_OPTION_PLUGIN_PATH,
    },
    .notes = "Exit status: 0 when the config would train, 1 when the standard output could\n"
             "not be written, 2 when the config would not train.\n",
};

static void print_resolution(gb_runtime *rt)
{
    printf("# plugins (search path: %s)\n", gb_loader_path_string(gb_runtime_loader(rt)));
    for (int k = GB_KIND_DEVICE; k <= GB_KIND_COMM; k++) {
        const gb_plugin *p = gb_runtime_instance(rt, (gb_kind)k)->plugin;
        printf("#   %-9s %-10s %-8s %s\n", gb_kind_name((gb_kind)k), p->desc->name,
               p->desc->version, p->path);
    }
}

/* The folder's layout and the tokens of each split, as comments. */
static void print_data(const gb_dataset *ds)
{
    printf("# data: %s format, %s tokens (ids below %lld)\n",
           gb_data_format_name(gb_data_format_of(ds)),
           gb_data_tokenizer(ds) == GB_TOKENIZER_GPT2 ? "GPT-2 BPE" : "byte",
           (long long)gb_data_id_limit(ds));
    for (gb_split split = GB_SPLIT_TRAIN; split <= GB_SPLIT_VAL; split++) {
        int files = gb_data_file_count(ds, split);
        printf("#   %-5s %lld tokens in %d file%s, from %s\n", split ? "val" : "train",
               (long long)gb_data_tokens(ds, split), files, files == 1 ? "" : "s",
               gb_data_file_path(ds, split, 0));
    }
}

/* What train would meet only when it starts writing: an out_dir it cannot create or
 * write into (a file, a read-only place, /proc). */
static int check_out_dir(const gb_settings *s, gb_diag *diag)
{
    char buf[PATH_MAX + 64];
    const char *why, *out_dir = gb_settings_out_dir(s);
    if (gb_check_writable_dir(out_dir, buf, sizeof buf, &why) == 0)
        return 0;
    gb_diag_add(diag, "[run] out_dir = %s: a run could not write there: %s; choose a folder "
                "you can write", out_dir, why);
    return 1;
}

/* The memory plan of a config whose device, plugins or data are not on this machine
 * (sizing a GPU run on a laptop): planned again with the CPU's plugins in place of the
 * device, attention and comm plugins, and [model] vocab_size for the data's vocabulary.
 * Nothing is allocated. Prints no plan when even that cannot be planned (the config's own
 * problems were reported). */
static void print_stand_in_plan(gb_config *cfg, const char *plugin_path)
{
    static const char *const stand_ins[] = {"device.plugin=cpu", "attn.plugin=math",
                                            "comm.plugin=single"};
    const char *device = gb_config_get(cfg, "device", "plugin");
    char wanted[160];
    snprintf(wanted, sizeof wanted, "%s", device ? device : "cpu");
    gb_diag diag = {0};
    gb_memory_plan plan;
    for (size_t i = 0; i < sizeof stand_ins / sizeof stand_ins[0]; i++)
        gb_config_set(cfg, stand_ins[i], &diag);
    gb_runtime *rt = gb_runtime_open(cfg, plugin_path, &diag);
    const gb_settings *s = rt ? gb_runtime_settings(rt) : NULL;
    int failed = !rt || !gb_settings_vocab_size(s) || gb_runtime_start(rt, &diag);
    gb_model_config mc = failed ? (gb_model_config){0} : gb_model_config_of(s, 0);
    if (!failed && !gb_model_plan(rt, &mc, gb_settings_batch_size(s), 1, &plan)) {
        printf("# planned with stand-ins (device cpu, attn math, comm single; [model] vocab_size "
               "for the data's) as [device] plugin = %s, its plugins or the data folder are "
               "not usable here; the attention plugin's own buffers may differ:\n", wanted);
        gb_memory_plan_print(&plan, stdout, "# ");
    }
    gb_runtime_close(rt);
    gb_diag_clear(&diag);
}

/* [train] init_from names a checkpoint train could open (it is read whole, and its
 * shape checked, when the run starts). */
static int check_init_from(const gb_settings *s, gb_diag *diag)
{
    struct stat st;
    errno = 0;
    const char *path = gb_settings_init_from(s);
    if (!path || (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0))
        return 0;
    gb_diag_add(diag, "[train] init_from = %s: not a readable checkpoint file (%s); write it "
                "with `gearbox import` or name a run's ckpt-STEP.gbk", path,
                errno ? strerror(errno) : "not a regular file");
    return 1;
}

int gb_cmd_check(int argc, char **argv)
{
    gb_cli_run run = {0};
    int rc = gb_cli_parse_run(&gb_cli_check_spec, argc, argv, &run, NULL, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    gb_diag diag = {0};
    gb_runtime *rt = gb_runtime_open(run.cfg, run.plugin_path, &diag);
    int problems = !rt, lost = 0;   /* lost: the standard output could not be written */
    gb_dataset *ds = NULL;
    gb_model *model = NULL;
    if (!problems)
        problems += check_out_dir(gb_runtime_settings(rt), &diag) +
                    check_init_from(gb_runtime_settings(rt), &diag);
    if (!problems) {
        /* a missing data folder does not hide whether the plugins start */
        ds = gb_data_open(gb_runtime_settings(rt), &diag);
        problems += gb_runtime_start(rt, &diag) != 0;
        problems += !ds || gb_data_record_tokenizer(ds, run.cfg, &diag) != 0;
    }
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    if (!problems) {
        /* planning the model asks the attention plugin about the run's shapes and
         * allocates everything once, as training would */
        const gb_settings *s = gb_runtime_settings(rt);
        gb_model_config mc = gb_model_config_of(s, gb_data_vocab(ds)->size);
        /* the choice goes to stderr: stdout stays INI */
        if (gb_batch_auto(rt, &mc, stderr, &diag) == 0)
            model = gb_model_create(rt, &mc, gb_settings_batch_size(s), 1);
        gb_diag_print(&diag, stderr);
        gb_diag_clear(&diag);
        problems += !model;
    }
    if (!problems) {
        print_resolution(rt);
        print_data(ds);
        gb_model_print_memory(model, stdout, "# ");
        gb_config_write(run.cfg, stdout);
        lost = gb_cli_flush_stdout("check");
        if (!lost)
            fprintf(stderr, "%s: ok\n", run.config_path);
    }
    gb_model_free(model);
    gb_data_free(ds);
    gb_runtime_close(rt);
    if (problems)
        print_stand_in_plan(run.cfg, run.plugin_path);
    gb_config_free(run.cfg);
    return problems ? 2 : lost;
}
