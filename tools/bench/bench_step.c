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
 *
 * --predict GPU times nothing: on the CUDA emulator's plugins it runs the warm-up steps,
 * then one step with the profile's marks taking what the emulator counted into each
 * phase, and prints the time each phase and kernel is predicted to take on that GPU
 * (bench_predict.h), the step's total and its MFU there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_predict.h"
#include "bench_util.h"
#include "cli.h"
#include "gearbox/engine/clock.h"
#include "gearbox/engine/machine.h"
#include "measure/measure.h"
#include "gearbox/engine/train.h"

#define DEFAULT_CONFIG "examples/shakespeare_char.ini"

enum { OPT_STEPS, OPT_WARMUP, OPT_PROFILE, OPT_DEVICE, OPT_PREDICT, OPT_SET, OPT_PLUGIN_PATH };

static const gb_cli_spec spec = {
    .verb = "bench step",
    .usage = "gearbox bench step [CONFIG] [--steps N] [--warmup N] [--profile]\n"
             "                          [--device NAME] [--predict GPU]\n"
             "                          [--set section.key=value]... [--plugin-path DIRS]",
    .about =
        "Runs training steps of CONFIG (default " DEFAULT_CONFIG ", from the working\n"
        "folder) and prints the median ms per step, tokens/s, model FLOPs per step and MFU,\n"
        "the FLOPs a step executes (matmuls by shape, attention over the causal triangle),\n"
        "next to the peak of the dtype the matmuls compute in (what MFU divides by: a GPU's\n"
        "stated one, on the CPU the larger of the rated and the measured), on the CPU the\n"
        "measured FMA peak (vector FMAs on every thread, no memory traffic: what no matmul\n"
        "can beat) and for bf16 or f16 that dtype's own (AVX512_BF16 dot products, AVX512_FP16\n"
        "FMAs), and the triad bandwidth. With a loss scaler (fp16), it says how many of the\n"
        "timed steps (or whether the counted one) skipped their update for an inf or NaN\n"
        "gradient: such steps hold less work; more warm-up steps let the scale settle.\n"
        "Nothing is written.\n",
    .options = {
        [OPT_STEPS] = {"steps", 0, "N", "timed steps (default 10)"},
        [OPT_WARMUP] = {"warmup", 0, "N", "steps run first and not timed (default 2; 0 with "
                        "--predict)"},
        [OPT_PROFILE] = {"profile", 0, NULL, "then run N more steps timing every kernel call and "
                         "print the time\nper phase (forward/backward matmul, attention, "
                         "layernorm, optimizer...)\nand the GFLOP/s of the matmul and attention "
                         "phases"},
        [OPT_DEVICE] = {"device", 0, "NAME", "the [device] plugin, cpu or cuda (as --set "
                        "device.plugin=NAME)"},
        [OPT_PREDICT] = {"predict", 0, "GPU", GB_BENCH_PREDICT_HELP ":\nthe warm-up "
                         "steps, then one step counted, and its predicted time\nper phase and "
                         "per kernel, its total and its MFU (H100,H200: a\ntable for each)"},
        [OPT_SET] = GB_CLI_OPTION_SET,
        [OPT_PLUGIN_PATH] = GB_CLI_OPTION_PLUGIN_PATH,
    },
};

typedef struct step_args {
    long steps, warmup;   /* warmup < 0: the default */
    int profile;
    const char *predict;  /* the GPU of --predict, or NULL */
    gb_cli_run *run;      /* --device adds its --set here */
    char device_set[GB_BENCH_NAME_CAP + 16];
} step_args;

/* --device NAME as the override device.plugin=NAME, in its place among the --set ones. */
static int add_device(step_args *a, const char *name)
{
    if (a->run->n_sets == GB_CLI_MAX_SETS)
        return gb_cli_usage_error("bench step", "--device %s: too many --set and --device "
                                  "(at most %d)", name, GB_CLI_MAX_SETS);
    snprintf(a->device_set, sizeof a->device_set, "device.plugin=%s", name);
    a->run->sets[a->run->n_sets++] = a->device_set;
    return 0;
}

/* bench step's own options, beside gb_cli_parse_run's --set and --plugin-path. */
static int parse_option(void *ctx, int opt, const char *value)
{
    step_args *a = ctx;
    if (opt == OPT_PROFILE)
        a->profile = 1;
    else if (opt == OPT_PREDICT)
        a->predict = value;
    else if (opt == OPT_DEVICE)
        return add_device(a, value);
    else if (opt == OPT_STEPS)
        return gb_bench_parse_long("bench step", "steps", value, 1, 1000000, &a->steps);
    else
        return gb_bench_parse_long("bench step", "warmup", value, 0, 1000000, &a->warmup);
    return 0;
}

/* What steps that skipped their update (the loss scaler's inf or NaN) do to the figures,
 * said when `skipped` of the `of` timed ones did. */
static void say_skipped(int64_t skipped, long of)
{
    if (skipped > 0)
        printf("loss scaler: %lld of the %ld timed steps skipped the optimizer's update (an "
               "inf or NaN gradient at the scale of the time), so they hold less work than a "
               "step that updates; --warmup N lets the scale settle first (each skip halves "
               "it)\n", (long long)skipped, of);
}

/* The same for the step a prediction counted: under GEARBOX_CUDA_EMU_COUNT_SAMPLE the
 * emulator runs a few blocks of each grid, so the gradients are incomplete and every step
 * of a loss scaler is skipped, whatever the scale. */
static void say_prediction_skipped(int64_t skipped)
{
    if (skipped <= 0)
        return;
    printf("loss scaler: the counted step skipped the optimizer's update (an inf or NaN "
           "gradient), so the prediction leaves most of the update out; ");
    if (getenv("GEARBOX_CUDA_EMU_COUNT_SAMPLE"))
        printf("with GEARBOX_CUDA_EMU_COUNT_SAMPLE the emulator runs only some blocks of "
               "each grid, the gradients are incomplete and every step is skipped: the same "
               "run in bf16 predicts the same optimizer work\n");
    else
        printf("--warmup N lets the scale settle first (each skip halves it)\n");
}

/* Runs `warmup` untimed steps and then `steps` timed ones: wall ms into ms[0 .. steps),
 * the process's CPU ms (all threads) into ms[steps .. 2 steps), and the loss scaler's
 * skips among the timed ones into *skipped. The last warm-up step (or an extra one when
 * there is none) runs with a profile attached, to count the FLOPs a step executes into
 * *executed. */
static int run_steps(gb_trainer *t, long warmup, long steps, double *ms, double *executed,
                     int64_t *skipped)
{
    long counted = warmup > 0 ? warmup - 1 : 0, first_timed = warmup + (warmup == 0);
    int64_t before = 0;
    gb_profile count = {0};
    for (long it = 0; it < warmup + steps + (warmup == 0); it++) {
        if (it == first_timed && gb_trainer_skipped_steps(t, &before))
            return -1;
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
    if (gb_trainer_skipped_steps(t, skipped))
        return -1;
    *skipped -= before;
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

/* The group of the records counted since the last mark, and the pass its matmuls serve:
 * a phase, or GB_PHASE_COUNT for what ran between the model's timed calls. */
typedef struct predict_marks {
    gb_predict *predict;
    int failed;
} predict_marks;

static void take_phase(void *ctx, gb_phase phase)
{
    predict_marks *m = ctx;
    gb_matmul_pass pass = phase == GB_PHASE_BWD_MATMUL_DX   ? GB_PASS_DX
                          : phase == GB_PHASE_BWD_MATMUL_DW ? GB_PASS_DW
                                                            : GB_PASS_FORWARD;
    if (!m->failed)
        m->failed = gb_predict_take(m->predict, (int)phase, pass) != 0;
}

/* The predicted table: each phase with its kernels, cuDNN's attention at the attention
 * phases' shapes, the step's total and MFU. */
static void report_prediction(gb_trainer *t, gb_predict *pr, const gb_profile *profile,
                              const char *config)
{
    const gb_gpu_spec *gpu = gb_predict_gpu(pr);
    const char *sample = getenv("GEARBOX_CUDA_EMU_COUNT_SAMPLE");
    char title[512];
    snprintf(title, sizeof title, "one step of %s on an %s, from the CUDA emulator's counts "
             "(%s blocks per grid, scaled) and gearbox's time model (docs/gpu.md); not a "
             "measurement", config, gpu->full_name, sample ? sample : "all");
    gb_predict_print_header(pr, title);
    double total = 0.0;
    for (int phase = 0; phase <= GB_PHASE_COUNT; phase++) {
        total += gb_predict_seconds(pr, phase);
        gb_predict_print_group(pr, phase, phase == GB_PHASE_COUNT
                                              ? "between the timed calls"
                                              : gb_phase_name((gb_phase)phase));
        if (phase == GB_PHASE_FWD_ATTN || phase == GB_PHASE_BWD_ATTN)
            gb_predict_printf(pr, "  (cuDNN's fused attention at these shapes: %.4f ms, at "
                              "the efficiency measured on an H100)\n",
                              1e3 * gb_gpu_predict_cudnn_attn(gpu, profile->flops[phase],
                                                              phase == GB_PHASE_BWD_ATTN)
                                        .seconds);
    }
    const gb_settings *s = gb_trainer_settings(t);
    double tokens = (double)(gb_settings_batch_size(s) * gb_settings_block_size(s) *
                             gb_settings_accumulation(s));
    const char *source, *compute;
    gb_trainer_peak_flops(t, &source, &compute);
    double peak = gb_gpu_peak_flops(gpu, compute), flops = gb_trainer_flops_per_step(t);
    gb_predict_printf(pr, "step total %.3f ms (the sum of the phases above) | %.0f tok/s | "
                      "MFU %.1f%% (%.4g GFLOP per step over %.1f TFLOP/s dense %s)\n",
                      1e3 * total, tokens / total, 100.0 * flops / total / peak, flops / 1e9,
                      peak / 1e12, compute);
    gb_predict_printf(pr, "occupancy with * is from threads and shared memory alone: the "
                      "record carries no register count\n");
}

/* --predict: `warmup` steps, then one with the profile's marks taking the counts. The
 * weights' upload is counted by the emulator alone: without it nothing runs (a GPU's or
 * the CPU's plugins). */
static int predict_step(gb_trainer *t, long warmup, gb_predict *pr, const char *config)
{
    if (gb_trainer_sync(t) || gb_predict_take(pr, -1, GB_PASS_FORWARD) ||
        gb_predict_check_counted(pr))
        return -1;
    for (long it = 0; it < warmup; it++)
        if (gb_trainer_step(t, it, NULL) || gb_trainer_sync(t))
            return -1;
    int64_t before, after;
    if (gb_trainer_skipped_steps(t, &before))
        return -1;
    predict_marks marks = {.predict = pr};
    gb_profile profile = {.mark = take_phase, .mark_ctx = &marks};
    /* what the device still has queued (the weights' first upload) is not the step's */
    if (gb_trainer_sync(t) || gb_predict_take(pr, -1, GB_PASS_FORWARD))
        return -1;
    gb_trainer_set_profile(t, &profile);
    int rc = gb_trainer_step(t, warmup, NULL) || gb_trainer_sync(t);
    gb_trainer_set_profile(t, NULL);
    if (rc || marks.failed || gb_predict_take(pr, GB_PHASE_COUNT, GB_PASS_FORWARD) ||
        gb_trainer_skipped_steps(t, &after))
        return -1;
    for (int gpu = 0; gpu < gb_predict_gpu_count(pr); gpu++) {
        gb_predict_show(pr, gpu);
        report_prediction(t, pr, &profile, config);
    }
    say_prediction_skipped(after - before);
    return 0;
}

/* The timed steps, their figures and, with --profile, the time per phase. */
static int measure_steps(gb_trainer *t, const step_args *a)
{
    double *ms = calloc(2 * (size_t)a->steps, sizeof *ms), executed;
    int64_t skipped;
    int rc = !ms || run_steps(t, a->warmup, a->steps, ms, &executed, &skipped) ? 1 : 0;
    if (rc == 0) {
        report(t, ms, a->steps, executed);
        say_skipped(skipped, a->steps);
    }
    if (rc == 0 && a->profile && report_profile(t, a->warmup + a->steps, a->steps))
        rc = 1;
    free(ms);
    return rc;
}

int gb_bench_step(int argc, char **argv)
{
    gb_cli_run run = {.config_path = DEFAULT_CONFIG};
    step_args a = {.steps = 10, .warmup = -1, .run = &run};
    int rc = gb_cli_parse_run(&spec, argc, argv, &run, parse_option, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (a.predict && a.profile) {
        gb_config_free(run.cfg);
        return gb_cli_usage_error("bench step", "--predict and --profile: choose one (the "
                                  "prediction is already per phase)");
    }
    if (a.warmup < 0)
        a.warmup = a.predict ? 0 : 2;
    gb_predict *pr = a.predict ? gb_predict_open("bench step", a.predict, GB_PREDICT_MAX_GPUS,
                                                 GB_PHASE_COUNT + 1)
                               : NULL;
    if (a.predict && !pr) {
        gb_config_free(run.cfg);
        return 2;
    }
    if (pr)
        printf("gearbox bench step: %s | %ld warm-up steps, then one counted for the "
               "prediction\n", run.config_path, a.warmup);
    else
        printf("gearbox bench step: %s | %ld warm-up steps excluded, then %ld timed\n",
               run.config_path, a.warmup, a.steps);
    gb_trainer *t = gb_trainer_open(run.cfg, run.plugin_path);
    rc = !t ? 2 : pr ? (predict_step(t, a.warmup, pr, run.config_path) ? 1 : 0)
                     : measure_steps(t, &a);
    gb_predict_close(pr);
    gb_trainer_close(t);
    gb_config_free(run.cfg);
    return rc;
}
