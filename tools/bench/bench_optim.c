/* `gearbox bench optim`: how close each optimizer plugin's update comes to this machine's
 * memory bandwidth.
 *
 * An update is what gb_model_update runs: the squared gradient norm (the optimizer's
 * grad_norm_sq when it has one, otherwise the device's sum_squares) and then step(), on
 * flat f32 buffers from the device's alloc() split into two groups as a model's are (99%
 * decaying matrices, 1% vectors that do not decay), with clipping on. Each plugin is
 * loaded through the core from a two-line config, as `gearbox train` would load it. The
 * figure of merit is GB/s: the bytes the plugin's passes move per parameter (below),
 * times the parameter count, over the median update time. Next to it stands a
 * STREAM-style triad a(i) = b(i) + s*c(i) measured by this command on arrays far larger
 * than the caches, counted as STREAM counts it (12 bytes per element, no write-allocate
 * traffic), so the ratio says how much of the reachable bandwidth the optimizer uses.
 * An in-place update moves every byte it is credited with while the triad's stores
 * also read their lines, so a good update can pass 100% of the triad figure.
 *
 * Bytes per parameter, f32 throughout; every pass reads and writes whole buffers:
 *   norm pass (either way)   read g                                      4
 *   adamw (one pass a term)  decay p (r+w, decaying groups only)         8 x 0.99
 *                            m (r m, g; w m) 12, v (r v, g; w v) 12,
 *                            update (r p, m, v; w p) 16                 40
 *   adamw_fused (one pass)   read p, g, m, v; write p, m, v             28
 * Another plugin is credited with the least any AdamW can move (28 + 4).
 *
 * The buffers live on the device of the runs (--set device.plugin=NAME; the cpu device by
 * default), filled in place where the host may touch them and through copy() elsewhere;
 * every time is taken after the device's sync, so a device that queues its work is timed
 * for the work, not for the queueing. The triad is the host's memory.
 *
 * Deliberately left out: the low-precision parameter copy, and any assertion about time:
 * this prints measurements, it does not judge them.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cli.h"
#include "gearbox/engine/clock.h"
#include "gearbox/engine/machine.h"
#include "measure/measure.h"
#include "gearbox/engine/run.h"

#define MAX_ITEMS 8
#define NO_DECAY_SHARE 0.01

enum { OPT_PARAMS, OPT_REPEATS, OPT_THREADS, OPT_PLUGINS, OPT_SET, OPT_PLUGIN_PATH };

static const gb_cli_spec spec = {
    .verb = "bench optim",
    .usage = "gearbox bench optim [OPTIONS]",
    .about =
        "Times one optimizer update (gradient-norm pass + step) of each plugin and prints ms\n"
        "per update, bytes moved, GB/s and the share of this machine's STREAM-style triad\n"
        "bandwidth, measured by the same command.\n",
    .options = {
        [OPT_PARAMS] = {"params", 0, "LIST", "parameter counts, comma-separated, with an optional "
                        "k, M or G\nsuffix (default 10M,100M)"},
        [OPT_REPEATS] = {"repeats", 0, "N", "timed updates per measurement; the median is shown "
                         "(default 10)"},
        [OPT_THREADS] = GB_BENCH_OPTION_THREADS,
        [OPT_PLUGINS] = {"plugins", 0, "LIST", "optimizer plugins, comma-separated; the first is "
                         "the baseline of\nthe speed-up column (default adamw,adamw_fused)"},
        [OPT_SET] = {"set", 0, "S.K=V", "a config line for every plugin's run, e.g. "
                     "--set device.plugin=cuda\n(the device the buffers live on; default the cpu "
                     "device; at most 8)"},
        [OPT_PLUGIN_PATH] = GB_CLI_OPTION_PLUGIN_PATH,
    },
};

typedef struct bench_args {
    int64_t params[MAX_ITEMS];
    int n_params;
    char plugins[MAX_ITEMS][GB_BENCH_NAME_CAP];
    int n_plugins;
    long repeats, threads;
    gb_bench_overrides overrides;
} bench_args;

/* One plugin loaded through the core. */
typedef struct bench_plugin {
    gb_config *cfg;
    gb_runtime *rt;
} bench_plugin;

/* One update's buffers, allocated on the device of the first plugin's runtime. */
typedef struct bench_buffers {
    float *params, *grads, *norm_sq;   // (n), (n), (1)
    void *state;
    int64_t n;
} bench_buffers;

typedef struct timing {
    double norm_ms, step_ms, total_ms;   /* medians */
} timing;

/* ---- arguments ----------------------------------------------------------------------- */

/* "10M" -> 10000000; 0 on anything that is not a positive count. */
static int64_t parse_count(const char *text, char **end)
{
    errno = 0;
    double v = strtod(text, end);
    if (errno || *end == text)
        return 0;
    double unit = **end == 'k' ? 1e3 : **end == 'M' ? 1e6 : **end == 'G' ? 1e9 : 1;
    if (unit > 1)
        (*end)++;
    v *= unit;
    return v >= 1 && v <= 1e12 ? (int64_t)v : 0;
}

static int parse_params(const char *text, bench_args *a)
{
    a->n_params = 0;
    for (const char *p = text; *p;) {
        char *end;
        int64_t n = parse_count(p, &end);
        if (!n || (*end && *end != ',') || a->n_params == MAX_ITEMS)
            return gb_cli_usage_error("bench optim", "--params %s: expected up to %d "
                                      "positive counts such as 10M,100M", text, MAX_ITEMS);
        a->params[a->n_params++] = n;
        p = *end ? end + 1 : end;
    }
    return a->n_params ? 0 : gb_cli_usage_error("bench optim", "--params is empty");
}

/* One option with its value into a: 0, or the exit status of a usage error. */
static int parse_option(void *ctx, int opt, const char *val)
{
    bench_args *a = ctx;
    const char *flag = spec.options[opt].name;
    switch (opt) {
    case OPT_PARAMS:
        return parse_params(val, a);
    case OPT_PLUGINS:
        return gb_bench_parse_names("bench optim", flag, val, a->plugins, MAX_ITEMS,
                                    &a->n_plugins);
    case OPT_REPEATS:
        return gb_bench_parse_long("bench optim", flag, val, 1, 100000, &a->repeats);
    case OPT_THREADS:
        return gb_bench_parse_long("bench optim", flag, val, 0, 1024, &a->threads);
    case OPT_SET:
        return gb_bench_add_set("bench optim", &a->overrides, val);
    default: /* OPT_PLUGIN_PATH */
        a->overrides.plugin_path = val;
        return 0;
    }
}

/* 0, -1 after --help, or the exit status of a usage error. */
static int parse_args(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){.repeats = 10, .threads = 0};
    if (parse_params("10M,100M", a) ||
        gb_bench_parse_names("bench optim", "plugins", "adamw,adamw_fused", a->plugins,
                             MAX_ITEMS, &a->n_plugins))
        return 2;
    return gb_bench_parse_options(&spec, argc, argv, parse_option, a);
}

/* ---- plugins and buffers ------------------------------------------------------------- */

static int start_plugin(const char *name, const bench_args *a, bench_plugin *p)
{
    char text[256];
    snprintf(text, sizeof text, "[optim]\nplugin = %s\n[run]\nthreads = %ld\n", name,
             a->threads);
    return gb_bench_start(text, "gearbox bench optim", &a->overrides, &p->cfg, &p->rt);
}

static void *device_alloc(gb_runtime *rt, size_t bytes)
{
    void *ptr = NULL;
    gb_instance *dev = gb_runtime_instance(rt, GB_KIND_DEVICE);
    if (gb_runtime_device_ops(rt)->alloc(dev->self, bytes, &ptr) != GB_OK) {
        gb_call_failed(dev, GB_ERR_NO_MEMORY, "alloc");
        return NULL;
    }
    return ptr;
}

static void free_buffers(gb_runtime *rt, bench_buffers *b)
{
    void *const ptrs[] = {b->params, b->grads, b->norm_sq, b->state};
    gb_bench_free_buffers(rt, ptrs, sizeof ptrs / sizeof ptrs[0]);
    memset(b, 0, sizeof *b);
}

static float initial_param(int64_t i)
{
    return (float)(i % 1000) * 1e-4f - 0.05f;
}

/* Alternating signs of a size that gives the gradient a norm of 2. */
static float initial_grad(int64_t i, int64_t n)
{
    float grad = (float)(2.0 / sqrt((double)n));
    return i % 2 ? grad : -grad;
}

/* On a device the host may touch: each thread writes the part it will stream, so
 * first-touch places the pages where the timed passes read them. */
static void fill_in_place(bench_buffers *b, size_t state_bytes)
{
    char *state = b->state;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < b->n; i++) {
        b->params[i] = initial_param(i);
        b->grads[i] = initial_grad(i, b->n);
    }
    const size_t block = 1 << 20;
    int64_t blocks = (int64_t)((state_bytes + block - 1) / block);
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < blocks; k++) {
        size_t off = (size_t)k * block;
        memset(state + off, 0, state_bytes - off < block ? state_bytes - off : block);
    }
}

/* On a device the host may not touch (a GPU, or the CPU device's GPU-like mode): the
 * values go through a host buffer and copy(). */
static int fill_by_copy(gb_runtime *rt, bench_buffers *b, size_t state_bytes)
{
    gb_instance *dev = gb_runtime_instance(rt, GB_KIND_DEVICE);
    const gb_device_ops *ops = gb_runtime_device_ops(rt);
    size_t bytes = (size_t)b->n * sizeof(float);
    float *host = malloc(bytes);
    if (!host) {
        fprintf(stderr, "gearbox: error: bench optim: no host memory for %zu bytes\n", bytes);
        return -1;
    }
    for (int64_t i = 0; i < b->n; i++)
        host[i] = initial_param(i);
    gb_status st = ops->copy(dev->self, b->params, host, bytes, GB_COPY_HOST_TO_DEVICE);
    for (int64_t i = 0; st == GB_OK && i < b->n; i++)
        host[i] = initial_grad(i, b->n);
    if (st == GB_OK)
        st = ops->copy(dev->self, b->grads, host, bytes, GB_COPY_HOST_TO_DEVICE);
    if (st == GB_OK && state_bytes)
        st = ops->memset_zero(dev->self, b->state, state_bytes);
    free(host);
    return st == GB_OK ? 0 : gb_call_failed(dev, st, "filling the buffers");
}

/* An optimizer that steps over the model's tensors (bind_params, ABI 1.8: optim/muon)
 * has no flat-buffer update to time: refused, naming where to time it. */
static int needs_tensors(const bench_plugin *p, const char *name)
{
    if (!GB_OPTIM_HAS(gb_runtime_optim_ops(p->rt), bind_params))
        return 0;
    fprintf(stderr, "gearbox bench optim: error: optim/%s steps over the model's tensors "
            "(bind_params), not over a flat buffer; time it in a training step instead: "
            "gearbox bench step --set optim.plugin=%s\n", name, name);
    return -1;
}

/* Buffers for n parameters on the plugin's own device (a device instance guards only
 * its own memory), with gradients of norm about 2, so that clipping to 1 is active. */
static int alloc_buffers(bench_plugin *p, int64_t n, bench_buffers *b)
{
    gb_runtime *rt = p->rt;
    size_t state_bytes =
        gb_runtime_optim_ops(rt)->state_bytes(gb_runtime_instance(rt, GB_KIND_OPTIM)->self, n);
    *b = (bench_buffers){.n = n};
    b->params = device_alloc(rt, (size_t)n * sizeof(float));
    b->grads = device_alloc(rt, (size_t)n * sizeof(float));
    b->norm_sq = device_alloc(rt, sizeof(float));
    b->state = state_bytes ? device_alloc(rt, state_bytes) : NULL;
    if (!b->params || !b->grads || !b->norm_sq || (state_bytes && !b->state)) {
        free_buffers(rt, b);
        return -1;
    }
    if (gb_runtime_device_ctx(rt)->host_access)
        fill_in_place(b, state_bytes);
    else if (fill_by_copy(rt, b, state_bytes)) {
        free_buffers(rt, b);
        return -1;
    }
    return 0;
}

/* ---- the measurement ----------------------------------------------------------------- */

/* Bytes one update of `name` moves per parameter (see the file comment). */
static double bytes_per_param(const char *name, int *known)
{
    *known = 1;
    if (strcmp(name, "adamw") == 0)
        return 4 + 40 + 8 * (1 - NO_DECAY_SHARE);
    if (strcmp(name, "adamw_fused") == 0)
        return 4 + 28;
    *known = 0;
    return 4 + 28;
}

/* The norm pass as gb_model_update runs it. */
static gb_status norm_pass(gb_runtime *rt, const bench_buffers *b)
{
    const gb_optim_ops *optim = gb_runtime_optim_ops(rt);
    if (optim->grad_norm_sq)
        return optim->grad_norm_sq(gb_runtime_instance(rt, GB_KIND_OPTIM)->self, b->norm_sq,
                                   b->grads, b->n);
    return gb_runtime_device_ops(rt)->sum_squares(gb_runtime_instance(rt, GB_KIND_DEVICE)->self,
                                                  b->norm_sq, b->grads, b->n);
}

/* One warm-up update, then `repeats` timed ones. Returns -1 when a call fails. */
static int time_updates(bench_plugin *p, const bench_buffers *b, long repeats, timing *t)
{
    gb_runtime *rt = p->rt;
    gb_instance *opt = gb_runtime_instance(rt, GB_KIND_OPTIM);
    gb_instance *dev = gb_runtime_instance(rt, GB_KIND_DEVICE);
    const gb_optim_ops *optim = gb_runtime_optim_ops(rt);
    int64_t n_decay = b->n - (int64_t)((double)b->n * NO_DECAY_SHARE);
    const gb_param_group groups[2] = {{0, n_decay, 1}, {n_decay, b->n - n_decay, 0}};
    double *norm = malloc((size_t)(repeats + 1) * 3 * sizeof *norm);
    if (!norm)
        return -1;
    double *step = norm + repeats + 1, *total = step + repeats + 1;
    for (long r = 0; r <= repeats; r++) {
        gb_optim_step_args args = {
            .struct_size = sizeof args,
            .params = b->params,
            .grads = b->grads,
            .state = b->state,
            .n = b->n,
            .groups = groups,
            .n_groups = 2,
            .step = r + 1,
            .lr = 1e-3f,
            .grad_norm_sq = b->norm_sq,
            .max_norm = 1.0f,
            .inv_loss_scale = 1.0f,
        };
        /* the calls only queue their work on a device with a queue: each time is taken
         * after a sync */
        double t0 = gb_now_ms();
        gb_status st = norm_pass(rt, b);
        if (st == GB_OK)
            st = gb_runtime_device_ops(rt)->sync(dev->self);
        double t1 = gb_now_ms();
        if (st != GB_OK) {
            free(norm);
            return gb_call_failed(optim->grad_norm_sq ? opt : dev, st, "gradient norm");
        }
        st = optim->step(opt->self, &args);
        if (st == GB_OK)
            st = gb_runtime_device_ops(rt)->sync(dev->self);
        double t2 = gb_now_ms();
        if (st != GB_OK) {
            free(norm);
            return gb_call_failed(opt, st, "step or sync");
        }
        norm[r] = t1 - t0, step[r] = t2 - t1, total[r] = t2 - t0;
    }
    /* index 0 is the warm-up */
    *t = (timing){gb_bench_median(norm + 1, repeats), gb_bench_median(step + 1, repeats),
                  gb_bench_median(total + 1, repeats)};
    free(norm);
    return 0;
}

static void print_header(const bench_args *a, int threads, double triad)
{
    double load[1] = {0};
    getloadavg(load, 1);
    printf("gearbox bench optim: %d thread(s), median of %ld updates (gradient-norm pass + "
           "step), 1-minute load average %.2f\n", threads, a->repeats, load[0]);
    long long mib = GB_TRIAD_ELEMENTS * (int64_t)sizeof(float) >> 20;
    printf("triad a(i) = b(i) + s*c(i), 3 x %lld MiB f32 arrays, best of %d: %.1f GB/s "
           "(12 bytes/element, write-allocate not counted)\n\n", mib, GB_TRIAD_RUNS, triad);
    printf("%-14s %9s %9s %9s %9s %11s %8s %9s %9s\n", "plugin", "params", "norm ms",
           "step ms", "total ms", "bytes/param", "GB/s", "of triad", "speed-up");
}

/* Prints one row; returns 1 when the plugin's byte count is the assumed minimum. */
static int print_row(const char *name, int64_t n, const timing *t, double triad,
                     double baseline_ms)
{
    int known;
    double bytes = bytes_per_param(name, &known);
    double gbs = bytes * (double)n / (t->total_ms * 1e-3) / 1e9;
    char count[32];
    if (n % 1000000 == 0)
        snprintf(count, sizeof count, "%lldM", (long long)(n / 1000000));
    else if (n % 1000 == 0)
        snprintf(count, sizeof count, "%lldk", (long long)(n / 1000));
    else
        snprintf(count, sizeof count, "%lld", (long long)n);
    printf("%-14s %9s %9.2f %9.2f %9.2f %10.1f%s %8.1f %8.0f%% %8.2fx\n", name, count,
           t->norm_ms, t->step_ms, t->total_ms, bytes, known ? " " : "*", gbs,
           triad > 0 ? 100 * gbs / triad : 0.0, baseline_ms / t->total_ms);
    return !known;
}

/* Every size, every plugin; returns 0 or -1. */
static int run_all(const bench_args *a, bench_plugin *plugins, double triad)
{
    int assumed = 0;
    for (int s = 0; s < a->n_params; s++) {
        double baseline_ms = 0;
        for (int k = 0; k < a->n_plugins; k++) {
            bench_buffers b;
            timing t = {0};
            if (needs_tensors(&plugins[k], a->plugins[k]) ||
                alloc_buffers(&plugins[k], a->params[s], &b))
                return -1;
            int failed = time_updates(&plugins[k], &b, a->repeats, &t);
            free_buffers(plugins[k].rt, &b);
            if (failed)
                return -1;
            baseline_ms = k == 0 ? t.total_ms : baseline_ms;
            assumed |= print_row(a->plugins[k], a->params[s], &t, triad, baseline_ms);
        }
    }
    if (assumed)
        printf("* not a plugin this benchmark knows: credited with the least any AdamW "
               "moves\n");
    return 0;
}

int gb_bench_optim(int argc, char **argv)
{
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    bench_plugin plugins[MAX_ITEMS] = {0};
    for (int k = 0; k < a.n_plugins && !rc; k++)
        rc = start_plugin(a.plugins[k], &a, &plugins[k]);
    if (!rc) {
        int threads = (int)gb_settings_threads(gb_runtime_settings(plugins[0].rt));
        double triad = gb_measure_triad_gbs(threads);
        print_header(&a, threads, triad);
        rc = run_all(&a, plugins, triad);
    }
    for (int k = 0; k < a.n_plugins; k++)
        if (plugins[k].cfg)
            gb_bench_stop(plugins[k].cfg, plugins[k].rt);
    return rc ? 1 : 0;
}
