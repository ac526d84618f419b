/* `gearbox bench matmul`: f32 GFLOP/s of the matmuls one transformer layer and the LM
 * head run per training step, at the model's own shapes, next to the machine's sgemm
 * peak (the device's stated f32 peak, or where it states none the larger of the CPU's
 * rated and measured peaks: gb_peak_flops for f32, the figure an f32 run's MFU is
 * against), with a measured 1024^3 sgemm beside it.
 *
 * For each linear layer out (N, OC) = in (N, IC) @ W^T, N = B*T, the step runs three
 * matmuls, timed separately as training calls them: forward (m N, n OC, k IC, W
 * transposed), the input gradient (N, IC, OC) and the weight gradient (OC, IC, N, input
 * transposed, accumulating). Attention's own batched matmuls belong to the attention
 * plugins (`gearbox bench attn`). Each shape gets one warm-up call and the median of
 * --repeats; the device plugin is loaded through the core as `gearbox train` loads it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_util.h"
#include "cli.h"
#include "machine.h"
#include "runtime.h"

#define MAX_MODELS 8

static const char usage[] =
    "usage: gearbox bench matmul [MODEL...] [--vocab V] [--repeats N] [--threads N]\n"
    "                            [--plugin-path DIRS]\n"
    "\n"
    "Times the f32 matmuls of one layer's forward and backward and of the LM head at a\n"
    "model's shapes, against the stated peak MFU is reported against.\n"
    "\n"
    "  MODEL            S (n_embd 128, T 64, B 12: examples/shakespeare_char.ini),\n"
    "                   M (n_embd 384, T 256, B 8), or C,T,B for any other; default S M\n"
    "  --vocab V        LM head width (default 65, Tiny Shakespeare's characters)\n"
    "  --repeats N      timed calls per shape after one warm-up; the median is shown\n"
    "                   (default 10)\n"
    "  --threads N      OpenMP threads; 0 for every online CPU (default 0)\n"
    "  --plugin-path D  extra plugin folders, ':'-separated\n";

typedef struct model_shape {
    char name[32];
    long C, T, B;
} model_shape;

typedef struct bench_args {
    model_shape models[MAX_MODELS];
    int n_models;
    long vocab, repeats, threads;
    const char *plugin_path;
} bench_args;

/* ---- arguments ----------------------------------------------------------------------- */

static int parse_model(const char *text, bench_args *a)
{
    model_shape m = {{0}, 0, 0, 0};
    if (a->n_models == MAX_MODELS)
        return gb_cli_usage_error("bench matmul", "at most %d models", MAX_MODELS);
    if (strcmp(text, "S") == 0)
        m = (model_shape){"S", 128, 64, 12};
    else if (strcmp(text, "M") == 0)
        m = (model_shape){"M", 384, 256, 8};
    else if (sscanf(text, "%ld,%ld,%ld", &m.C, &m.T, &m.B) != 3 || m.C < 1 || m.T < 1 ||
             m.B < 1 || m.C > 65536 || m.T * m.B > (1L << 24))
        return gb_cli_usage_error("bench matmul", "model '%s': expected S, M or C,T,B such "
                                  "as 128,64,12", text);
    else
        snprintf(m.name, sizeof m.name, "%.31s", text);
    a->models[a->n_models++] = m;
    return 0;
}

static int parse_args(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){.vocab = 65, .repeats = 10, .threads = 0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc;
        if (arg[0] != '-')
            rc = parse_model(arg, a);
        else if (i + 1 >= argc)
            rc = gb_cli_usage_error("bench matmul", "%s: unknown option or missing value", arg);
        else if (strcmp(arg, "--vocab") == 0)
            rc = gb_bench_parse_long("bench matmul", arg, argv[++i], 1, 1 << 20, &a->vocab);
        else if (strcmp(arg, "--repeats") == 0)
            rc = gb_bench_parse_long("bench matmul", arg, argv[++i], 1, 10000, &a->repeats);
        else if (strcmp(arg, "--threads") == 0)
            rc = gb_bench_parse_long("bench matmul", arg, argv[++i], 0, 1024, &a->threads);
        else if (strcmp(arg, "--plugin-path") == 0)
            rc = (a->plugin_path = argv[++i], 0);
        else
            rc = gb_cli_usage_error("bench matmul", "unknown option %s", arg);
        if (rc)
            return rc;
    }
    if (a->n_models == 0 && (parse_model("S", a) || parse_model("M", a)))
        return 2;
    return 0;
}

/* ---- the measurement ----------------------------------------------------------------- */

typedef struct linear {
    const char *name;
    long in, out;   /* IC, OC in units of C, or -1 for the vocabulary */
} linear;

/* The linear layers of a block and the LM head, by their nanoGPT names. */
static const linear linears[] = {
    {"attn.c_attn", 1, 3}, {"attn.c_proj", 1, 1}, {"mlp.c_fc", 1, 4},
    {"mlp.c_proj", 4, 1},  {"lm_head", 1, -1},
};

/* Times one matmul and prints its row; adds its FLOPs and time to the totals. */
static int time_row(gb_runtime *rt, const char *label, gb_matmul_args shape, long repeats,
                    double peak, double *flops, double *ms)
{
    gb_instance *dev = &rt->inst[GB_KIND_DEVICE];
    gb_timing t;
    if (gb_time_matmul(rt->dev, dev->self, shape, (int)repeats, &t))
        return gb_call_failed(dev, GB_ERR_DEVICE, "matmul");
    double gflops = gb_matmul_gflops(shape.m, shape.n, shape.k, t.median_ms);
    printf("  %-22s %6lld %6lld %6lld  %-4s %9.3f %9.1f %6.0f%%\n", label, (long long)shape.m,
           (long long)shape.n, (long long)shape.k,
           shape.trans_a ? "A^T" : shape.trans_b ? "B^T" : "", t.median_ms, gflops,
           peak > 0 ? 100.0 * gflops * 1e9 / peak : 0.0);
    *flops += 2.0 * (double)shape.m * (double)shape.n * (double)shape.k;
    *ms += t.median_ms;
    return 0;
}

/* The peak the percentages are of, and beside it what the device measures. */
static void print_peaks(gb_runtime *rt, double peak, const char *source)
{
    char how[160] = "";
    if (strcmp(source, "device") == 0)
        printf("peak: %.1f GFLOP/s (the device's stated f32 peak)", peak / 1e9);
    else if (strcmp(source, "measured CPU") == 0)
        printf("peak: %.1f GFLOP/s (the CPU's measured f32 peak: AVX FMA loop, above the "
               "rated %.1f)", peak / 1e9, gb_cpu_peak_flops_f32(NULL, 0) / 1e9);
    else if (peak > 0 && gb_cpu_peak_flops_f32(how, sizeof how) > 0)
        printf("peak: %.1f GFLOP/s (the CPU's rated f32 peak: %s)", peak / 1e9, how);
    else
        printf("peak: unknown (the device states none)");
    printf("; measured: %.1f GFLOP/s (best of %d 1024x1024x1024 sgemm through the device's "
           "matmul)\n", gb_measured_sgemm_flops(rt->dev, rt->inst[GB_KIND_DEVICE].self) / 1e9,
           GB_PEAK_CALLS);
}

static int bench_model(gb_runtime *rt, const model_shape *m, const bench_args *a, double peak)
{
    long N = m->B * m->T;
    double flops = 0.0, ms = 0.0;
    printf("\nmodel %s: n_embd %ld, T %ld, B %ld (N = B*T = %ld rows), vocab %ld\n", m->name,
           m->C, m->T, m->B, N, a->vocab);
    printf("  %-22s %6s %6s %6s  %-4s %9s %9s %7s\n", "matmul", "m", "n", "k", "op", "ms",
           "GFLOP/s", "of peak");
    for (size_t i = 0; i < sizeof linears / sizeof linears[0]; i++) {
        const linear *l = &linears[i];
        long IC = l->in * m->C, OC = l->out < 0 ? a->vocab : l->out * m->C;
        char label[64];
        const gb_matmul_args passes[3] = {
            {.m = N, .n = OC, .k = IC, .trans_b = 1, .alpha = 1.0f},
            {.m = N, .n = IC, .k = OC, .alpha = 1.0f},
            {.m = OC, .n = IC, .k = N, .trans_a = 1, .alpha = 1.0f, .beta = 1.0f},
        };
        static const char *const pass_names[3] = {"forward", "d input", "d weight"};
        for (int p = 0; p < 3; p++) {
            snprintf(label, sizeof label, "%s %s", l->name, pass_names[p]);
            if (time_row(rt, label, passes[p], a->repeats, peak, &flops, &ms))
                return -1;
        }
    }
    printf("  %-22s %28s %9.3f %9.1f %6.0f%%\n", "all of the above", "", ms,
           flops / (ms * 1e6), peak > 0 ? 100.0 * flops / (ms * 1e-3) / peak : 0.0);
    return 0;
}

static int start_device(const bench_args *a, gb_config **cfg, gb_runtime *rt)
{
    char text[64];
    snprintf(text, sizeof text, "[run]\nthreads = %ld\n", a->threads);
    gb_diag diag = {0};
    *cfg = gb_config_load_string(text, "gearbox bench matmul", "/", &diag);
    int started = *cfg && !gb_runtime_resolve(rt, *cfg, a->plugin_path, &diag) &&
                  !gb_runtime_start(rt, &diag);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    return started ? 0 : -1;
}

int gb_bench_matmul(int argc, char **argv)
{
    if (gb_cli_wants_help(argc, argv, usage))
        return 0;
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    gb_config *cfg = NULL;
    gb_runtime rt = {0};
    rc = start_device(&a, &cfg, &rt);
    if (rc == 0) {
        const char *source;
        gb_instance *dev = &rt.inst[GB_KIND_DEVICE];
        double peak = gb_peak_flops(rt.dev, dev->self, rt.device_bit, GB_COMPUTE_F32, &source);
        printf("gearbox bench matmul: device/%s, %lld threads, f32, median of %ld calls after "
               "one warm-up\n", dev->plugin->desc->name, (long long)rt.settings.threads,
               a.repeats);
        print_peaks(&rt, peak, source);
        for (int i = 0; rc == 0 && i < a.n_models; i++)
            rc = bench_model(&rt, &a.models[i], &a, peak);
    }
    gb_runtime_free(&rt);
    gb_config_free(cfg);
    return rc ? 1 : 0;
}
