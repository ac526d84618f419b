/* Checkpoints: gearbox's own versioned, checksummed file holding everything a run needs to
 * continue exactly: the effective config, the vocabulary, the step, the parameters, the
 * optimizer's state (with the optimizer's name) and the precision policy's scaler state.
 *
 * Layout (little-endian): "GEARBOXK", u32 format version (1), u32 section count, then
 * sections {char tag[4], u64 length, bytes}: CONF, VOCB, STEP, PRMS, OPTM, PREC; then a
 * u64 FNV-1a hash of every byte before it. Written to a temporary file, flushed, and
 * renamed over the target, so a crash never leaves a torn checkpoint. */
#ifndef GB_CORE_CHECKPOINT_H
#define GB_CORE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/engine/data.h"
#include "gearbox/engine/diag.h"
#include "gearbox/engine/model.h"
#include "gearbox/engine/settings.h"

#define GB_CHECKPOINT_VERSION 1
/* The 8 bytes every checkpoint starts with, by which a program tells one apart. */
#define GB_CHECKPOINT_MAGIC "GEARBOXK"

typedef struct gb_checkpoint {
    char *config_text;        /* effective config as INI */
    gb_vocab *vocab;
    int64_t step;             /* optimizer steps completed */
    int64_t n_params;
    float *params;            /* (n_params) */
    char optim_name[64];
    size_t optim_bytes;
    void *optim_state;
    size_t precision_bytes;
    void *precision_state;
} gb_checkpoint;

int gb_checkpoint_write(const char *path, const gb_checkpoint *ck, gb_diag *diag);
/* Reads and verifies (magic, version, checksum, each section once, every section but
 * PREC present, a step of 0 or more). Fields are malloc'ed. A folder, pipe or device is
 * refused without reading from it. */
int gb_checkpoint_read(const char *path, gb_checkpoint *ck, gb_diag *diag);
/* The same over a whole file held in memory; `name` names it in messages. */
int gb_checkpoint_parse(const unsigned char *data, size_t size, const char *name,
                        gb_checkpoint *ck, gb_diag *diag);
void gb_checkpoint_free(gb_checkpoint *ck);
/* 1 when `path` is a regular file that starts as a checkpoint does (its magic), else 0;
 * reads nothing else, and never from a pipe. */
int gb_checkpoint_is_file(const char *path);
/* The checksum a checkpoint ends with, over its `n` bytes before it. */
uint64_t gb_checkpoint_checksum(const void *data, size_t n);

/* Whether `ck` fits the model `m` of the run configured by `s`: the [model] shape of its
 * saved config is this run's (n_head changes no parameter count, but every loss), the
 * parameter count is the model's, and every parameter is finite (messages name the
 * tensor). 0, or -1 with the problems in diag. */
int gb_checkpoint_check_model(const gb_checkpoint *ck, const char *path, const gb_model *m,
                              const gb_settings *s, gb_diag *diag);

/* A run's model, as the checkpoint it starts from describes it: `resume` (a checkpoint
 * path, or NULL) or else [train] init_from is read and verified, and its [model] section
 * becomes cfg's: a key cfg leaves out is taken from it (vocab_size as the checkpoint's
 * vocabulary where its run took the data's), a key cfg sets to another value is reported
 * with both values and where cfg sets it. Train and check call it before resolving cfg.
 * 0 (also with neither), or the number of problems added to `diag`. */
int gb_checkpoint_take_model(gb_config *cfg, const char *resume, gb_diag *diag);
/* Its second half: the [model] section of `ck` into cfg, `origin` naming the checkpoint
 * in messages ("[train] init_from = PATH"). */
int gb_checkpoint_inherit_model(const gb_checkpoint *ck, const char *origin, gb_config *cfg,
                                gb_diag *diag);

/* The newest checkpoint in dir, a file named exactly "ckpt-STEP.gbk" (by step; the
 * ".tmp" a crash leaves is not one), malloc'ed, or NULL. */
char *gb_checkpoint_latest(const char *dir);
/* The step of a checkpoint's file name ("ckpt-STEP.gbk", no folder), else -1. */
long long gb_checkpoint_file_step(const char *name);

/* [run] keep_last: deletes the checkpoints of `dir` but the newest `keep_last` (by step),
 * the one just written (`newest_step`) and the one whose step had the lowest val loss in
 * dir/metrics.jsonl, reporting each file deleted (a file that cannot be deleted is a
 * warning: the run goes on). keep_last 0 deletes nothing. */
void gb_checkpoint_retain(const char *dir, int64_t keep_last, int64_t newest_step);

#endif
