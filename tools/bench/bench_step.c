/* `gearbox bench step`: milliseconds per training step and tokens/s for a config, with
 * the model FLOPs of a step (nanoGPT's count), MFU, the FLOPs the step executes (counted
 * from the calls it makes), and the machine's limits beside them (the peak MFU divides
 * by, on the CPU the measured FMA peak and a 16-bit dtype's own, and STREAM triad
 * bandwidth).
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

#include "bench_util.h"
#include "cli.h"
#include "gearbox/engine/clock.h"
#include "gearbox/engine/machine.h"
#include "measure/measure.h"
#include "gearbox/engine/train.h"

#define DEFAULT_CONFIG "examples/shakespeare_char.ini"

enum { OPT_STEPS, OPT_WARMUP, OPT_PROFILE, OPT_SET, OPT_PLUGIN_PATH };

static const gb_cli_spec spec = {
    .verb = "bench step",
    .usage = "gearbox bench step [CONFIG] [--steps N] [--warmup N] [--profile]\n"
             "                          [--set section.key=value]... [--plugin-path DIRS]",
    .about =
        "Runs training steps of CONFIG (default " DEFAULT_CONFIG ", from the working\n"
        "folder) and prints the median ms per step, tokens/s, model FLOPs per step and MFU,\n"
        "the FLOPs a step executes (matmuls by shape, attention over the causal triangle),\n"
        "next to the peak of the dtype the matmuls compute in (what MFU divides by: a GPU's\n"
        "stated one, on the CPU the larger of the rated and the measured), on the CPU the\n"
        "measured FMA peak (vector FMAs on every thread, no memory traffic: what no matmul\n"
        "can beat) and for bf16 or f16 that dtype's own (AVX512_BF16 dot products, AVX512_FP16\n"
        "FMAs), and the triad bandwidth.\n"
        "Nothing is written.\n",
    .options = {
        [OPT_STEPS] = {"steps", 0, "N", "timed steps (default 10)"},
        [OPT_WARMUP] = {"warmup", 0, "N", "steps run first and not timed (default 2)"},
        [OPT_PROFILE] = {"profile", 0, NULL, "then run N more steps timing every kernel call and "
                         "print the time\nper phase (forward/backward matmul, attention, "
                         "layernorm, optimizer...)\nand the GFLOP/s of the matmul and attention "
                         "phases"},
        [OPT_SET] = GB_CLI_OPTION_SET,
        [OPT_PLUGIN_PATH] = GB_CLI_OPTION_PLUGIN_PATH,
    },
};

typedef struct step_args {
    long steps, warmup;
    int profile;
} step_args;

/* bench step's own options, beside gb_cli_parse_run's --set and --plugin-path. */
static int parse_option(void *ctx, int opt, const char *value)
{
    step_args *a = ctx;
    if (opt == OPT_PROFILE)
        a->profile = 1;
    else if (opt == OPT_STEPS)
        return gb_bench_parse_long("bench step", "steps", value, 1, 1000000, &a->steps);
    else
        return gb_bench_parse_long("bench step", "warmup", value, 0, 1000000, &a->warmup);
    return 0;
}

/* Runs `warmup` untimed steps and then `steps` timed ones: wall ms into ms[0 .. steps),
 * the process's CPU ms (all threads) into ms[steps .. 2 steps). The last warm-up step
 * (or an extra one when there is none) runs with a profile attached, to count the FLOPs
 * a step executes into *executed. */
static int run_steps(gb_trainer *t, long warmup, long steps, double *ms, double *executed)
{
    long counted = warmup > 0 ? warmup - 1 : 0;
    gb_profile count = {0};
    for (long it = 0; it < warmup + steps + (warmup == 0); it++) {
        if (it == counted)
            gb_trainer_set_profile(t, &count);
        double t0 = gb_now_ms(), cpu0 = gb_cpu_ms();
        int rc = gb_trainer_step(t, it, NULL) || gb_trainer_sync(t);
        double took = gb_now_ms() - t0, cpu = gb_cpu_ms() - cpu0;
        if (it == counted)
            gb_trainer_set_profile(t, NULL);
        if (rc)
            return -1;
        long timed = it - warmup - (warmup == 0);
        if (timed >= 0) {
            ms[timed] = took;
            ms[steps + timed] = cpu;
        }
    }
    *executed = 0.0;
    for (int p = 0; p < GB_PHASE_COUNT; p++)
        *executed += count.flops[p];
    return 0;
}

/* The median wall and CPU ms of a step. */
typedef struct step_time {
    double wall, cpu;
} step_time;

/* The measured limit of `compute` ("f32", "bf16"...) on `threads` threads, printed as
 * " | LABEL X GFLOP/s (measured: ISA, N threads; Y per CPU-second) -> executed FLOPs at
 * P% of it (Q% per CPU-second)": the second pair, work and limit both over CPU time,
 * holds on a machine busy with other programs, where the first falls apart. */
static void report_measured(const char *label, const char *compute, double executed,
                            step_time median, long long threads)
{
    gb_compute c = GB_COMPUTE_F32;
    while (c < GB_COMPUTE_F16 && strcmp(gb_compute_name(c), compute) != 0)
        c++;
    const char *isa;
    double per_cpu_s;
    double limit = gb_measure_compute_flops(c, (int)threads, &isa, &per_cpu_s);
    if (limit > 0)
        printf(" | %s %.1f GFLOP/s (measured: %s, %lld threads; %.1f per CPU-second) -> "
               "executed FLOPs at %.1f%% of it (%.1f%% per CPU-second)", label, limit / 1e9,
               isa, threads, per_cpu_s / 1e9, 100.0 * executed / (median.wall / 1e3) / limit,
               100.0 * executed * (double)threads / (median.cpu / 1e3) / per_cpu_s);
}

/* The limits a step's figures stand against: the peak MFU divides by and where it comes
 * from; on the CPU the measured FMA peak (what no f32 matmul can beat) and, for a 16-bit
 * run, the measured limit of its dtype's instructions; the triad bandwidth. */
static void report_limits(double peak, const char *source, const char *compute,
                          double executed, step_time median, long long threads)
{
    int cpu = strcmp(source, "device") != 0;
    printf("limits: %s peak %.1f GFLOP/s (%s%s, what MFU divides by)", compute, peak / 1e9,
           cpu ? "" : "stated by the ", source);
    if (cpu) {
        report_measured("FMA peak", "f32", executed, median, threads);
        if (strcmp(compute, "bf16") == 0 || strcmp(compute, "f16") == 0)
            report_measured(strcmp(compute, "bf16") == 0 ? "bf16 peak" : "f16 peak", compute,
                            executed, median, threads);
    }
    printf(" | triad %.1f GB/s (STREAM, %lld threads)\n", gb_measure_triad_gbs((int)threads),
           threads);
}

static void report(gb_trainer *t, double *ms, long steps, double executed)
{
    const gb_settings *s = gb_trainer_settings(t);
    gb_timing timing = gb_timing_of(ms, (int)steps);
    double median = timing.median_ms;
    double cpu_median = gb_timing_of(ms + steps, (int)steps).median_ms;
    double tokens = (double)(gb_settings_batch_size(s) * gb_settings_block_size(s) *
                             gb_settings_accumulation(s));
    double flops = gb_trainer_flops_per_step(t);
    const char *source, *compute;
    double peak = gb_trainer_peak_flops(t, &source, &compute);
    printf("step: median %.2f ms (min %.2f, max %.2f over %ld steps) | %.0f tokens per step "
           "| %.0f tok/s | CPU time %.2f ms per step (all threads)\n", median, timing.best_ms,
           timing.worst_ms, steps, tokens, tokens / (median / 1e3), cpu_median);
    printf("model FLOPs: %.4g GFLOP per step (nanoGPT's 6N + 12LHQT per token) -> %.1f "
           "GFLOP/s", flops / 1e9, flops / (median * 1e6));
    if (peak > 0)
        printf(" | MFU %.1f%%", 100.0 * flops / (median / 1e3) / peak);
    printf("\nexecuted FLOPs: %.4g GFLOP per step (matmuls by shape, attention over the "
           "causal triangle) -> %.1f GFLOP/s\n", executed / 1e9, executed / (median * 1e6));
    report_limits(peak, source, compute, executed, (step_time){median, cpu_median},
                  (long long)gb_settings_threads(s));
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
    printf("  %-30s %10s %7s %10s %8s\n", "phase", "ms/step", "share", "calls/step", "GFLOP/s");
    double attributed = 0.0;
    for (int p = 0; p < GB_PHASE_COUNT; p++) {
        double ms = profile.ms[p] / (double)steps;
        attributed += ms;
        if (profile.ms[p] <= 0.0)
            continue;
        printf("  %-30s %10.3f %6.1f%% %10.1f", gb_phase_name((gb_phase)p), ms,
               100.0 * ms / total, (double)profile.calls[p] / (double)steps);
        if (profile.flops[p] > 0)
            printf(" %8.1f", profile.flops[p] / (profile.ms[p] * 1e6));
        printf("\n");
    }
    printf("  %-30s %10.3f %6.1f%%\n", "other (loop, host code)", total - attributed,
           100.0 * (total - attributed) / total);
    return 0;
}

int gb_bench_step(int argc, char **argv)
{
    step_args a = {.steps = 10, .warmup = 2};
    gb_cli_run run = {.config_path = DEFAULT_CONFIG};
    int rc = gb_cli_parse_run(&spec, argc, argv, &run, parse_option, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    printf("gearbox bench step: %s | %ld warm-up steps excluded, then %ld timed\n",
           run.config_path, a.warmup, a.steps);
    gb_trainer *t = gb_trainer_open(run.cfg, run.plugin_path);
    double *ms = calloc(2 * (size_t)a.steps, sizeof *ms), executed;
    rc = !t ? 2 : !ms || run_steps(t, a.warmup, a.steps, ms, &executed) ? 1 : 0;
    if (rc == 0)
        report(t, ms, a.steps, executed);
    if (rc == 0 && a.profile && report_profile(t, a.warmup + a.steps, a.steps))
        rc = 1;
    free(ms);
    gb_trainer_close(t);
    gb_config_free(run.cfg);
    return rc;
}
