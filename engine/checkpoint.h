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

#include "data.h"
#include "diag.h"

#define GB_CHECKPOINT_VERSION 1

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
/* Reads and verifies (magic, version, checksum). Fields are malloc'ed. */
int gb_checkpoint_read(const char *path, gb_checkpoint *ck, gb_diag *diag);
void gb_checkpoint_free(gb_checkpoint *ck);

/* The newest "ckpt-*.gbk" in dir (by step), malloc'ed, or NULL. */
char *gb_checkpoint_latest(const char *dir);

#endif
