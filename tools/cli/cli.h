/* The `gearbox` command line: one function per verb (and per kind of `gearbox bench`),
 * plus what their option handling shares (`--set section.key=value`, `--plugin-path
 * DIRS`); options.h turns each verb's table of options into getopt_long's and into its
 * --help. */
#ifndef GB_CLI_H
#define GB_CLI_H

#include <stdio.h>

#include "gearbox/engine/config.h"
#include "gearbox/engine/loader.h"
#include "gearbox/engine/model.h"
#include "options.h"

int gb_cmd_train(int argc, char **argv);
int gb_cmd_prepare(int argc, char **argv);
int gb_cmd_sample(int argc, char **argv);
int gb_cmd_eval(int argc, char **argv);
int gb_cmd_plugins(int argc, char **argv);
int gb_cmd_check(int argc, char **argv);
int gb_cmd_bench(int argc, char **argv);
int gb_cmd_new_plugin(int argc, char **argv);
int gb_cmd_test_plugin(int argc, char **argv);
int gb_cmd_doctor(int argc, char **argv);
int gb_cmd_ab(int argc, char **argv);
int gb_cmd_import(int argc, char **argv);
int gb_cmd_export(int argc, char **argv);
int gb_cmd_encode(int argc, char **argv);
int gb_cmd_decode(int argc, char **argv);

/* The microbenchmarks behind `gearbox bench KIND` (tools/bench/): measured figures
 * printed next to this machine's limits, for docs/BENCHMARKS.md. Benchmarks are not
 * tests: they assert nothing about time. Each takes the verb's remaining arguments
 * (argv[0] is the KIND). */
int gb_bench_attn(int argc, char **argv);
int gb_bench_optim(int argc, char **argv);
int gb_bench_matmul(int argc, char **argv);
int gb_bench_step(int argc, char **argv);

#define GB_CLI_MAX_SETS 256

/* The option-table entries the verbs that read a config share (options.h). */
#define GB_CLI_OPTION_SET                                                                  \
    {"set", 0, "section.key=value", "override one key of the config (repeatable),\n"        \
     "e.g. --set run.steps=100"}
#define GB_CLI_OPTION_PLUGIN_PATH                                                          \
    {"plugin-path", 0, "DIRS", "':'-separated plugin folders, searched before\n"            \
     "GEARBOX_PLUGIN_PATH, [run] plugin_path and the built-in folder"}

/* What `train`, `check` and `bench step` share: a config file with overrides and a
 * plugin path. */
typedef struct gb_cli_run {
    const char *config_path;
    const char *plugin_path;
    const char *resume;        /* train only */
    const char *sets[GB_CLI_MAX_SETS];   /* the --set values, in order */
    int n_sets;
    gb_config *cfg;            /* loaded, overrides applied */
} gb_cli_run;

/* A verb's own option (its index in spec->options) with its value (NULL for a flag):
 * 0, or the exit status after printing the problem. */
typedef int (*gb_cli_option_fn)(void *ctx, int option, const char *value);

/* Parses "CONFIG [OPTIONS]" against spec into run (zeroed by the caller), loading nothing
 * (run->cfg stays NULL): the options named set, plugin-path and resume fill run; any other
 * goes to `own` (NULL when spec has none). run->config_path, when set before the call, is
 * the default for a CONFIG left out; else CONFIG is required. 0, -1 after --help, or the
 * exit status after printing the problem (2). */
int gb_cli_parse_run_args(const gb_cli_spec *spec, int argc, char **argv, gb_cli_run *run,
                          gb_cli_option_fn own, void *ctx);

/* gb_cli_parse_run_args, then loads the config and applies the overrides. 0, -1 after
 * --help, or the exit status after printing the problem (2: usage or config error). */
int gb_cli_parse_run(const gb_cli_spec *spec, int argc, char **argv, gb_cli_run *run,
                     gb_cli_option_fn own, void *ctx);

/* Each verb's command line (train's also for the fuzz target of its parser). */
extern const gb_cli_spec gb_cli_train_spec, gb_cli_check_spec, gb_cli_prepare_spec,
    gb_cli_sample_spec, gb_cli_eval_spec, gb_cli_encode_spec, gb_cli_decode_spec,
    gb_cli_import_spec, gb_cli_export_spec, gb_cli_plugins_spec, gb_cli_bench_spec,
    gb_cli_doctor_spec, gb_cli_ab_spec, gb_cli_new_plugin_spec, gb_cli_test_plugin_spec;

/* `gearbox` itself: its options and its verbs, whose lines in its --help come from the
 * specs above (verbs.c). */
extern const gb_cli_spec gb_cli_gearbox_spec;

/* Prints "gearbox VERSION (git REVISION), plugin ABI MAJOR.MINOR" on stdout. */
void gb_cli_print_version(void);

/* The loading half of gb_cli_parse_run: run->config_path read into run->cfg, the
 * overrides applied. 0, or 2 after printing the problems. */
int gb_cli_load_run(gb_cli_run *run);

/* The checkpoint a verb reads: `given` itself, or the newest ckpt-STEP.gbk of the out_dir
 * `given` names. malloc'ed; NULL only when out of memory. A folder without checkpoints
 * comes back as it is, for the checkpoint reader to say so. */
char *gb_cli_checkpoint_path(const char *given);

/* One line on a model: its parameters and [model] shape, after `prefix`. */
void gb_cli_print_model(FILE *out, const char *prefix, const gb_model_config *c,
                        int64_t n_params);

/* What `gearbox sample` was asked for. */
typedef struct gb_sample_args {
    const char *checkpoint, *prompt, *plugin_path;
    const char *vocab;         /* --vocab: GPT-2's vocabulary files, or NULL */
    const char *prompt_file;   /* --prompt-file: "-" for the standard input, or NULL */
    int prompt_given;          /* --prompt was given (it and --prompt-file exclude each other) */
    long tokens, top_k, num_samples;
    double temperature, top_p;
    unsigned long long seed;
    int keep_going;            /* --keep-going: past <|endoftext|> */
    int no_cache;              /* --no-cache: the whole window for every token */
} gb_sample_args;

/* The whole of FILE, or of the standard input for "-", with a NUL after its *len bytes.
 * NULL after saying why, as "gearbox VERB: cannot read ...". */
char *gb_cli_read_input(const char *verb, const char *path, size_t *len);

/* Parses sample's arguments (no file is touched). 0; -1 after printing --help; or the
 * exit status after printing the problem (2). */
int gb_cli_parse_sample(int argc, char **argv, gb_sample_args *a);

/* Re-executes gearbox with GOMP_SPINCOUNT bounded unless OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT is set (omp_wait.c says why); returns only when it did not. */
void gb_cli_bound_openmp_spin(char **argv);

/* Creates the missing folders above the file or folder `path` that VERB is about to
 * write. 0, or 1 after printing which folder could not be made and why. */
int gb_cli_make_parents(const char *verb, const char *path);

/* Flushes the standard output and checks that all written to it arrived: 0, or 1 after
 * saying "gearbox VERB: cannot write the standard output: WHY" (a full disk, a pipe whose
 * reader is gone). main calls it after every verb; a verb that writes as it goes (sample)
 * calls it to stop at the first failure. */
int gb_cli_flush_stdout(const char *verb);

/* Prints the plugins all[0 .. n) a line each after `indent`: kind, name, version, devices
 * and file, each column as wide as its widest entry; with `header`, the columns' names
 * first. A plugin that an earlier one of its kind, name and device hides is marked so. */
void gb_cli_list_plugins(const gb_plugin **all, int n, const char *indent, int header);

/* Prints each problem in diag as "gearbox VERB: PROBLEM" on stderr. */
void gb_cli_print_problems(const char *verb, const gb_diag *diag);

/* Prints "gearbox VERB: MESSAGE" and a pointer to --help; returns 2. */
int gb_cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends value to items (*n of them, at most max): what a repeatable option or operand
 * collects. 0, or 2 after a usage error for `verb` naming `what` ("--set options") and
 * the limit. */
int gb_cli_append(const char *verb, const char *what, const char **items, int *n, int max,
                  const char *value);

/* The value of option `flag` ("--tokens") as a whole number from lo to hi, written in
 * decimal digits only ("1.5", "0x10", "-1" and "1e3" are not counts a user meant), into
 * *out: 0, or 2 after a usage error for `verb` that names the flag and the range. */
int gb_cli_parse_count(const char *verb, const char *flag, const char *text,
                       unsigned long long lo, unsigned long long hi, unsigned long long *out);

#endif
