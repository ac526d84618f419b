/* The public handles of gearbox/engine/run.h, settings.h and data.h over the engine's
 * structs (engine/runtime.h, settings.h, data.h): what programs read of them, one
 * accessor each. */
#include <stdlib.h>

#include "data.h"
#include "runtime.h"
#include "settings.h"

/* A handle of `size` bytes that `resolve` fills from `cfg`; NULL after reporting why (no
 * memory, or the problems `resolve` reported), `release` having freed what it held. */
static void *open_handle(size_t size, int (*resolve)(void *, gb_config *, const char *, gb_diag *),
                         void (*release)(void *), gb_config *cfg, const char *plugin_path,
                         gb_diag *diag)
{
    void *handle = calloc(1, size);
    if (handle && resolve(handle, cfg, plugin_path, diag) == 0)
        return handle;
    if (!handle)
        gb_diag_add(diag, "out of memory for a run of %s", gb_config_dir(cfg));
    release(handle);
    return NULL;
}

static int resolve_runtime(void *rt, gb_config *cfg, const char *plugin_path, gb_diag *diag)
{
    return gb_runtime_resolve(rt, cfg, plugin_path, diag);
}

static void release_runtime(void *rt)
{
    gb_runtime_close(rt);
}

gb_runtime *gb_runtime_open(gb_config *cfg, const char *cli_plugin_path, gb_diag *diag)
{
    return open_handle(sizeof(gb_runtime), resolve_runtime, release_runtime, cfg,
                       cli_plugin_path, diag);
}

void gb_runtime_close(gb_runtime *rt)
{
    if (!rt)
        return;
    gb_runtime_free(rt);
    free(rt);
}

const gb_settings *gb_runtime_settings(const gb_runtime *rt) { return &rt->settings; }
gb_loader *gb_runtime_loader(const gb_runtime *rt) { return rt->loader; }
gb_instance *gb_runtime_instance(gb_runtime *rt, gb_kind kind) { return &rt->inst[kind]; }
const gb_device_ops *gb_runtime_device_ops(const gb_runtime *rt) { return rt->dev; }
const gb_attn_ops *gb_runtime_attn_ops(const gb_runtime *rt) { return rt->attn; }
const gb_optim_ops *gb_runtime_optim_ops(const gb_runtime *rt) { return rt->optim; }
const gb_device_ctx *gb_runtime_device_ctx(const gb_runtime *rt) { return &rt->ctx; }
const gb_precision_policy *gb_runtime_policy(const gb_runtime *rt) { return &rt->policy; }
const gb_device_desc *gb_runtime_device(const gb_runtime *rt) { return &rt->device; }

static int resolve_settings(void *s, gb_config *cfg, const char *plugin_path, gb_diag *diag)
{
    (void)plugin_path;
    return gb_settings_resolve(cfg, s, diag);
}

static void release_settings(void *s)
{
    gb_settings_close(s);
}

gb_settings *gb_settings_open(gb_config *cfg, gb_diag *diag)
{
    return open_handle(sizeof(gb_settings), resolve_settings, release_settings, cfg, NULL, diag);
}

void gb_settings_close(gb_settings *s)
{
    if (!s)
        return;
    gb_settings_free(s);
    free(s);
}

int64_t gb_settings_threads(const gb_settings *s) { return s->threads; }
const char *gb_settings_out_dir(const gb_settings *s) { return s->out_dir; }
const char *gb_settings_plugin_path(const gb_settings *s) { return s->plugin_path; }
const char *gb_settings_plugin(const gb_settings *s, gb_kind kind) { return s->plugin[kind]; }
int64_t gb_settings_block_size(const gb_settings *s) { return s->block_size; }
int64_t gb_settings_vocab_size(const gb_settings *s) { return s->vocab_size; }
int64_t gb_settings_batch_size(const gb_settings *s) { return s->batch_size; }
int64_t gb_settings_accumulation(const gb_settings *s) { return s->gradient_accumulation_steps; }
gb_tokenizer gb_settings_tokenizer(const gb_settings *s) { return s->tokenizer; }
const char *gb_settings_vocab_path(const gb_settings *s) { return s->vocab_path; }
const char *gb_settings_init_from(const gb_settings *s) { return s->init_from; }
int64_t gb_settings_eval_iters(const gb_settings *s) { return s->eval_iters; }

gb_data_format gb_data_format_of(const gb_dataset *ds) { return ds->format; }
gb_tokenizer gb_data_tokenizer(const gb_dataset *ds) { return ds->tokenizer; }
int64_t gb_data_id_limit(const gb_dataset *ds) { return ds->id_limit; }
const gb_vocab *gb_data_vocab(const gb_dataset *ds) { return &ds->vocab; }
const char *gb_data_vocab_path(const gb_dataset *ds) { return ds->vocab_path; }
int64_t gb_data_tokens(const gb_dataset *ds, gb_split split) { return ds->split[split].length; }
int gb_data_file_count(const gb_dataset *ds, gb_split split) { return ds->split[split].n_files; }

const char *gb_data_file_path(const gb_dataset *ds, gb_split split, int i)
{
    return ds->split[split].files[i].path;
}
