/* `gearbox bench attn`: forward+backward time and extra memory of attention plugins, by T.
 *
 * Each plugin is loaded through the core from an in-memory config ("[device] plugin =
 * DEVICE", "[attn] plugin = NAME", "[run] threads = N", the [precision] plugin that
 * computes in --dtype, then every --set), as `gearbox train` would load it, and every
 * buffer comes from the device plugin's alloc(). The run's precision follows --dtype
 * (fp32, bf16 or fp16; a 16-bit policy also names adamw_fused, the optimizer it needs,
 * which is loaded and never called), so the core's check that each plugin computes in
 * the run's dtype lets a 16-bit-only plugin such as cudnn run in its dtype. For each T
 * the problem is causal self-attention in --dtype (f32, bf16 or f16; TF32 products when
 * the precision asks for them) on the core's layout: q, k, v are slices of a packed
 * (B, T, 3, H, D) projection and out, dout are (B, T, H, D), so the views and strides are
 * the ones training passes. A cell is one untimed warm-up (it also faults the pages in),
 * then up to --repeats timed runs of forward + backward; the medians are printed.
 *
 * TFLOP/s counts what the engine's profile counts (engine/model_profile.c): one
 * (T, T) x (T, D) product per head over the causal triangle, diagonal included, is 2 B H D T (T + 1) / 2
 * FLOPs; forward is two products (Q K^T, P V), backward four (dV, dP, dQ, dK), so
 * forward+backward is 6 B H D T (T + 1) FLOPs, with nothing counted for recomputing P.
 * (FlashAttention's own benchmarks count backward as 2.5 forwards: their figures read
 * 7/6 of ours for the same time.) bench/sdpa_attn.py counts PyTorch's SDPA the same way.
 *
 * Extra memory is what memory() declares: bytes saved per layer between forward and
 * backward, plus the workspace of one call; the inputs and gradients (q, k, v, out, dout,
 * dq, dk, dv), which every plugin needs alike, are printed once per T and not counted.
 * A cell that cannot run is a line saying why and what the plugin would keep, never an
 * abort: memory that cannot be allocated, or a run predicted from the plugin's previous
 * cell (time grows as T^2) to take longer than --max-seconds. Timing stops repeating
 * when the next run would overrun --max-seconds. Every plugin of a T is timed before
 * its lines are printed, so the speed-up column finds math wherever it is listed.
 * Nothing here judges the figures; docs/BENCHMARKS.md records them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "cli.h"
#include "gearbox/convert.h"
#include "gearbox/engine/run.h"

#define MAX_ITEMS 8
#define BASELINE "math"

enum { OPT_T, OPT_HEADS, OPT_HEAD_DIM, OPT_BATCH, OPT_REPEATS, OPT_PLUGINS, OPT_THREADS,
       OPT_DEVICE, OPT_DTYPE, OPT_MAX_SECONDS, OPT_SET, OPT_PLUGIN_PATH };

static const gb_cli_spec spec = {
    .verb = "bench attn",
    .usage = "gearbox bench attn [OPTIONS]",
    .about =
        "Times causal attention forward+backward of each plugin at each sequence length,\n"
        "with its TFLOP/s (6 B H D T (T + 1) FLOPs: the causal triangle, no recomputation),\n"
        "and prints the extra memory each declares (saved per layer + workspace).\n",
    .options = {
        [OPT_T] = {"T", 0, "LIST", "sequence lengths, comma-separated (default 256,1024,4096,8192)"},
        [OPT_HEADS] = {"heads", 0, "N", "attention heads (default 12)"},
        [OPT_HEAD_DIM] = {"head-dim", 0, "N", "head_dim (default 64)"},
        [OPT_BATCH] = {"batch", 0, "N", "batch size (default 1)"},
        [OPT_REPEATS] = {"repeats", 0, "N", "timed runs per cell after one warm-up; the median is "
                         "shown\n(default 5)"},
        [OPT_PLUGINS] = {"plugins", 0, "LIST", "attention plugins, comma-separated\n"
                         "(default math,mem_efficient,flash)"},
        [OPT_THREADS] = GB_BENCH_OPTION_THREADS,
        [OPT_DEVICE] = GB_BENCH_OPTION_DEVICE,
        [OPT_DTYPE] = {"dtype", 0, "T", "element type of q, k, v, out and the gradients: f32, bf16 "
                       "or f16\n(default f32); the run's [precision] plugin computes in it (fp32,\n"
                       "bf16 or fp16), and a plugin that does not take it is not eligible"},
        [OPT_MAX_SECONDS] = {"max-seconds", 0, "S", "time budget of one cell; a plugin is not "
                             "timed at a T where its\nlast time, scaled by T^2, would exceed "
                             "it (default 60)"},
        [OPT_SET] = {"set", 0, "K=V", "a config override as for `gearbox train`, applied last, "
                     "e.g.\nprecision.plugin=tf32 (f32 with TF32 products); the precision\n"
                     "must still compute in --dtype (at most 8)"},
        [OPT_PLUGIN_PATH] = GB_CLI_OPTION_PLUGIN_PATH,
    },
};

typedef struct bench_args {
    long T[MAX_ITEMS];
    int n_T;
    char plugins[MAX_ITEMS][GB_BENCH_NAME_CAP];
    int n_plugins;
    long heads, head_dim, batch, repeats, threads;
    char device[GB_BENCH_NAME_CAP];
    gb_dtype dtype;
    double max_seconds;
    gb_bench_overrides overrides;
} bench_args;

/* One plugin loaded through the core, and what its last cell showed. */
typedef struct bench_plugin {
    const char *name;
    gb_config *cfg;
    gb_runtime *rt;
    int started;
    double last_run_s;   /* one forward + backward at last_T; 0 before the first cell */
    long last_T;
} bench_plugin;

/* The tensors of one problem, on the device. */
typedef struct bench_buffers {
    char *qkv, *dqkv, *out, *dout;   // (B, T, 3C), (B, T, 3C), (B, T, C), (B, T, C) in dtype
    void *saved, *workspace;
} bench_buffers;

typedef struct cell {
    int eligible;
    size_t saved, workspace;
    double fwd_ms, bwd_ms, total_ms;   /* medians; total_ms 0 when not timed */
    int runs;
    char note[1024];                   /* why the cell was not timed, or "" */
} cell;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "3.2 GiB", "512 KiB", "96 B". */
static const char *bytes_text(double bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4)
        bytes /= 1024, u++;
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
    return buf;
}

/* ---- arguments ----------------------------------------------------------------------- */

static int parse_lengths(const char *text, bench_args *a)
{
    a->n_T = 0;
    for (const char *p = text; *p;) {
        char *end;
        errno = 0;
        long T = strtol(p, &end, 10);
        if (errno || end == p || T < 1 || T > (1L << 20) || (*end && *end != ',') ||
            a->n_T == MAX_ITEMS)
            return gb_cli_usage_error("bench attn", "--T %s: expected up to %d sequence "
                                      "lengths in [1, %ld] such as 256,1024", text, MAX_ITEMS,
                                      1L << 20);
        a->T[a->n_T++] = T;
        p = *end ? end + 1 : end;
    }
    return a->n_T ? 0 : gb_cli_usage_error("bench attn", "--T is empty");
}

static int parse_seconds(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v > 0))
        return gb_cli_usage_error("bench attn", "--max-seconds %s: expected a positive "
                                  "number of seconds", text);
    *out = v;
    return 0;
}

static int parse_device(const char *text, char *out)
{
    if (!*text || strlen(text) >= GB_BENCH_NAME_CAP || strcspn(text, " \t\n[]=;#") != strlen(text))
        return gb_cli_usage_error("bench attn", "--device %s: expected a device plugin name "
                                  "such as cpu or cuda", text);
    strcpy(out, text);
    return 0;
}

/* One option with its value into a: 0, or the exit status of a usage error. */
static int parse_option(void *ctx, int opt, const char *val)
{
    bench_args *a = ctx;
    const char *flag = spec.options[opt].name;
    switch (opt) {
    case OPT_T:
        return parse_lengths(val, a);
    case OPT_HEADS:
        return gb_bench_parse_long("bench attn", flag, val, 1, 1024, &a->heads);
    case OPT_HEAD_DIM:
        return gb_bench_parse_long("bench attn", flag, val, 1, 4096, &a->head_dim);
    case OPT_BATCH:
        return gb_bench_parse_long("bench attn", flag, val, 1, 4096, &a->batch);
    case OPT_REPEATS:
        return gb_bench_parse_long("bench attn", flag, val, 1, 1000, &a->repeats);
    case OPT_PLUGINS:
        return gb_bench_parse_names("bench attn", flag, val, a->plugins, MAX_ITEMS,
                                    &a->n_plugins);
    case OPT_THREADS:
        return gb_bench_parse_long("bench attn", flag, val, 0, 1024, &a->threads);
    case OPT_DEVICE:
        return parse_device(val, a->device);
    case OPT_DTYPE:
        return gb_bench_parse_dtype("bench attn", val, &a->dtype);
    case OPT_MAX_SECONDS:
        return parse_seconds(val, &a->max_seconds);
    case OPT_SET:
        return gb_bench_add_set("bench attn", &a->overrides, val);
    default: /* OPT_PLUGIN_PATH */
        a->overrides.plugin_path = val;
        return 0;
    }
}

/* 0, -1 after --help, or the exit status of a usage error. */
static int parse_args(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){.heads = 12, .head_dim = 64, .batch = 1, .repeats = 5, .threads = 0,
                      .device = "cpu", .dtype = GB_F32, .max_seconds = 60};
    if (parse_lengths("256,1024,4096,8192", a) ||
        gb_bench_parse_names("bench attn", "plugins", "math,mem_efficient,flash", a->plugins,
                             MAX_ITEMS, &a->n_plugins))
        return 2;
    return gb_bench_parse_options(&spec, argc, argv, parse_option, a);
}

/* ---- plugins and buffers ------------------------------------------------------------- */

/* The config sections of a run that computes in `dtype`: its [precision] plugin, and for
 * 16-bit the optimizer such a policy needs (it writes the 16-bit weight copy; it is never
 * called here). */
static const char *precision_section(gb_dtype dtype)
{
    switch (dtype) {
    case GB_BF16:
        return "[precision]\nplugin = bf16\n[optim]\nplugin = adamw_fused\n";
    case GB_F16:
        return "[precision]\nplugin = fp16\n[optim]\nplugin = adamw_fused\n";
    default:
        return "[precision]\nplugin = fp32\n";
    }
}

/* The run's precision must compute in --dtype: a --set that changes it is refused here,
 * naming both, rather than benchmarking a problem the run does not compute. */
static int check_precision(const bench_plugin *p, const bench_args *a)
{
    const gb_dtype computes = gb_runtime_policy(p->rt)->activation_dtype;
    if (computes == a->dtype)
        return 0;
    return gb_cli_usage_error("bench attn", "--dtype %s, but [precision] plugin = %s computes "
                              "in %s; drop that --set or pass --dtype %s", gb_dtype_name(a->dtype),
                              gb_runtime_instance(p->rt, GB_KIND_PRECISION)->plugin->desc->name,
                              gb_dtype_name(computes), gb_dtype_name(computes));
}

static int start_plugin(const char *name, const bench_args *a, bench_plugin *p)
{
    char text[512];
    snprintf(text, sizeof text, "[device]\nplugin = %s\n[attn]\nplugin = %s\n[run]\n"
             "threads = %ld\n%s", a->device, name, a->threads, precision_section(a->dtype));
    p->name = name;
    p->started = !gb_bench_start(text, "gearbox bench attn", &a->overrides, &p->cfg, &p->rt);
    if (!p->started)
        return -1;
    return check_precision(p, a) ? -1 : 0;
}

static void free_buffers(gb_runtime *rt, bench_buffers *b)
{
    void *const ptrs[] = {b->qkv, b->dqkv, b->out, b->dout, b->saved, b->workspace};
    gb_bench_free_buffers(rt, ptrs, sizeof ptrs / sizeof ptrs[0]);
    memset(b, 0, sizeof *b);
}

/* n uniform values in [-1, 1), in dtype, into host (n times the element size). */
static void fill_random(void *host, size_t n, gb_dtype dtype)
{
    uint64_t state = 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < n; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        float x = (float)((double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        if (dtype == GB_F32)
            ((float *)host)[i] = x;
        else
            ((uint16_t *)host)[i] = dtype == GB_BF16 ? gb_bf16_from_f32(x) : gb_f16_from_f32(x);
    }
}

/* Allocates the buffers of one cell and fills q, k, v and dout through copy(), as a
 * device plugin would be fed. Returns 0, or -1 with the size that failed in *failed. */
static int alloc_buffers(gb_runtime *rt, const gb_attn_problem *p, const cell *c,
                         bench_buffers *b, size_t *failed)
{
    void *dev = gb_runtime_instance(rt, GB_KIND_DEVICE)->self;
    const gb_device_ops *ops = gb_runtime_device_ops(rt);
    const size_t n_out = (size_t)(p->batch * p->seq_len * p->heads * p->head_dim);
    const size_t el = gb_dtype_size(p->dtype);
    const size_t sizes[] = {3 * n_out * el, 3 * n_out * el, n_out * el, n_out * el, c->saved,
                            c->workspace};
    void **slots[] = {(void **)&b->qkv, (void **)&b->dqkv, (void **)&b->out,
                      (void **)&b->dout, &b->saved, &b->workspace};
    memset(b, 0, sizeof *b);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        if (ops->alloc(dev, sizes[k] ? sizes[k] : 64, slots[k]) != GB_OK) {
            *failed = sizes[k];
            free_buffers(rt, b);
            return -1;
        }
    void *host = malloc(3 * n_out * el);
    if (!host) {
        *failed = 3 * n_out * el;
        free_buffers(rt, b);
        return -1;
    }
    fill_random(host, 3 * n_out, p->dtype);
    gb_status st = ops->copy(dev, b->qkv, host, 3 * n_out * el, GB_COPY_HOST_TO_DEVICE);
    if (st == GB_OK)
        st = ops->copy(dev, b->dout, host, n_out * el, GB_COPY_HOST_TO_DEVICE);
    free(host);
    if (st != GB_OK) {
        gb_call_failed(gb_runtime_instance(rt, GB_KIND_DEVICE), st, "copy");
        free_buffers(rt, b);
        return -1;
    }
    return 0;
}

/* A (B, H, T, D) view of the core's packed (B, T, n*C) rows, n = 3 for q, k, v, starting
 * `skip` elements into base. */
static gb_tensor heads_view(char *base, const gb_attn_problem *p, int64_t n, int64_t skip)
{
    const int64_t row = n * p->heads * p->head_dim;
    return (gb_tensor){
        .data = base + (size_t)skip * gb_dtype_size(p->dtype), .dtype = p->dtype, .ndim = 4,
        .shape = {p->batch, p->heads, p->seq_len, p->head_dim},
        .stride = {p->seq_len * row, p->head_dim, row, 1},
    };
}

/* One forward + backward; the seconds each took in fwd_s, bwd_s. */
static int run_once(gb_runtime *rt, const gb_attn_problem *p, bench_buffers *b, double *fwd_s,
                    double *bwd_s)
{
    gb_instance *inst = gb_runtime_instance(rt, GB_KIND_ATTN);
    gb_instance *dev = gb_runtime_instance(rt, GB_KIND_DEVICE);
    const gb_attn_ops *attn = gb_runtime_attn_ops(rt);
    const gb_device_ops *ops = gb_runtime_device_ops(rt);
    const int64_t C = p->heads * p->head_dim;
    gb_tensor q = heads_view(b->qkv, p, 3, 0), k = heads_view(b->qkv, p, 3, C),
              v = heads_view(b->qkv, p, 3, 2 * C), out = heads_view(b->out, p, 1, 0),
              dout = heads_view(b->dout, p, 1, 0), dq = heads_view(b->dqkv, p, 3, 0),
              dk = heads_view(b->dqkv, p, 3, C), dv = heads_view(b->dqkv, p, 3, 2 * C);
    double t0 = now_s();
    GB_CALL(inst, "forward",
            attn->forward(inst->self, p, out, q, k, v, b->saved, b->workspace));
    GB_CALL(dev, "sync", ops->sync(dev->self));
    double t1 = now_s();
    GB_CALL(inst, "backward", attn->backward(inst->self, p, dq, dk, dv, dout, q, k, v, out,
                                             b->saved, b->workspace));
    GB_CALL(dev, "sync", ops->sync(dev->self));
    *fwd_s = t1 - t0;
    *bwd_s = now_s() - t1;
    return 0;
}

/* Times one cell: a warm-up, then timed runs while --repeats and --max-seconds allow
 * (the next run is predicted to take as long as the last). When not even one timed run
 * fits, the warm-up is the sample. Returns -1 when a call failed. */
static int time_cell(bench_plugin *bp, const gb_attn_problem *p, bench_buffers *b,
                     const bench_args *a, cell *c)
{
    double fwd[1000], bwd[1000], total[1000];
    if (run_once(bp->rt, p, b, &fwd[0], &bwd[0]))
        return -1;
    double last = fwd[0] + bwd[0], spent = last;
    int n = 0;
    while (n < a->repeats && spent + last <= a->max_seconds) {
        if (run_once(bp->rt, p, b, &fwd[n], &bwd[n]))
            return -1;
        last = total[n] = fwd[n] + bwd[n];
        spent += total[n++];
    }
    if (n == 0)
        total[n++] = last;
    c->runs = n;
    c->total_ms = 1e3 * gb_bench_median(total, n);
    c->fwd_ms = 1e3 * gb_bench_median(fwd, n);
    c->bwd_ms = 1e3 * gb_bench_median(bwd, n);
    bp->last_run_s = last;
    bp->last_T = p->seq_len;
    return 0;
}

/* eligible() and memory() of plugin bp for this problem. */
static int plan_cell(bench_plugin *bp, const gb_attn_problem *p, cell *c)
{
    gb_instance *inst = gb_runtime_instance(bp->rt, GB_KIND_ATTN);
    const gb_attn_ops *attn = gb_runtime_attn_ops(bp->rt);
    char reason[400] = "";
    *c = (cell){.eligible = attn->eligible(inst->self, p, reason, sizeof reason)};
    if (!c->eligible) {
        snprintf(c->note, sizeof c->note, "not eligible: %s", reason);
        return 0;
    }
    GB_CALL(inst, "memory", attn->memory(inst->self, p, &c->saved, &c->workspace));
    return 0;
}

/* What a plugin that was not timed keeps per layer; when that is several times what the
 * leanest plugins keep, they are named (`leanest` reads "NAME and NAME keep SIZE"). */
static void memory_note(const gb_attn_problem *p, const cell *c, size_t least_saved,
                        const char *leanest, char *buf, size_t cap)
{
    char size[32];
    const double probs = 4.0 * (double)(p->batch * p->heads) * (double)p->seq_len *
                         (double)p->seq_len;
    snprintf(buf, cap, "it keeps %s per layer%s%s%s",
             bytes_text((double)c->saved, size, sizeof size),
             (double)c->saved >= probs ? " for the (T, T) probabilities" : "",
             c->saved >= 4 * least_saved ? "; " : "", c->saved >= 4 * least_saved ? leanest : "");
}

/* Times plugin bp on this problem unless the last cell predicts a run over --max-seconds
 * (time grows as T^2) or the buffers cannot be allocated; then c->note says why. */
static int time_or_skip(bench_plugin *bp, const gb_attn_problem *p, const bench_args *a,
                        const char *memory, cell *c)
{
    char size[32];
    const double ratio = (double)p->seq_len / (double)(bp->last_T ? bp->last_T : 1);
    const double predicted = bp->last_run_s * ratio * ratio;
    if (predicted > a->max_seconds) {
        snprintf(c->note, sizeof c->note, "not timed: one run took %.3g s at T = %ld, so "
                 "about %.0f s here, over --max-seconds %g; %s", bp->last_run_s, bp->last_T,
                 predicted, a->max_seconds, memory);
        return 0;
    }
    bench_buffers b;
    size_t failed = 0;
    if (alloc_buffers(bp->rt, p, c, &b, &failed)) {
        snprintf(c->note, sizeof c->note, "not timed: cannot allocate %s; %s",
                 bytes_text((double)failed, size, sizeof size), memory);
        return 0;
    }
    int rc = time_cell(bp, p, &b, a, c);
    free_buffers(bp->rt, &b);
    return rc;
}

/* "NAME and NAME keep SIZE": the plugins that keep the least per layer. */
static size_t leanest_plugins(const bench_plugin *plugins, const cell *cells, int n,
                              char *buf, size_t cap)
{
    size_t least = (size_t)-1;
    for (int k = 0; k < n; k++)
        if (cells[k].eligible && cells[k].saved < least)
            least = cells[k].saved;
    size_t used = 0;
    int named = 0;
    buf[0] = '\0';
    for (int k = 0; k < n && used < cap; k++)
        if (cells[k].eligible && cells[k].saved == least)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", named++ ? " and " : "",
                                     plugins[k].name);
    char size[32];
    if (used < cap)
        snprintf(buf + used, cap - used, " keep%s %s", named > 1 ? "" : "s",
                 bytes_text((double)least, size, sizeof size));
    return least;
}

/* ---- the table ----------------------------------------------------------------------- */

static void print_header(const bench_args *a, bench_plugin *first)
{
    gb_device_info info = {.struct_size = sizeof info};
    gb_runtime_device_ops(first->rt)->info(gb_runtime_instance(first->rt, GB_KIND_DEVICE)->self,
                                           &info);
    double load[1] = {0};
    getloadavg(load, 1);
    printf("gearbox bench attn: causal %s self-attention forward+backward, B %ld, H %ld, "
           "head_dim %ld, %lld thread(s)\n", gb_dtype_name(a->dtype), a->batch, a->heads,
           a->head_dim, (long long)gb_settings_threads(gb_runtime_settings(first->rt)));
    printf("precision: [precision] plugin = %s, computing in %s%s\n",
           gb_runtime_instance(first->rt, GB_KIND_PRECISION)->plugin->desc->name,
           gb_dtype_name(gb_runtime_policy(first->rt)->activation_dtype),
           gb_runtime_policy(first->rt)->tf32 ? " with TF32 products" : "");
    printf("device: %s; 1-minute load average %.2f\n", info.name, load[0]);
    printf("each cell: median of up to %ld runs after a warm-up, at most %g s; extra = saved "
           "per layer + workspace;\nTFLOP/s of fwd+bwd = 6 B H D T (T + 1) FLOPs (the causal "
           "triangle) / time\n", a->repeats, a->max_seconds);
}

/* Forward+backward FLOPs of one causal problem, as the engine's profile counts them. */
static double fwd_bwd_flops(const gb_attn_problem *p)
{
    const double T = (double)p->seq_len;
    return 6.0 * (double)(p->batch * p->heads * p->head_dim) * T * (T + 1.0);
}

static void print_inputs(const gb_attn_problem *p)
{
    char buf[32];
    double bytes = 8.0 * (double)(p->batch * p->seq_len * p->heads * p->head_dim) *
                   (double)gb_dtype_size(p->dtype);
    printf("\nT = %lld: inputs and gradients (q, k, v, out, dout, dq, dk, dv), not counted "
           "as extra: %s\n", (long long)p->seq_len, bytes_text(bytes, buf, sizeof buf));
    printf("  %-14s %10s %10s %12s %9s %9s %12s %12s %12s\n", "plugin", "fwd ms", "bwd ms",
           "fwd+bwd ms", "TFLOP/s", "vs " BASELINE, "saved/layer", "workspace", "extra");
}

static void print_cell(const char *name, const gb_attn_problem *p, const cell *c,
                       const cell *baseline)
{
    char saved[32], workspace[32], extra[32];
    if (!c->eligible) {
        printf("  %-14s %s\n", name, c->note);
        return;
    }
    bytes_text((double)c->saved, saved, sizeof saved);
    bytes_text((double)c->workspace, workspace, sizeof workspace);
    bytes_text((double)(c->saved + c->workspace), extra, sizeof extra);
    if (c->total_ms > 0) {
        char speed[32] = "-";
        if (baseline && baseline->total_ms > 0)
            snprintf(speed, sizeof speed, "%.2fx", baseline->total_ms / c->total_ms);
        printf("  %-14s %10.2f %10.2f %12.2f %9.3g %9s %12s %12s %12s%s\n", name, c->fwd_ms,
               c->bwd_ms, c->total_ms, fwd_bwd_flops(p) / (c->total_ms * 1e9), speed, saved,
               workspace, extra,
               c->runs == 1 ? "  (1 run)" : "");
    } else {
        printf("  %-14s %10s %10s %12s %9s %9s %12s %12s %12s\n", name, "-", "-", "-", "-", "-",
               saved, workspace, extra);
        printf("  %-14s   %s\n", "", c->note);
    }
}

int gb_bench_attn(int argc, char **argv)
{
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    bench_plugin plugins[MAX_ITEMS] = {0};
    for (int k = 0; k < a.n_plugins; k++)
        if (start_plugin(a.plugins[k], &a, &plugins[k])) {
            for (int j = 0; j <= k; j++)
                gb_bench_stop(plugins[j].cfg, plugins[j].rt);
            return 2;
        }
    print_header(&a, &plugins[0]);
    for (int i = 0; i < a.n_T && rc == 0; i++) {
        const gb_attn_problem p = {
            .struct_size = sizeof p, .batch = a.batch, .heads = a.heads, .seq_len = a.T[i],
            .head_dim = a.head_dim, .dtype = a.dtype, .causal = 1,
            .allow_tf32 = gb_runtime_policy(plugins[0].rt)->tf32,
        };
        cell cells[MAX_ITEMS];
        int baseline = -1;
        for (int k = 0; k < a.n_plugins && rc == 0; k++)
            rc = plan_cell(&plugins[k], &p, &cells[k]);
        char leanest[256], memory[512];
        const size_t least_saved = leanest_plugins(plugins, cells, a.n_plugins, leanest,
                                                   sizeof leanest);
        for (int k = 0; k < a.n_plugins && rc == 0; k++) {
            if (cells[k].eligible) {
                memory_note(&p, &cells[k], least_saved, leanest, memory, sizeof memory);
                rc = time_or_skip(&plugins[k], &p, &a, memory, &cells[k]);
            }
            if (strcmp(plugins[k].name, BASELINE) == 0)
                baseline = k;
        }
        if (rc)
            break;
        print_inputs(&p);
        for (int k = 0; k < a.n_plugins; k++)
            print_cell(plugins[k].name, &p, &cells[k], baseline >= 0 ? &cells[baseline] : NULL);
        fflush(stdout);
    }
    for (int k = 0; k < a.n_plugins; k++)
        gb_bench_stop(plugins[k].cfg, plugins[k].rt);
    return rc ? 1 : 0;
}
