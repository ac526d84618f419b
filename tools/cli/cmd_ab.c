/* `gearbox ab`: the command line of the A/B comparison (variants, options, the report
 * folder); the work is in tools/ab/. Every variant's config and overrides are parsed here
 * first, so a typo stops the comparison before any run starts. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ab/ab.h"
#include "cli.h"
#include "gearbox/engine/fsutil.h"

enum { OPT_VARIANT, OPT_BASELINE, OPT_STEPS, OPT_WARMUP, OPT_REPEATS, OPT_TOLERANCE,
       OPT_TARGET_LOSS, OPT_EVAL_EVERY, OPT_SET, OPT_OUT, OPT_PLUGIN_PATH };

const gb_cli_spec gb_cli_ab_spec = {
    .verb = "ab",
    .usage = "gearbox ab CONFIG --variant NAME:[section.key=value[,...]] --variant ... [OPTIONS]\n"
             "       gearbox ab A.ini B.ini [MORE.ini...] [OPTIONS]",
    .about =
        "Trains every variant from the same seed on the same batches, each run a `gearbox train`\n"
        "child process, repeated and interleaved (A B A B ...), then compares each variant with\n"
        "the baseline: step time, tokens/s, the speed ratio with a 95% confidence interval,\n"
        "planned and peak memory, and how far the loss curves differ. Every figure comes from\n"
        "the metrics.jsonl each run writes.\n",
    .options = {
        [OPT_VARIANT] = {"variant", 0, "NAME:OVERRIDES",
                         "a variant: a name, then comma-separated overrides of CONFIG\n"
                         "(`--variant base:` has none); two or more. A piece without\n"
                         "'=' continues the previous value (a value with a comma)"},
        [OPT_BASELINE] = {"baseline", 0, "NAME", "compare with this variant (default: the first "
                          "variant with\nno overrides, else the first)"},
        [OPT_STEPS] = {"steps", 0, "N", "steps per run (default 50)"},
        [OPT_WARMUP] = {"warmup", 0, "W", "first steps not timed (default 5)"},
        [OPT_REPEATS] = {"repeats", 0, "R", "runs per variant (default 3)"},
        [OPT_TOLERANCE] = {"tolerance", 0, "X", "loss differences up to X read as the same curve "
                           "(default 1e-4)"},
        [OPT_TARGET_LOSS] = {"target-loss", 0, "X", "also the steps and seconds to val loss <= X"},
        [OPT_EVAL_EVERY] = {"eval-every", 0, "K", "evaluate every K steps too (default: after the "
                            "last only;\nwith --target-loss, every steps/20)"},
        [OPT_SET] = {"set", 0, "section.key=value", "override for every variant (repeatable)"},
        [OPT_OUT] = {"out", 0, "DIR", "the report folder (default out/ab-YYYYmmdd-HHMMSS)"},
        [OPT_PLUGIN_PATH] = GB_CLI_OPTION_PLUGIN_PATH,
    },
    .notes =
        "With config files only (A.ini B.ini), each file is a variant named after it and the\n"
        "first is the baseline. The report folder gets summary.md, loss.svg, step_times.svg, and\n"
        "per variant its effective config and each run's metrics.jsonl and logs (docs/ab.md).\n"
        "Exit status: 0 every variant ran, 1 one failed, 2 bad arguments, 130 interrupted.\n",
};

enum { MAX_ITEMS = 64 };
/* The most steps a run takes: [run] steps' limit (2^43). */
#define MAX_STEPS (1LL << 43)

typedef struct ab_args {
    const char *configs[MAX_ITEMS];
    const char *specs[MAX_ITEMS];      /* --variant values */
    const char *sets[GB_CLI_MAX_SETS];
    int n_configs, n_specs, n_sets;
    const char *baseline, *out, *plugin_path;
    int64_t steps, warmup, repeats, eval_every;
    double tolerance, target_loss;
} ab_args;

/* ---- arguments ----------------------------------------------------------------------- */

/* Option `flag`'s whole number from lo to hi into *out: 0, or 2 after a usage error. */
static int parse_count(const char *flag, const char *text, int64_t lo, int64_t hi,
                       int64_t *out)
{
    unsigned long long n = 0;
    if (gb_cli_parse_count("ab", flag, text, (unsigned long long)lo, (unsigned long long)hi,
                           &n))
        return 2;
    *out = (int64_t)n;
    return 0;
}

/* A finite number, at least 0, into *out: 0, or -1. */
static int parse_nonnegative(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= 0.0) || isinf(v))
        return -1;
    *out = v;
    return 0;
}

/* One option with its value into a: 0, or the exit status of a usage error. */
static int parse_option(int opt, const char *v, ab_args *a)
{
    switch (opt) {
    case OPT_VARIANT:
        return gb_cli_append("ab", "--variant options", a->specs, &a->n_specs, MAX_ITEMS, v);
    case OPT_SET:
        return gb_cli_append("ab", "--set options", a->sets, &a->n_sets, GB_CLI_MAX_SETS, v);
    case OPT_BASELINE:
        a->baseline = v;
        return 0;
    case OPT_OUT:
        a->out = v;
        return 0;
    case OPT_PLUGIN_PATH:
        a->plugin_path = v;
        return 0;
    case OPT_STEPS:
        return parse_count("--steps", v, 1, MAX_STEPS, &a->steps);
    case OPT_WARMUP:
        return parse_count("--warmup", v, 0, MAX_STEPS, &a->warmup);
    case OPT_REPEATS:
        return parse_count("--repeats", v, 1, GB_AB_MAX_REPEATS, &a->repeats);
    case OPT_EVAL_EVERY:
        return parse_count("--eval-every", v, 1, MAX_STEPS, &a->eval_every);
    case OPT_TARGET_LOSS:
        return parse_nonnegative(v, &a->target_loss)
                   ? gb_cli_usage_error("ab", "--target-loss %s: expected a loss, 0 or more", v)
                   : 0;
    default: /* OPT_TOLERANCE */
        return parse_nonnegative(v, &a->tolerance)
                   ? gb_cli_usage_error("ab", "--tolerance %s: expected a number, 0 or more", v)
                   : 0;
    }
}

/* The command line into a: 0, -1 after --help, or the exit status of a usage error. */
static int parse_args(int argc, char **argv, ab_args *a)
{
    *a = (ab_args){.steps = 50, .warmup = 5, .repeats = 3, .tolerance = 1e-4,
                   .target_loss = NAN};
    gb_cli_parser p;
    gb_cli_begin(&p, &gb_cli_ab_spec, argc, argv);
    for (int opt, rc; (opt = gb_cli_next(&p)) != GB_CLI_END;) {
        if (opt == GB_CLI_EXIT)
            return p.status ? p.status : -1;
        rc = opt == GB_CLI_OPERAND ? gb_cli_append("ab", "config files", a->configs,
                                                   &a->n_configs, MAX_ITEMS, p.value)
                                   : parse_option(opt, p.value, a);
        if (rc)
            return rc;
    }
    if (a->n_configs == 0)
        return gb_cli_usage_error("ab", "missing CONFIG (an INI file such as "
                                  "examples/shakespeare_char.ini)");
    if (a->n_specs && a->n_configs > 1)
        return gb_cli_usage_error("ab", "give one CONFIG with --variant, or only config "
                                  "files (`gearbox ab A.ini B.ini`)");
    if (a->n_specs + (a->n_specs ? 0 : a->n_configs) < 2)
        return gb_cli_usage_error("ab", "a comparison needs two or more variants (--variant "
                                  "NAME:section.key=value, or two config files)");
    if (a->warmup >= a->steps)
        return gb_cli_usage_error("ab", "--warmup %lld must be below --steps %lld, so that "
                                  "some steps are timed", (long long)a->warmup,
                                  (long long)a->steps);
    if (!isnan(a->target_loss) && a->eval_every == 0)
        a->eval_every = a->steps >= 20 ? a->steps / 20 : 1;
    return 0;
}

/* ---- variants ------------------------------------------------------------------------ */

static int valid_name(const char *name, size_t len)
{
    if (len == 0 || len >= GB_AB_NAME_MAX || (name[0] == '.'))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.",
                    name[i]))
            return 0;
    return 1;
}

/* Splits "a=1,b=2" into overrides; a piece without '=' belongs to the previous value. */
static int split_overrides(const char *list, gb_ab_variant *v)
{
    size_t pieces = 1;
    for (const char *c = list; *c; c++)
        pieces += *c == ',';
    v->overrides = calloc(pieces, sizeof *v->overrides);
    if (!v->overrides)
        return -1;
    for (const char *p = list; *list && p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int joins = v->n_overrides > 0 && !memchr(p, '=', len);
        char *prev = joins ? v->overrides[v->n_overrides - 1] : NULL;
        size_t prev_len = prev ? strlen(prev) + 1 : 0;
        char *s = malloc(prev_len + len + 1);
        if (!s)
            return -1;
        snprintf(s, prev_len + len + 1, "%s%s%.*s", prev ? prev : "", prev ? "," : "",
                 (int)len, p);
        free(prev);
        v->overrides[joins ? v->n_overrides - 1 : v->n_overrides++] = s;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

static int variant_from_spec(const char *spec, const char *config, gb_ab_variant *v)
{
    const char *colon = strchr(spec, ':');
    if (!colon)
        return gb_cli_usage_error("ab", "--variant %s: expected NAME:section.key=value[,...] "
                                  "(NAME: for no overrides)", spec);
    if (!valid_name(spec, (size_t)(colon - spec)))
        return gb_cli_usage_error("ab", "--variant %s: a name is 1-47 letters, digits, '_', "
                                  "'-' or '.' (it names the variant's folder)", spec);
    snprintf(v->name, sizeof v->name, "%.*s", (int)(colon - spec), spec);
    v->config = config;
    if (split_overrides(colon + 1, v))
        return gb_cli_usage_error("ab", "out of memory");
    return 0;
}

static int name_taken(const gb_ab_variant *variants, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(variants[i].name, name) == 0)
            return 1;
    return 0;
}

/* "runs/fast.ini" -> "fast", made unique among the first n variants. */
static void name_from_file(const char *path, gb_ab_variant *variants, int n)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t len = strcspn(base, ".");
    char name[GB_AB_NAME_MAX], unique[GB_AB_NAME_MAX];
    snprintf(name, sizeof name, "%.*s", (int)(len ? len : strlen(base)), base);
    for (char *c = name; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", *c))
            *c = '_';
    snprintf(unique, sizeof unique, "%s", *name ? name : "config");
    for (int k = 2; name_taken(variants, n, unique); k++)
        snprintf(unique, sizeof unique, "%.30s-%d", name, k);
    memcpy(variants[n].name, unique, sizeof unique);
}

static int choose_baseline(const ab_args *a, const gb_ab_plan *p)
{
    for (int i = 0; a->baseline && i < p->n_variants; i++)
        if (strcmp(p->variants[i].name, a->baseline) == 0)
            return i;
    if (a->baseline)
        return -1;
    for (int i = 0; i < p->n_variants; i++)
        if (p->variants[i].n_overrides == 0)
            return i;
    return 0;
}

static int make_variants(const ab_args *a, gb_ab_plan *p)
{
    p->n_variants = a->n_specs ? a->n_specs : a->n_configs;
    p->variants = calloc((size_t)p->n_variants, sizeof *p->variants);
    if (!p->variants)
        return gb_cli_usage_error("ab", "out of memory");
    for (int i = 0; i < p->n_variants; i++) {
        if (!a->n_specs) {
            p->variants[i].config = a->configs[i];
            name_from_file(a->configs[i], p->variants, i);
        } else if (variant_from_spec(a->specs[i], a->configs[0], &p->variants[i])) {
            return 2;
        }
        for (int k = 0; k < i; k++)
            if (strcmp(p->variants[k].name, p->variants[i].name) == 0)
                return gb_cli_usage_error("ab", "two variants are called %s",
                                          p->variants[i].name);
    }
    p->baseline = choose_baseline(a, p);
    if (p->baseline < 0)
        return gb_cli_usage_error("ab", "--baseline %s: no variant has that name", a->baseline);
    return 0;
}

/* The key of gb_ab_fixed_keys that "section.key=value" sets, or NULL. */
/* Whether `assignment` ("section.key=value") sets `key` ("section.key"). */
static int assigns(const char *assignment, const char *key)
{
    size_t len = strlen(key);
    return strncmp(assignment, key, len) == 0 && assignment[len] == '=';
}

static const char *fixed_key(const char *assignment)
{
    for (int i = 0; i < GB_AB_N_FIXED; i++)
        if (assigns(assignment, gb_ab_fixed_keys[i]))
            return gb_ab_fixed_keys[i];
    return NULL;
}

/* An override of what every run needs would be replaced without a word; refuse it.
 * `where` says which flag gave it. */
static void report_fixed_key(const char *where, const char *assignment, const gb_ab_plan *p,
                             gb_diag *diag)
{
    const char *key = fixed_key(assignment);
    if (key)
        gb_diag_add(diag, "%s%s: `gearbox ab` sets %s for every run itself (run.steps from "
                    "--steps, now %lld; run.eval_every from --eval-every; one logged step "
                    "each, no checkpoints, an out_dir per run); leave it out", where,
                    assignment, key, (long long)p->steps);
}

/* The steps `[run] threads = auto` may spend on its first trial (engine/threads_auto.h:
 * 16 in blocks, 10 more where fewer threads looked faster), some of them on fewer; on
 * more than two cores a smaller team that wins brings another trial at once. */
#define AUTO_TRIAL_STEPS 26

/* Whether a --set for every variant or the variant's own override names run.threads. */
static int names_threads(const gb_ab_plan *p, const gb_ab_variant *v)
{
    int n = p->n_sets + v->n_overrides;
    for (int i = 0; i < n; i++) {
        const char *set = i < p->n_sets ? p->sets[i] : v->overrides[i - p->n_sets];
        if (assigns(set, "run.threads"))
            return 1;
    }
    return 0;
}

/* `threads = auto` (the default) changes the team during a run, and its trials' steps on
 * fewer threads would be timed, differently in each run: a variant whose config leaves it
 * there runs a fixed team of every online CPU instead. One that asks for auto with --set
 * keeps it (it may be what is compared), with a note when --warmup leaves its first trial
 * timed. */
static void choose_team(const gb_ab_plan *p, gb_ab_variant *v, const gb_config *cfg)
{
    const char *threads = cfg ? gb_config_get(cfg, "run", "threads") : NULL;
    if (threads && strcmp(threads, "auto") != 0)
        return;
    if (!names_threads(p, v)) {
        v->fixed_team = 1;
        return;
    }
    if (p->warmup < AUTO_TRIAL_STEPS)
        fprintf(stderr, "gearbox ab: note: variant %s runs [run] threads = auto, whose first "
                "trial (up to %d steps) runs some steps on fewer threads; with --warmup %lld "
                "they are timed: use --warmup %d or more, or a fixed run.threads, for steady "
                "timings\n", v->name, AUTO_TRIAL_STEPS, (long long)p->warmup,
                AUTO_TRIAL_STEPS);
}

/* Loads each variant's config and applies its overrides, as `gearbox train` will, so that
 * a missing file or a malformed override is reported before any run. */
static int validate_variants(const gb_ab_plan *p)
{
    gb_diag diag = {0};
    for (int k = 0; k < p->n_sets; k++)
        report_fixed_key("--set ", p->sets[k], p, &diag);
    for (int i = 0; i < p->n_variants; i++) {
        gb_ab_variant *v = &p->variants[i];
        char where[GB_AB_NAME_MAX + 16];
        snprintf(where, sizeof where, "--variant %s: ", v->name);
        for (int k = 0; k < v->n_overrides; k++)
            report_fixed_key(where, v->overrides[k], p, &diag);
        gb_config *cfg = gb_config_load(v->config, &diag);
        for (int k = 0; cfg && k < p->n_sets; k++)
            gb_config_set(cfg, p->sets[k], &diag);
        for (int k = 0; cfg && k < v->n_overrides; k++)
            gb_config_set(cfg, v->overrides[k], &diag);
        choose_team(p, v, cfg);
        gb_config_free(cfg);
    }
    gb_diag_print(&diag, stderr);
    int problems = diag.count;
    gb_diag_clear(&diag);
    return problems ? 2 : 0;
}

static void free_variants(gb_ab_plan *p)
{
    for (int i = 0; p->variants && i < p->n_variants; i++) {
        gb_ab_variant *v = &p->variants[i];
        for (int k = 0; k < v->n_overrides; k++)
            free(v->overrides[k]);
        for (int r = 0; v->runs && r < p->repeats; r++)
            gb_ab_run_free(&v->runs[r]);
        free(v->overrides);
        free(v->effective);
        free(v->failure);
        free(v->runs);
    }
    free(p->variants);
}

/* ---- the report folder and the command line ------------------------------------------ */

static char *prepare_out_dir(const char *requested)
{
    char fallback[64];
    if (!requested) {
        time_t now = time(NULL);
        strftime(fallback, sizeof fallback, "out/ab-%Y%m%d-%H%M%S", localtime(&now));
        requested = fallback;
    }
    if (gb_make_dirs(requested) != 0) {
        fprintf(stderr, "gearbox ab: cannot create %s: %s\n", requested, strerror(errno));
        return NULL;
    }
    return realpath(requested, NULL);
}

/* The command as typed, quoted for a POSIX shell where needed. */
static char *command_line(int argc, char **argv)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fputs("gearbox", f);
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                            "_-./:=,@%+") == strlen(s)) {
            fprintf(f, " %s", s);
            continue;
        }
        fputs(" '", f);
        for (; *s; s++) {
            if (*s == '\'')
                fputs("'\\''", f);
            else
                fputc(*s, f);
        }
        fputc('\'', f);
    }
    fclose(f);
    return text;
}

int gb_cmd_ab(int argc, char **argv)
{
    ab_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "gearbox ab: cannot find this program's file: %s\n", strerror(errno));
        return 1;
    }
    exe[n] = '\0';
    gb_ab_plan p = {.exe = exe, .plugin_path = a.plugin_path, .sets = a.sets,
                    .n_sets = a.n_sets, .steps = a.steps, .warmup = a.warmup,
                    .repeats = (int)a.repeats, .tolerance = a.tolerance,
                    .eval_every = a.eval_every, .target_loss = a.target_loss};
    char *out_dir = NULL, *command = NULL;
    rc = make_variants(&a, &p);
    if (!rc)
        rc = validate_variants(&p);
    if (!rc && !(out_dir = prepare_out_dir(a.out)))
        rc = 1;
    if (!rc) {
        p.out_dir = out_dir;
        p.command = command = command_line(argc, argv);
        printf("ab: %d variants, baseline %s; %lld steps per run (first %lld not timed), "
               "%d repeats; report in %s\n", p.n_variants, p.variants[p.baseline].name,
               (long long)p.steps, (long long)p.warmup, p.repeats, out_dir);
        fflush(stdout);
        int failed = gb_ab_execute(&p);
        int report_failed = gb_ab_report(&p, stdout) != 0;
        rc = p.interrupted ? 130 : (failed || report_failed) ? 1 : 0;
    }
    free_variants(&p);
    free(out_dir);
    free(command);
    return rc;
}
