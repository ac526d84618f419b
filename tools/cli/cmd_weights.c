/* `gearbox import` and `gearbox export`: GPT-2 weights between gearbox checkpoints and
 * Hugging Face's (model.safetensors + config.json) or llm.c's (gpt2_124M.bin) files
 * (engine/weights.c). Nothing is downloaded: the user points gearbox at the files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "weights.h"

static const char import_usage[] =
    "usage: gearbox import SOURCE CHECKPOINT [--padded-vocab-size N]\n"
    "\n"
    "Writes the GPT-2 weights of SOURCE as the gearbox checkpoint CHECKPOINT (.gbk), which\n"
    "[train] init_from fine-tunes from (step 0, a fresh optimizer) and `gearbox sample`\n"
    "reads. SOURCE is one of\n"
    "  - a Hugging Face GPT-2 folder: model.safetensors and config.json (as\n"
    "    GPT2LMHeadModel.save_pretrained writes them, or as the model hub has them);\n"
    "  - a model.safetensors file, with its config.json beside it;\n"
    "  - llm.c's gpt2_124M.bin (f32) or gpt2_124M_bf16.bin (its padded vocabulary kept).\n"
    "\n"
    "  --padded-vocab-size N   pad the token embedding to N rows, as llm.c does (GPT-2:\n"
    "                          50304); the extra rows are never predicted\n"
    "\n"
    "The checkpoint's [model] section is the config a fine-tuning run must repeat;\n"
    "`gearbox check` on it shows the memory plan.\n";

static const char export_usage[] =
    "usage: gearbox export CHECKPOINT DEST [--format hf|llm.c]\n"
    "\n"
    "Writes the weights of a gearbox checkpoint (a .gbk file, or an out_dir: its newest)\n"
    "for other programs:\n"
    "  --format hf     (default) DEST is a folder: model.safetensors and config.json that\n"
    "                  transformers' GPT2LMHeadModel.from_pretrained(DEST) loads (the real\n"
    "                  vocabulary rows only; activation_function gelu_new for [model]\n"
    "                  gelu = tanh, gelu for erf). A model without biases is refused.\n"
    "  --format llm.c  DEST is a file in llm.c's layout (version 3, f32); llm.c runs only\n"
    "                  GPT-2 with biases and GELU's tanh form.\n";

/* N of "--padded-vocab-size N": 1 to 2^20. */
static int parse_padding(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < 1 || v > (1 << 20))
        return gb_cli_usage_error("import", "--padded-vocab-size %s: expected a whole number "
                                  "from 1 to 1048576", text);
    *out = v;
    return 0;
}

/* The two positional arguments and the one flag of a verb. 0, or 2 after a usage error. */
static int parse_args(int argc, char **argv, const char *verb, const char *flag,
                      const char *pos[2], const char **value)
{
    int n = 0, missing = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = gb_cli_flag_value(argc, argv, &i, flag, &missing);
        if (v)
            *value = v;
        else if (missing)
            return gb_cli_usage_error(verb, "%s needs a value", flag);
        else if (argv[i][0] == '-')
            return gb_cli_usage_error(verb, "unknown option %s", argv[i]);
        else if (n == 2)
            return gb_cli_usage_error(verb, "unexpected argument %s", argv[i]);
        else
            pos[n++] = argv[i];
    }
    if (n < 2)
        return gb_cli_usage_error(verb, "expected two arguments, %s",
                                  strcmp(verb, "import") == 0 ? "SOURCE and CHECKPOINT"
                                                              : "CHECKPOINT and DEST");
    return 0;
}

/* One line on what was converted, for the user to check against the source. */
static void describe(const char *verb, const char *path, const gb_weights *w)
{
    const gb_model_config *c = &w->cfg;
    printf("gearbox %s: %s: %lld parameters | n_layer %lld, n_head %lld, n_embd %lld, "
           "block_size %lld, vocab %lld (%lld rows), bias %s, gelu %s\n", verb, path,
           (long long)w->n_params, (long long)c->n_layer, (long long)c->n_head,
           (long long)c->n_embd, (long long)c->block_size, (long long)c->vocab_size,
           (long long)gb_model_table_rows(c), c->bias ? "true" : "false",
           c->gelu_tanh ? "tanh" : "erf");
}

int gb_cmd_import(int argc, char **argv)
{
    if (gb_cli_wants_help(argc, argv, import_usage))
        return 0;
    const char *pos[2] = {NULL, NULL}, *padding = NULL;
    int64_t padded = 0;
    int rc = parse_args(argc, argv, "import", "--padded-vocab-size", pos, &padding);
    if (rc || (padding && parse_padding(padding, &padded)))
        return 2;
    gb_weights w;
    gb_diag diag = {0};
    if (gb_weights_is_llmc(pos[0]) && padding)
        rc = gb_cli_usage_error("import", "%s is llm.c's file, which gives its padding itself",
                                pos[0]);
    else if (gb_weights_is_llmc(pos[0]))
        rc = gb_weights_read_llmc(pos[0], &w, &diag) ? 1 : 0;
    else
        rc = gb_weights_read_hf(pos[0], padded, &w, &diag) ? 1 : 0;
    if (rc == 0) {
        rc = gb_cli_make_parents("import", pos[1]) ||
             gb_weights_write_checkpoint(pos[1], &w, &diag) ? 1 : 0;
        if (rc == 0)
            describe("import", pos[1], &w);
        gb_weights_free(&w);
    }
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    return rc;
}

int gb_cmd_export(int argc, char **argv)
{
    if (gb_cli_wants_help(argc, argv, export_usage))
        return 0;
    const char *pos[2] = {NULL, NULL}, *format = "hf";
    if (parse_args(argc, argv, "export", "--format", pos, &format))
        return 2;
    int llmc = strcmp(format, "llm.c") == 0;
    if (!llmc && strcmp(format, "hf") != 0)
        return gb_cli_usage_error("export", "--format %s: expected hf or llm.c", format);
    char *path = gb_checkpoint_latest(pos[0]);
    if (!path && !(path = strdup(pos[0])))
        return 1;
    gb_checkpoint ck;
    gb_weights w = {0};
    gb_diag diag = {0};
    int rc = gb_checkpoint_read(path, &ck, &diag) || gb_weights_from_checkpoint(&ck, path, &w,
                                                                                &diag);
    if (rc == 0)   /* hf's DEST is a folder, which gb_weights_write_hf creates whole */
        rc = llmc ? gb_cli_make_parents("export", pos[1]) ||
                        gb_weights_write_llmc(pos[1], &w, &diag)
                  : gb_weights_write_hf(pos[1], &w, &diag);
    if (rc == 0)
        describe("export", pos[1], &w);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    gb_weights_free(&w);
    gb_checkpoint_free(&ck);
    free(path);
    return rc ? 1 : 0;
}
