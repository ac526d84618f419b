/* `--predict GPU` of `gearbox bench step` and `gearbox bench attn`: the work runs on the
 * CUDA emulator's plugins in its counting mode (GEARBOX_CUDA_EMU_COUNT, cuda_emu/README.md),
 * each record the emulator writes is taken into the group of calls it belongs to (a
 * phase of the step, the forward or backward of an attention cell) as soon as the device
 * is synchronised after them, and the groups are printed with the time model's prediction
 * (tools/gpumodel/gpumodel.h) for one GPU. Every printed line says it is a prediction.
 */
#ifndef GB_BENCH_PREDICT_H
#define GB_BENCH_PREDICT_H

#include "gpumodel/gpumodel.h"

typedef struct gb_predict gb_predict;

/* The most GPUs one --predict lists. */
#define GB_PREDICT_MAX_GPUS 4

/* The help of --predict, which each benchmark's option table completes. */
#define GB_BENCH_PREDICT_HELP                                                              \
    "on the CUDA emulator's plugins (a -Dgpu_emu build, --device cuda):\ncount what "      \
    "every kernel does and print the time it is predicted to\ntake on GPU (H100 or H200; " \
    "docs/gpu.md) instead of timing this machine"

/* A prediction for `verb` ("bench step") on the GPUs of `gpus`, a comma-separated list of
 * at most `most` names ("H100,H200"), in `groups` groups each: names the file the emulator
 * counts into (a temporary one unless GEARBOX_CUDA_EMU_COUNT names one) and its sampling,
 * which must happen before any plugin is loaded. NULL after a usage message (an unknown
 * GPU, too many). */
gb_predict *gb_predict_open(const char *verb, const char *gpus, int most, int groups);
void gb_predict_close(gb_predict *p);
int gb_predict_gpu_count(const gb_predict *p);
/* The GPU whose figures gb_predict_seconds and the printing functions give (the first
 * until another is shown). */
void gb_predict_show(gb_predict *p, int gpu);
const gb_gpu_spec *gb_predict_gpu(const gb_predict *p);

/* Takes every record counted since the last take into `group` of every GPU; a matmul is timed at the
 * efficiency of `pass`. A group < 0 drops them (warm-up). 0, or -1 after a message naming
 * the file and line of a record that cannot be read. */
int gb_predict_take(gb_predict *p, int group, gb_matmul_pass pass);
/* 0 when the emulator counted anything since the open (read by gb_predict_take); else a
 * message that --predict needs the emulated CUDA plugins, and -1. */
int gb_predict_check_counted(const gb_predict *p);
/* Empties every group (a new attention cell). */
void gb_predict_clear(gb_predict *p);

/* The predicted seconds of `group`: the sum over its records. */
double gb_predict_seconds(const gb_predict *p, int group);

/* Prints "[prediction GPU]" and the title, then the header of the kernel table. */
void gb_predict_print_header(const gb_predict *p, const char *title);
/* One line for `group` named `label` (its total, calls and dominant bound), then one per
 * kernel in it, costliest first. Nothing for an empty group. */
void gb_predict_print_group(const gb_predict *p, int group, const char *label);
/* "[prediction GPU] " then printf's. */
void gb_predict_printf(const gb_predict *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
