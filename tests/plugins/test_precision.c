/* Tests for the precision plugins without a loss scaler (fp32, tf32, bf16), one row of a
 * table each: the descriptor and its options, the scaler entries all NULL (precision.h:
 * NULL means scale 1, never skip a step), the policy's dtypes and master weights (and
 * policy(NULL) refused with a message), and where each is eligible: fp32 and bf16
 * everywhere without a reason; tf32 on CUDA of compute capability 8.0 or later (or not
 * saying), refused on a 7.0 GPU and on the CPU with a reason naming the device and what to
 * use, cut short safely in a small buffer. bf16 also makes an instance per value of
 * stochastic_rounding, which its policy's ABI 1.1 field reports. fp16, with its scaler, has
 * test_precision_fp16.c.
 *
 * Usage: test_precision NAME PLUGIN.so    (NAME: fp32, tf32 or bf16)
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/precision.h"
#include "test_host.h"

typedef enum eligible_on { EVERYWHERE, CUDA_AMPERE_ON } eligible_on;

typedef struct expected {
    const char *name;
    gb_dtype storage;          /* activations, matmuls and parameters */
    int master_weights;
    eligible_on where;
    const char *option;        /* its one option, or NULL for none */
} expected;

static const expected plugins[] = {
    {"fp32", GB_F32, 0, EVERYWHERE, NULL},
    {"tf32", GB_F32, 0, CUDA_AMPERE_ON, NULL},
    {"bf16", GB_BF16, 1, EVERYWHERE, "stochastic_rounding"},
};

static int check_policy(const expected *e, const gb_precision_ops *ops, void *self)
{
    int failures = 0;
    gb_precision_policy policy = {.struct_size = sizeof policy, .master_weights = -1};
    gb_status st = ops->policy(self, &policy);
    GB_TEST_CHECK(failures, st == GB_OK, "policy returned %d: %s", st, gb_test_last_error());
    GB_TEST_CHECK(failures, policy.struct_size == sizeof policy, "policy struct_size %zu",
                  policy.struct_size);
    GB_TEST_CHECK(failures, policy.activation_dtype == e->storage &&
                                policy.matmul_dtype == e->storage &&
                                policy.param_dtype == e->storage,
                  "activations %s, matmuls %s, params %s; expected %s for all",
                  gb_dtype_name(policy.activation_dtype), gb_dtype_name(policy.matmul_dtype),
                  gb_dtype_name(policy.param_dtype), gb_dtype_name(e->storage));
    GB_TEST_CHECK(failures, policy.master_weights == e->master_weights,
                  "master_weights %d, expected %d", policy.master_weights, e->master_weights);
    gb_test_clear_error();
    st = ops->policy(self, NULL);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "policy(NULL) returned %d", st);
    return failures;
}

/* Eligible on `ctx` and silent about it. */
static int check_eligible(const gb_precision_ops *ops, void *self, const gb_device_ctx *ctx,
                          const char *where)
{
    int failures = 0;
    char reason[256] = "untouched";
    GB_TEST_CHECK(failures, ops->eligible(self, ctx, reason, sizeof reason) == 1,
                  "not eligible on %s: %s", where, reason);
    GB_TEST_CHECK(failures, reason[0] == '\0', "eligible on %s but gave a reason: %s", where,
                  reason);
    return failures;
}

/* Refused on `ctx` with a reason that holds both words. */
static int check_refused(const gb_precision_ops *ops, void *self, const gb_device_ctx *ctx,
                         const char *where, const char *word1, const char *word2)
{
    int failures = 0;
    char reason[256] = "";
    GB_TEST_CHECK(failures, ops->eligible(self, ctx, reason, sizeof reason) == 0,
                  "eligible on %s", where);
    GB_TEST_CHECK(failures, strstr(reason, word1) && strstr(reason, word2),
                  "the refusal on %s \"%s\" does not name %s and %s", where, reason, word1, word2);
    printf("refused on %s: %s\n", where, reason);
    return failures;
}

static int check_eligibility(const expected *e, const gb_precision_ops *ops, void *self)
{
    // an Ampere and a Hopper GPU, and a context from before ABI 1.2 that does not say
    const gb_device_ctx cudas[] = {
        {.struct_size = sizeof cudas[0], .device = GB_DEVICE_CUDA, .cc_major = 8},
        {.struct_size = sizeof cudas[0], .device = GB_DEVICE_CUDA, .cc_major = 9},
        {.struct_size = offsetof(gb_device_ctx, ops), .device = GB_DEVICE_CUDA},
    };
    int failures = 0;
    for (int i = 0; i < 3; i++)
        failures += check_eligible(ops, self, &cudas[i], "CUDA");
    if (e->where == EVERYWHERE)
        return failures + check_eligible(ops, self, gb_test_cpu_ctx(), "the CPU");

    const gb_device_ctx volta = {.struct_size = sizeof volta, .device = GB_DEVICE_CUDA,
                                 .cc_major = 7, .cc_minor = 0};
    failures += check_refused(ops, self, &volta, "a 7.0 GPU", "7.0", "8.0");
    failures += check_refused(ops, self, gb_test_cpu_ctx(), "the CPU", "cpu", "fp32");
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    ops->eligible(self, gb_test_cpu_ctx(), tiny, sizeof tiny);
    GB_TEST_CHECK(failures, memchr(tiny, '\0', sizeof tiny) != NULL,
                  "the reason overran an 8-byte buffer");
    GB_TEST_CHECK(failures, ops->eligible(self, gb_test_cpu_ctx(), NULL, 0) == 0,
                  "eligible on the CPU without a reason buffer");
    return failures;
}

/* The policy's ABI 1.1 field says which stochastic_rounding was asked for, and a
 * 1.0-sized struct does not get it. */
static int check_stochastic_field(const gb_precision_ops *ops, void *self, int asked)
{
    int failures = 0;
    gb_precision_policy pol = {.struct_size = sizeof pol, .stochastic_rounding = -1};
    ops->policy(self, &pol);
    GB_TEST_CHECK(failures, pol.stochastic_rounding == asked,
                  "stochastic_rounding %d: the policy says %d", asked, pol.stochastic_rounding);
    gb_precision_policy old = {.struct_size = offsetof(gb_precision_policy, stochastic_rounding),
                               .stochastic_rounding = -1};
    ops->policy(self, &old);
    GB_TEST_CHECK(failures, old.stochastic_rounding == -1,
                  "a 1.0-sized policy struct had its 1.1 field written");
    return failures;
}

/* One instance per value of the plugin's boolean option (one instance when it has none),
 * each checked for eligibility and policy. */
static int check_instances(const expected *e, const gb_plugin_desc *desc)
{
    int failures = 0;
    const gb_precision_ops *ops = desc->ops;
    gb_value values[1];
    for (int v = 0; v <= (e->option ? 1 : 0); v++) {
        if (e->option) {
            gb_test_default_values(desc, values);
            values[gb_test_option_index(desc, e->option)].i = v;
        }
        void *self = NULL;
        gb_status st = ops->create(gb_test_host(), e->option ? values : NULL,
                                   gb_test_cpu_ctx(), &self);
        GB_TEST_CHECK(failures, st == GB_OK, "create (option value %d) returned %d: %s", v,
                      st, gb_test_last_error());
        if (st != GB_OK)
            continue;
        failures += check_eligibility(e, ops, self);
        failures += check_policy(e, ops, self);
        if (e->option)
            failures += check_stochastic_field(ops, self, v);
        ops->destroy(self);
    }
    return failures;
}

static int check_descriptor(const expected *e, const gb_plugin_desc *desc)
{
    /* tf32 is a CUDA mode: it alone does not run on any host-memory device (ABI 1.6) */
    uint32_t any_host = strcmp(e->name, "tf32") != 0 ? GB_DEVICE_ANY_HOST : 0u;
    int failures = gb_test_check_descriptor(desc, GB_KIND_PRECISION, e->name,
                                            GB_DEVICE_CPU | GB_DEVICE_CUDA | any_host,
                                            sizeof(gb_precision_ops));
    size_t want_options = e->option ? 1 : 0;
    GB_TEST_CHECK(failures, desc->n_options == want_options, "%zu options, expected %zu",
                  desc->n_options, want_options);
    if (e->option)
        failures += gb_test_check_option(desc, e->option, GB_OPT_BOOL, "false");
    const gb_precision_ops *ops = desc->ops;
    GB_TEST_CHECK(failures, ops->create && ops->destroy && ops->eligible && ops->policy,
                  "policy entries missing");
    GB_TEST_CHECK(failures, !ops->loss_scale && !ops->update && !ops->state_bytes &&
                                !ops->save_state && !ops->load_state,
                  "scaler entries are not all NULL");
    return failures;
}

int main(int argc, char **argv)
{
    const gb_plugin_desc *desc;
    const expected *e = &plugins[GB_TEST_NAMED_PLUGIN(argc, argv, 3, plugins,
                                                      "fp32|tf32|bf16 precision-NAME.so", &desc)];
    int failures = check_descriptor(e, desc);
    if (failures == 0)
        failures += check_instances(e, desc);
    printf("%s %s: %d failure(s)\n", argv[0], e->name, failures);
    return failures ? 1 : 0;
}
