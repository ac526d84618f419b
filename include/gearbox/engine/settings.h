/* The engine's own configuration: the [run], [model], [data] and [train] sections and the
 * `plugin` key of each plugin section, resolved and validated. Programs hold the resolved
 * settings as an opaque handle and read them through the accessors below (a run's own
 * through gb_runtime_settings or gb_trainer_settings); the engine's code sees the struct
 * in engine/settings.h. */
#ifndef GB_ENGINE_SETTINGS_H
#define GB_ENGINE_SETTINGS_H

#include <stdint.h>

#include "gearbox/engine/config.h"
#include "gearbox/engine/diag.h"

/* [data] tokenizer: what token ids stand for. */
typedef enum gb_tokenizer {
    GB_TOKENIZER_AUTO,   /* the data folder's: bytes with a vocab.txt, else gpt2 */
    GB_TOKENIZER_BYTES,  /* one byte each, as the folder's vocab.txt says */
    GB_TOKENIZER_GPT2    /* GPT-2's byte-level BPE (gearbox/engine/bpe.h) */
} gb_tokenizer;

typedef struct gb_settings gb_settings;

/* Resolves and validates the engine's sections of `cfg` (and each plugin section's
 * `plugin` key, but not the plugins' own keys, which need the plugin's schema), which
 * must outlive the result. NULL after reporting every problem into `diag`. */
gb_settings *gb_settings_open(gb_config *cfg, gb_diag *diag);
void gb_settings_close(gb_settings *s);

/* The resolved values; paths are absolute, NULL where unset. */
int64_t gb_settings_threads(const gb_settings *s);          /* [run] threads */
const char *gb_settings_out_dir(const gb_settings *s);      /* [run] out_dir */
const char *gb_settings_plugin_path(const gb_settings *s);  /* [run] plugin_path, ':'-separated */
/* The `plugin` key of [device] [attn] [optim] [precision] [comm]: a name or a path. */
const char *gb_settings_plugin(const gb_settings *s, gb_kind kind);
int64_t gb_settings_block_size(const gb_settings *s);       /* [model] block_size */
int64_t gb_settings_vocab_size(const gb_settings *s);       /* [model] vocab_size; 0: the data's */
/* [data] batch_size (once batch_size = auto has chosen it) and
 * gradient_accumulation_steps. */
int64_t gb_settings_batch_size(const gb_settings *s);
int64_t gb_settings_accumulation(const gb_settings *s);
gb_tokenizer gb_settings_tokenizer(const gb_settings *s);   /* [data] tokenizer */
const char *gb_settings_vocab_path(const gb_settings *s);   /* [data] vocab */
const char *gb_settings_init_from(const gb_settings *s);    /* [train] init_from */
int64_t gb_settings_eval_iters(const gb_settings *s);       /* [run] eval_iters */

#endif
