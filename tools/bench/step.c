/* `gearbox bench step`: milliseconds per training step and tokens/s for a config, with
 * the model FLOPs of a step (nanoGPT's count), MFU, and the machine's limits beside them
 * (the stated peak MFU divides by, and STREAM triad bandwidth).
 *
 * The steps are `gearbox train`'s own (gb_trainer_step: data, forward, backward, clip,
 * optimizer update), on the config's model, plugins and batch, so the figure is what a
 * run gets; evaluation, checkpoints and metrics files are left out. Warm-up steps are
 * run first and excluded; the median of the timed steps is reported with their range.
 * --profile then runs as many steps again with per-phase timers (profile.h) and prints
 * where a step's time goes; the median comes from the unprofiled steps.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "clock.h"
#include "machine.h"
#include "train.h"

#define DEFAULT_CONFIG "examples/shakespeare_char.ini"

static const char usage[] =
    "usage: gearbox bench step [CONFIG] [--steps N] [--warmup N] [--profile]\n"
    "                          [--set section.key=value]... [--plugin-path DIRS]\n"
    "\n"
    "Runs training steps of CONFIG (default " DEFAULT_CONFIG ", from the working\n"
    "folder) and prints the median ms per step, tokens/s, model FLOPs per step and MFU,\n"
    "next to the stated f32 peak and triad bandwidth. Nothing is written.\n"
    "\n"
    "  --steps N    timed steps (default 10)\n"
    "  --warmup N   steps run first and not timed (default 2)\n"
    "  --profile    then run N more steps timing every kernel call and print the time\n"
    "               per phase (forward/backward matmul, attention, layernorm, optimizer...)\n"
    "  --set, --plugin-path   as for `gearbox train`\n";

static int parse_count(const char *flag, const char *text, long lo, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > 1000000)
        return gb_cli_usage_error("bench step", "%s %s: expected an integer in [%ld, 1000000]",
                                  flag, text, lo);
    *out = v;
    return 0;
}

/* Takes --steps, --warmup and --profile out of argv; the rest, with the default config added when
 * none is named, goes to gb_cli_parse_run. `rest` has room for argc + 1 entries. */
static int split_args(int argc, char **argv, long *steps, long *warmup, int *profile,
                      char **rest, int *n_rest)
{
    int named = 0;
    *n_rest = 0;
    rest[(*n_rest)++] = "bench step";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--profile") == 0) {
            *profile = 1;
            continue;
        }
        int own = strcmp(argv[i], "--steps") == 0 || strcmp(argv[i], "--warmup") == 0;
        int takes_value = strcmp(argv[i], "--set") == 0 || strcmp(argv[i], "--plugin-path") == 0;
        if (own && i + 1 >= argc)
            return gb_cli_usage_error("bench step", "%s needs a value", argv[i]);
        if (own) {
            int rc = argv[i][2] == 's' ? parse_count(argv[i], argv[i + 1], 1, steps)
                                       : parse_count(argv[i], argv[i + 1], 0, warmup);
            if (rc)
                return rc;
            i++;
            continue;
        }
        named |= argv[i][0] != '-';
        rest[(*n_rest)++] = argv[i];
        if (takes_value && i + 1 < argc)
            rest[(*n_rest)++] = argv[++i];
    }
    if (!named)
        rest[(*n_rest)++] = DEFAULT_CONFIG;
    return 0;
}

/* Runs `warmup` untimed steps and then `steps` timed ones into ms. */
static int run_steps(gb_trainer *t, long warmup, long steps, double *ms)
{
    for (long it = 0; it < warmup + steps; it++) {
        double t0 = gb_now_ms();
        if (gb_trainer_step(t, it, NULL) || gb_trainer_sync(t))
            return -1;
        if (it >= warmup)
            ms[it - warmup] = gb_now_ms() - t0;
    }
    return 0;
}

static void report(gb_trainer *t, double *ms, long steps)
{
    const gb_settings *s = gb_trainer_settings(t);
    gb_timing timing = gb_timing_of(ms, (int)steps);
    double median = timing.median_ms;
    double tokens = (double)(s->batch_size * s->block_size * s->gradient_accumulation_steps);
    double flops = gb_trainer_flops_per_step(t);
    const char *source;
    double peak = gb_trainer_peak_flops(t, &source);
    printf("step: median %.2f ms (min %.2f, max %.2f over %ld steps) | %.0f tokens per step "
           "| %.0f tok/s\n", median, timing.best_ms, timing.worst_ms, steps, tokens,
           tokens / (median / 1e3));
    printf("model FLOPs: %.4g GFLOP per step (nanoGPT's 6N + 12LHQT per token) -> %.1f "
           "GFLOP/s", flops / 1e9, flops / (median * 1e6));
    if (peak > 0)
        printf(" | MFU %.1f%%", 100.0 * flops / (median / 1e3) / peak);
    printf("\nlimits: f32 peak %.1f GFLOP/s (stated by the %s; `gearbox bench matmul` "
           "measures) | triad %.1f GB/s (STREAM, %lld threads)\n", peak / 1e9,
           strcmp(source, "device") == 0 ? "device" : "CPU", gb_measure_triad_gbs((int)s->threads),
           (long long)s->threads);
}

/* Runs `steps` more steps with the profile attached and prints the time per phase. */
static int report_profile(gb_trainer *t, long first, long steps)
{
    gb_profile profile = {0};
    gb_trainer_set_profile(t, &profile);
    double start = gb_now_ms();
    for (long it = first; it < first + steps; it++)
        if (gb_trainer_step(t, it, NULL))
            return -1;
    if (gb_trainer_sync(t))
        return -1;
    double total = (gb_now_ms() - start) / (double)steps;
    gb_trainer_set_profile(t, NULL);
    printf("\nprofile: %.2f ms per step over %ld profiled steps (the device is synchronised "
           "around every call)\n", total, steps);
    printf("  %-30s %10s %7s %10s\n", "phase", "ms/step", "share", "calls/step");
    double attributed = 0.0;
    for (int p = 0; p < GB_PHASE_COUNT; p++) {
        double ms = profile.ms[p] / (double)steps;
        attributed += ms;
        if (profile.ms[p] > 0.0)
            printf("  %-30s %10.3f %6.1f%% %10.1f\n", gb_phase_name((gb_phase)p), ms,
                   100.0 * ms / total, (double)profile.calls[p] / (double)steps);
    }
    printf("  %-30s %10.3f %6.1f%%\n", "other (loop, host code)", total - attributed,
           100.0 * (total - attributed) / total);
    return 0;
}

int gb_bench_step(int argc, char **argv)
{
    if (gb_cli_wants_help(argc, argv, usage))
        return 0;
    long steps = 10, warmup = 2;
    int profile = 0, n_rest;
    char **rest = calloc((size_t)argc + 2, sizeof *rest);
    if (!rest)
        return 1;
    int rc = split_args(argc, argv, &steps, &warmup, &profile, rest, &n_rest);
    gb_cli_run run = {0};
    if (!rc)
        rc = gb_cli_parse_run(n_rest, rest, usage, 0, &run);
    free(rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    printf("gearbox bench step: %s | %ld warm-up steps excluded, then %ld timed\n",
           run.config_path, warmup, steps);
    gb_trainer *t = gb_trainer_open(run.cfg, run.plugin_path);
    double *ms = calloc((size_t)steps, sizeof *ms);
    rc = !t ? 2 : !ms || run_steps(t, warmup, steps, ms) ? 1 : 0;
    if (rc == 0)
        report(t, ms, steps);
    if (rc == 0 && profile && report_profile(t, warmup + steps, steps))
        rc = 1;
    free(ms);
    gb_trainer_close(t);
    gb_config_free(run.cfg);
    return rc;
}
