/* Planning without allocating: gb_model_plan must give, byte for byte, the plan that
 * gb_model_create allocates, for several batches, for training and sampling models (the
 * batch_size = auto search rests on it). Also the new settings behind it: [run]
 * memory_budget's byte syntax, [data] batch_size = auto and [data] tokens_per_step. */
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "runtime.h"
#include "settings.h"

static int failures;

static void check(int ok, const char *fmt, const char *detail)
{
    printf("%s: ", ok ? "ok" : "FAIL");
    printf(fmt, detail);
    putchar('\n');
    failures += !ok;
}

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
    check(ok, "gb_model_plan equals gb_model_create's plan (%s)", what);
    if (!ok) {
        print_plan("planned", &planned);
        print_plan("created", &created);
    }
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
    check(started, "%s", "runtime starts from the build tree's plugins");
    if (started) {
        gb_model_config mc = {.n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = 16,
                              .vocab_size = 65};
        const int64_t batches[] = {1, 2, 3, 5, 8};
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++)
            plan_matches_creation(&rt, &mc, batches[i], 1);
        plan_matches_creation(&rt, &mc, 4, 0);
        gb_memory_plan a, b;
        check(gb_model_plan(&rt, &mc, 4, 1, &a) == 0 && gb_model_plan(&rt, &mc, 5, 1, &b) == 0 &&
              gb_memory_plan_total(&b) > gb_memory_plan_total(&a),
              "%s", "the plan grows with the batch");
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
        check(ok, "memory_budget = %s", good[i].text);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "[run]\nmemory_budget = %s\n", bad[i]);
        check(resolve(text, &s) == 1, "memory_budget = %s is refused", bad[i]);
    }
}

static void batch_settings(void)
{
    gb_settings s;
    check(resolve("[data]\nbatch_size = auto\n", &s) == 0 && s.batch_auto && s.batch_size == 1,
          "%s", "batch_size = auto is accepted (batch 1 until chosen)");
    check(resolve("[data]\nbatch_size = automatic\n", &s) == 1, "%s",
          "batch_size = automatic is refused");
    check(resolve("[model]\nblock_size = 16\n[data]\nbatch_size = 4\ntokens_per_step = 256\n",
                  &s) == 0 && s.gradient_accumulation_steps == 4,
          "%s", "tokens_per_step 256 = 16 sequences of 16 tokens: accumulation 4 of batch 4");
    check(resolve("[model]\nblock_size = 16\n[data]\nbatch_size = 3\ntokens_per_step = 256\n",
                  &s) == 1, "%s", "16 sequences per step do not split into batches of 3");
    check(resolve("[model]\nblock_size = 16\n[data]\nbatch_size = auto\ntokens_per_step = 100\n",
                  &s) == 1, "%s", "tokens_per_step must be a multiple of block_size");
}

int main(void)
{
    planning();
    memory_budgets();
    batch_settings();
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
