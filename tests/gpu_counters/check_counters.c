/* Holds the emulator's counts (GEARBOX_CUDA_EMU_COUNT's lines, cuda_emu/README.md) to a
 * committed baseline: each kernel, over all its launches in the run, reduced to its ratios,
 * global sectors per request (loads and stores apart) and shared wavefronts per request
 * (loads and stores apart), which no shape change moves much but an uncoalesced access or
 * a bank conflict does, and its lowest sm_90 occupancy over its launches (resident warps
 * per SM, from the real build's registers and shared memory), which more registers or
 * shared memory lower. A ratio above its baseline (beyond a relative 1e-3), or fewer
 * warps, fails, naming the kernel and the counter; a better figure passes and says the
 * baseline can be tightened; a kernel missing from either side fails. Counts are
 * deterministic: this is no timing test.
 *
 * usage: check_counters COUNTS.jsonl BASELINE.tsv          compare
 *        check_counters --write COUNTS.jsonl BASELINE.tsv  write the baseline from the counts
 * The baseline is a sorted table, one kernel per line: name, .cu file, the four ratios
 * with three decimals ("-" where the kernel makes no such request), then the warps per SM
 * ("-" where the build has no resource table, as without nvcc).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GLD, GST, SHLD, SHST, N_RATIOS };
static const char *const ratio_names[N_RATIOS] = {
    "global load sectors per request", "global store sectors per request",
    "shared load wavefronts per request", "shared store wavefronts per request"};
/* each ratio's numerator and denominator in a kernel's line */
static const char *const ratio_fields[N_RATIOS][2] = {
    {"gld_sectors", "gld_requests"}, {"gst_sectors", "gst_requests"},
    {"shld_wavefronts", "shld_requests"}, {"shst_wavefronts", "shst_requests"}};
static const double EPSILON = 1e-3;

struct kernel {
    char name[512], file[256];
    unsigned long long num[N_RATIOS], den[N_RATIOS];   /* the run's sums */
    char ratio[N_RATIOS][32];                          /* "1.250" or "-" */
    long min_warps;                                    /* lowest warps per SM; -1: none */
    char warps[32];                                    /* "48" or "-" */
};

struct table {
    struct kernel *k;
    size_t n, cap;
};

static struct kernel *find_or_add(struct table *t, const char *name, const char *file)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->k[i].name, name) == 0 && strcmp(t->k[i].file, file) == 0)
            return &t->k[i];
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->k = realloc(t->k, t->cap * sizeof *t->k);
        if (!t->k) {
            fprintf(stderr, "check_counters: out of memory\n");
            exit(2);
        }
    }
    struct kernel *k = &t->k[t->n++];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    snprintf(k->file, sizeof k->file, "%s", file);
    k->min_warps = -1;
    return k;
}

/* The string value of "key":"..." in line into out (names hold no escaped quotes). */
static int string_field(const char *line, const char *key, char *out, size_t cap)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *at = strstr(line, pattern);
    if (!at)
        return 0;
    at += strlen(pattern);
    const char *end = strchr(at, '"');
    if (!end || (size_t)(end - at) >= cap)
        return 0;
    memcpy(out, at, (size_t)(end - at));
    out[end - at] = '\0';
    return 1;
}

static unsigned long long number_field(const char *line, const char *key, int *ok)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = strstr(line, pattern);
    if (!at) {
        *ok = 0;
        return 0;
    }
    return strtoull(at + strlen(pattern), NULL, 10);
}

static int by_name(const void *a, const void *b)
{
    const struct kernel *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->file, y->file);
}

/* Every kernel line of the counts file, summed per kernel and reduced to ratios. */
static struct table read_counts(const char *path)
{
    struct table t = {0};
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "check_counters: cannot read the counts %s\n", path);
        exit(2);
    }
    static char line[8192];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strstr(line, "\"type\":\"kernel\""))
            continue;
        char name[512], file[256];
        int ok = string_field(line, "kernel", name, sizeof name) &&
                 string_field(line, "file", file, sizeof file);
        struct kernel *k = ok ? find_or_add(&t, name, file) : NULL;
        for (int r = 0; ok && r < N_RATIOS; r++) {
            k->num[r] += number_field(line, ratio_fields[r][0], &ok);
            k->den[r] += number_field(line, ratio_fields[r][1], &ok);
        }
        int has_warps = ok;
        const long warps = (long)number_field(line, "warps_per_sm", &has_warps);
        if (has_warps && (k->min_warps < 0 || warps < k->min_warps))
            k->min_warps = warps;
        if (!ok) {
            fprintf(stderr, "check_counters: %s:%d: a kernel line without its name, file or "
                    "counters (the emulator's GEARBOX_CUDA_EMU_COUNT format)\n", path, lineno);
            exit(2);
        }
    }
    fclose(f);
    for (size_t i = 0; i < t.n; i++) {
        if (t.k[i].min_warps >= 0)
            snprintf(t.k[i].warps, sizeof t.k[i].warps, "%ld", t.k[i].min_warps);
        else
            snprintf(t.k[i].warps, sizeof t.k[i].warps, "-");
        for (int r = 0; r < N_RATIOS; r++)
            if (t.k[i].den[r])
                snprintf(t.k[i].ratio[r], sizeof t.k[i].ratio[r], "%.3f",
                         (double)t.k[i].num[r] / (double)t.k[i].den[r]);
            else
                snprintf(t.k[i].ratio[r], sizeof t.k[i].ratio[r], "-");
    }
    qsort(t.k, t.n, sizeof *t.k, by_name);
    return t;
}

static void write_baseline(const struct table *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "check_counters: cannot write the baseline %s\n", path);
        exit(2);
    }
    fprintf(f, "# kernel\tfile\tgld sectors/request\tgst sectors/request\t"
            "shld wavefronts/request\tshst wavefronts/request\twarps/SM (lowest)\n");
    for (size_t i = 0; i < t->n; i++) {
        const struct kernel *k = &t->k[i];
        fprintf(f, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k->name, k->file, k->ratio[GLD],
                k->ratio[GST], k->ratio[SHLD], k->ratio[SHST], k->warps);
    }
    fclose(f);
    printf("wrote %zu kernels to %s\n", t->n, path);
}

static struct table read_baseline(const char *path)
{
    struct table t = {0};
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "check_counters: cannot read the baseline %s (write one with --write)\n",
                path);
        exit(2);
    }
    static char line[2048];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\n")] = '\0';
        char *fields[3 + N_RATIOS];
        int n = 0;
        for (char *s = line; n < 3 + N_RATIOS && s; n++) {
            fields[n] = s;
            s = strchr(s, '\t');
            if (s)
                *s++ = '\0';
        }
        if (n != 3 + N_RATIOS) {
            fprintf(stderr, "check_counters: %s:%d: %d fields, expected %d (kernel, file, "
                    "four ratios and warps per SM, tab-separated)\n", path, lineno, n,
                    3 + N_RATIOS);
            exit(2);
        }
        struct kernel *k = find_or_add(&t, fields[0], fields[1]);
        for (int r = 0; r < N_RATIOS; r++)
            snprintf(k->ratio[r], sizeof k->ratio[r], "%s", fields[2 + r]);
        snprintf(k->warps, sizeof k->warps, "%s", fields[2 + N_RATIOS]);
    }
    fclose(f);
    return t;
}

static const struct kernel *lookup(const struct table *t, const struct kernel *k)
{
    for (size_t i = 0; i < t->n; i++)
        if (by_name(&t->k[i], k) == 0)
            return &t->k[i];
    return NULL;
}

/* One ratio against its baseline: 1 when it is worse (or appeared or vanished). */
static int compare_ratio(const struct kernel *now, const char *was, int r, const char *base_path)
{
    const char *is = now->ratio[r];
    if (strcmp(is, was) == 0)
        return 0;
    if (strcmp(is, "-") == 0 || strcmp(was, "-") == 0) {
        printf("FAIL: %s (%s): %s is %s, the baseline says %s: the kernel's accesses changed; "
               "if that is meant, regenerate %s\n", now->name, now->file, ratio_names[r], is,
               was, base_path);
        return 1;
    }
    const double a = atof(is), b = atof(was);
    if (a > b * (1 + EPSILON) + EPSILON) {
        printf("FAIL: %s (%s): %s rose from %s to %s (%s)\n", now->name, now->file,
               ratio_names[r], was, is,
               r <= GST ? "a less coalesced global access" : "a shared-memory bank conflict");
        return 1;
    }
    if (a < b * (1 - EPSILON) - EPSILON)
        printf("ok: %s (%s): %s fell from %s to %s: better; the baseline can be tightened "
               "(regenerate %s)\n", now->name, now->file, ratio_names[r], was, is, base_path);
    return 0;
}

/* The occupancy against its baseline: 1 when the kernel keeps fewer warps per SM. */
static int compare_warps(const struct kernel *now, const char *was, const char *base_path)
{
    if (strcmp(now->warps, was) == 0)
        return 0;
    if (strcmp(now->warps, "-") == 0) {
        static int said;
        if (!said++)
            printf("note: this build has no resource table (nvcc not found): occupancy is "
                   "not compared\n");
        return 0;
    }
    if (strcmp(was, "-") == 0) {
        printf("FAIL: %s (%s): warps per SM is %s, the baseline says %s: the resource table "
               "changed; if that is meant, regenerate %s\n", now->name, now->file, now->warps,
               was, base_path);
        return 1;
    }
    if (atol(now->warps) < atol(was)) {
        printf("FAIL: %s (%s): occupancy fell from %s to %s warps per SM (more registers or "
               "shared memory per block)\n", now->name, now->file, was, now->warps);
        return 1;
    }
    printf("ok: %s (%s): occupancy rose from %s to %s warps per SM: better; the baseline can "
           "be tightened (regenerate %s)\n", now->name, now->file, was, now->warps, base_path);
    return 0;
}

static int compare(const struct table *now, const struct table *base, const char *base_path)
{
    int failures = 0;
    for (size_t i = 0; i < now->n; i++) {
        const struct kernel *k = &now->k[i];
        const struct kernel *b = lookup(base, k);
        if (!b) {
            printf("FAIL: %s (%s): not in the baseline %s: a new kernel's counts are a reviewed "
                   "addition (regenerate the baseline)\n", k->name, k->file, base_path);
            failures++;
            continue;
        }
        int worse = 0;
        for (int r = 0; r < N_RATIOS; r++)
            worse += compare_ratio(k, b->ratio[r], r, base_path);
        worse += compare_warps(k, b->warps, base_path);
        if (!worse)
            printf("ok: %s (%s): %s %s %s %s, %s warps/SM\n", k->name, k->file, k->ratio[GLD],
                   k->ratio[GST], k->ratio[SHLD], k->ratio[SHST], k->warps);
        failures += worse;
    }
    for (size_t i = 0; i < base->n; i++)
        if (!lookup(now, &base->k[i])) {
            printf("FAIL: %s (%s): in the baseline but not launched by this run: a kernel "
                   "renamed or no longer covered (regenerate the baseline)\n", base->k[i].name,
                   base->k[i].file);
            failures++;
        }
    return failures;
}

int main(int argc, char **argv)
{
    const int writing = argc == 4 && strcmp(argv[1], "--write") == 0;
    if (argc != 3 && !writing) {
        fprintf(stderr, "usage: check_counters [--write] COUNTS.jsonl BASELINE.tsv\n");
        return 2;
    }
    struct table now = read_counts(argv[writing + 1]);
    if (now.n == 0) {
        printf("FAIL: %s holds no kernel line: was GEARBOX_CUDA_EMU_COUNT set?\n",
               argv[writing + 1]);
        return 1;
    }
    if (writing) {
        write_baseline(&now, argv[3]);
        return 0;
    }
    struct table base = read_baseline(argv[2]);
    const int failures = compare(&now, &base, argv[2]);
    printf("%zu kernels against the baseline: %d failure%s\n", now.n, failures,
           failures == 1 ? "" : "s");
    free(now.k);
    free(base.k);
    return failures ? 1 : 0;
}
