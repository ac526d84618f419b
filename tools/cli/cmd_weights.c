/* `gearbox import` and `gearbox export`: GPT-2 weights between gearbox checkpoints and
 * Hugging Face's (model.safetensors + config.json) or llm.c's (gpt2_124M.bin) files
 * (tools/weights/weights.c). Nothing is downloaded: the user points gearbox at the files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gearbox/engine/checkpoint.h"
#include "cli.h"
#include "options.h"
#include "weights.h"

enum { OPT_PADDED_VOCAB_SIZE, OPT_FORCE };

const gb_cli_spec gb_cli_import_spec = {
    .verb = "import",
    .usage = "gearbox import SOURCE CHECKPOINT [--padded-vocab-size N] [--force]",
    .about =
    "Writes the GPT-2 weights of SOURCE as the gearbox checkpoint CHECKPOINT (.gbk), which\n"
    "[train] init_from fine-tunes from (step 0, a fresh optimizer) and `gearbox sample`\n"
    "reads; a CHECKPOINT that is a folder or ends in '/' gets CHECKPOINT/ckpt-000000.gbk,\n"
    "and the folders missing on its path are created. SOURCE is one of\n"
    "  - a Hugging Face GPT-2 folder: model.safetensors and config.json (as\n"
    "    GPT2LMHeadModel.save_pretrained writes them, or as the model hub has them);\n"
    "  - a model.safetensors file, with its config.json beside it;\n"
    "  - llm.c's gpt2_124M.bin (f32) or gpt2_124M_bf16.bin (its padded vocabulary kept).\n"
    "A fine-tuning run's [train] init_from = CHECKPOINT takes its [model] section from it;\n"
    "`gearbox check CHECKPOINT` shows its shape, parameters and memory plan.\n",
    .options = {
        [OPT_PADDED_VOCAB_SIZE] = {"padded-vocab-size", 0, "N", "pad the token embedding to N "
                                   "rows, as llm.c does (GPT-2:\n50304); the extra rows are "
                                   "never predicted"},
        [OPT_FORCE] = {"force", 0, NULL, "overwrite CHECKPOINT when it exists (else refused)"},
    }};

const gb_cli_spec gb_cli_export_spec = {
    .verb = "export",
    .usage = "gearbox export CHECKPOINT DEST [--format hf|llm.c]",
    .about = "Writes the weights of a gearbox checkpoint (a .gbk file, or an out_dir: its newest)\n"
             "for other programs.\n",
    .options = {
        {"format", 0, "hf|llm.c", "hf (the default): DEST is a folder: model.safetensors and\n"
         "config.json that transformers' GPT2LMHeadModel\n"
         ".from_pretrained(DEST) loads (the real vocabulary rows only;\n"
         "activation_function gelu_new for [model] gelu = tanh, gelu\n"
         "for erf; bos/eos_token_id <|endoftext|>, the last id, for\n"
         "GPT-2 BPE tokens). A model without biases is refused.\n"
         "llm.c: DEST is a file in llm.c's layout (version 3, f32);\n"
         "llm.c runs only GPT-2 with biases and GELU's tanh form"},
    }};

/* N of "--padded-vocab-size N": 1 to 2^20. */
static int parse_padding(const char *text, int64_t *out)
{
    unsigned long long n = 0;
    if (gb_cli_parse_count("import", "--padded-vocab-size", text, 1, 1 << 20, &n))
        return 2;
    *out = (int64_t)n;
    return 0;
}

/* What import was asked for beside its operands. */
typedef struct import_args {
    const char *padding;   /* --padded-vocab-size, or NULL */
    int force;
} import_args;

static int on_import_option(void *ctx, int index, const char *value)
{
    import_args *a = ctx;
    if (index == OPT_FORCE)
        a->force = 1;
    else
        a->padding = value;
    return 0;
}

/* Import's refusal to replace a checkpoint, which may be a run's only copy of its weights,
 * unless --force says so, and anything but a file even then (the checkpoint is written
 * beside it and renamed over it, which would replace a device such as /dev/null): 0, or
 * 1 after saying what to do. */
static int refuse_overwrite(const char *target, int force)
{
    struct stat st;
    if (stat(target, &st) != 0)
        return 0;
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "gearbox import: CHECKPOINT %s is a device, pipe or socket, which the "
                "checkpoint would replace; name a file\n", target);
        return 1;
    }
    if (force)
        return 0;
    fprintf(stderr, "gearbox import: %s exists; pass --force to overwrite it, or name another "
            "CHECKPOINT\n", target);
    return 1;
}

/* One line on what was converted, for the user to check against the source. */
static void describe(const char *verb, const char *path, const gb_weights *w)
{
    printf("gearbox %s: %s: ", verb, path);
    gb_cli_print_model(stdout, "", &w->cfg, w->n_params);
}

/* Where import writes: CHECKPOINT, or CHECKPOINT/ckpt-000000.gbk for a folder (one that
 * exists, or a path ending in '/'), as `gearbox sample` and init_from read out_dirs. */
static char *import_target(const char *checkpoint)
{
    struct stat st;
    size_t n = strlen(checkpoint);
    int folder = (n && checkpoint[n - 1] == '/') ||
                 (stat(checkpoint, &st) == 0 && S_ISDIR(st.st_mode));
    char *path = malloc(n + 32);
    if (path)
        snprintf(path, n + 32, folder ? "%s%sckpt-000000.gbk" : "%s", checkpoint,
                 n && checkpoint[n - 1] == '/' ? "" : "/");
    return path;
}

/* The weights of SOURCE, told apart by llm.c's magic number first: any other file is
 * read as safetensors, whose refusal would not say that an llm.c file was the wrong one. */
static int read_source(const char *source, const char *padding, int64_t padded, gb_weights *w,
                       gb_diag *diag)
{
    if (gb_weights_is_checkpoint(source)) {
        gb_diag_add(diag, "%s is a gearbox checkpoint already: there is nothing to import; "
                    "[train] init_from and `gearbox sample` read it as it is, and `gearbox "
                    "export` writes its weights for Hugging Face or llm.c", source);
        return -1;
    }
    const char *other = NULL;
    int llmc = gb_weights_llmc_kind(source, &other);
    if (llmc < 0) {
        gb_diag_add(diag, "%s is %s, not a model: import takes llm.c's gpt2_124M.bin (or "
                    "gpt2_124M_bf16.bin), or a Hugging Face folder", source, other);
        return -1;
    }
    if (llmc && padding) {
        gb_diag_add(diag, "%s is llm.c's model file, which gives its padding itself: drop "
                    "--padded-vocab-size", source);
        return -1;
    }
    size_t n = strlen(source);   /* a .bin is llm.c's: say what its magic is not */
    if (llmc || (n > 4 && strcmp(source + n - 4, ".bin") == 0))
        return gb_weights_read_llmc(source, w, diag);
    return gb_weights_read_hf(source, padded, w, diag);
}

int gb_cmd_import(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL};
    import_args a = {0};
    int64_t padded = 0;
    int rc = gb_cli_parse_operands(&gb_cli_import_spec, argc, argv, on_import_option, &a, 2, 2,
                                   "SOURCE CHECKPOINT", pos);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (a.padding && parse_padding(a.padding, &padded))
        return 2;
    gb_weights w;
    gb_diag diag = {0};
    char *target = import_target(pos[1]);
    rc = !target || refuse_overwrite(target, a.force) ||
         read_source(pos[0], a.padding, padded, &w, &diag) ? 1 : 0;
    if (rc == 0) {
        rc = gb_cli_make_parents("import", target) ||
             gb_weights_write_checkpoint(target, &w, &diag) ? 1 : 0;
        if (rc == 0)
            describe("import", target, &w);
        gb_weights_free(&w);
    }
    gb_cli_print_problems("import", &diag);
    gb_diag_clear(&diag);
    free(target);
    return rc;
}

int gb_cmd_export(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL}, *format = "hf";
    int parsed = gb_cli_parse_operands(&gb_cli_export_spec, argc, argv, gb_cli_keep_value,
                                       &format, 2, 2, "CHECKPOINT DEST", pos);
    if (parsed)
        return parsed < 0 ? 0 : parsed;
    int llmc = strcmp(format, "llm.c") == 0;
    if (!llmc && strcmp(format, "hf") != 0)
        return gb_cli_usage_error("export", "--format %s: expected hf or llm.c", format);
    char *path = gb_cli_checkpoint_path(pos[0]);
    if (!path)
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
    gb_cli_print_problems("export", &diag);
    gb_diag_clear(&diag);
    gb_weights_free(&w);
    gb_checkpoint_free(&ck);
    free(path);
    return rc ? 1 : 0;
}
