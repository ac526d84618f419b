/* GPT-2 weights from and to other programs' files: Hugging Face's (a model.safetensors
 * with its config.json, as GPT2LMHeadModel saves and loads them) and llm.c's
 * (gpt2_124M.bin: a header of 256 int32, then every parameter in llm.c's order, f32 in
 * version 3, bf16 in version 5). Both hold GPT-2 itself: biases everywhere, the LM head
 * tied to the token embedding, LayerNorm eps 1e-5.
 *
 * Hugging Face's GPT-2 stores its linear layers as Conv1D, weights (in, out): they are
 * transposed into gearbox's (out, in) on the way in and back on the way out. Names come
 * with or without the "transformer." prefix; the attention mask buffers (attn.bias,
 * attn.masked_bias) are skipped. llm.c pads the token embedding to Vp rows, which
 * becomes [model] padded_vocab_size; Hugging Face's files hold the vocab_size real rows
 * only. */
#ifndef GB_CORE_WEIGHTS_H
#define GB_CORE_WEIGHTS_H

#include "gearbox/engine/checkpoint.h"
#include "gearbox/engine/diag.h"
#include "gearbox/engine/model.h"

/* A model's shape and its parameters in gearbox's flat layout (gb_model_layout). */
typedef struct gb_weights {
    gb_model_config cfg;
    float *params;
    int64_t n_params;
    int gpt2_tokens;          /* its ids are GPT-2 BPE tokens ([data] tokenizer = gpt2) */
} gb_weights;

void gb_weights_free(gb_weights *w);

/* Hugging Face: `path` is a folder holding model.safetensors and config.json, or the
 * model.safetensors file with config.json beside it. `padded_vocab` (0: none) pads the
 * token embedding with zero rows. 0, or -1 with the problem in diag. */
int gb_weights_read_hf(const char *path, int64_t padded_vocab, gb_weights *w, gb_diag *diag);
/* Writes DIR/model.safetensors and DIR/config.json (DIR is created); refuses a model
 * Hugging Face's GPT-2 cannot hold (no biases). */
int gb_weights_write_hf(const char *dir, const gb_weights *w, gb_diag *diag);

/* 1 when the file at `path` starts as a gearbox checkpoint does (GB_CHECKPOINT_MAGIC). */
int gb_weights_is_checkpoint(const char *path);
/* 1 when the file at `path` starts with llm.c's magic number. */
int gb_weights_is_llmc(const char *path);
/* 1 for llm.c's model file; -1 for another of llm.c's files, which *other (when not
 * NULL) then names; 0 for anything else. */
int gb_weights_llmc_kind(const char *path, const char **other);
int gb_weights_read_llmc(const char *path, gb_weights *w, gb_diag *diag);
/* Version 3 (f32); refuses what llm.c's GPT-2 cannot run (no biases, the erf GELU). */
int gb_weights_write_llmc(const char *path, const gb_weights *w, gb_diag *diag);

/* The weights of a gearbox checkpoint (its saved [model] section gives the shape). */
int gb_weights_from_checkpoint(const gb_checkpoint *ck, const char *path, gb_weights *w,
                               gb_diag *diag);
/* A checkpoint that [train] init_from and `gearbox sample` read: the weights, a config
 * of the model's [model] section, step 0, no optimizer state, and GPT-2's 256 byte
 * tokens as its vocabulary (ids past them sample as '?'). */
int gb_weights_write_checkpoint(const char *path, const gb_weights *w, gb_diag *diag);

#endif
