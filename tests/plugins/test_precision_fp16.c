/* Tests for precision-fp16: descriptor and schema, the f16 policy, and the loss scaler as
 * a state machine driven the way the core drives it.
 *
 * The scaler must follow PyTorch GradScaler (torch._amp_update_scale_): an inf skips the
 * step, multiplies the scale by backoff_factor and resets the growth tracker; the scale
 * grows by growth_factor exactly on the growth_interval-th clean step in a row; it never
 * falls below min_scale nor grows past f32's range; enabled = false means scale 1 and no
 * skipping. The state blob is read here through its documented layout
 * (plugins/precision/common/loss_scaler.h), so a layout change fails this test; a saved
 * state loaded into a fresh instance must continue the same sequence, and damaged blobs
 * must be refused with a message and leave the instance as it was. The scaler as a device
 * runs it (ABI 1.4, scaler_get and scaler_set): moved by the rule device.h states, written
 * out here again, it ends where update() does, and set refuses another rule or a damaged
 * state; device_update = false keeps it on the host.
 *
 * Usage: test_precision_fp16 PLUGIN.so
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/precision.h"
#include "test_host.h"

/* The state blob's documented layout. */
#define STATE_BYTES 40
#define AT_MAGIC 0
#define AT_VERSION 4
#define AT_SCALE 8
#define AT_TRACKER 16
#define AT_SKIPPED 24
#define AT_TOTAL 32

typedef struct blob_fields {
    char magic[4];
    uint32_t version;
    float scale;
    int64_t tracker, skipped, total;
} blob_fields;

/* One scaler instance and the plugin it came from. */
typedef struct scaler {
    const gb_plugin_desc *desc;
    const gb_precision_ops *ops;
    void *self;
} scaler;

/* A config key's value for create(); the others keep their defaults. */
typedef struct setting {
    const char *key;
    double value;
} setting;

static gb_status scaler_create(const gb_plugin_desc *desc, const setting *settings,
                               int n_settings, scaler *s)
{
    gb_value values[8];
    gb_test_default_values(desc, values);
    for (int k = 0; k < n_settings; k++) {
        int index = gb_test_option_index(desc, settings[k].key);
        if (index < 0) {
            printf("FAIL: no option %s\n", settings[k].key);
            return GB_ERR_INTERNAL;
        }
        if (desc->options[index].type == GB_OPT_FLOAT)
            values[index].f = settings[k].value;
        else
            values[index].i = (int64_t)settings[k].value;
    }
    *s = (scaler){.desc = desc, .ops = desc->ops};
    gb_test_clear_error();
    return s->ops->create(gb_test_host(), values, gb_test_cpu_ctx(), &s->self);
}

static void scaler_destroy(scaler *s)
{
    if (s->self)
        s->ops->destroy(s->self);
    s->self = NULL;
}

static float scale_of(const scaler *s)
{
    return s->ops->loss_scale(s->self);
}

/* One update; returns skip_step, or -1 when update() failed. */
static int step(const scaler *s, int found_inf)
{
    int skip = -1;
    gb_status st = s->ops->update(s->self, found_inf, &skip);
    if (st != GB_OK) {
        printf("FAIL: update returned %d: %s\n", st, gb_test_last_error());
        return -1;
    }
    return skip;
}

static blob_fields read_blob(const unsigned char *blob)
{
    blob_fields f;
    memcpy(f.magic, blob + AT_MAGIC, 4);
    memcpy(&f.version, blob + AT_VERSION, 4);
    memcpy(&f.scale, blob + AT_SCALE, 4);
    memcpy(&f.tracker, blob + AT_TRACKER, 8);
    memcpy(&f.skipped, blob + AT_SKIPPED, 8);
    memcpy(&f.total, blob + AT_TOTAL, 8);
    return f;
}

static blob_fields saved_fields(const scaler *s)
{
    unsigned char blob[STATE_BYTES] = {0};
    s->ops->save_state(s->self, blob);
    return read_blob(blob);
}

static int check_schema(const gb_plugin_desc *desc)
{
    int failures = gb_test_check_descriptor(desc, GB_KIND_PRECISION, "fp16",
                                            GB_DEVICE_CPU | GB_DEVICE_CUDA | GB_DEVICE_ANY_HOST,
                                            sizeof(gb_precision_ops));
    GB_TEST_CHECK(failures, desc->n_options == 7, "%zu options, expected 7", desc->n_options);
    failures += gb_test_check_option(desc, "init_scale", GB_OPT_FLOAT, "65536");
    failures += gb_test_check_option(desc, "growth_factor", GB_OPT_FLOAT, "2.0");
    failures += gb_test_check_option(desc, "backoff_factor", GB_OPT_FLOAT, "0.5");
    failures += gb_test_check_option(desc, "growth_interval", GB_OPT_INT, "2000");
    failures += gb_test_check_option(desc, "min_scale", GB_OPT_FLOAT, "1.0");
    failures += gb_test_check_option(desc, "enabled", GB_OPT_BOOL, "true");
    failures += gb_test_check_option(desc, "device_update", GB_OPT_BOOL, "true");
    const gb_precision_ops *ops = desc->ops;
    GB_TEST_CHECK(failures, ops->create && ops->destroy && ops->eligible && ops->policy,
                  "policy entries missing");
    GB_TEST_CHECK(failures, ops->loss_scale && ops->update && ops->state_bytes &&
                                ops->save_state && ops->load_state,
                  "a loss-scaler entry is NULL");
    GB_TEST_CHECK(failures, ops->scaler_get && ops->scaler_set, "scaler_get or scaler_set is NULL");
    return failures;
}

static int check_policy_and_eligibility(const scaler *s)
{
    int failures = 0;
    gb_precision_policy policy = {.struct_size = sizeof policy, .master_weights = -1};
    gb_status st = s->ops->policy(s->self, &policy);
    GB_TEST_CHECK(failures, st == GB_OK, "policy returned %d: %s", st, gb_test_last_error());
    GB_TEST_CHECK(failures, policy.struct_size == sizeof policy, "policy struct_size %zu",
                  policy.struct_size);
    GB_TEST_CHECK(failures, policy.activation_dtype == GB_F16 && policy.matmul_dtype == GB_F16 &&
                                policy.param_dtype == GB_F16,
                  "activations %s, matmuls %s, params %s; expected f16 for all",
                  gb_dtype_name(policy.activation_dtype), gb_dtype_name(policy.matmul_dtype),
                  gb_dtype_name(policy.param_dtype));
    GB_TEST_CHECK(failures, policy.master_weights == 1, "master_weights %d",
                  policy.master_weights);
    gb_test_clear_error();
    st = s->ops->policy(s->self, NULL);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "policy(NULL) returned %d", st);

    const gb_device_ctx cuda = {.struct_size = sizeof cuda, .device = GB_DEVICE_CUDA};
    const gb_device_ctx *devices[] = {gb_test_cpu_ctx(), &cuda};
    for (int d = 0; d < 2; d++) {
        char reason[128] = "untouched";
        GB_TEST_CHECK(failures, s->ops->eligible(s->self, devices[d], reason, sizeof reason),
                      "not eligible on device 0x%x: %s", devices[d]->device, reason);
        GB_TEST_CHECK(failures, reason[0] == '\0', "eligible but gave a reason: %s", reason);
    }
    return failures;
}

/* Defaults: 65536, an inf halves it and skips, the 2000th clean step (not the 1999th)
 * doubles it, and an inf resets the count of clean steps. */
static int check_defaults_sequence(const gb_plugin_desc *desc)
{
    int failures = 0;
    scaler s;
    gb_status st = scaler_create(desc, NULL, 0, &s);
    GB_TEST_CHECK(failures, st == GB_OK, "create returned %d: %s", st, gb_test_last_error());
    if (st != GB_OK)
        return failures;
    GB_TEST_CHECK(failures, scale_of(&s) == 65536.0f, "initial scale %g", (double)scale_of(&s));
    GB_TEST_CHECK(failures, s.ops->state_bytes(s.self) == STATE_BYTES, "state_bytes %zu",
                  s.ops->state_bytes(s.self));

    int skip = step(&s, 1);
    GB_TEST_CHECK(failures, skip == 1, "an inf step gave skip_step %d", skip);
    GB_TEST_CHECK(failures, scale_of(&s) == 32768.0f, "scale %g after an inf, expected 32768",
                  (double)scale_of(&s));

    /* 1999 clean steps, an inf, then growth must wait for 2000 more */
    int skipped_clean = 0;
    for (int i = 0; i < 1999; i++)
        skipped_clean += step(&s, 0) != 0;
    GB_TEST_CHECK(failures, scale_of(&s) == 32768.0f, "scale %g after 1999 clean steps",
                  (double)scale_of(&s));
    blob_fields f = saved_fields(&s);
    GB_TEST_CHECK(failures, f.tracker == 1999, "growth tracker %lld after 1999 clean steps",
                  (long long)f.tracker);
    step(&s, 1);
    f = saved_fields(&s);
    GB_TEST_CHECK(failures, f.tracker == 0 && scale_of(&s) == 16384.0f,
                  "after an inf: tracker %lld, scale %g (expected 0, 16384)",
                  (long long)f.tracker, (double)scale_of(&s));
    for (int i = 0; i < 1999; i++)
        skipped_clean += step(&s, 0) != 0;
    GB_TEST_CHECK(failures, scale_of(&s) == 16384.0f, "grew before the 2000th clean step: %g",
                  (double)scale_of(&s));
    skipped_clean += step(&s, 0) != 0;
    GB_TEST_CHECK(failures, scale_of(&s) == 32768.0f,
                  "scale %g after 2000 clean steps, expected 32768", (double)scale_of(&s));
    GB_TEST_CHECK(failures, skipped_clean == 0, "%d clean steps were skipped", skipped_clean);

    f = saved_fields(&s);
    GB_TEST_CHECK(failures, memcmp(f.magic, "GBLS", 4) == 0 && f.version == 1,
                  "blob magic %.4s version %u, expected GBLS 1", f.magic, f.version);
    GB_TEST_CHECK(failures, f.scale == 32768.0f && f.tracker == 0 && f.skipped == 2 &&
                                f.total == 4001,
                  "blob scale %g tracker %lld skipped %lld total %lld; expected 32768 0 2 4001",
                  (double)f.scale, (long long)f.tracker, (long long)f.skipped,
                  (long long)f.total);
    scaler_destroy(&s);
    return failures;
}

/* growth_interval 3, backoff 0.25, growth 4, init 1024: a hand-worked GradScaler
 * sequence. */
static int check_config_honoured(const gb_plugin_desc *desc)
{
    int failures = 0;
    const setting settings[] = {{"init_scale", 1024}, {"growth_interval", 3},
                                {"backoff_factor", 0.25}, {"growth_factor", 4}};
    scaler s;
    gb_status st = scaler_create(desc, settings, 4, &s);
    GB_TEST_CHECK(failures, st == GB_OK, "create returned %d: %s", st, gb_test_last_error());
    if (st != GB_OK)
        return failures;
    /* C C C -> grow; I -> back off; C C I -> back off (no growth); C C C -> grow */
    const int infs[] = {0, 0, 0, 1, 0, 0, 1, 0, 0, 0};
    const float want[] = {1024, 1024, 4096, 1024, 1024, 1024, 256, 256, 256, 1024};
    for (int i = 0; i < 10; i++) {
        int skip = step(&s, infs[i]);
        GB_TEST_CHECK(failures, skip == infs[i] && scale_of(&s) == want[i],
                      "step %d (%s): skip %d scale %g, expected skip %d scale %g", i + 1,
                      infs[i] ? "inf" : "clean", skip, (double)scale_of(&s), infs[i],
                      (double)want[i]);
    }
    scaler_destroy(&s);
    return failures;
}

/* Repeated infs stop at min_scale, also when the backoff would step over it. */
static int check_min_scale(const gb_plugin_desc *desc)
{
    int failures = 0;
    const struct { setting settings[2]; float floor; } cases[] = {
        {{{"init_scale", 65536}, {"min_scale", 1}}, 1.0f},
        {{{"init_scale", 16}, {"min_scale", 3}}, 3.0f},
    };
    for (int c = 0; c < 2; c++) {
        scaler s;
        gb_status st = scaler_create(desc, cases[c].settings, 2, &s);
        GB_TEST_CHECK(failures, st == GB_OK, "create returned %d: %s", st,
                      gb_test_last_error());
        if (st != GB_OK)
            continue;
        int below = 0, not_skipped = 0;
        for (int i = 0; i < 200; i++) {
            not_skipped += step(&s, 1) != 1;
            below += scale_of(&s) < cases[c].floor;
        }
        GB_TEST_CHECK(failures, below == 0 && scale_of(&s) == cases[c].floor,
                      "min_scale %g: %d steps below it, ending at %g", (double)cases[c].floor,
                      below, (double)scale_of(&s));
        GB_TEST_CHECK(failures, not_skipped == 0, "%d inf steps at the floor were not skipped",
                      not_skipped);
        scaler_destroy(&s);
    }
    return failures;
}

/* Growth saturates at the largest power of two reached instead of becoming inf. */
static int check_saturation(const gb_plugin_desc *desc)
{
    int failures = 0;
    const float top = ldexpf(1.0f, 127);
    const setting settings[] = {{"init_scale", ldexp(1.0, 125)}, {"growth_interval", 1}};
    scaler s;
    gb_status st = scaler_create(desc, settings, 2, &s);
    GB_TEST_CHECK(failures, st == GB_OK, "create returned %d: %s", st, gb_test_last_error());
    if (st != GB_OK)
        return failures;
    for (int i = 0; i < 6; i++)
        step(&s, 0);
    GB_TEST_CHECK(failures, isfinite(scale_of(&s)) && scale_of(&s) == top,
                  "scale %g after growing past f32's range, expected %g", (double)scale_of(&s),
                  (double)top);
    blob_fields f = saved_fields(&s);
    GB_TEST_CHECK(failures, f.tracker == 0, "tracker %lld at saturation, expected 0",
                  (long long)f.tracker);
    step(&s, 1);
    GB_TEST_CHECK(failures, scale_of(&s) == ldexpf(1.0f, 126),
                  "a saturated scale did not back off: %g", (double)scale_of(&s));
    scaler_destroy(&s);
    return failures;
}

static int found_inf_at(int i)
{
    return i % 7 == 3 || i % 11 == 0;
}

/* 10 updates, save, load into a fresh instance; 10 more on both must agree, as must the
 * blobs they save at the end. */
static int check_round_trip(const gb_plugin_desc *desc)
{
    int failures = 0;
    const setting settings[] = {{"growth_interval", 3}, {"backoff_factor", 0.25}};
    scaler a, b = {0};
    gb_status st = scaler_create(desc, settings, 2, &a);
    GB_TEST_CHECK(failures, st == GB_OK, "create returned %d: %s", st, gb_test_last_error());
    if (st != GB_OK)
        return failures;
    for (int i = 0; i < 10; i++)
        step(&a, found_inf_at(i));
    unsigned char saved[STATE_BYTES], end_a[STATE_BYTES], end_b[STATE_BYTES];
    st = a.ops->save_state(a.self, saved);
    GB_TEST_CHECK(failures, st == GB_OK, "save_state returned %d", st);
    if (st == GB_OK && (st = scaler_create(desc, settings, 2, &b)) == GB_OK) {
        st = b.ops->load_state(b.self, saved);
        GB_TEST_CHECK(failures, st == GB_OK, "load_state returned %d: %s", st,
                      gb_test_last_error());
        GB_TEST_CHECK(failures, scale_of(&b) == scale_of(&a), "loaded scale %g, saved %g",
                      (double)scale_of(&b), (double)scale_of(&a));
        int differ = 0;
        for (int i = 10; i < 20; i++) {
            int skip_a = step(&a, found_inf_at(i)), skip_b = step(&b, found_inf_at(i));
            differ += skip_a != skip_b || scale_of(&a) != scale_of(&b);
        }
        GB_TEST_CHECK(failures, differ == 0, "%d of 10 updates after loading differ", differ);
        a.ops->save_state(a.self, end_a);
        b.ops->save_state(b.self, end_b);
        GB_TEST_CHECK(failures, memcmp(end_a, end_b, STATE_BYTES) == 0,
                      "the two instances end with different state blobs");
        blob_fields f = read_blob(end_b);
        GB_TEST_CHECK(failures, f.total == 20, "total steps %lld after 20 updates",
                      (long long)f.total);
    }
    scaler_destroy(&b);
    scaler_destroy(&a);
    return failures;
}

/* Damaged blobs are refused with a message, and the instance goes on unchanged. */
static int check_bad_blobs(const gb_plugin_desc *desc)
{
    int failures = 0;
    scaler s;
    gb_status st = scaler_create(desc, (const setting[]){{"min_scale", 4}}, 1, &s);
    GB_TEST_CHECK(failures, st == GB_OK, "create returned %d: %s", st, gb_test_last_error());
    if (st != GB_OK)
        return failures;
    step(&s, 1);
    step(&s, 0);
    unsigned char good[STATE_BYTES], before[STATE_BYTES], after[STATE_BYTES];
    s.ops->save_state(s.self, good);
    const float nan_scale = NAN, negative_scale = -1.0f, low_scale = 2.0f;
    const uint32_t version_2 = 2;
    const int64_t negative_tracker = -1, too_many_skipped = 1000;
    const struct {
        const char *what;
        size_t at, bytes;
        const void *value;
        const char *message_has;
        gb_status want;
    } cases[] = {
        {"magic", AT_MAGIC, 4, "GBLX", "GBLS", GB_ERR_INVALID_ARG},
        {"zeroed magic", AT_MAGIC, 4, "\0\0\0\0", "GBLS", GB_ERR_INVALID_ARG},
        {"version 2", AT_VERSION, 4, &version_2, "version", GB_ERR_INVALID_ARG},
        {"nan scale", AT_SCALE, 4, &nan_scale, "damaged", GB_ERR_INVALID_ARG},
        {"negative scale", AT_SCALE, 4, &negative_scale, "damaged", GB_ERR_INVALID_ARG},
        {"negative tracker", AT_TRACKER, 8, &negative_tracker, "damaged", GB_ERR_INVALID_ARG},
        {"more skipped than total", AT_SKIPPED, 8, &too_many_skipped, "damaged",
         GB_ERR_INVALID_ARG},
        {"scale below min_scale", AT_SCALE, 4, &low_scale, "min_scale", GB_ERR_CONFIG},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        unsigned char bad[STATE_BYTES];
        memcpy(bad, good, STATE_BYTES);
        memcpy(bad + cases[c].at, cases[c].value, cases[c].bytes);
        s.ops->save_state(s.self, before);
        gb_test_clear_error();
        st = s.ops->load_state(s.self, bad);
        s.ops->save_state(s.self, after);
        GB_TEST_CHECK(failures, st == cases[c].want, "%s: load_state returned %d, expected %d",
                      cases[c].what, st, cases[c].want);
        GB_TEST_CHECK(failures, strstr(gb_test_last_error(), cases[c].message_has) != NULL,
                      "%s: message \"%s\" does not mention %s", cases[c].what,
                      gb_test_last_error(), cases[c].message_has);
        GB_TEST_CHECK(failures, memcmp(before, after, STATE_BYTES) == 0,
                      "%s: a refused load changed the state", cases[c].what);
    }
    gb_test_clear_error();
    GB_TEST_CHECK(failures, s.ops->load_state(s.self, NULL) == GB_ERR_INVALID_ARG &&
                                gb_test_last_error()[0],
                  "load_state(NULL) was not refused with a message");
    scaler_destroy(&s);
    return failures;
}

/* enabled = false: scale 1 whatever happens, nothing skipped. */
static int check_disabled(const gb_plugin_desc *desc)
{
    int failures = 0;
    scaler s;
    gb_status st = scaler_create(desc, (const setting[]){{"enabled", 0}, {"growth_interval", 1}},
                                 2, &s);
    GB_TEST_CHECK(failures, st == GB_OK, "create returned %d: %s", st, gb_test_last_error());
    if (st != GB_OK)
        return failures;
    int skipped = 0, not_one = 0;
    for (int i = 0; i < 50; i++) {
        skipped += step(&s, found_inf_at(i)) != 0;
        not_one += scale_of(&s) != 1.0f;
    }
    GB_TEST_CHECK(failures, skipped == 0 && not_one == 0 && scale_of(&s) == 1.0f,
                  "disabled: %d steps skipped, %d times the scale was not 1", skipped, not_one);
    scaler_destroy(&s);
    return failures;
}

/* One step of gearbox/device.h's gb_loss_scaler rule, as the header states it. */
static void rule_step(gb_loss_scaler *g, int found_inf)
{
    g->total_steps++;
    if (!g->enabled)
        return;
    if (found_inf) {
        float lowered = (float)((double)g->scale * g->backoff_factor);
        g->skipped_steps++;
        g->growth_tracker = 0;
        g->scale = lowered > g->min_scale ? lowered : g->min_scale;
    } else if (++g->growth_tracker >= g->growth_interval) {
        float grown = (float)((double)g->scale * g->growth_factor);
        g->growth_tracker = 0;
        if (isfinite(grown))
            g->scale = grown;
    }
}

/* scaler_get, 40 steps of the rule "on the device", scaler_set: the instance then holds
 * what 40 update() calls give, down to the saved blob; set refuses another rule and a
 * damaged state; device_update = false refuses get. */
static int check_device_scaler(const gb_plugin_desc *desc)
{
    int failures = 0;
    const setting settings[] = {{"growth_interval", 3}, {"init_scale", 1e30}};
    scaler host, dev, off;
    if (scaler_create(desc, settings, 2, &host) != GB_OK ||
        scaler_create(desc, settings, 2, &dev) != GB_OK) {
        printf("FAIL: create: %s\n", gb_test_last_error());
        return 1;
    }
    gb_loss_scaler g;
    gb_status st = dev.ops->scaler_get(dev.self, &g);
    GB_TEST_CHECK(failures, st == GB_OK && g.scale == 1e30f && g.growth_interval == 3 &&
                                g.growth_factor == 2.0 && g.backoff_factor == 0.5 &&
                                g.min_scale == 1.0f && g.enabled == 1 && g.total_steps == 0,
                  "scaler_get returned %d: scale %g, interval %lld", st, (double)g.scale,
                  (long long)g.growth_interval);
    for (int i = 0; i < 40; i++) {
        step(&host, found_inf_at(i) || i < 2);
        rule_step(&g, found_inf_at(i) || i < 2);
    }
    st = dev.ops->scaler_set(dev.self, &g);
    unsigned char a[STATE_BYTES], b[STATE_BYTES];
    host.ops->save_state(host.self, a);
    dev.ops->save_state(dev.self, b);
    GB_TEST_CHECK(failures, st == GB_OK && memcmp(a, b, STATE_BYTES) == 0 &&
                                scale_of(&dev) == scale_of(&host),
                  "after 40 steps on the device: set returned %d, scale %g, on the host %g", st,
                  (double)scale_of(&dev), (double)scale_of(&host));
    gb_loss_scaler other = g;
    other.growth_interval = 4;
    gb_test_clear_error();
    st = dev.ops->scaler_set(dev.self, &other);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && strstr(gb_test_last_error(), "rule"),
                  "set with another rule returned %d: \"%s\"", st, gb_test_last_error());
    other = g;
    other.scale = NAN;
    st = dev.ops->scaler_set(dev.self, &other);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && scale_of(&dev) == scale_of(&host),
                  "set with a NaN scale returned %d, scale now %g", st, (double)scale_of(&dev));
    if (scaler_create(desc, (const setting[]){{"device_update", 0}}, 1, &off) == GB_OK) {
        gb_test_clear_error();
        st = off.ops->scaler_get(off.self, &g);
        GB_TEST_CHECK(failures, st == GB_ERR_UNSUPPORTED &&
                                    strstr(gb_test_last_error(), "device_update = false"),
                      "device_update = false: scaler_get returned %d: \"%s\"", st,
                      gb_test_last_error());
        scaler_destroy(&off);
    }
    scaler_destroy(&dev);
    scaler_destroy(&host);
    return failures;
}

/* Values the schema's inclusive ranges let through but the scaler cannot use. */
static int check_refused_configs(const gb_plugin_desc *desc)
{
    int failures = 0;
    const struct { setting settings[2]; int n; const char *key; } cases[] = {
        {{{"growth_factor", 1}}, 1, "growth_factor"},
        {{{"backoff_factor", 1}}, 1, "backoff_factor"},
        {{{"backoff_factor", 0}}, 1, "backoff_factor"},
        {{{"init_scale", 0.5}, {"min_scale", 1}}, 2, "init_scale"},
    };
    for (int c = 0; c < 4; c++) {
        scaler s;
        gb_status st = scaler_create(desc, cases[c].settings, cases[c].n, &s);
        GB_TEST_CHECK(failures, st == GB_ERR_CONFIG &&
                                    strstr(gb_test_last_error(), cases[c].key) != NULL,
                      "%s = %g: create returned %d with \"%s\"", cases[c].settings[0].key,
                      cases[c].settings[0].value, st, gb_test_last_error());
        if (st == GB_OK)
            scaler_destroy(&s);
    }
    scaler s;
    gb_status st = scaler_create(desc, NULL, 0, &s);
    if (st == GB_OK) {
        gb_test_clear_error();
        GB_TEST_CHECK(failures, s.ops->update(s.self, 0, NULL) == GB_ERR_INVALID_ARG &&
                                    gb_test_last_error()[0],
                      "update with skip_step NULL was not refused with a message");
        scaler_destroy(&s);
    }
    return failures;
}

int main(int argc, char **argv)
{
    gb_test_usage_unless(argc == 2, argv[0], "precision-fp16.so");
    const gb_plugin_desc *desc = gb_test_load_plugin(argv[1]);
    int failures = check_schema(desc);
    if (failures == 0) {
        scaler s;
        gb_status st = scaler_create(desc, NULL, 0, &s);
        GB_TEST_CHECK(failures, st == GB_OK, "create returned %d: %s", st,
                      gb_test_last_error());
        if (st == GB_OK) {
            failures += check_policy_and_eligibility(&s);
            scaler_destroy(&s);
        }
        failures += check_defaults_sequence(desc);
        failures += check_config_honoured(desc);
        failures += check_min_scale(desc);
        failures += check_saturation(desc);
        failures += check_round_trip(desc);
        failures += check_bad_blobs(desc);
        failures += check_disabled(desc);
        failures += check_refused_configs(desc);
        failures += check_device_scaler(desc);
    }
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
