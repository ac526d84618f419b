/* attn/cudnn on the CPU: what it decides without a GPU (plugins/attn/cudnn/sdpa_shapes.h)
 * and its refusal of the cpu device.
 *
 * - eligibility: each rule of sdpa_eligible() on both sides of its bound (dtype, cuDNN
 *   version, compute capability, head_dim, T), every refusal naming a plugin to use
 *   instead, and reasons that fit a tiny buffer;
 * - layouts: a transposed operand (K^T, V^T, P^T) read through the dims and strides handed
 *   to cuDNN addresses exactly the element the view holds, for the core's packed views and
 *   contiguous ones;
 * - plan keys, workspace offsets, the mask's fill value and the alignment check;
 * - the engine order: deterministic engines first, then those of unknown determinism
 *   (kept, so a cuDNN that reports no notes still gets a plan), never nondeterministic
 *   ones; and the plan cache's replacement, which never evicts a plan fetched within the
 *   cache's size of lookups (memory()'s forward and backward, a call's own plan);
 * - with the built plugin's path as argument: its descriptor, and create() on the cpu
 *   device failing with GB_ERR_UNSUPPORTED and a message naming attn/cudnn.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "sdpa_shapes.h"
#include "test_host.h"

static gb_attn_problem problem(gb_dtype dtype, int64_t T, int64_t D)
{
    gb_attn_problem p = {.struct_size = sizeof p, .batch = 2, .heads = 3, .seq_len = T,
                         .head_dim = D, .dtype = dtype, .causal = 1};
    return p;
}

/* eligible() must say yes, or no with a reason holding `needle` and naming a plugin. */
static void expect(const sdpa_env *env, gb_attn_problem p, int want, const char *needle)
{
    char reason[512] = "";
    int got = sdpa_eligible(env, &p, reason, sizeof reason);
    check_that(got == want, "cuDNN %lld, cc %d.%d, %s T %lld D %lld: eligible %d, want %d (%s)",
               (long long)env->cudnn_version, (int)env->cc_major, (int)env->cc_minor,
               gb_dtype_name(p.dtype), (long long)p.seq_len, (long long)p.head_dim, got, want,
               reason);
    if (!want) {
        check_that(strstr(reason, needle), "reason \"%s\" should say \"%s\"", reason, needle);
        check_that(strstr(reason, "attn/"), "reason \"%s\" should name a plugin to use instead",
                   reason);
    }
}

static void check_eligibility(void)
{
    const sdpa_env hopper = {91900, 9, 0}, ampere = {91900, 8, 0}, turing = {91900, 7, 5};
    const sdpa_env old_9 = {91500, 9, 0}, fixed_9 = {91501, 9, 0};
    expect(&hopper, problem(GB_BF16, 128, 64), 1, "");
    expect(&hopper, problem(GB_F16, 1024, 128), 1, "");
    expect(&hopper, problem(GB_F32, 128, 64), 0, "16-bit");
    expect(&hopper, problem(GB_I32, 128, 64), 0, "i32");
    expect(&hopper, problem(GB_BF16, 128, 12), 0, "multiple of 8");
    expect(&hopper, problem(GB_BF16, 128, 256), 1, "");
    expect(&hopper, problem(GB_BF16, 128, 264), 0, "<= 256");
    expect(&ampere, problem(GB_BF16, 128, 128), 1, "");
    expect(&ampere, problem(GB_BF16, 128, 136), 0, "<= 128");
    expect(&turing, problem(GB_BF16, 128, 64), 0, "8.0");
    expect(&(sdpa_env){8907, 9, 0}, problem(GB_BF16, 128, 64), 0, "9.0");
    expect(&(sdpa_env){91000, 9, 0}, problem(GB_BF16, 128, 64), 0, "9.10.0");
    expect(&(sdpa_env){91001, 9, 0}, problem(GB_BF16, 128, 64), 0, "9.10.1");
    expect(&(sdpa_env){91002, 9, 0}, problem(GB_BF16, 128, 64), 1, "");
    expect(&hopper, problem(GB_BF16, 1, 64), 0, "T = 1");
    expect(&old_9, problem(GB_BF16, 100, 64), 0, "multiple of 128");
    expect(&old_9, problem(GB_BF16, 256, 64), 1, "");
    expect(&fixed_9, problem(GB_BF16, 100, 64), 1, "");
    expect(&hopper, problem(GB_BF16, 7, 8), 1, "");

    gb_attn_problem p = problem(GB_F32, 128, 64);
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    sdpa_eligible(&hopper, &p, tiny, sizeof tiny);
    check_that(memchr(tiny, '\0', sizeof tiny), "the reason overflowed an 8-byte buffer");
}

/* Offset (elements) of element `idx` through dims/strides `l`. */
static int64_t offset(const sdpa_layout *l, const int64_t idx[4])
{
    int64_t at = 0;
    for (int i = 0; i < 4; i++)
        at += idx[i] * l->strides[i];
    return at;
}

/* Through the transposed layout, element (b, h, j, i) must be the view's (b, h, i, j). */
static void check_transpose(const sdpa_layout *view, const char *what)
{
    const sdpa_layout t = sdpa_transposed(*view);
    check_that(t.dims[0] == view->dims[0] && t.dims[1] == view->dims[1] &&
                   t.dims[2] == view->dims[3] && t.dims[3] == view->dims[2],
               "%s: transposed dims", what);
    int64_t bad = 0;
    for (int64_t b = 0; b < view->dims[0]; b++)
        for (int64_t h = 0; h < view->dims[1]; h++)
            for (int64_t i = 0; i < view->dims[2]; i++)
                for (int64_t j = 0; j < view->dims[3]; j++) {
                    const int64_t v[4] = {b, h, i, j}, w[4] = {b, h, j, i};
                    bad += offset(view, v) != offset(&t, w);
                }
    check_that(bad == 0, "%s: %lld elements of the transposed layout miss the view's", what,
               (long long)bad);
}

static gb_tensor view_of(const gb_attn_problem *p, const int64_t strides[4])
{
    gb_tensor t = {.data = NULL, .dtype = p->dtype, .ndim = 4,
                   .shape = {p->batch, p->heads, p->seq_len, p->head_dim}};
    memcpy(t.stride, strides, sizeof t.stride);
    return t;
}

static void check_layouts(void)
{
    const gb_attn_problem p = problem(GB_BF16, 5, 8);
    int64_t qkv[4], out[4], flat[4];
    sdpa_core_strides(&p, qkv, out);
    sdpa_contiguous_strides(&p, flat);
    // the core's packed projection: q of (b, t, h) at b*T*3C + t*3C + h*D
    check_that(qkv[0] == 5 * 3 * 24 && qkv[1] == 8 && qkv[2] == 3 * 24 && qkv[3] == 1,
               "core q/k/v strides");
    check_that(out[0] == 5 * 24 && out[1] == 8 && out[2] == 24 && out[3] == 1, "core out strides");
    check_that(flat[0] == 3 * 5 * 8 && flat[1] == 5 * 8 && flat[2] == 8 && flat[3] == 1,
               "contiguous strides");

    const gb_tensor packed = view_of(&p, qkv), contiguous = view_of(&p, flat);
    const sdpa_layout lp = sdpa_view_layout(&packed), lc = sdpa_view_layout(&contiguous);
    check_that(memcmp(lp.strides, qkv, sizeof qkv) == 0 && lp.dims[2] == 5 && lp.dims[3] == 8,
               "a view's layout is its own dims and strides");
    check_transpose(&lp, "K^T of the packed projection");
    check_transpose(&lc, "K^T of a contiguous view");
    const sdpa_layout s = sdpa_scores(&p);
    check_transpose(&s, "P^T of the scores");

    const sdpa_layout rows = sdpa_row_stats(&p);
    check_that(rows.dims[2] == 5 && rows.dims[3] == 1 && rows.strides[0] == 15 &&
                   rows.strides[1] == 5 && rows.strides[2] == 1,
               "row statistics (B, H, T, 1)");
    check_that(fabsf(sdpa_scale(&(gb_attn_problem){.head_dim = 64}) - 0.125f) == 0.0f,
               "scale 1/sqrt(64)");
}

static void check_keys(void)
{
    const gb_attn_problem p = problem(GB_F16, 256, 64);
    int64_t qkv[4], out[4], strides[SDPA_VIEWS][4];
    sdpa_core_strides(&p, qkv, out);
    for (int i = 0; i < SDPA_VIEWS; i++)
        memcpy(strides[i], i == SDPA_O || i == SDPA_DO ? out : qkv, sizeof qkv);
    const sdpa_key planned = sdpa_planned_key(SDPA_BACKWARD, &p, 1);
    sdpa_key call = sdpa_make_key(SDPA_BACKWARD, &p, (const int64_t(*)[4])strides);
    check_that(memcmp(&planned, &call, sizeof call) == 0,
               "a backward call on the core's views must find the plan memory() built");
    const sdpa_key fwd = sdpa_planned_key(SDPA_FORWARD, &p, 1);
    call = sdpa_make_key(SDPA_FORWARD, &p, (const int64_t(*)[4])strides);
    check_that(memcmp(&fwd, &call, sizeof call) == 0,
               "forward keys ignore the gradient views' strides");
    check_that(memcmp(&fwd, &planned, sizeof fwd) != 0, "forward and backward keys differ");
    const sdpa_key flat = sdpa_planned_key(SDPA_BACKWARD, &p, 0);
    check_that(memcmp(&planned, &flat, sizeof planned) != 0, "packed and contiguous keys differ");
    strides[SDPA_DK][2] += 8;
    call = sdpa_make_key(SDPA_BACKWARD, &p, (const int64_t(*)[4])strides);
    check_that(memcmp(&planned, &call, sizeof call) != 0,
               "a different dk stride needs its own plan");
}

static void check_workspace(void)
{
    const gb_attn_problem p = problem(GB_BF16, 128, 64);
    const int64_t rows = 2 * 3 * 128 * (int64_t)sizeof(float);
    check_that(sdpa_rowsum_offset(0) == 0 && sdpa_rowsum_offset(1) == 256 &&
                   sdpa_rowsum_offset(256) == 256 && sdpa_rowsum_offset(257) == 512,
               "rowsum offsets round up to 256 bytes");
    check_that(sdpa_workspace_bytes(&p, 0, 1000) == 1024 + rows, "backward needs scratch + rowsum");
    check_that(sdpa_workspace_bytes(&p, 1 << 20, 1000) == 1 << 20, "a larger forward scratch wins");
}

static void check_fill_and_alignment(void)
{
    check_that(sdpa_mask_fill(90500) == -FLT_MAX, "cuDNN < 9.10 masks with the lowest float");
    check_that(isinf(sdpa_mask_fill(91000)) && sdpa_mask_fill(91000) < 0,
               "cuDNN 9.10 masks with -inf");

    const gb_attn_problem p = problem(GB_BF16, 5, 8);
    int64_t qkv[4], out[4];
    sdpa_core_strides(&p, qkv, out);
    static _Alignas(64) uint16_t buffer[64];
    gb_tensor t = view_of(&p, qkv);
    char reason[256] = "";
    t.data = buffer;
    check_that(sdpa_view_aligned(&t, "q", reason, sizeof reason), "an aligned view: %s", reason);
    t.data = buffer + 1;
    check_that(!sdpa_view_aligned(&t, "k", reason, sizeof reason) && strstr(reason, "k is not"),
               "a misaligned k must be refused naming it: %s", reason);
    t.data = buffer;
    t.stride[2] = 12;
    check_that(!sdpa_view_aligned(&t, "v", reason, sizeof reason) && strstr(reason, "stride[2]"),
               "a row stride of 12 bf16 must be refused naming it: %s", reason);
    check_that(sdpa_buffer_aligned(buffer, "saved", reason, sizeof reason), "an aligned buffer");
    check_that(!sdpa_buffer_aligned((char *)buffer + 4, "saved", reason, sizeof reason) &&
                   strstr(reason, "saved is not"),
               "a misaligned saved buffer must be refused naming it: %s", reason);
}

static void expect_order(const int *determinism, int n, const int *want, int n_want,
                         const char *what)
{
    int order[16];
    const int got = sdpa_engine_order(determinism, n, order);
    int same = got == n_want;
    for (int i = 0; same && i < got; i++)
        same = order[i] == want[i];
    check_that(same, "%s: %d engines to try, want %d, in the order given", what, got, n_want);
}

static void check_engine_order(void)
{
    const int D = SDPA_DETERMINISTIC, N = SDPA_NONDETERMINISTIC, U = SDPA_NOTES_UNKNOWN;
    expect_order((const int[]){D, N, D}, 3, (const int[]){0, 2}, 2,
                 "deterministic ones in the heuristics' order, nondeterministic left out");
    expect_order((const int[]){U, U}, 2, (const int[]){0, 1}, 2,
                 "a cuDNN that reports no notes keeps every engine");
    expect_order((const int[]){U, N, D, U, D}, 5, (const int[]){2, 4, 0, 3}, 4,
                 "unknown notes after every deterministic engine");
    expect_order((const int[]){N, N}, 2, NULL, 0, "only nondeterministic engines: none");
    expect_order(NULL, 0, NULL, 0, "no engines offered");
}

/* A model of cuda.c's plan_for over sdpa_victim_slot: `slots` cache slots holding plan
 * ids; returns the slot of plan `id`, building it (into the victim) when absent. */
typedef struct cache_model {
    int ids[8];
    uint64_t last_use[8], lookups;
    int slots, builds;
} cache_model;

static int cache_lookup(cache_model *c, int id)
{
    const uint64_t now = ++c->lookups;
    for (int i = 0; i < c->slots; i++)
        if (c->last_use[i] && c->ids[i] == id) {
            c->last_use[i] = now;
            return i;
        }
    const int slot = sdpa_victim_slot(c->last_use, c->slots);
    c->ids[slot] = id;
    c->last_use[slot] = now;
    c->builds++;
    return slot;
}

static void check_plan_cache(void)
{
    check_that(sdpa_victim_slot((const uint64_t[]){5, 0, 3}, 3) == 1, "a free slot first");
    check_that(sdpa_victim_slot((const uint64_t[]){5, 2, 3}, 3) == 1,
               "else the least recently used");

    /* memory()'s lookups, forward then backward, for many problems through a small cache:
     * the forward plan just fetched must still be in its slot once backward is built (the
     * round-robin cache this replaced evicted it whenever forward sat in the next slot) */
    cache_model c = {.slots = 4};
    int evicted = 0;
    for (int problem = 0; problem < 40; problem++) {
        const int fwd = 2 * (problem % 7), bwd = fwd + 1;
        const int at = cache_lookup(&c, fwd);
        cache_lookup(&c, bwd);
        evicted += c.ids[at] != fwd;
    }
    check_that(evicted == 0, "building the backward plan evicted the forward plan just fetched "
               "%d times", evicted);

    /* any sequence: what each of the last slots - 1 lookups returned is still in place (a
     * call's plan after memory()'s four lookups, with 5 slots) */
    cache_model d = {.slots = 5};
    int history[200], slot_of[200], moved = 0;
    uint64_t state = 7;
    for (int i = 0; i < 200; i++) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        history[i] = (int)(state >> 33) % 9;
        slot_of[i] = cache_lookup(&d, history[i]);
        for (int back = 1; back < d.slots && back <= i; back++)
            moved += d.ids[slot_of[i - back]] != history[i - back];
    }
    check_that(moved == 0, "%d plans fetched within the last %d lookups were evicted", moved,
               d.slots - 1);
}

/* The built object: its descriptor, and create() refusing the cpu device. */
static void check_plugin(const char *path)
{
    void *handle = NULL;
    const gb_plugin_desc *desc = gb_test_open_plugin(path, &handle);
    if (!desc) {
        check_failures++;
        return;
    }
    check_failures += gb_test_check_descriptor(desc, GB_KIND_ATTN, "cudnn", GB_DEVICE_CUDA,
                                         sizeof(gb_attn_ops));
    check_that(desc->dtypes == (GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16)),
               "attn/cudnn declares bf16 and f16 only");
    const gb_attn_ops *ops = (const gb_attn_ops *)desc->ops;
    void *self = NULL;
    gb_test_clear_error();
    gb_status st = ops->create(gb_test_host(), NULL, gb_test_cpu_ctx(), &self);
    check_that(st == GB_ERR_UNSUPPORTED && !self, "create on the cpu device: status %d, want %d",
               (int)st, (int)GB_ERR_UNSUPPORTED);
    check_that(strstr(gb_test_last_error(), "attn/cudnn") &&
                   strstr(gb_test_last_error(), "cuda device only"),
               "the refusal should name attn/cudnn and the cuda device: \"%s\"",
               gb_test_last_error());
}

int main(int argc, char **argv)
{
    check_eligibility();
    check_layouts();
    check_keys();
    check_workspace();
    check_fill_and_alignment();
    check_engine_order();
    check_plan_cache();
    if (argc > 1)
        check_plugin(argv[1]);
    return check_exit("attn/cudnn's eligibility, layouts, plan keys, workspace, engine order, "
                      "plan cache and cpu refusal");
}
