/* Running the variants of `gearbox ab` as child processes; see ab.h. */
#include "ab.h"
#include "gearbox/engine/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gearbox/engine/clock.h"
#include "verdict.h"

extern char **environ;

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* ---- files --------------------------------------------------------------------------- */

char *gb_ab_read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[8192];
    size_t n;
    while (mem && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, mem);
    int failed = ferror(f);
    fclose(f);
    if (mem)
        fclose(mem);
    if (failed) {
        free(text);
        return NULL;
    }
    return text;
}

/* The last `lines` lines of a file (whole when shorter); malloc'ed, NULL when unreadable. */
static char *tail_of(const char *path, int lines)
{
    char *text = gb_ab_read_text(path);
    if (!text)
        return NULL;
    size_t len = strlen(text);
    while (len > 0 && text[len - 1] == '\n')
        text[--len] = '\0';
    char *start = text + len;
    for (int seen = 0; start > text; start--)
        if (start[-1] == '\n' && ++seen == lines)
            break;
    memmove(text, start, strlen(start) + 1);
    return text;
}

/* Each run's final checkpoint is only a by-product of `gearbox train` here. */
static void remove_checkpoints(const char *dir)
{
    char pattern[4300];
    snprintf(pattern, sizeof pattern, "%s/ckpt-*.gbk", dir);
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0)
        return;
    for (size_t i = 0; i < g.gl_pathc; i++)
        unlink(g.gl_pathv[i]);
    globfree(&g);
}

/* ---- machine ------------------------------------------------------------------------- */

static void cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon)
            continue;
        snprintf(buf, cap, "%s", colon + 2);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    if (f)
        fclose(f);
}

static double load_average(void)
{
    double load;
    return getloadavg(&load, 1) == 1 ? load : NAN;
}

/* ---- child processes ----------------------------------------------------------------- */

/* Runs argv[0] with stdout and stderr written to files; stdin is /dev/null. Returns its
 * exit status (128 + signal when killed), or -1 when it could not be started. */
static int spawn_and_wait(char *const argv[], const char *out_path, const char *err_path)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

const char *const gb_ab_fixed_keys[GB_AB_N_FIXED] = {"run.steps", "run.log_every",
                                                      "run.eval_every", "run.checkpoint_every",
                                                      "run.out_dir"};

typedef struct child_args {
    char **argv;                        /* NULL-terminated; NULL when out of memory */
    char fixed[GB_AB_N_FIXED][4300];    /* the settings every run needs, as --set values */
} child_args;

/* The argument vector of `gearbox VERB` for a variant: its config, --plugin-path, a fixed
 * team where it has one, the --set for all, its own overrides, then the settings every
 * run of the comparison needs (gb_ab_fixed_keys, which the variants were checked not to
 * set). */
static void variant_args(const gb_ab_plan *p, const gb_ab_variant *v, const char *verb,
                         const char *run_dir, child_args *a)
{
    int argc = 0;
    a->argv = calloc((size_t)(2 * (p->n_sets + v->n_overrides + GB_AB_N_FIXED) + 8),
                     sizeof(char *));
    if (!a->argv)
        return;
    a->argv[argc++] = (char *)p->exe;
    a->argv[argc++] = (char *)verb;
    a->argv[argc++] = (char *)v->config;
    if (p->plugin_path) {
        a->argv[argc++] = "--plugin-path";
        a->argv[argc++] = (char *)p->plugin_path;
    }
    if (v->fixed_team) {
        a->argv[argc++] = "--set";
        a->argv[argc++] = "run.threads=0";
    }
    char steps[32], eval_every[32];
    snprintf(steps, sizeof steps, "%lld", (long long)p->steps);
    snprintf(eval_every, sizeof eval_every, "%lld", (long long)p->eval_every);
    const char *values[GB_AB_N_FIXED] = {steps, "1", eval_every, "0", run_dir};
    for (int i = 0; i < GB_AB_N_FIXED; i++)
        snprintf(a->fixed[i], sizeof a->fixed[i], "%s=%s", gb_ab_fixed_keys[i], values[i]);
    int n = p->n_sets + v->n_overrides + GB_AB_N_FIXED;
    for (int i = 0; i < n; i++) {
        a->argv[argc++] = "--set";
        a->argv[argc++] = i < p->n_sets ? (char *)p->sets[i]
                          : i < p->n_sets + v->n_overrides ? v->overrides[i - p->n_sets]
                          : a->fixed[i - p->n_sets - v->n_overrides];
    }
}

/* "gearbox check exited with status 2", or why it could not start. */
static void describe_exit(char *buf, size_t cap, const char *who, int status)
{
    if (status < 0)
        snprintf(buf, cap, "%s could not start: %s", who, strerror(errno));
    else
        snprintf(buf, cap, "%s exited with status %d", who, status);
}

/* Marks the variant failed: `what` happened; the tail of its stderr says why. */
static void mark_failed(gb_ab_variant *v, int status, const char *what, const char *err_path)
{
    char *tail = tail_of(err_path, 12);
    size_t cap = strlen(what) + strlen(err_path) + 64 + (tail ? strlen(tail) : 0);
    v->failure = malloc(cap);
    if (v->failure)
        snprintf(v->failure, cap, "%s; the last lines of %s:\n%s", what, err_path,
                 tail && *tail ? tail : "(empty)");
    v->failed = status > 0 ? status : 1;
    free(tail);
}

static void variant_dir(const gb_ab_plan *p, const gb_ab_variant *v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", p->out_dir, v->name);
}

static void run_dir(const gb_ab_plan *p, const gb_ab_variant *v, int repeat, char *buf,
                    size_t cap)
{
    snprintf(buf, cap, "%s/%s/r%d", p->out_dir, v->name, repeat + 1);
}

/* Creates `dir` and runs the variant's `gearbox VERB` with the run folder rdir, its output
 * into out_path and err_path: 0 with the child's exit status in *status (-1 when it could
 * not be started), or -1 after marking the variant failed when `dir` cannot be made. */
static int spawn_in(const gb_ab_plan *p, gb_ab_variant *v, const char *verb, const char *dir,
                    const char *rdir, const char *out_path, const char *err_path, int *status)
{
    if (gb_make_dirs(dir) != 0) {
        char what[4400];
        snprintf(what, sizeof what, "cannot create %s: %s", dir, strerror(errno));
        mark_failed(v, 1, what, err_path);
        return -1;
    }
    child_args a;
    variant_args(p, v, verb, rdir, &a);
    *status = a.argv ? spawn_and_wait(a.argv, out_path, err_path) : -1;
    free(a.argv);
    return 0;
}

/* `gearbox check` with the first run's settings: fails fast on a bad variant, and its
 * output is the variant's effective config and memory plan. */
static void check_variant(const gb_ab_plan *p, gb_ab_variant *v)
{
    char dir[4200], rdir[4200], out_path[4300], err_path[4300], what[256];
    variant_dir(p, v, dir, sizeof dir);
    run_dir(p, v, 0, rdir, sizeof rdir);
    snprintf(out_path, sizeof out_path, "%s/config.ini", dir);
    snprintf(err_path, sizeof err_path, "%s/check.log", dir);
    int status;
    if (spawn_in(p, v, "check", dir, rdir, out_path, err_path, &status))
        return;
    if (status != 0) {
        describe_exit(what, sizeof what, "gearbox check", status);
        mark_failed(v, status, what, err_path);
        return;
    }
    v->effective = gb_ab_read_text(out_path);
}

static void train_run(const gb_ab_plan *p, gb_ab_variant *v, int repeat)
{
    char dir[4200], out_path[4300], err_path[4300], metrics[4300], what[9000], why[8800];
    run_dir(p, v, repeat, dir, sizeof dir);
    snprintf(out_path, sizeof out_path, "%s/train.log", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr.log", dir);
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", dir);
    int status;
    if (spawn_in(p, v, "train", dir, dir, out_path, err_path, &status))
        return;
    remove_checkpoints(dir);
    gb_ab_run *run = &v->runs[repeat];
    char who[64];
    snprintf(who, sizeof who, "gearbox train (repeat %d)", repeat + 1);
    if (status != 0 && interrupted) {
        return;   /* stopped by Ctrl-C, which reached the run too: not the variant's fault */
    } else if (status != 0) {
        describe_exit(what, sizeof what, who, status);
        mark_failed(v, status, what, err_path);
    } else if (gb_ab_run_read(metrics, run, why, sizeof why) != 0) {
        snprintf(what, sizeof what, "%s: %s", who, why);
        mark_failed(v, 1, what, err_path);
    } else if (run->n_steps != (size_t)p->steps) {
        snprintf(what, sizeof what, "%s logged %zu steps in %s, expected %lld", who,
                 run->n_steps, metrics, (long long)p->steps);
        mark_failed(v, 1, what, err_path);
    } else {
        v->runs_done++;
    }
}

static void print_progress(const gb_ab_plan *p, const gb_ab_variant *v, int repeat, int index,
                           int total, double seconds)
{
    printf("ab: [%d/%d] %-12s repeat %d/%d: ", index, total, v->name, repeat + 1, p->repeats);
    if (v->failed)
        printf("FAILED (exit status %d) after %.1f s\n", v->failed, seconds);
    else if (v->runs_done <= repeat)
        printf("interrupted after %.1f s\n", seconds);
    else
        printf("%.1f s, median step %.1f ms\n", seconds,
               gb_ab_timing_of(&v->runs[repeat], 1, p->warmup).ms.median);
    fflush(stdout);
}

static void describe_machine(gb_ab_plan *p)
{
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    p->cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(p->machine, sizeof p->machine, "%s, %ld CPUs online, load average %.2f before "
             "the runs", cpu, p->cpus, p->load_before);
}

int gb_ab_execute(gb_ab_plan *p)
{
    p->load_before = load_average();
    void (*old_int)(int) = signal(SIGINT, on_interrupt);
    void (*old_term)(int) = signal(SIGTERM, on_interrupt);
    for (int i = 0; i < p->n_variants && !interrupted; i++) {
        gb_ab_variant *v = &p->variants[i];
        v->runs = malloc((size_t)p->repeats * sizeof *v->runs);
        for (int r = 0; v->runs && r < p->repeats; r++)
            v->runs[r] = gb_ab_run_empty();
        if (!v->runs)
            v->failed = 1;
        else
            check_variant(p, v);
        if (v->failed)
            printf("ab: %s failed its check and is skipped (details below)\n", v->name);
    }
    int total = p->repeats * p->n_variants, index = 0;
    for (int r = 0; r < p->repeats && !interrupted; r++) {
        for (int i = 0; i < p->n_variants && !interrupted; i++) {
            gb_ab_variant *v = &p->variants[i];
            index++;
            if (v->failed)
                continue;
            double t0 = gb_now_ms();
            train_run(p, v, r);
            print_progress(p, v, r, index, total, (gb_now_ms() - t0) / 1e3);
        }
    }
    p->interrupted = interrupted != 0;
    signal(SIGINT, old_int);
    signal(SIGTERM, old_term);
    describe_machine(p);
    int failed = 0;
    for (int i = 0; i < p->n_variants; i++)
        failed += p->variants[i].failed != 0;
    return failed;
}
