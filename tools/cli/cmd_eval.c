/* `gearbox eval`: a checkpoint's validation loss over its config's data, and a
 * HellaSwag-style multiple-choice evaluation from a local JSONL file
 * (gearbox/engine/hellaswag.h), without training. The validation batches are those
 * training's evaluation draws after the checkpoint's step, so with [run] eval_iters
 * batches the loss is the one the run logged there. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "gearbox/engine/bpe.h"
#include "gearbox/engine/checkpoint.h"
#include "gearbox/engine/data.h"
#include "gearbox/engine/hellaswag.h"
#include "gearbox/engine/model.h"
#include "gearbox/engine/run.h"
#include "gearbox/engine/train.h"
#include "text_codec.h"

/* The option table's order: set and plugin-path are gb_cli_run's, the others eval's. */
enum { OPT_SET, OPT_PLUGIN_PATH, OPT_CKPT, OPT_BATCHES, OPT_HELLASWAG };

const gb_cli_spec gb_cli_eval_spec = {
    .verb = "eval",
    .usage = "gearbox eval CONFIG --ckpt CHECKPOINT [--batches N] [--hellaswag FILE]\n"
             "                    [--set section.key=value]... [--plugin-path DIRS]",
    .about =
        "Evaluates the weights of CHECKPOINT (a .gbk file, or an out_dir: its newest\n"
        "checkpoint) on CONFIG's model, data and plugins, without training: the mean loss of\n"
        "validation batches, the ones training's evaluation draws after the checkpoint's step\n"
        "(with [run] eval_iters of them, the val loss the run logged there); and with\n"
        "--hellaswag, multiple-choice accuracy on a HellaSwag JSONL file.\n",
    .options = {
        [OPT_SET] = GB_CLI_OPTION_SET,
        [OPT_PLUGIN_PATH] = GB_CLI_OPTION_PLUGIN_PATH,
        [OPT_CKPT] = {"ckpt", 0, "CHECKPOINT", "the weights: a checkpoint file, or an out_dir\n"
                      "(its newest ckpt-STEP.gbk); its [model] shape must be CONFIG's"},
        [OPT_BATCHES] = {"batches", 0, "N", "validation batches of [data] batch_size x\n"
                         "block_size tokens (default [run] eval_iters; 0: none)"},
        [OPT_HELLASWAG] = {"hellaswag", 0, "FILE", "a JSONL file in HellaSwag's format, one item\n"
                           "a line: {\"ctx\": ..., \"endings\": [...], \"label\": N}"},
    },
    .notes =
        "HellaSwag is scored as nanoGPT's and llm.c's hellaswag.py do: each ending is read after\n"
        "its context (as \" \" + ending) and its tokens' cross-entropies are summed; acc counts\n"
        "the items whose lowest sum is the label's ending, acc_norm those whose lowest mean per\n"
        "ending token is (the figure those scripts report). Items longer than block_size lose\n"
        "the start of their context.\n"
        "Exit status: 0 done, 1 failed while evaluating, 2 refused: a bad config, checkpoint\n"
        "or HellaSwag file (a line that is not an item is refused before any work; an item\n"
        "the model cannot read, when it is reached).\n",
};

typedef struct eval_args {
    const char *ckpt, *hellaswag;
    long long batches;   /* -1: [run] eval_iters */
} eval_args;

static int on_option(void *ctx, int index, const char *value)
{
    eval_args *a = ctx;
    unsigned long long n = 0;
    switch (index) {
    case OPT_CKPT: a->ckpt = value; break;
    case OPT_HELLASWAG: a->hellaswag = value; break;
    case OPT_BATCHES:
        if (gb_cli_parse_count("eval", "--batches", value, 0, (1 << 20) - 1, &n))
            return 2;
        a->batches = (long long)n;
        break;
    }
    return 0;
}

/* What one evaluation holds open. */
typedef struct evaluation {
    gb_runtime *rt;
    const gb_settings *s;
    gb_dataset *ds;
    gb_model *model;
    gb_model_config mc;
    gb_checkpoint ck;
    char *ckpt_path;
} evaluation;

/* --ckpt's file: itself, or an out_dir's newest checkpoint. */
static char *checkpoint_path(const char *given, gb_diag *diag)
{
    struct stat st;
    int folder = stat(given, &st) == 0 && S_ISDIR(st.st_mode);
    char *path = folder ? gb_checkpoint_latest(given) : strdup(given);
    if (!path && folder)
        gb_diag_add(diag, "--ckpt %s: the folder holds no checkpoint (ckpt-STEP.gbk); name a "
                    "run's out_dir or a checkpoint file", given);
    return path;
}

/* The runtime, data and model of the config, with the checkpoint's weights. 0, or -1
 * with the problems in diag. */
static int open_evaluation(evaluation *e, gb_cli_run *run, const eval_args *a, gb_diag *diag)
{
    e->ckpt_path = checkpoint_path(a->ckpt, diag);
    if (!e->ckpt_path || gb_checkpoint_read(e->ckpt_path, &e->ck, diag))
        return -1;
    e->rt = gb_runtime_open(run->cfg, run->plugin_path, diag);
    if (!e->rt)
        return -1;
    e->s = gb_runtime_settings(e->rt);
    e->ds = gb_data_open(e->s, diag);
    if (!e->ds || gb_runtime_start(e->rt, diag))
        return -1;
    e->mc = gb_model_config_of(e->s, gb_data_vocab(e->ds)->size);
    e->model = gb_model_create(e->rt, &e->mc, gb_settings_batch_size(e->s), 0);
    if (!e->model || gb_checkpoint_check_model(&e->ck, e->ckpt_path, e->model, e->s, diag))
        return -1;
    return gb_model_set_params(e->model, e->ck.params);
}

static void close_evaluation(evaluation *e)
{
    gb_model_free(e->model);
    gb_data_free(e->ds);
    gb_runtime_close(e->rt);
    gb_checkpoint_free(&e->ck);
    free(e->ckpt_path);
}

static int print_val_loss(evaluation *e, int64_t batches)
{
    int64_t B = gb_settings_batch_size(e->s), T = e->mc.block_size;
    int32_t *tokens = malloc((size_t)(B * T) * sizeof *tokens);
    int32_t *targets = malloc((size_t)(B * T) * sizeof *targets);
    double loss;
    int rc = !tokens || !targets ||
             gb_split_loss(e->model, e->ds, e->s, GB_SPLIT_VAL, e->ck.step, batches, 0, B,
                           tokens, targets, &loss);
    if (rc == 0)
        printf("val loss %.4f over %lld batches of %lld x %lld tokens (%s, step %lld)\n", loss,
               (long long)batches, (long long)B, (long long)T, e->ckpt_path,
               (long long)e->ck.step);
    free(tokens);
    free(targets);
    return rc ? -1 : 0;
}

/* ---- HellaSwag ----------------------------------------------------------------------- */

/* How the data's text becomes ids: GPT-2's BPE, or the folder's bytes. */
static int open_item_codec(gb_cli_codec *c, const gb_dataset *ds, gb_diag *diag)
{
    *c = (gb_cli_codec){gb_data_vocab(ds), NULL};
    if (gb_data_tokenizer(ds) != GB_TOKENIZER_GPT2)
        return 0;
    if (!gb_data_vocab_path(ds)) {
        gb_diag_add(diag, "--hellaswag: the data holds GPT-2 BPE tokens, but no vocabulary to "
                    "encode the items with is known: set [data] vocab (a folder with GPT-2's "
                    "encoder.json and vocab.bpe, or a tiktoken gpt2 file)");
        return -1;
    }
    c->bpe = gb_bpe_load(gb_data_vocab_path(ds), diag);
    return c->bpe ? 0 : -1;
}

/* Appends the ids of `text` to row (of room for *cap ids, grown), each checked below V;
 * `what` and the item name the text in messages. */
static int encode_text(const gb_cli_codec *c, const char *text, int32_t **row, int64_t *n,
                       int64_t *cap, int64_t V, const char *file, const gb_hellaswag_item *item,
                       const char *what, gb_diag *diag)
{
    char where[4200];
    snprintf(where, sizeof where, "%s:%lld: %s", file, (long long)item->line, what);
    return gb_cli_encode(c, text, where, V, row, n, cap, diag);
}

/* The index of the smallest of n values (the first of equals). */
static int lowest(const double *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] < v[best])
            best = i;
    return best;
}

/* Ending k of an item after its context's n_ctx ids in row, as ids: 0, or 2 when it
 * cannot be encoded or is too long for the model (said in diag). */
static int encode_ending(evaluation *e, const gb_cli_codec *c, const char *file,
                         const gb_hellaswag_item *item, int k, int32_t **row, int64_t *n,
                         int64_t *cap, gb_diag *diag)
{
    char what[32], *spaced = malloc(strlen(item->endings[k]) + 2);
    snprintf(what, sizeof what, "ending %d", k);
    if (!spaced)
        return 2;
    sprintf(spaced, " %s", item->endings[k]);   /* as hellaswag.py encodes an ending */
    int64_t n_ctx = *n;
    int rc = encode_text(c, spaced, row, n, cap, e->mc.vocab_size, file, item, what, diag);
    free(spaced);
    if (rc == 0 && (*n - n_ctx > e->mc.block_size || n_ctx == 0)) {
        gb_diag_add(diag, "%s:%lld: %s is %lld tokens after %lld of context; an ending must "
                    "follow a context and fit the model's block_size = %lld", file,
                    (long long)item->line, what, (long long)(*n - n_ctx), (long long)n_ctx,
                    (long long)e->mc.block_size);
        rc = -1;
    }
    return rc ? 2 : 0;
}

/* One item's predictions by summed and by mean ending loss: 0; 2 when the item cannot be
 * encoded for the model; 1 when the model failed (said in diag). */
static int score_item(evaluation *e, const gb_cli_codec *c, const char *file,
                      const gb_hellaswag_item *item, int *by_sum, int *by_mean, gb_diag *diag)
{
    double sum[GB_HELLASWAG_MAX_ENDINGS] = {0}, mean[GB_HELLASWAG_MAX_ENDINGS] = {0};
    int64_t cap = 0, n = 0;
    int32_t *row = NULL;
    int rc = encode_text(c, item->ctx, &row, &n, &cap, e->mc.vocab_size, file, item, "ctx",
                         diag) ? 2 : 0;
    int64_t n_ctx = n;
    for (int k = 0; rc == 0 && k < item->n_endings; k++) {
        n = n_ctx;
        rc = encode_ending(e, c, file, item, k, &row, &n, &cap, diag);
        if (rc == 0 && gb_hellaswag_ending_loss(e->model, e->mc.block_size, e->mc.vocab_size,
                                                row, n, n - n_ctx, &sum[k], diag))
            rc = 1;
        mean[k] = rc == 0 ? sum[k] / (double)(n - n_ctx) : 0.0;
    }
    free(row);
    *by_sum = lowest(sum, item->n_endings);
    *by_mean = lowest(mean, item->n_endings);
    return rc;
}

/* The items of `set` (read from `file`) scored: 0, or the exit status after saying why. */
static int print_hellaswag(evaluation *e, const gb_hellaswag *set, const char *file,
                           gb_diag *diag)
{
    gb_cli_codec codec;
    if (open_item_codec(&codec, e->ds, diag))
        return 2;
    int64_t right = 0, right_norm = 0;
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < set->count; i++) {
        int by_sum, by_mean;
        rc = score_item(e, &codec, file, &set->items[i], &by_sum, &by_mean, diag);
        right += by_sum == set->items[i].label;
        right_norm += by_mean == set->items[i].label;
    }
    if (rc == 0)
        printf("hellaswag: %lld items of %s: acc %.4f (%lld right), acc_norm %.4f (%lld right)\n",
               (long long)set->count, file, (double)right / (double)set->count,
               (long long)right, (double)right_norm / (double)set->count, (long long)right_norm);
    gb_bpe_free(codec.bpe);
    return rc;
}

int gb_cmd_eval(int argc, char **argv)
{
    gb_cli_run run = {0};
    eval_args a = {.batches = -1};
    int rc = gb_cli_parse_run(&gb_cli_eval_spec, argc, argv, &run, on_option, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!a.ckpt || (a.batches == 0 && !a.hellaswag)) {
        gb_config_free(run.cfg);
        return gb_cli_usage_error("eval", !a.ckpt ? "--ckpt CHECKPOINT is needed: the "
                                  "checkpoint file, or the out_dir, whose weights to evaluate"
                                  : "--batches 0 without --hellaswag leaves nothing to "
                                  "evaluate");
    }
    gb_diag diag = {0};
    evaluation e = {0};
    gb_hellaswag set = {0};
    /* a bad file is refused before any work */
    rc = (a.hellaswag && gb_hellaswag_read(a.hellaswag, &set, &diag)) ||
         open_evaluation(&e, &run, &a, &diag) ? 2 : 0;
    int64_t batches = a.batches < 0 && rc == 0 ? gb_settings_eval_iters(e.s) : a.batches;
    if (rc == 0 && batches > 0 && print_val_loss(&e, batches))
        rc = 1;
    if (rc == 0 && a.hellaswag)
        rc = print_hellaswag(&e, &set, a.hellaswag, &diag);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    gb_hellaswag_free(&set);
    close_evaluation(&e);
    gb_config_free(run.cfg);
    if (rc == 0 && fflush(stdout) != 0) {
        fprintf(stderr, "gearbox eval: cannot write the results: %s\n", strerror(errno));
        rc = 1;
    }
    return rc;
}
