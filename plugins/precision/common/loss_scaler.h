/* A dynamic loss scaler with PyTorch GradScaler's semantics, for the precision plugins
 * that scale the loss (precision.h: loss_scale, update, state_bytes, save_state,
 * load_state). The plugin declares the config keys, fills a loss_scaler_config from them
 * and forwards its scaler entries here.
 *
 * update(found_inf) follows torch._amp_update_scale_ (PyTorch 1.13), with the scale an f32
 * and every product computed in double and rounded once, as there (the step itself is
 * kernels/common/loss_scale.h's, which the devices run too):
 *   inf/nan:  skip the step; scale *= backoff_factor; tracker = 0
 *   clean:    tracker += 1; when tracker reaches growth_interval: tracker = 0 and
 *             scale *= growth_factor unless the product rounds to inf in f32 (the
 *             scale then stays where it is)
 * Two additions: the scale never drops below min_scale (PyTorch has no floor, so a run
 * of infs can drive its scale to 0), and "reaches" is tracker >= growth_interval, so a
 * state saved under a longer interval still grows when loaded under a shorter one
 * (PyTorch's == would never grow again). With enabled = 0 the scaler is off, like
 * GradScaler(enabled=False): the scale reads 1 and no step is skipped.
 *
 * The state is plain data, 40 bytes in the machine's byte order (little-endian on x86-64
 * and aarch64), which the core may read for metrics:
 *   offset  0  char[4]  magic "GBLS"
 *   offset  4  uint32   version, 1
 *   offset  8  float    scale (the value in effect while enabled)
 *   offset 12  uint32   reserved, 0
 *   offset 16  int64    growth tracker: clean steps since the scale last moved
 *   offset 24  int64    skipped steps (updates with found_inf while enabled)
 *   offset 32  int64    total steps (every update)
 * Loading refuses a blob whose magic, version or values do not make sense, with a
 * message through host->set_error(). No checksum: the checkpoint file has its own.
 *
 * The scaler is held as gearbox/device.h's gb_loss_scaler (the rule and the state), which
 * loss_scaler_get and loss_scaler_set hand to and take from a device that runs it (ABI
 * 1.4, precision.h's scaler_get and scaler_set).
 */
#ifndef GB_PLUGINS_PRECISION_LOSS_SCALER_H
#define GB_PLUGINS_PRECISION_LOSS_SCALER_H

#include "gearbox/device.h"
#include "gearbox/plugin.h"

#define LOSS_SCALER_MAGIC "GBLS"
#define LOSS_SCALER_VERSION 1u

/* The saved state, byte for byte (see the layout above). */
typedef struct loss_scaler_state {
    char magic[4];
    uint32_t version;
    float scale;
    uint32_t reserved;
    int64_t growth_tracker;
    int64_t skipped_steps;
    int64_t total_steps;
} loss_scaler_state;

_Static_assert(sizeof(loss_scaler_state) == 40, "the loss-scaler state layout is frozen");

/* The knobs, as the config keys of the same names give them. */
typedef struct loss_scaler_config {
    double init_scale;        /* first scale, at least min_scale */
    double growth_factor;     /* above 1 */
    double backoff_factor;    /* in (0, 1) */
    int64_t growth_interval;  /* clean steps per growth, at least 1 */
    double min_scale;         /* the floor, above 0 */
    int enabled;              /* 0: scale 1, never skip */
} loss_scaler_config;

/* One scaler: the knobs as update() uses them, and the state it saves. */
typedef struct loss_scaler {
    gb_loss_scaler s;
} loss_scaler;

/* Checks `config` and starts `s` at init_scale with zero counters. On a value the
 * schema's inclusive ranges let through but the scaler cannot use, says which key is at
 * fault through host->set_error() and returns GB_ERR_CONFIG. */
gb_status loss_scaler_init(loss_scaler *s, const loss_scaler_config *config,
                           const gb_host *host);

/* The factor the core multiplies the loss gradient by: 1 when disabled. */
float loss_scaler_scale(const loss_scaler *s);

/* One optimizer step's verdict: *skip_step is 1 when found_inf (and enabled), else 0;
 * the scale and counters move as the file comment says. */
void loss_scaler_update(loss_scaler *s, int found_inf, int *skip_step);

/* Writes the state (sizeof(loss_scaler_state) bytes) to buf. */
void loss_scaler_save(const loss_scaler *s, void *buf);

/* Replaces the state with the one in buf (sizeof(loss_scaler_state) bytes) after checking
 * it; on a blob that is not a loss-scaler state, or one from another version, says why
 * through host->set_error(), leaves `s` as it was and returns GB_ERR_INVALID_ARG; on a
 * scale below this run's min_scale, GB_ERR_CONFIG. */
gb_status loss_scaler_load(loss_scaler *s, const void *buf, const gb_host *host);

/* The scaler as a device runs it. */
void loss_scaler_get(const loss_scaler *s, gb_loss_scaler *out);

/* Takes the state of `in`, a scaler loss_scaler_get gave that a device has moved since;
 * refuses (GB_ERR_INVALID_ARG, said through host->set_error()) another rule or a state
 * that does not make sense, leaving `s` as it was. */
gb_status loss_scaler_set(loss_scaler *s, const gb_loss_scaler *in, const gb_host *host);

#endif
