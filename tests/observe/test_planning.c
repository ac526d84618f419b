/* Planning without allocating: gb_model_plan must give, byte for byte, the plan that
 * gb_model_create allocates, for several batches, for training and sampling models (the
 * batch_size = auto search rests on it). Also the new settings behind it: [run]
 * memory_budget's byte syntax, [data] batch_size = auto and [data] tokens_per_step. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "model.h"
#include "runtime.h"
#include "settings.h"

static void print_plan(const char *label, const gb_memory_plan *p)
{
    printf("  %-8s params %zu, grads %zu, optimizer %zu, activations %zu, workspace %zu\n",
           label, p->params, p->grads, p->optimizer, p->activations, p->workspace);
}

static void plan_matches_creation(gb_runtime *rt, const gb_model_config *mc, int64_t batch,
                                  int train)
{
    gb_memory_plan planned = {0}, created = {0};
    gb_model *m = NULL;
    int ok = gb_model_plan(rt, mc, batch, train, &planned) == 0 &&
             (m = gb_model_create(rt, mc, batch, train)) != NULL;
    if (m)
        created = gb_model_memory(m);
    gb_model_free(m);
    ok = ok && memcmp(&planned, &created, sizeof planned) == 0;
    char what[64];
    snprintf(what, sizeof what, "batch %lld, %s", (long long)batch, train ? "train" : "sample");
    check_that(ok, "gb_model_plan equals gb_model_create's plan (%s)", what);
    if (!ok) {
        print_plan("planned", &planned);
        print_plan("created", &created);
    }
}

/* [train] recompute: plans still equal creation, and the activations shrink by what the
 * recomputed buffers take: norm_gelu drops 6 of a block's 16 C-wide rows in each block but
 * keeps one shared set of 5 (ln1 and ln2 share); block keeps only one block's buffers
 * besides every block's output. */
static void recomputation_plans(gb_runtime *rt, const gb_model_config *base)
{
    const int64_t batch = 3, N = batch * base->block_size, C = base->n_embd, L = base->n_layer;
    gb_memory_plan plan[3];
    for (int r = 0; r < 3; r++) {
        gb_model_config mc = *base;
        mc.recompute = (gb_recompute)r;
        plan_matches_creation(rt, &mc, batch, 1);
        if (gb_model_plan(rt, &mc, batch, 1, &plan[r]))
            memset(&plan[r], 0, sizeof plan[r]);
    }
    size_t norm_gelu_saves = (size_t)((L * 6 - 5) * N * C) * sizeof(float);
    size_t block_saves_at_least = (size_t)((L - 1) * (15 * N * C + 4 * N)) * sizeof(float);
    check_that(plan[0].activations - plan[1].activations == norm_gelu_saves,
               "recompute = norm_gelu saves (6 L - 5) N C activations");
    check_that(plan[0].activations - plan[2].activations >= block_saves_at_least &&
               plan[2].activations < plan[1].activations,
               "recompute = block saves at least (L - 1) of a block's 15 N C + 4 N, more than "
               "norm_gelu");
    check_that(plan[0].params == plan[2].params && plan[0].workspace == plan[2].workspace,
               "recomputation changes only the activations");
}

static void planning(void)
{
    static const char text[] = "[run]\nthreads = 1\n[model]\nn_layer = 2\nn_head = 2\n"
                               "n_embd = 32\nblock_size = 16\nvocab_size = 65\n";
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load_string(text, "test", "/", &diag);
    gb_runtime rt = {0};
    int started = cfg && !gb_runtime_resolve(&rt, cfg, NULL, &diag) &&
                  !gb_runtime_start(&rt, &diag);
    gb_diag_print(&diag, stdout);
    gb_diag_clear(&diag);
    check_that(started, "runtime starts from the build tree's plugins");
    if (started) {
        gb_model_config mc = {.n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = 16,
                              .vocab_size = 65};
        const int64_t batches[] = {1, 2, 3, 5, 8};
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++)
            plan_matches_creation(&rt, &mc, batches[i], 1);
        plan_matches_creation(&rt, &mc, 4, 0);
        gb_memory_plan a, b;
        check_that(gb_model_plan(&rt, &mc, 4, 1, &a) == 0 &&
                       gb_model_plan(&rt, &mc, 5, 1, &b) == 0 &&
                       gb_memory_plan_total(&b) > gb_memory_plan_total(&a),
                   "the plan grows with the batch");
        recomputation_plans(&rt, &mc);
    }
    gb_runtime_free(&rt);
    gb_config_free(cfg);
}

/* Resolves the core settings of `text`; returns the number of problems. */
static int resolve(const char *text, gb_settings *s)
{
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load_string(text, "test", "/", &diag);
    int problems = cfg ? gb_settings_resolve(cfg, s, &diag) : 1;
    gb_diag_print(&diag, stdout);
    gb_diag_clear(&diag);
    gb_settings_free(s);
    gb_config_free(cfg);
    return problems;
}

static void memory_budgets(void)
{
    static const struct {
        const char *text;
        unsigned long long bytes;
    } good[] = {{"0", 0},
                {"1048576", 1048576},
                {"64K", 65536},
                {"512MiB", 512ull << 20},
                {"1.5GiB", 3ull << 29},
                {"2G", 2ull << 30},
                {"800MB", 800000000},
                {"1 TiB", 1ull << 40}};
    static const char *const bad[] = {"100k", "MiB", "-1", "1.5XB", "lots"};
    char text[128];
    gb_settings s;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(text, sizeof text, "[run]\nmemory_budget = %s\n", good[i].text);
        int ok = resolve(text, &s) == 0 && s.memory_budget == good[i].bytes;
        check_that(ok, "memory_budget = %s", good[i].text);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "[run]\nmemory_budget = %s\n", bad[i]);
        check_that(resolve(text, &s) == 1, "memory_budget = %s is refused", bad[i]);
    }
}

static void batch_settings(void)
{
    gb_settings s;
    check_that(resolve("[data]\nbatch_size = auto\n", &s) == 0 && s.batch_auto &&
                   s.batch_size == 1,
               "batch_size = auto is accepted (batch 1 until chosen)");
    check_that(resolve("[data]\nbatch_size = automatic\n", &s) == 1,
               "batch_size = automatic is refused");
    check_that(resolve("[model]\nblock_size = 16\n[data]\nbatch_size = 4\ntokens_per_step = 256\n",
                       &s) == 0 && s.gradient_accumulation_steps == 4,
               "tokens_per_step 256 = 16 sequences of 16 tokens: accumulation 4 of batch 4");
    check_that(resolve("[model]\nblock_size = 16\n[data]\nbatch_size = 3\ntokens_per_step = 256\n",
                       &s) == 1, "16 sequences per step do not split into batches of 3");
    check_that(resolve("[model]\nblock_size = 16\n[data]\nbatch_size = auto\n"
                       "tokens_per_step = 100\n", &s) == 1,
               "tokens_per_step must be a multiple of block_size");
}

int main(void)
{
    planning();
    memory_budgets();
    batch_settings();
    return check_exit("observe planning");
}
