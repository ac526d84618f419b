/* Configuration: INI files (parsed with inih), `--set section.key=value` overrides, and
 * validation of each section against a schema of gb_option (the same table plugins
 * declare in their descriptors, so core keys and plugin keys are checked alike).
 *
 * Every entry remembers where it came from (file and line, or the --set flag) so that
 * problems are reported as "FILE:LINE: [section] key: what is wrong; what to do".
 * Validation resolves each section into gb_value arrays and records the effective value
 * of every key (defaults included) for printing and for checkpoints.
 */
#ifndef GB_CORE_CONFIG_H
#define GB_CORE_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "gearbox/plugin.h"
#include "gearbox/engine/diag.h"

typedef struct gb_config gb_config;

/* Parses the INI file at `path`. Syntax errors are reported as "PATH:LINE: ..." into
 * `diag` and NULL is returned; a missing or unreadable file too. */
gb_config *gb_config_load(const char *path, gb_diag *diag);
/* Parses INI text held in memory (a checkpoint's saved config); `origin` names it in
 * messages, and relative paths resolve against `base_dir`. */
gb_config *gb_config_load_string(const char *text, const char *origin, const char *base_dir,
                                 gb_diag *diag);
void gb_config_free(gb_config *cfg);

/* Applies "section.key=value", overriding or adding the entry. Reports a malformed
 * assignment into `diag` and returns -1; 0 on success. */
int gb_config_set(gb_config *cfg, const char *assignment, gb_diag *diag);

/* The raw text of a key, or NULL when absent. */
const char *gb_config_get(const gb_config *cfg, const char *section, const char *key);
/* The folder of the config file (absolute), against which relative paths resolve. */
const char *gb_config_dir(const gb_config *cfg);
/* `path`, the value of [section] key, made absolute unless it is: against
 * gb_config_dir() when the value came from the file (or is a default), against the
 * working directory when it came from --set (as a shell user expects). malloc'ed. */
char *gb_config_resolve_path(const gb_config *cfg, const char *section, const char *key,
                             const char *path);

/* Reports every section not in `known` (with a did-you-mean suggestion). Returns the
 * number of problems added to `diag`. */
int gb_config_check_sections(const gb_config *cfg, const char *const *known, size_t n_known,
                             gb_diag *diag);

/* Validates [section] against `options`: unknown keys (did you mean...?), wrong types,
 * out-of-range values, enums outside their choices. Keys in `ignore` (may be NULL, e.g.
 * {"plugin"}) are accepted without a schema entry. Fills `values` (parallel to options,
 * defaults where absent; strings owned by cfg) and records the effective values.
 * Returns the number of problems added to `diag`. */
int gb_config_validate_section(gb_config *cfg, const char *section, const gb_option *options,
                               size_t n_options, const char *const *ignore, size_t n_ignore,
                               gb_value *values, gb_diag *diag);

/* Takes [section] of `from` (a checkpoint's saved config) into cfg, key by key for the
 * keys of `options`: a key cfg leaves out gets `from`'s value, noted as coming from
 * `origin`; a key cfg sets to another value (compared as `options` parse them, so "yes"
 * is "true") is reported with both values and where cfg sets it. Returns the number of
 * problems added to `diag`. */
int gb_config_inherit(gb_config *cfg, const gb_config *from, const char *section,
                      const gb_option *options, size_t n_options, const char *origin,
                      gb_diag *diag);

/* Replaces the effective value of a validated key with `text` (a path made absolute, so
 * that a config saved into a checkpoint means the same file wherever it is read).
 * 0, or -1 when the key has no effective value or "key=text" is longer than a config line
 * may be (it could not be read back). */
int gb_config_set_effective(gb_config *cfg, const char *section, const char *key,
                            const char *text);

/* Writes the effective configuration as INI: every validated section in first-seen
 * order, every key with its resolved value (defaults included), as "key = value", or
 * "key=value" where only that fits a line, so that it always reads back. */
void gb_config_write(const gb_config *cfg, FILE *out);
/* What gb_config_write writes, as a string to free(); NULL when out of memory. */
char *gb_config_text(const gb_config *cfg);

/* Levenshtein-nearest of `word` among `candidates` when it is close enough to be a
 * plausible typo, else NULL. */
const char *gb_suggest(const char *word, const char *const *candidates, size_t n);

#endif
