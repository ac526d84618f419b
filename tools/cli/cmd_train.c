/* `gearbox train` and `gearbox check` (of a config, or of a checkpoint). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gearbox/engine/checkpoint.h"
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
        "validated before any work starts; `gearbox check CONFIG` shows the effective values.\n"
        "A run that starts from a checkpoint (--resume, or else [train] init_from) has its\n"
        "model: [model] keys CONFIG leaves out are taken from the checkpoint, and one set to\n"
        "another value is refused.\n",
    .options = {
        GB_CLI_OPTION_SET,
        {"resume", 0, "CHECKPOINT", "continue a run from a checkpoint it wrote, or from the\n"
         "newest in an out_dir; the steps that follow give the same\n"
         "losses as the uninterrupted run"},
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
    /* --resume OUT_DIR: its newest checkpoint, as sample and export read an out_dir */
    char *resume = run.resume ? gb_cli_checkpoint_path(run.resume) : NULL;
    gb_train_options opts = {run.plugin_path, resume};
    rc = run.resume && !resume ? 1 : gb_train(run.cfg, &opts);
    free(resume);
    gb_config_free(run.cfg);
    return rc;
}

const gb_cli_spec gb_cli_check_spec = {
    .verb = "check",
    .usage = "gearbox check CONFIG|CHECKPOINT [--set section.key=value]... [--plugin-path DIRS]",
    .about =
        "Validates CONFIG as `gearbox train` would (every section and key, the data folder,\n"
        "every plugin: found, loadable, right ABI, kind and device, able to start; an\n"
        "init_from checkpoint read and checked against the model), then prints the plugins\n"
        "chosen, the data folder's layout (gearbox, nanoGPT or llm.c) with the tokens of each\n"
        "split, the memory plan, and the effective configuration with every default filled\n"
        "in.\n"
        "Given a CHECKPOINT instead (a .gbk file, or an out_dir: its newest), reads and checks\n"
        "it as sample and init_from do, then prints its step, parameters and [model] shape,\n"
        "the memory plan of a run of its config (--set changes that run), and the config it\n"
        "was written with.\n",
    .options = {
        GB_CLI_OPTION_SET,
        GB_CLI_OPTION_PLUGIN_PATH,
    },
    .notes = "Exit status: 0 when the config would train (the checkpoint reads and fits its\n"
             "model), 1 when the standard output could not be written, 2 otherwise.\n",
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

/* What stands in for a config's device, attention and comm plugins where they are not
 * usable on this machine (sizing a GPU run on a laptop). */
static const char *const stand_ins[] = {"device.plugin=cpu", "attn.plugin=math",
                                        "comm.plugin=single"};
#define STAND_INS_SAID "device cpu, attn math, comm single"

/* A started runtime for cfg with the stand-ins in place of its plugins; NULL when even
 * that does not start (the config's own problems are reported elsewhere). */
static gb_runtime *start_stand_ins(gb_config *cfg, const char *plugin_path)
{
    gb_diag diag = {0};
    for (size_t i = 0; i < sizeof stand_ins / sizeof stand_ins[0]; i++)
        gb_config_set(cfg, stand_ins[i], &diag);
    gb_runtime *rt = gb_runtime_open(cfg, plugin_path, &diag);
    if (rt && gb_runtime_start(rt, &diag)) {
        gb_runtime_close(rt);
        rt = NULL;
    }
    gb_diag_clear(&diag);
    return rt;
}

/* The plan of a run of `mc` at the run's batch, with `prefix` before each line; 0, or -1
 * when it cannot be planned. */
static int print_plan(gb_runtime *rt, const gb_model_config *mc, const char *prefix)
{
    gb_memory_plan plan;
    if (gb_model_plan(rt, mc, gb_settings_batch_size(gb_runtime_settings(rt)), 1, &plan))
        return -1;
    gb_memory_plan_print(&plan, stdout, prefix);
    return 0;
}

/* The memory plan of a config whose device, plugins or data are not on this machine:
 * planned again with the stand-ins, and [model] vocab_size for the data's vocabulary;
 * `caveat`, when not NULL, is said first. Nothing is allocated. Prints no plan when even
 * that cannot be planned (the config's own problems were reported). */
static void print_stand_in_plan(gb_config *cfg, const char *plugin_path, const char *caveat)
{
    const char *device = gb_config_get(cfg, "device", "plugin");
    char wanted[160];
    snprintf(wanted, sizeof wanted, "%s", device ? device : "cpu");
    gb_runtime *rt = start_stand_ins(cfg, plugin_path);
    const gb_settings *s = rt ? gb_runtime_settings(rt) : NULL;
    if (s && gb_settings_vocab_size(s)) {
        gb_model_config mc = gb_model_config_of(s, 0);
        if (caveat)
            printf("# %s\n", caveat);
        printf("# planned with stand-ins (" STAND_INS_SAID "; [model] vocab_size for the "
               "data's) as [device] plugin = %s, its plugins or the data folder are not "
               "usable here; the attention plugin's own buffers may differ:\n", wanted);
        print_plan(rt, &mc, "# ");
    }
    gb_runtime_close(rt);
}

/* [train] init_from read and checked against the model as train does before its first
 * step (shape, parameter count, every value finite). */
static int check_init_from(const gb_settings *s, const gb_model *model, gb_diag *diag)
{
    const char *path = gb_settings_init_from(s);
    gb_checkpoint ck;
    if (!path)
        return 0;
    int rc = gb_checkpoint_read(path, &ck, diag) ||
             gb_checkpoint_check_model(&ck, path, model, s, diag);
    gb_checkpoint_free(&ck);
    if (rc)
        gb_diag_add(diag, "[train] init_from = %s: not used; fix the checkpoint or name "
                    "another", path);
    return rc;
}

/* The checkpoint's config with the overrides, on its own plugins or, where they are not
 * usable here, the stand-ins (*stood_in set); NULL after reporting why. */
static gb_runtime *open_checkpoint_run(gb_cli_run *run, const gb_checkpoint *ck,
                                       int *stood_in, gb_diag *diag)
{
    run->cfg = gb_config_load_string(ck->config_text, run->config_path, "/", diag);
    for (int i = 0; run->cfg && i < run->n_sets; i++)
        gb_config_set(run->cfg, run->sets[i], diag);
    if (!run->cfg || diag->count)
        return NULL;
    gb_diag own = {0};
    gb_runtime *rt = gb_runtime_open(run->cfg, run->plugin_path, &own);
    if (rt && gb_runtime_start(rt, &own)) {
        gb_runtime_close(rt);
        rt = NULL;
    }
    gb_diag_clear(&own);
    *stood_in = !rt;
    if (!rt && !(rt = start_stand_ins(run->cfg, run->plugin_path)))
        gb_diag_add(diag, "%s: its saved configuration does not start a run here, even with "
                    "the stand-ins " STAND_INS_SAID, run->config_path);
    return rt;
}

/* `gearbox check CHECKPOINT`: read and verified, its model built and checked as sample
 * builds it, then described. */
static int check_checkpoint(gb_cli_run *run)
{
    gb_checkpoint ck;
    gb_diag diag = {0};
    gb_runtime *rt = NULL;
    gb_model *model = NULL;
    int stood_in = 0;
    if (gb_checkpoint_read(run->config_path, &ck, &diag) == 0)
        rt = open_checkpoint_run(run, &ck, &stood_in, &diag);
    const gb_settings *s = rt ? gb_runtime_settings(rt) : NULL;
    gb_model_config mc = s ? gb_model_config_of(s, ck.vocab->size) : (gb_model_config){0};
    if (s)
        model = gb_model_create(rt, &mc, 1, 0);
    int ok = model && !gb_checkpoint_check_model(&ck, run->config_path, model, s, &diag);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    if (ok) {
        printf("# checkpoint %s: step %lld, ", run->config_path, (long long)ck.step);
        if (ck.optim_bytes)
            printf("[optim] plugin = %s (%zu bytes of state)\n", ck.optim_name, ck.optim_bytes);
        else
            printf("weights only (no optimizer state: start from it with [train] init_from)\n");
        gb_cli_print_model(stdout, "# ", &mc, gb_model_num_params(model));
        printf("# tokens: %s\n", gb_settings_tokenizer(s) == GB_TOKENIZER_GPT2
                                     ? "GPT-2 BPE" : "bytes, as its vocabulary lists them");
        if (stood_in)
            printf("# planned with stand-ins (" STAND_INS_SAID "): its plugins are not "
                   "usable here\n");
        print_plan(rt, &mc, "# ");
        fputs(ck.config_text, stdout);
        fprintf(stderr, "%s: ok\n", run->config_path);
    }
    gb_model_free(model);
    gb_runtime_close(rt);
    gb_config_free(run->cfg);
    gb_checkpoint_free(&ck);
    return ok ? 0 : 2;
}

int gb_cmd_check(int argc, char **argv)
{
    gb_cli_run run = {0};
    int rc = gb_cli_parse_run_args(&gb_cli_check_spec, argc, argv, &run, NULL, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    char *newest = gb_checkpoint_latest(run.config_path);   /* an out_dir: its newest */
    if (newest || gb_checkpoint_is_file(run.config_path)) {
        run.config_path = newest ? newest : run.config_path;
        rc = check_checkpoint(&run);
        free(newest);
        return rc;
    }
    if ((rc = gb_cli_load_run(&run)) != 0)
        return rc;
    gb_diag diag = {0};
    /* as train does: a fine-tuning run's model is its init_from checkpoint's */
    int model_unknown = gb_checkpoint_take_model(run.cfg, NULL, &diag) != 0;
    gb_runtime *rt = model_unknown ? NULL : gb_runtime_open(run.cfg, run.plugin_path, &diag);
    int problems = !rt, lost = 0;   /* lost: the standard output could not be written */
    gb_dataset *ds = NULL;
    gb_model *model = NULL;
    if (!problems)
        problems += check_out_dir(gb_runtime_settings(rt), &diag);
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
        problems += !model || check_init_from(s, model, &diag);
        gb_diag_print(&diag, stderr);
        gb_diag_clear(&diag);
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
        print_stand_in_plan(run.cfg, run.plugin_path,
                            model_unknown ? "the [model] section as the config writes it: "
                                            "[train] init_from, whose model a run takes, "
                                            "could not be read" : NULL);
    gb_config_free(run.cfg);
    return problems ? 2 : lost;
}
