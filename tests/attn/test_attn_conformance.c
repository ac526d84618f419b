/* Conformance of attention plugins against attn/math, the textbook reference.
 *
 * Usage: test_attn_conformance MATH.so PLUGIN.so[:key=value,...]...
 * Each PLUGIN argument is a module path, optionally followed by option overrides (an
 * enum by its choice's name), so one plugin can be run with several tile sizes. Every
 * plugin runs the same problems as attn/math on the same data: T = 1, 7, 63, 64, 65, 100
 * and 257, head_dim 8, 16, 32, 48, 64, 80 and 128, batch and heads 1 and more, causal and
 * not, on the core's packed views (q, k, v slices of a (B, T, 3, H, D) projection, out in
 * (B, T, H, D)) and on contiguous (B, H, T, D) ones. Checks, per plugin and problem:
 * - out, dq, dk and dv agree with attn/math elementwise: |got - want| <= 1e-5 + 1e-4 |want|;
 *   outputs, saved state and workspace start as NaN, so anything read unwritten shows;
 * - a second forward and backward give bit-identical results;
 * - causality: replacing keys and values after position s leaves out[0..s] bit-identical;
 * - saved and workspace bytes grow linearly in T (f(4T) - f(2T) = 2 (f(2T) - f(T)));
 * - eligibility answers and refusals of bad views come with a reason;
 * - an `isa` option (instruction set) never changes results: every choice this CPU runs
 *   gives the bits of the first;
 * - results do not depend on the thread count (1, 2 and 3 threads give the same bits),
 *   which these CPU plugins promise beyond the contract's "same thread count, same bits"
 *   (and which takes attn/flash through both ways it splits its backward pass).
 * A create() that answers GB_ERR_UNSUPPORTED to explicit options (say isa = avx512 on a
 * CPU without it) is reported as skipped, not failed.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/attn.h"
#include "test_host.h"

#define ATOL 1e-5
#define RTOL 1e-4
#define MAX_OPTIONS 16

static int failures;

/* One plugin instance under test. */
typedef struct attn_plugin {
    const char *label;          /* the command-line argument */
    const gb_plugin_desc *desc;
    const gb_attn_ops *ops;
    gb_value values[MAX_OPTIONS];
    gb_host host;               /* the test host, with this instance's thread count */
    void *handle, *self;
} attn_plugin;

typedef struct attn_case {
    int64_t B, H, T, D;
    int causal, packed;
} attn_case;

/* The tensors of one problem; q, k, v and dout are shared by every plugin's run. */
typedef struct attn_data {
    gb_attn_problem p;
    float *qkv, *dqkv, *o, *dout_buf;
    size_t n_qkv, n_out;
    gb_tensor q, k, v, out, dq, dk, dv, dout;
} attn_data;

/* A run's outputs gathered into contiguous (B, H, T, D) arrays. */
typedef struct attn_result {
    float *out, *dq, *dk, *dv;
} attn_result;

/* ---- buffers ------------------------------------------------------------------------- */

static float *floats(size_t n)
{
    float *x = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!x) {
        printf("FAIL: out of memory for %zu floats\n", n);
        exit(1);
    }
    return x;
}

static void fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

static uint64_t rng_state;

/* Uniform in [-1, 1) from xorshift64*. */
static float uniform(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1DULL;
    return (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static gb_tensor view(float *data, const attn_case *c, const int64_t stride[4])
{
    gb_tensor t = {.data = data, .dtype = GB_F32, .ndim = 4, .shape = {c->B, c->H, c->T, c->D}};
    memcpy(t.stride, stride, sizeof t.stride);
    return t;
}

static attn_data make_data(const attn_case *c, uint64_t seed)
{
    attn_data a = {
        .p = {.struct_size = sizeof(gb_attn_problem), .batch = c->B, .heads = c->H,
              .seq_len = c->T, .head_dim = c->D, .dtype = GB_F32, .causal = c->causal},
    };
    const int64_t C = c->H * c->D;
    a.n_qkv = (size_t)(c->B * c->T * 3 * C);
    a.n_out = (size_t)(c->B * c->T * C);
    a.qkv = floats(a.n_qkv);
    a.dqkv = floats(a.n_qkv);
    a.o = floats(a.n_out);
    a.dout_buf = floats(a.n_out);
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < a.n_qkv; i++)
        a.qkv[i] = uniform();
    for (size_t i = 0; i < a.n_out; i++)
        a.dout_buf[i] = uniform();
    int64_t s_qkv[4] = {c->T * 3 * C, c->D, 3 * C, 1}, s_out[4] = {c->T * C, c->D, C, 1};
    int64_t offset_k = C, offset_v = 2 * C;
    if (!c->packed) {
        const int64_t plain[4] = {c->H * c->T * c->D, c->T * c->D, c->D, 1};
        memcpy(s_qkv, plain, sizeof plain);
        memcpy(s_out, plain, sizeof plain);
        offset_k = c->B * c->H * c->T * c->D;
        offset_v = 2 * offset_k;
    }
    a.q = view(a.qkv, c, s_qkv);
    a.k = view(a.qkv + offset_k, c, s_qkv);
    a.v = view(a.qkv + offset_v, c, s_qkv);
    a.dq = view(a.dqkv, c, s_qkv);
    a.dk = view(a.dqkv + offset_k, c, s_qkv);
    a.dv = view(a.dqkv + offset_v, c, s_qkv);
    a.out = view(a.o, c, s_out);
    a.dout = view(a.dout_buf, c, s_out);
    return a;
}

static void free_data(attn_data *a)
{
    free(a->qkv);
    free(a->dqkv);
    free(a->o);
    free(a->dout_buf);
}

static float *element(const gb_tensor *t, int64_t b, int64_t h, int64_t s, int64_t d)
{
    return (float *)t->data + b * t->stride[0] + h * t->stride[1] + s * t->stride[2] + d;
}

/* A view copied into a contiguous (B, H, T, D) array. */
static float *gather(const gb_tensor *t)
{
    float *g = floats((size_t)(t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3]));
    size_t i = 0;
    for (int64_t b = 0; b < t->shape[0]; b++)
        for (int64_t h = 0; h < t->shape[1]; h++)
            for (int64_t s = 0; s < t->shape[2]; s++)
                for (int64_t d = 0; d < t->shape[3]; d++)
                    g[i++] = *element(t, b, h, s, d);
    return g;
}

static void free_result(attn_result *r)
{
    free(r->out);
    free(r->dq);
    free(r->dk);
    free(r->dv);
}

/* ---- running plugins ----------------------------------------------------------------- */

/* Forward and backward of `plugin` on `a`, everything it writes starting as NaN. Returns 1
 * with the outputs gathered into *r, or 0 after reporting a failure. */
static int run(const attn_plugin *plugin, attn_data *a, attn_result *r)
{
    size_t saved_bytes = 0, workspace_bytes = 0;
    gb_test_clear_error();
    if (plugin->ops->memory(plugin->self, &a->p, &saved_bytes, &workspace_bytes) != GB_OK) {
        printf("FAIL: %s: memory() failed: %s\n", plugin->label, gb_test_last_error());
        failures++;
        return 0;
    }
    float *saved = floats(saved_bytes / sizeof(float) + 1);
    float *workspace = floats(workspace_bytes / sizeof(float) + 1);
    fill_nan(saved, saved_bytes / sizeof(float) + 1);
    fill_nan(workspace, workspace_bytes / sizeof(float) + 1);
    fill_nan(a->o, a->n_out);
    fill_nan(a->dqkv, a->n_qkv);
    gb_status fwd = plugin->ops->forward(plugin->self, &a->p, a->out, a->q, a->k, a->v, saved,
                                         workspace);
    gb_status bwd = fwd != GB_OK ? fwd
                    : plugin->ops->backward(plugin->self, &a->p, a->dq, a->dk, a->dv, a->dout,
                                            a->q, a->k, a->v, a->out, saved, workspace);
    free(saved);
    free(workspace);
    if (fwd != GB_OK || bwd != GB_OK) {
        printf("FAIL: %s: %s failed: %s\n", plugin->label, fwd != GB_OK ? "forward" : "backward",
               gb_test_last_error());
        failures++;
        return 0;
    }
    *r = (attn_result){gather(&a->out), gather(&a->dq), gather(&a->dk), gather(&a->dv)};
    return 1;
}

/* Elementwise |got - want| <= ATOL + RTOL |want|; prints the largest absolute difference,
 * the largest relative one where |want| > ATOL (below, relative error means nothing)
 * and, on failure, the first element outside the tolerance. NaN is infinitely wrong. */
static void compare(const char *what, const float *got, const float *want, size_t n)
{
    double max_abs = 0.0, max_rel = 0.0;
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - (double)want[i]);
        diff = isnan(diff) ? INFINITY : diff;
        if (diff > ATOL + RTOL * fabs((double)want[i]) && bad++ == 0)
            first_bad = i;
        max_abs = fmax(max_abs, diff);
        if (fabs((double)want[i]) > ATOL)
            max_rel = fmax(max_rel, diff / fabs((double)want[i]));
    }
    printf("    %-3s max abs %.3e  max rel %.3e\n", what, max_abs, max_rel);
    if (bad) {
        printf("FAIL: %s: %zu of %zu values outside tolerance; first [%zu]: got %.9g, want "
               "%.9g\n", what, bad, n, first_bad, got[first_bad], want[first_bad]);
        failures++;
    }
}

static int same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

static int same_result(const attn_result *x, const attn_result *y, size_t n)
{
    return same_bits(x->out, y->out, n) && same_bits(x->dq, y->dq, n) &&
           same_bits(x->dk, y->dk, n) && same_bits(x->dv, y->dv, n);
}

/* Keys and values after s = (T-1)/2 replaced: out at 0..s must keep its bits. */
static void check_causality(const attn_plugin *plugin, const attn_case *c)
{
    attn_data a = make_data(c, 99);
    attn_data changed = make_data(c, 99);
    const int64_t s = (c->T - 1) / 2;
    rng_state = 12345;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t t = s + 1; t < c->T; t++)
                for (int64_t d = 0; d < c->D; d++) {
                    *element(&changed.k, b, h, t, d) = uniform();
                    *element(&changed.v, b, h, t, d) = uniform();
                }
    attn_result before, after;
    if (run(plugin, &a, &before) && run(plugin, &changed, &after)) {
        int kept = 1, moved = 0;
        size_t i = 0;
        for (int64_t bh = 0; bh < c->B * c->H; bh++)
            for (int64_t t = 0; t < c->T; t++, i += (size_t)c->D) {
                int same = same_bits(before.out + i, after.out + i, (size_t)c->D);
                kept &= t > s || same;
                moved |= t > s && !same;
            }
        printf("    causality (k, v after %lld do not reach out[0..%lld]): %s\n", (long long)s,
               (long long)s, kept ? "holds" : "violated  <-- FAIL");
        failures += !kept;
        if (c->T > 1 && !moved) {
            printf("FAIL: changing keys and values after %lld changed nothing\n", (long long)s);
            failures++;
        }
        free_result(&before);
        free_result(&after);
    }
    free_data(&a);
    free_data(&changed);
}

/* ---- plugins and their options ------------------------------------------------------- */

/* Index of `name` among an enum's '|'-separated choices, or -1. */
static int choice_index(const char *choices, const char *name)
{
    size_t len = strlen(name);
    int index = 0;
    for (const char *p = choices; p; index++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, name, len) == 0)
            return index;
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

/* Applies "key=value,key=value" to the values parallel to the schema. */
static int apply_options(attn_plugin *plugin, char *list)
{
    for (char *item = strtok(list, ","); item; item = strtok(NULL, ",")) {
        char *eq = strchr(item, '=');
        int index = eq ? (*eq = '\0', gb_test_option_index(plugin->desc, item)) : -1;
        if (index < 0) {
            printf("FAIL: %s: no option '%s'\n", plugin->label, item);
            return 0;
        }
        const gb_option *o = &plugin->desc->options[index];
        if (o->type == GB_OPT_ENUM)
            plugin->values[index].i = choice_index(o->choices, eq + 1);
        else if (o->type == GB_OPT_FLOAT)
            plugin->values[index].f = strtod(eq + 1, NULL);
        else
            plugin->values[index].i = strtoll(eq + 1, NULL, 0);
        if (o->type == GB_OPT_ENUM && plugin->values[index].i < 0) {
            printf("FAIL: %s: '%s' is not one of %s\n", plugin->label, eq + 1, o->choices);
            return 0;
        }
    }
    return 1;
}

/* Loads and creates the plugin named by `arg` (PATH[:key=value,...]) for `threads`
 * threads (0: the test host's). Returns 1 when created, 0 when skipped (unsupported
 * options here) and -1 on failure. The instance keeps a pointer to plugin->host. */
static int open_plugin(const char *arg, int threads, attn_plugin *plugin)
{
    static char copy[4096];
    snprintf(copy, sizeof copy, "%s", arg);
    char *colon = strchr(copy, ':');
    if (colon)
        *colon = '\0';
    memset(plugin, 0, sizeof *plugin);
    plugin->label = arg;
    plugin->desc = gb_test_open_plugin(copy, &plugin->handle);
    if (!plugin->desc)
        return -1;
    if (gb_test_check_descriptor(plugin->desc, GB_KIND_ATTN, plugin->desc->name, GB_DEVICE_CPU,
                                 sizeof(gb_attn_ops)) != 0 ||
        plugin->desc->n_options > MAX_OPTIONS)
        return -1;
    plugin->ops = plugin->desc->ops;
    gb_test_default_values(plugin->desc, plugin->values);
    if (colon && !apply_options(plugin, colon + 1))
        return -1;
    plugin->host = *gb_test_host();
    if (threads > 0)
        plugin->host.num_threads = threads;
    gb_test_clear_error();
    gb_status st = plugin->ops->create(&plugin->host, plugin->values, gb_test_cpu_ctx(),
                                       &plugin->self);
    if (st == GB_ERR_UNSUPPORTED && colon) {
        printf("SKIP: %s: %s\n", arg, gb_test_last_error());
        return 0;
    }
    if (st != GB_OK) {
        printf("FAIL: %s: create failed: %s\n", arg, gb_test_last_error());
        return -1;
    }
    return 1;
}

static void close_plugin(attn_plugin *plugin)
{
    if (plugin->self)
        plugin->ops->destroy(plugin->self);
    if (plugin->handle)
        dlclose(plugin->handle);
    memset(plugin, 0, sizeof *plugin);
}

/* ---- the checks ---------------------------------------------------------------------- */

static void check_case(const attn_plugin *reference, const attn_plugin *plugins, int n_plugins,
                       const attn_case *c)
{
    printf("(B, H, T, D) = (%lld, %lld, %lld, %lld) %s, %s views\n", (long long)c->B,
           (long long)c->H, (long long)c->T, (long long)c->D,
           c->causal ? "causal" : "not causal", c->packed ? "packed" : "contiguous");
    attn_data a = make_data(c, (uint64_t)(c->T * 1000 + c->D));
    const size_t n = a.n_out;
    attn_result want;
    if (!run(reference, &a, &want)) {
        free_data(&a);
        return;
    }
    for (int i = 0; i < n_plugins; i++) {
        attn_result got, again;
        printf("  %s\n", plugins[i].label);
        if (!run(&plugins[i], &a, &got))
            continue;
        compare("out", got.out, want.out, n);
        compare("dq", got.dq, want.dq, n);
        compare("dk", got.dk, want.dk, n);
        compare("dv", got.dv, want.dv, n);
        if (run(&plugins[i], &a, &again)) {
            int same = same_result(&got, &again, n);
            printf("    run twice: %s\n", same ? "bit-identical" : "different  <-- FAIL");
            failures += !same;
            free_result(&again);
        }
        if (c->causal)
            check_causality(&plugins[i], c);
        free_result(&got);
    }
    free_result(&want);
    free_data(&a);
}

static void check_memory(const attn_plugin *plugin)
{
    gb_attn_problem p = {.struct_size = sizeof p, .batch = 2, .heads = 3, .head_dim = 64,
                         .dtype = GB_F32, .causal = 1};
    size_t saved[3], workspace[3];
    for (int i = 0; i < 3; i++) {
        p.seq_len = 1024 << i;
        if (plugin->ops->memory(plugin->self, &p, &saved[i], &workspace[i]) != GB_OK) {
            printf("FAIL: %s: memory() failed at T = %lld\n", plugin->label,
                   (long long)p.seq_len);
            failures++;
            return;
        }
    }
    int linear = saved[2] - saved[1] == 2 * (saved[1] - saved[0]) &&
                 workspace[2] - workspace[1] == 2 * (workspace[1] - workspace[0]);
    printf("  %s: saved %zu, %zu, %zu and workspace %zu, %zu, %zu bytes at T = 1024, 2048, "
           "4096: %s\n", plugin->label, saved[0], saved[1], saved[2], workspace[0],
           workspace[1], workspace[2], linear ? "linear in T" : "NOT linear in T  <-- FAIL");
    failures += !linear;
}

static void check_eligibility(const attn_plugin *plugin)
{
    gb_attn_problem p = {.struct_size = sizeof p, .batch = 2, .heads = 3, .seq_len = 7,
                         .head_dim = 8, .dtype = GB_F32, .causal = 1};
    char reason[512] = "";
    int yes = plugin->ops->eligible(plugin->self, &p, reason, sizeof reason);
    GB_TEST_CHECK(failures, yes, "%s: a small f32 causal problem is not eligible: %s",
                  plugin->label, reason);
    p.dtype = GB_BF16;
    GB_TEST_CHECK(failures, plugin->ops->eligible(plugin->self, &p, reason, sizeof reason),
                  "%s: a bf16 problem is not eligible: %s", plugin->label, reason);
    p.dtype = GB_I32;
    reason[0] = '\0';
    yes = plugin->ops->eligible(plugin->self, &p, reason, sizeof reason);
    printf("  %s: i32 not eligible: %s\n", plugin->label, reason);
    GB_TEST_CHECK(failures, !yes && strstr(reason, "i32"),
                  "%s: i32 answer %d, reason \"%s\" should name i32", plugin->label, yes,
                  reason);
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    plugin->ops->eligible(plugin->self, &p, tiny, sizeof tiny);
    GB_TEST_CHECK(failures, memchr(tiny, '\0', sizeof tiny) != NULL,
                  "%s: reason overflowed an 8-byte buffer", plugin->label);
}

static void check_refusals(const attn_plugin *plugin)
{
    const attn_case c = {1, 2, 5, 8, 1, 1};
    attn_data a = make_data(&c, 5);
    float saved[1024], workspace[1 << 16];
    size_t saved_bytes, workspace_bytes;
    plugin->ops->memory(plugin->self, &a.p, &saved_bytes, &workspace_bytes);
    GB_TEST_CHECK(failures, saved_bytes <= sizeof saved && workspace_bytes <= sizeof workspace,
                  "%s: a (1, 2, 5, 8) problem needs %zu + %zu bytes", plugin->label,
                  saved_bytes, workspace_bytes);
    a.k.stride[3] = 2;
    gb_test_clear_error();
    gb_status st = plugin->ops->forward(plugin->self, &a.p, a.out, a.q, a.k, a.v, saved,
                                        workspace);
    GB_TEST_CHECK(failures, st == GB_ERR_UNSUPPORTED && strstr(gb_test_last_error(), "stride"),
                  "%s: k.stride[3] = 2 gave status %d, message \"%s\"", plugin->label, st,
                  gb_test_last_error());
    a.k.stride[3] = 1;
    a.dv.shape[2] = 4;
    gb_test_clear_error();
    st = plugin->ops->backward(plugin->self, &a.p, a.dq, a.dk, a.dv, a.dout, a.q, a.k, a.v,
                               a.out, saved, workspace);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && strstr(gb_test_last_error(), "dv"),
                  "%s: a wrong dv shape gave status %d, message \"%s\"", plugin->label, st,
                  gb_test_last_error());
    a.dv.shape[2] = 5;
    a.p.dtype = GB_I32;
    st = plugin->ops->forward(plugin->self, &a.p, a.out, a.q, a.k, a.v, saved, workspace);
    GB_TEST_CHECK(failures, st == GB_ERR_UNSUPPORTED, "%s: an i32 forward gave status %d",
                  plugin->label, st);
    free_data(&a);
}

/* Runs each (argument, thread count) variant on two problems and checks that all give
 * the bits of the first variant. Variants this CPU cannot run are skipped. */
static void check_same_bits(char *const *args, const int *threads, int n)
{
    static const attn_case cases[] = {{1, 3, 100, 48, 1, 1}, {2, 1, 257, 80, 0, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        attn_data a = make_data(&cases[k], 3 + k);
        attn_result base;
        int have_base = 0;
        for (int i = 0; i < n; i++) {
            attn_plugin plugin;
            attn_result r;
            if (open_plugin(args[i], threads[i], &plugin) != 1) {
                close_plugin(&plugin);
                continue;
            }
            if (run(&plugin, &a, &r)) {
                int same = !have_base || same_result(&base, &r, a.n_out);
                printf("  %s, %d thread(s), (B, H, T, D) = (%lld, %lld, %lld, %lld): %s\n",
                       args[i], plugin.host.num_threads, (long long)cases[k].B,
                       (long long)cases[k].H, (long long)cases[k].T, (long long)cases[k].D,
                       !have_base ? "the reference bits" : same ? "bit-identical"
                                                             : "different  <-- FAIL");
                failures += !same;
                if (have_base)
                    free_result(&r);
                else
                    base = r, have_base = 1;
            }
            close_plugin(&plugin);
        }
        if (have_base)
            free_result(&base);
        free_data(&a);
    }
}

/* Every choice of an `isa` option, at the test host's thread count. */
static void check_isa_choices(const char *path)
{
    attn_plugin first;
    char choices[256] = "";
    if (open_plugin(path, 0, &first) == 1) {
        int index = gb_test_option_index(first.desc, "isa");
        if (index >= 0)
            snprintf(choices, sizeof choices, "%s", first.desc->options[index].choices);
    }
    close_plugin(&first);
    char args[8][4200], *argv[8];
    int threads[8] = {0}, n = 0;
    for (const char *p = choices[0] ? choices : NULL; p && n < 8; n++) {
        const char *bar = strchr(p, '|');
        snprintf(args[n], sizeof args[n], "%s:isa=%.*s", path,
                 (int)(bar ? bar - p : (long)strlen(p)), p);
        argv[n] = args[n];
        p = bar ? bar + 1 : NULL;
    }
    if (n)
        check_same_bits(argv, threads, n);
}

/* 1, 2 and 3 threads. */
static void check_thread_counts(const char *arg)
{
    char *args[3] = {(char *)arg, (char *)arg, (char *)arg};
    const int threads[3] = {1, 2, 3};
    check_same_bits(args, threads, 3);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MATH.so PLUGIN.so[:key=value,...]...\n", argv[0]);
        return 2;
    }
    attn_plugin reference;
    if (open_plugin(argv[1], 0, &reference) != 1 || strcmp(reference.desc->name, "math") != 0) {
        printf("FAIL: the first argument must be attn/math\n");
        return 1;
    }
    attn_plugin *plugins = calloc((size_t)argc, sizeof *plugins);
    int n = 0;
    for (int i = 2; i < argc; i++) {
        int opened = open_plugin(argv[i], 0, &plugins[n]);
        failures += opened < 0;
        if (opened > 0)
            n++;
        else
            close_plugin(&plugins[n]);
    }

    printf("== eligibility, memory and refusals\n");
    for (int i = 0; i < n; i++) {
        check_eligibility(&plugins[i]);
        check_memory(&plugins[i]);
        check_refusals(&plugins[i]);
    }

    printf("== against attn/math (|got - want| <= %g + %g |want|)\n", ATOL, RTOL);
    static const attn_case cases[] = {
        {1, 1, 1, 8, 1, 1},     {1, 1, 1, 64, 0, 0},    {2, 3, 7, 16, 1, 1},
        {2, 3, 7, 8, 0, 0},     {1, 2, 63, 32, 1, 1},   {2, 1, 63, 80, 0, 1},
        {2, 2, 64, 48, 1, 0},   {1, 3, 64, 64, 1, 1},   {1, 3, 65, 64, 1, 1},
        {2, 2, 65, 16, 0, 1},   {1, 2, 100, 128, 1, 1}, {2, 2, 100, 80, 1, 0},
        {1, 1, 257, 8, 0, 0},   {2, 2, 257, 64, 1, 1},  {1, 2, 257, 48, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&reference, plugins, n, &cases[i]);

    printf("== instruction-set choices and thread counts: the same bits\n");
    for (int i = 2; i < argc; i++) {
        if (!strchr(argv[i], ':'))
            check_isa_choices(argv[i]);
        check_thread_counts(argv[i]);
    }

    for (int i = 0; i < n; i++)
        close_plugin(&plugins[i]);
    close_plugin(&reference);
    free(plugins);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
