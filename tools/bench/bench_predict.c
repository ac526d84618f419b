/* The records of the CUDA emulator's counting mode, grouped and printed with their
 * predicted times; see bench_predict.h. */
#include "bench_predict.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Blocks per grid the emulator runs when the user names no other: the first, the last
 * and two between (cuda_emu/README.md), enough for block-uniform kernels. */
#define DEFAULT_SAMPLE "4"

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
    const gb_gpu_spec *gpu;
    char path[4096];
    int temporary;        /* the file is ours to remove */
    FILE *in;
    long line;            /* lines read so far, for messages */
    long records;
    kernel_group *groups;
    int n_groups;
};

gb_predict *gb_predict_open(const char *verb, const char *gpu, int groups)
{
    const gb_gpu_spec *spec = gb_gpu_find(gpu);
    if (!spec) {
        gb_cli_usage_error(verb, "--predict %s: unknown GPU; expected one of %s", gpu,
                           gb_gpu_names());
        return NULL;
    }
    gb_predict *p = calloc(1, sizeof *p);
    p->groups = calloc((size_t)groups, sizeof *p->groups);
    p->verb = verb;
    p->gpu = spec;
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
    for (int g = 0; g < p->n_groups; g++)
        p->groups[g].n = 0;
}

void gb_predict_close(gb_predict *p)
{
    if (!p)
        return;
    for (int g = 0; g < p->n_groups; g++)
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
    return p->gpu;
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

void gb_predict_add(gb_predict *p, int group, const char *name, gb_gpu_estimate est)
{
    entry *e = entry_of(&p->groups[group], name);
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
    if (r.type == GB_RECORD_KERNEL) {
        gb_predict_add(p, group, r.kernel.kernel, gb_gpu_predict_kernel(p->gpu, &r.kernel));
    } else if (r.type == GB_RECORD_MATMUL) {
        matmul_name(&r.matmul, name, sizeof name);
        gb_predict_add(p, group, name, gb_gpu_predict_matmul(p->gpu, &r.matmul, pass));
    } else {
        int memset = strcmp(r.copy.kind, "memset") == 0;
        snprintf(name, sizeof name, "%s%s", memset ? "cudaMemset" : "copy ",
                 memset ? "" : r.copy.kind);
        gb_predict_add(p, group, name, gb_gpu_predict_copy(p->gpu, &r.copy));
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
    for (int i = 0; i < p->groups[group].n; i++)
        s += p->groups[group].entries[i].seconds;
    return s;
}

void gb_predict_printf(const gb_predict *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[prediction %s] ", p->gpu->name);
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
    kernel_group *g = &p->groups[group];
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
