/* The `gearbox` command line: one function per verb, plus the option handling they share
 * (`--set section.key=value`, `--plugin-path DIRS`, `--help`). */
#ifndef GB_CLI_H
#define GB_CLI_H

#include "config.h"

int gb_cmd_train(int argc, char **argv);
int gb_cmd_prepare(int argc, char **argv);
int gb_cmd_sample(int argc, char **argv);
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

#define GB_CLI_MAX_SETS 256

/* What `train` and `check` share: a config file with overrides and a plugin path. */
typedef struct gb_cli_run {
    const char *config_path;
    const char *plugin_path;
    const char *resume;        /* train only */
    const char *sets[GB_CLI_MAX_SETS];   /* the --set values, in order */
    int n_sets;
    gb_config *cfg;            /* loaded, overrides applied */
} gb_cli_run;

/* The argument part of gb_cli_parse_run: fills run but loads nothing (run->cfg stays
 * NULL). 0, or the exit status after printing the problem (2). */
int gb_cli_parse_run_args(int argc, char **argv, int allow_resume, gb_cli_run *run);

/* Parses "CONFIG [--set s.k=v]... [--plugin-path DIRS] [--resume CKPT]" (resume only when
 * allow_resume), loads the config and applies the overrides. Returns 0, or the exit
 * status after printing the problem (2: usage or config error). */
int gb_cli_parse_run(int argc, char **argv, const char *usage, int allow_resume,
                     gb_cli_run *run);

/* What `gearbox sample` was asked for. */
typedef struct gb_sample_args {
    const char *checkpoint, *prompt, *plugin_path;
    const char *vocab;         /* --vocab: GPT-2's vocabulary files, or NULL */
    long tokens, top_k;
    double temperature;
    unsigned long long seed;
} gb_sample_args;

/* Parses sample's arguments (no file is touched). 0; -1 after printing --help; or the
 * exit status after printing the problem (2). */
int gb_cli_parse_sample(int argc, char **argv, gb_sample_args *a);

/* One option of a verb, for getopt_long and for its --help: the long name (no "--"),
 * the value's name (NULL for a flag without one) and what it does ('\n' between lines;
 * --help lines them up in one column). */
typedef struct gb_cli_option {
    const char *name;
    const char *value;
    const char *help;
} gb_cli_option;

/* Called with the index of the option found in the table and its value (NULL for none).
 * 0, or 2 after a usage error. */
typedef int (*gb_cli_on_option)(int index, const char *value, void *ctx);

/* Parses argv with getopt_long against `options`: "--name VALUE", "--name=VALUE", and
 * -h or --help, which prints `intro` and the options' table to stdout. The arguments
 * that are not options are moved to argv[*first..argc). 0; -1 after printing the help;
 * 2 after a usage error (an unknown option, a missing value, or on_option's). */
int gb_cli_getopt(int argc, char **argv, const char *verb, const char *intro,
                  const gb_cli_option *options, int count, gb_cli_on_option on_option,
                  void *ctx, int *first);

/* Value of "--flag VALUE" or "--flag=VALUE" at argv[*i], advancing *i; NULL if argv[*i]
 * is not that flag. *missing is set when the flag has no value. */
const char *gb_cli_flag_value(int argc, char **argv, int *i, const char *flag, int *missing);

/* 1 when argv holds -h or --help (then `usage` has been printed). */
int gb_cli_wants_help(int argc, char **argv, const char *usage);

/* Re-executes gearbox with GOMP_SPINCOUNT bounded unless OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT is set (omp_wait.c says why); returns only when it did not. */
void gb_cli_bound_openmp_spin(char **argv);

/* Creates the missing folders above the file or folder `path` that VERB is about to
 * write. 0, or 1 after printing which folder could not be made and why. */
int gb_cli_make_parents(const char *verb, const char *path);

/* Prints "gearbox VERB: MESSAGE" and a pointer to --help; returns 2. */
int gb_cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
