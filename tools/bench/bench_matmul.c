/* `gearbox bench matmul`: GFLOP/s of the matmuls one transformer layer and the LM head
 * run per training step, at the model's own shapes, on a device (cpu or cuda) and in a
 * dtype (f32, bf16, f16), next to the peak of that dtype a run's MFU is against
 * (gb_peak_flops: the device's stated one, or where it states none the larger of the
 * CPU's rated and measured peaks), with a measured 1024^3 sgemm beside it.
 *
 * For each linear layer out (N, OC) = in (N, IC) @ W^T, N = B*T, the step runs three
 * matmuls, timed separately as training calls them (engine/model_*.c): forward (m N, n OC,
 * k IC, W transposed; output in the dtype), the input gradient (N, IC, OC; in the dtype)
 * and the weight gradient (OC, IC, N, input transposed, accumulating into f32). With
 * --epilogues each is timed with the epilogue a GPT-2 run gives it: the bias in the
 * forward products, GELU's tanh form (with its pre-activation kept) in mlp.c_fc's forward,
 * GELU's derivative in mlp.c_proj's input gradient, and the bias gradient in every weight
 * gradient but the LM head's; this is where a forward product slower than its weight
 * gradient shows which epilogue or layout costs it. Attention's own batched matmuls belong
 * to the attention plugins (`gearbox bench attn`). Each shape gets one warm-up call and
 * the median of --repeats; the device plugin is loaded through the core as `gearbox train`
 * loads it. --predict GPU times nothing: on the CUDA emulator's plugins each product runs
 * once, what the emulator counted for it (the cuBLASLt call and any epilogue kernel that
 * runs apart from it) is predicted on that GPU (bench_predict.h), and its row shows the
 * predicted time and rate; then each product's kernels.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_predict.h"
#include "bench_util.h"
#include "cli.h"
#include "gearbox/engine/machine.h"
#include "measure/measure.h"
#include "gearbox/engine/run.h"

#define MAX_MODELS 8

enum { OPT_VOCAB, OPT_DEVICE, OPT_DTYPE, OPT_EPILOGUES, OPT_REPEATS, OPT_THREADS,
       OPT_PREDICT, OPT_PLUGIN_PATH };

static const gb_cli_spec spec = {
    .verb = "bench matmul",
    .usage = "gearbox bench matmul [MODEL...] [OPTIONS]",
    .about =
        "Times the matmuls of one layer's forward and backward and of the LM head at a\n"
        "model's shapes, in a dtype, against the stated peak MFU is reported against.\n"
        "\n"
        "MODEL is S (n_embd 128, T 64, B 12: examples/shakespeare_char.ini), M (n_embd 384,\n"
        "T 256, B 8), G (GPT-2 124M: n_embd 768, T 1024, B 16, vocab 50304), or C,T,B for any\n"
        "other; the default is S M.\n",
    .options = {
        [OPT_VOCAB] = {"vocab", 0, "V",
                       "LM head width (default: 65, Tiny Shakespeare's characters,\n"
                       "for S, M and C,T,B; 50304 for G)"},
        [OPT_DEVICE] = GB_BENCH_OPTION_DEVICE,
        [OPT_DTYPE] = {"dtype", 0, "f32|bf16|f16",
                       "the activations' and weights' dtype, as a run of\n"
                       "that precision has them (default f32); weight gradients\n"
                       "accumulate in f32"},
        [OPT_EPILOGUES] = {"epilogues", 0, NULL,
                           "each matmul with the epilogue a GPT-2 run gives it\n"
                           "(bias, GELU, GELU's derivative, bias gradient)"},
        [OPT_REPEATS] = {"repeats", 0, "N", "timed calls per shape after one warm-up; the median "
                         "is shown\n(default 10)"},
        [OPT_THREADS] = GB_BENCH_OPTION_THREADS,
        [OPT_PREDICT] = {"predict", 0, "GPU", GB_BENCH_PREDICT_HELP ":\neach product runs "
                         "once and its row shows the predicted\ntime and rate, then its "
                         "kernels"},
        [OPT_PLUGIN_PATH] = GB_CLI_OPTION_PLUGIN_PATH,
    },
};

typedef struct model_shape {
    char name[32];
    long C, T, B, vocab;
} model_shape;

typedef struct bench_args {
    model_shape models[MAX_MODELS];
    int n_models;
    long vocab, repeats, threads;   /* vocab 0: each model's own */
    gb_bench_overrides overrides;   /* the plugin path alone: matmul takes no --set */
    const char *device;
    gb_dtype dtype;
    int epilogues;
    const char *predict;   /* --predict's GPU, or NULL */
    gb_predict *pr;        /* its groups: one per product of a model */
} bench_args;

/* ---- arguments ----------------------------------------------------------------------- */

static int parse_model(const char *text, bench_args *a)
{
    model_shape m = {{0}, 0, 0, 0, 65};
    if (a->n_models == MAX_MODELS)
        return gb_cli_usage_error("bench matmul", "at most %d models", MAX_MODELS);
    if (strcmp(text, "S") == 0)
        m = (model_shape){"S", 128, 64, 12, 65};
    else if (strcmp(text, "M") == 0)
        m = (model_shape){"M", 384, 256, 8, 65};
    else if (strcmp(text, "G") == 0)
        m = (model_shape){"G", 768, 1024, 16, 50304};
    else if (sscanf(text, "%ld,%ld,%ld", &m.C, &m.T, &m.B) != 3 || m.C < 1 || m.T < 1 ||
             m.B < 1 || m.C > 65536 || m.T * m.B > (1L << 24))
        return gb_cli_usage_error("bench matmul", "model '%s': expected S, M or C,T,B such "
                                  "as 128,64,12", text);
    else
        snprintf(m.name, sizeof m.name, "%.31s", text);
    a->models[a->n_models++] = m;
    return 0;
}

/* 0, -1 after --help, or the exit status of a usage error. */
static int parse_args(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){.repeats = 10, .device = "cpu", .dtype = GB_F32};
    gb_cli_parser p;
    gb_cli_begin(&p, &spec, argc, argv);
    for (int opt, rc = 0; (opt = gb_cli_next(&p)) != GB_CLI_END;) {
        if (opt == GB_CLI_EXIT)
            return p.status ? p.status : -1;
        if (opt == GB_CLI_OPERAND)
            rc = parse_model(p.value, a);
        else if (opt == OPT_VOCAB)
            rc = gb_bench_parse_long("bench matmul", "vocab", p.value, 1, 1 << 20, &a->vocab);
        else if (opt == OPT_DEVICE)
            a->device = p.value;
        else if (opt == OPT_DTYPE)
            rc = gb_bench_parse_dtype("bench matmul", p.value, &a->dtype);
        else if (opt == OPT_EPILOGUES)
            a->epilogues = 1;
        else if (opt == OPT_REPEATS)
            rc = gb_bench_parse_long("bench matmul", "repeats", p.value, 1, 10000, &a->repeats);
        else if (opt == OPT_THREADS)
            rc = gb_bench_parse_long("bench matmul", "threads", p.value, 0, 1024, &a->threads);
        else if (opt == OPT_PREDICT)
            a->predict = p.value;
        else
            a->overrides.plugin_path = p.value;
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

/* One matmul of a training step as bench_model sets it up: the shape and dtypes, and which
 * of the epilogue's operands it reads or writes. */
typedef struct timed_call {
    gb_matmul_args args;    /* shape, transposes, dtypes, alpha, beta, epilogue */
    int bias, aux, bias_grad;
} timed_call;

/* The device buffers of one call, freed together. */
typedef struct call_buffers {
    void *ptr[6];
    int n;
} call_buffers;

/* gb_device_pattern, remembered in bufs for freeing. */
static void *typed_pattern(gb_runtime *rt, call_buffers *bufs, gb_dtype dtype, size_t count)
{
    void *buf = gb_device_pattern(gb_runtime_device_ops(rt),
                                  gb_runtime_instance(rt, GB_KIND_DEVICE)->self, dtype, count);
    if (buf)
        bufs->ptr[bufs->n++] = buf;
    return buf;
}

/* Gives `c` device operands laid out densely; 0, or -1 when the device refused. */
static int place_operands(gb_runtime *rt, gb_matmul_args *c, const timed_call *call,
                          call_buffers *bufs)
{
    c->struct_size = sizeof *c;
    c->lda = c->trans_a ? c->m : c->k;
    c->ldb = c->trans_b ? c->k : c->n;
    c->ldc = c->n;
    c->a = typed_pattern(rt, bufs, c->dtype_a, (size_t)(c->m * c->k));
    c->b = typed_pattern(rt, bufs, c->dtype_b, (size_t)(c->k * c->n));
    c->c = typed_pattern(rt, bufs, c->dtype_c, (size_t)(c->m * c->n));
    if (call->bias)
        c->bias = typed_pattern(rt, bufs, GB_F32, (size_t)c->n);
    if (call->aux)
        c->aux = typed_pattern(rt, bufs, c->dtype_c, (size_t)(c->m * c->n));
    if (call->bias_grad)
        c->bias_grad = typed_pattern(rt, bufs, GB_F32, (size_t)c->m);
    return c->a && c->b && c->c && (!call->bias || c->bias) && (!call->aux || c->aux) &&
                   (!call->bias_grad || c->bias_grad)
               ? 0
               : -1;
}

static const char *epilogue_name(gb_matmul_epilogue e, int bias)
{
    switch (e) {
    case GB_EPILOGUE_GELU_TANH: return bias ? "bias+gelu" : "gelu";
    case GB_EPILOGUE_DGELU_TANH: return "dgelu";
    case GB_EPILOGUE_BIAS_GRAD: return "bgrad";
    default: return bias ? "bias" : "";
    }
}

/* --predict: one call, counted into `group` at the efficiency of `pass` (the operands'
 * upload before it dropped); its predicted time in t->median_ms. */
static int predict_call(const gb_device_ops *ops, void *dev, const gb_matmul_args *c,
                        gb_predict *pr, int group, gb_matmul_pass pass, gb_timing *t)
{
    if (ops->sync(dev) != GB_OK || gb_predict_take(pr, -1, pass) ||
        ops->matmul(dev, c) != GB_OK || ops->sync(dev) != GB_OK ||
        gb_predict_take(pr, group, pass))
        return -1;
    t->median_ms = 1e3 * gb_predict_seconds(pr, group);
    return 0;
}

/* Times one matmul, or predicts it into `group` under --predict, and prints its row; adds
 * its FLOPs and time to the totals. */
static int time_row(gb_runtime *rt, const char *label, const timed_call *call,
                    const bench_args *a, int group, double peak, double *flops, double *ms)
{
    gb_instance *dev = gb_runtime_instance(rt, GB_KIND_DEVICE);
    const gb_device_ops *ops = gb_runtime_device_ops(rt);
    gb_matmul_args c = call->args;
    call_buffers bufs = {{0}, 0};
    gb_timing t;
    int rc = place_operands(rt, &c, call, &bufs) ||
             (a->pr ? predict_call(ops, dev->self, &c, a->pr, group, (gb_matmul_pass)(group % 3),
                                   &t)
                    : gb_time_matmul_call(ops, dev->self, &c, (int)a->repeats, &t));
    for (int i = 0; i < bufs.n; i++)
        ops->free(dev->self, bufs.ptr[i]);
    if (rc)
        return gb_call_failed(dev, GB_ERR_DEVICE, "matmul");
    double gflops = gb_matmul_gflops(c.m, c.n, c.k, t.median_ms);
    printf("%s  %-22s %6lld %6lld %6lld  %-4s %-9s %9.3f %9.1f %6.0f%%\n",
           a->pr ? "[prediction] " : "", label, (long long)c.m,
           (long long)c.n, (long long)c.k, c.trans_a ? "A^T" : c.trans_b ? "B^T" : "",
           epilogue_name(c.epilogue, call->bias), t.median_ms, gflops,
           peak > 0 ? 100.0 * gflops * 1e9 / peak : 0.0);
    *flops += 2.0 * (double)c.m * (double)c.n * (double)c.k;
    *ms += t.median_ms;
    return 0;
}

/* The peak the percentages are of, and beside it what the device measures. */
static void print_peaks(gb_runtime *rt, double peak, const char *source, const char *dtype)
{
    char how[160] = "";
    if (strcmp(source, "device") == 0)
        printf("peak: %.1f GFLOP/s (the device's stated %s peak)", peak / 1e9, dtype);
    else if (strcmp(source, "measured CPU") == 0)
        printf("peak: %.1f GFLOP/s (the CPU's measured %s peak: its FMA loop, above the rated "
               "one)", peak / 1e9, dtype);
    else if (peak > 0 && gb_cpu_peak_flops(GB_COMPUTE_F32, how, sizeof how) > 0)
        printf("peak: %.1f GFLOP/s (the CPU's rated %s peak: %s)", peak / 1e9, dtype, how);
    else
        printf("peak: unknown (the device states none)");
    printf("; measured: %.1f GFLOP/s (best of %d 1024x1024x1024 sgemm through the device's "
           "matmul)\n",
           gb_measured_sgemm_flops(gb_runtime_device_ops(rt),
                                   gb_runtime_instance(rt, GB_KIND_DEVICE)->self) / 1e9,
           GB_PEAK_CALLS);
}

/* The three matmuls of linear layer `l` as a run in `a->dtype` calls them (engine/model_*.c),
 * with their GPT-2 epilogues under --epilogues. */
static void linear_calls(const linear *l, long N, long IC, long OC, const bench_args *a,
                         timed_call calls[3])
{
    gb_dtype act = a->dtype;
    int biased = a->epilogues && l->out > 0;
    calls[0] = (timed_call){{.m = N, .n = OC, .k = IC, .trans_b = 1, .alpha = 1.0f,
                             .dtype_a = act, .dtype_b = act, .dtype_c = act},
                            .bias = biased};
    calls[1] = (timed_call){{.m = N, .n = IC, .k = OC, .alpha = 1.0f,
                             .dtype_a = act, .dtype_b = act, .dtype_c = act},
                            .bias = 0};
    calls[2] = (timed_call){{.m = OC, .n = IC, .k = N, .trans_a = 1, .alpha = 1.0f, .beta = 1.0f,
                             .dtype_a = act, .dtype_b = act, .dtype_c = GB_F32},
                            .bias_grad = biased};
    if (!a->epilogues)
        return;
    if (strcmp(l->name, "mlp.c_fc") == 0)   /* GELU follows it: its pre-activation is kept */
        calls[0].args.epilogue = GB_EPILOGUE_GELU_TANH, calls[0].aux = 1;
    if (strcmp(l->name, "mlp.c_proj") == 0)   /* its input gradient goes back through GELU */
        calls[1].args.epilogue = GB_EPILOGUE_DGELU_TANH, calls[1].aux = 1;
    if (biased)
        calls[2].args.epilogue = GB_EPILOGUE_BIAS_GRAD;
}

/* Number of products per model: three for each linear layer. */
#define PRODUCTS ((int)(3 * sizeof linears / sizeof linears[0]))

/* --predict: the kernels each product ran, then the groups emptied for the next model. */
static void print_predicted_kernels(gb_predict *pr, const char *model)
{
    static const char *const pass_names[3] = {"forward", "d input", "d weight"};
    char title[96];
    snprintf(title, sizeof title, "model %s: each product's kernels", model);
    gb_predict_print_header(pr, title);
    for (int g = 0; g < PRODUCTS; g++) {
        char label[64];
        snprintf(label, sizeof label, "%s %s", linears[g / 3].name, pass_names[g % 3]);
        gb_predict_print_group(pr, g, label);
    }
    gb_predict_clear(pr);
}

static int bench_model(gb_runtime *rt, const model_shape *m, const bench_args *a, double peak)
{
    long N = m->B * m->T, vocab = a->vocab ? a->vocab : m->vocab;
    double flops = 0.0, ms = 0.0;
    printf("\nmodel %s: n_embd %ld, T %ld, B %ld (N = B*T = %ld rows), vocab %ld\n", m->name,
           m->C, m->T, m->B, N, vocab);
    printf("  %-22s %6s %6s %6s  %-4s %-9s %9s %9s %7s\n", "matmul", "m", "n", "k", "op",
           "epilogue", "ms", "GFLOP/s", "of peak");
    for (size_t i = 0; i < sizeof linears / sizeof linears[0]; i++) {
        const linear *l = &linears[i];
        long IC = l->in * m->C, OC = l->out < 0 ? vocab : l->out * m->C;
        timed_call calls[3];
        linear_calls(l, N, IC, OC, a, calls);
        static const char *const pass_names[3] = {"forward", "d input", "d weight"};
        for (int p = 0; p < 3; p++) {
            /* the passes in gb_matmul_pass's order, so a row's group says its pass */
            char label[64];
            snprintf(label, sizeof label, "%s %s", l->name, pass_names[p]);
            if (time_row(rt, label, &calls[p], a, 3 * (int)i + p, peak, &flops, &ms))
                return -1;
        }
    }
    printf("%s  %-22s %38s %9.3f %9.1f %6.0f%%\n", a->pr ? "[prediction] " : "",
           "all of the above", "", ms,
           flops / (ms * 1e6), peak > 0 ? 100.0 * flops / (ms * 1e-3) / peak : 0.0);
    if (a->pr)
        print_predicted_kernels(a->pr, m->name);
    return 0;
}

static int start_device(const bench_args *a, gb_config **cfg, gb_runtime **rt)
{
    char text[160];
    snprintf(text, sizeof text, "[run]\nthreads = %ld\n[device]\nplugin = %s\n", a->threads,
             a->device);
    return gb_bench_start(text, "gearbox bench matmul", &a->overrides, cfg, rt);
}

int gb_bench_matmul(int argc, char **argv)
{
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    gb_config *cfg = NULL;
    gb_runtime *rt = NULL;
    /* the counting file is named before any plugin loads */
    if (a.predict && !(a.pr = gb_predict_open("bench matmul", a.predict, 1, PRODUCTS)))
        return 2;
    rc = start_device(&a, &cfg, &rt);
    if (rc == 0) {
        const char *source;
        gb_instance *dev = gb_runtime_instance(rt, GB_KIND_DEVICE);
        gb_compute compute = a.dtype == GB_BF16 ? GB_COMPUTE_BF16
                             : a.dtype == GB_F16 ? GB_COMPUTE_F16 : GB_COMPUTE_F32;
        double peak = gb_peak_flops(gb_runtime_device_ops(rt), dev->self, gb_runtime_device(rt),
                                    compute, &source);
        char how[96];
        if (a.pr)
            snprintf(how, sizeof how, "each product counted once, its time predicted for %s",
                     gb_predict_gpu(a.pr)->full_name);
        else
            snprintf(how, sizeof how, "median of %ld calls after one warm-up", a.repeats);
        printf("gearbox bench matmul: device/%s, %lld threads, %s%s, %s\n",
               dev->plugin->desc->name, (long long)gb_settings_threads(gb_runtime_settings(rt)),
               gb_dtype_name(a.dtype), a.epilogues ? " with GPT-2's epilogues" : "", how);
        print_peaks(rt, peak, source, gb_dtype_name(a.dtype));
        for (int i = 0; rc == 0 && i < a.n_models; i++)
            rc = bench_model(rt, &a.models[i], &a, peak);
        if (rc == 0 && a.pr && gb_predict_check_counted(a.pr))
            rc = 1;
    }
    gb_bench_stop(cfg, rt);
    gb_predict_close(a.pr);
    return rc ? 1 : 0;
}
