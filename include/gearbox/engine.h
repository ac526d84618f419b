/* gearbox's engine, as a program embeds it: the public API of the gearbox-engine library
 * (`pkg-config --cflags --libs gearbox-engine`). Every header it includes is the contract;
 * the engine's own headers (in engine/) are not installed and no program includes them.
 *
 *   config.h, settings.h   read INI files and --set overrides; the resolved settings
 *   diag.h                 the problems a call reports, collected for the caller to print
 *   run.h                  a run's runtime: the config's plugins bound and created
 *   train.h                train as a config says, or step, evaluate and save a trainer
 *   model.h, checkpoint.h  the GPT model, its memory plan and weights; checkpoint files
 *   kvcache.h              sampling with a KV cache: the forward over new tokens only
 *   autobatch.h            [data] batch_size = auto
 *   data.h, bpe.h          token folders and vocabularies; GPT-2's tokenizer
 *   hellaswag.h            multiple-choice evaluation files and an ending's loss
 *   loader.h, instance.h   find, load and bind plugins (doctor, conformance, benchmarks)
 *   machine.h, gpu_monitor.h  what the machine is, MFU's peaks, a GPU's live figures
 *   profile.h              per-phase timers of a training step
 *   report.h               where the engine's messages and metrics go (a callback)
 *   fsutil.h, text.h, clock.h, rng.h  files, text, time and the reproducible random streams
 *
 * Errors: calls that can fail add one line per problem to a gb_diag (naming the file,
 * line, section, key or plugin at fault and what to do) and return nonzero or NULL; the
 * caller prints them with gb_diag_print. Returned objects are the caller's to release with
 * the matching _free or _close. */
#ifndef GEARBOX_ENGINE_H
#define GEARBOX_ENGINE_H

#include "gearbox/engine/autobatch.h"
#include "gearbox/engine/bpe.h"
#include "gearbox/engine/checkpoint.h"
#include "gearbox/engine/clock.h"
#include "gearbox/engine/config.h"
#include "gearbox/engine/data.h"
#include "gearbox/engine/diag.h"
#include "gearbox/engine/fsutil.h"
#include "gearbox/engine/gpu_monitor.h"
#include "gearbox/engine/hellaswag.h"
#include "gearbox/engine/instance.h"
#include "gearbox/engine/kvcache.h"
#include "gearbox/engine/loader.h"
#include "gearbox/engine/machine.h"
#include "gearbox/engine/model.h"
#include "gearbox/engine/profile.h"
#include "gearbox/engine/report.h"
#include "gearbox/engine/rng.h"
#include "gearbox/engine/run.h"
#include "gearbox/engine/settings.h"
#include "gearbox/engine/text.h"
#include "gearbox/engine/train.h"

#endif
