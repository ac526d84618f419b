/* The records of the CUDA emulator's counting mode, grouped and printed with their
 * predicted times; see bench_predict.h. */
#include "bench_predict.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "cli.h"

/* Blocks per grid the emulator runs when the user names no other: the first, the last
 * and 62 evenly spaced between (cuda_emu/README.md). Enough for a grid whose blocks differ
 * by their tile, as causal attention's do: 4, spaced a multiple of a head's tiles apart,
 * took the lightest tile three times in four and under-counted attn/flash by up to 40%. */
#define DEFAULT_SAMPLE "64"

/* One kernel (or library call) of a group: its calls' predictions summed. */
typedef struct entry {
    char name[128];
    long calls;
    double seconds, roofline_s;
    double by_bound[GB_BOUND_COUNT];   /* seconds of the calls each bound won */
    double bytes_requested, sector_bytes, smem_requests, smem_wavefronts;
    double occupancy;
    int occupancy_estimated;
} entry;

typedef struct kernel_group {
    entry *entries;
    int n, cap;
} kernel_group;

struct gb_predict {
    const char *verb;
    const gb_gpu_spec *gpus[GB_PREDICT_MAX_GPUS];
    int n_gpus, shown;    /* the GPUs predicted, and the one printed and summed */
    char path[4096];
    int temporary;        /* the file is ours to remove */
    FILE *in;
    long line;            /* lines read so far, for messages */
    long records;
    kernel_group *groups; /* n_groups per GPU */
    int n_groups;
};

static kernel_group *group_of(const gb_predict *p, int gpu, int group)
{
    return &p->groups[gpu * p->n_groups + group];
}

/* The GPUs of --predict's list into p: 0, or 2 after a usage message. */
static int find_gpus(gb_predict *p, const char *list, int most)
{
    char names[GB_PREDICT_MAX_GPUS][GB_BENCH_NAME_CAP];
    int listed = 1;
    for (const char *c = strchr(list, ','); c; c = strchr(c + 1, ','))
        listed++;
    if (listed > most)
        return gb_cli_usage_error(p->verb, "--predict %s: at most %d GPU%s here", list, most,
                                  most > 1 ? "s" : "");
    if (gb_bench_parse_names(p->verb, "predict", list, names, most, &p->n_gpus))
        return 2;
    for (int i = 0; i < p->n_gpus; i++)
        if (!(p->gpus[i] = gb_gpu_find(names[i])))
            return gb_cli_usage_error(p->verb, "--predict %s: unknown GPU '%s'; expected one "
                                      "of %s", list, names[i], gb_gpu_names());
    return 0;
}

gb_predict *gb_predict_open(const char *verb, const char *gpus, int most, int groups)
{
    gb_predict *p = calloc(1, sizeof *p);
    p->verb = verb;
    if (find_gpus(p, gpus, most)) {
        free(p);
        return NULL;
    }
    p->groups = calloc((size_t)(p->n_gpus * groups), sizeof *p->groups);
    p->n_groups = groups;
    const char *named = getenv("GEARBOX_CUDA_EMU_COUNT");
    if (named && *named) {
        snprintf(p->path, sizeof p->path, "%s", named);
        FILE *f = fopen(p->path, "a");   /* it exists, so it can be read from the start */
        if (f)
            fclose(f);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(p->path, sizeof p->path, "%s/gearbox-predict-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        int fd = mkstemp(p->path);
        if (fd >= 0)
            close(fd);
        p->temporary = fd >= 0;
        setenv("GEARBOX_CUDA_EMU_COUNT", p->path, 1);
    }
    setenv("GEARBOX_CUDA_EMU_COUNT_SAMPLE", DEFAULT_SAMPLE, 0);
    p->in = fopen(p->path, "r");
    if (!p->in) {
        fprintf(stderr, "gearbox %s: --predict: cannot open %s, the file the CUDA emulator "
                "counts into: %m; set GEARBOX_CUDA_EMU_COUNT or TMPDIR to a writable "
                "place\n", verb, p->path);
        gb_predict_close(p);
        return NULL;
    }
    return p;
}

void gb_predict_clear(gb_predict *p)
{
    for (int g = 0; g < p->n_gpus * p->n_groups; g++)
        p->groups[g].n = 0;
}

void gb_predict_close(gb_predict *p)
{
    if (!p)
        return;
    for (int g = 0; g < p->n_gpus * p->n_groups; g++)
        free(p->groups[g].entries);
    free(p->groups);
    if (p->in)
        fclose(p->in);
    if (p->temporary)
        unlink(p->path);
    free(p);
}

const gb_gpu_spec *gb_predict_gpu(const gb_predict *p)
{
    return p->gpus[p->shown];
}

int gb_predict_gpu_count(const gb_predict *p)
{
    return p->n_gpus;
}

void gb_predict_show(gb_predict *p, int gpu)
{
    p->shown = gpu;
}

static entry *entry_of(kernel_group *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->entries[i].name, name) == 0)
            return &g->entries[i];
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 16;
        g->entries = realloc(g->entries, (size_t)g->cap * sizeof *g->entries);
    }
    entry *e = &g->entries[g->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    return e;
}

/* Adds one call's prediction on GPU `gpu` to `group` under `name`. */
static void add(gb_predict *p, int gpu, int group, const char *name, gb_gpu_estimate est)
{
    entry *e = entry_of(group_of(p, gpu, group), name);
    e->calls++;
    e->seconds += est.seconds;
    e->roofline_s += est.roofline_s;
    e->by_bound[est.bound] += est.seconds;
    e->bytes_requested += est.bytes_requested;
    e->sector_bytes += est.sector_bytes;
    e->smem_requests += est.smem_requests;
    e->smem_wavefronts += est.smem_wavefronts;
    e->occupancy = est.occupancy;
    e->occupancy_estimated = est.occupancy_estimated;
}

/* "cuBLASLt 768x16384x2304 bf16 GELU_BIAS": a matmul's entry, one per shape. */
static void matmul_name(const gb_matmul_shape *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "cuBLASLt %.0fx%.0fx%.0f%s %s%s%s", s->m, s->n, s->k,
             s->batch > 1 ? " batched" : "", s->compute, s->epilogue[0] ? " " : "",
             s->epilogue);
}

static int take_line(gb_predict *p, const char *line, int group, gb_matmul_pass pass)
{
    gb_record r;
    char why[256], name[128];
    if (gb_record_parse(line, &r, why, sizeof why)) {
        fprintf(stderr, "gearbox %s: --predict: %s:%ld: %s; the CUDA emulator's counting mode "
                "writes these records (cuda_emu/README.md): rebuild it with this gearbox\n",
                p->verb, p->path, p->line, why);
        return -1;
    }
    p->records++;
    if (group < 0 || r.type == GB_RECORD_OTHER)
        return 0;
    int memset = r.type == GB_RECORD_COPY && strcmp(r.copy.kind, "memset") == 0;
    if (r.type == GB_RECORD_KERNEL)
        snprintf(name, sizeof name, "%s", r.kernel.kernel);
    else if (r.type == GB_RECORD_MATMUL)
        matmul_name(&r.matmul, name, sizeof name);
    else
        snprintf(name, sizeof name, "%s%s", memset ? "cudaMemset" : "copy ",
                 memset ? "" : r.copy.kind);
    for (int i = 0; i < p->n_gpus; i++) {
        const gb_gpu_spec *gpu = p->gpus[i];
        add(p, i, group, name,
            r.type == GB_RECORD_KERNEL   ? gb_gpu_predict_kernel(gpu, &r.kernel)
            : r.type == GB_RECORD_MATMUL ? gb_gpu_predict_matmul(gpu, &r.matmul, pass)
                                         : gb_gpu_predict_copy(gpu, &r.copy));
    }
    return 0;
}

int gb_predict_take(gb_predict *p, int group, gb_matmul_pass pass)
{
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        long start = ftell(p->in);
        ssize_t n = getline(&line, &cap, p->in);
        if (n <= 0)
            break;
        if (line[n - 1] != '\n') {   /* a record still being written: read it next time */
            fseek(p->in, start, SEEK_SET);
            break;
        }
        p->line++;
        if ((rc = take_line(p, line, group, pass)) != 0)
            break;
    }
    clearerr(p->in);
    free(line);
    return rc;
}

int gb_predict_check_counted(const gb_predict *p)
{
    if (p->records > 0)
        return 0;
    fprintf(stderr, "gearbox %s: --predict: nothing was counted into %s: --predict runs on "
            "the CUDA emulator's plugins, which count what each kernel does; a real GPU's "
            "(or the CPU's) do not. Build with -Dgpu_emu=true, run with --device cuda and "
            "put BUILD/cuda_emu/plugins first on --plugin-path; on a GPU, time it instead "
            "(without --predict)\n", p->verb, p->path);
    return -1;
}

double gb_predict_seconds(const gb_predict *p, int group)
{
    double s = 0.0;
    const kernel_group *g = group_of(p, p->shown, group);
    for (int i = 0; i < g->n; i++)
        s += g->entries[i].seconds;
    return s;
}

void gb_predict_printf(const gb_predict *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[prediction %s] ", p->gpus[p->shown]->name);
    vprintf(fmt, ap);
    va_end(ap);
}

#define ROW "%-46.46s %6s %10s %-8s %10s %9s %9s %7s\n"

void gb_predict_print_header(const gb_predict *p, const char *title)
{
    gb_predict_printf(p, "%s\n", title);
    gb_predict_printf(p, ROW, "phase / kernel", "calls", "ms", "bound", "coalescing",
                      "bank x", "occupancy", "%roof");
}

static int costlier(const void *x, const void *y)
{
    double a = ((const entry *)x)->seconds, b = ((const entry *)y)->seconds;
    return (a < b) - (a > b);
}

/* "0.87" or "n/a": a ratio whose denominator may be 0. */
static const char *ratio(double num, double den, char *buf, size_t cap)
{
    if (den > 0)
        snprintf(buf, cap, "%.2f", num / den);
    else
        snprintf(buf, cap, "n/a");
    return buf;
}

static void print_entry(const gb_predict *p, const entry *e)
{
    char calls[16], ms[16], coal[16], bank[16], occ[16], roof[16];
    snprintf(calls, sizeof calls, "%ld", e->calls);
    snprintf(ms, sizeof ms, "%.4f", 1e3 * e->seconds);
    if (e->occupancy >= 0)
        snprintf(occ, sizeof occ, "%.0f%%%s", 100.0 * e->occupancy,
                 e->occupancy_estimated ? "*" : "");
    else
        snprintf(occ, sizeof occ, "n/a");
    snprintf(roof, sizeof roof, "%.0f%%", 100.0 * e->roofline_s / e->seconds);
    char name[sizeof e->name + 2];
    snprintf(name, sizeof name, "  %s", e->name);
    gb_predict_printf(p, ROW, name, calls, ms, gb_gpu_bound_name(gb_gpu_largest_bound(e->by_bound)),
                      ratio(e->bytes_requested, e->sector_bytes, coal, sizeof coal),
                      ratio(e->smem_wavefronts, e->smem_requests, bank, sizeof bank), occ,
                      roof);
}

void gb_predict_print_group(const gb_predict *p, int group, const char *label)
{
    kernel_group *g = group_of(p, p->shown, group);
    if (g->n == 0)
        return;
    entry total = {.occupancy = -1};
    for (int i = 0; i < g->n; i++) {
        total.calls += g->entries[i].calls;
        total.seconds += g->entries[i].seconds;
        for (int b = 0; b < GB_BOUND_COUNT; b++)
            total.by_bound[b] += g->entries[i].by_bound[b];
    }
    char calls[16], ms[16];
    snprintf(calls, sizeof calls, "%ld", total.calls);
    snprintf(ms, sizeof ms, "%.4f", 1e3 * total.seconds);
    gb_predict_printf(p, ROW, label, calls, ms, gb_gpu_bound_name(gb_gpu_largest_bound(total.by_bound)),
                      "", "", "", "");
    qsort(g->entries, (size_t)g->n, sizeof *g->entries, costlier);
    for (int i = 0; i < g->n; i++)
        print_entry(p, &g->entries[i]);
}
