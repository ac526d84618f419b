/* manifest.json: what a run was, for reproducing and comparing it (`gearbox ab` puts one
 * per variant in its report). It records the effective configuration (as INI text and as
 * an object of sections whose values are the INI strings), each plugin's kind, name,
 * version, file and SHA-256, the library versions, the CPU and its features, the thread
 * count, the device, gearbox's version and git revision, the host and the start time.
 *
 * It deliberately records no figures measured during the run (those are in
 * metrics.jsonl) and nothing from the environment beyond OMP_NUM_THREADS.
 */
#ifndef GB_CORE_MANIFEST_H
#define GB_CORE_MANIFEST_H

#include <time.h>

#include "runtime.h"

/* The SHA-256 of the file at `path` (computed with nettle) as 64 lower-case hex digits and
 * a NUL: the `sha256` of each plugin. 0, or -1 (errno set) when it cannot be read. */
int gb_manifest_sha256_file(const char *path, char hex[65]);

/* Writes the manifest of the started runtime `rt` (batch already resolved) to `path`;
 * `config_ini` is the effective configuration as gb_config_write prints it. 0, or -1
 * after reporting why. */
int gb_manifest_write(const char *path, const gb_runtime *rt, const char *config_ini,
                      time_t start);

#endif
