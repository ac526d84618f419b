/* Tests for precision-bf16: descriptor and schema, eligibility on both devices without a
 * reason, the bf16 policy with f32 master weights, and the absent loss scaler
 * (precision.h: NULL means scale 1, never skip a step).
 *
 * Usage: test_precision_bf16 PLUGIN.so
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/precision.h"
#include "test_host.h"

static int check_policy(const gb_precision_ops *ops, void *self)
{
    int failures = 0;
    gb_precision_policy policy = {.struct_size = sizeof policy, .master_weights = -1};
    gb_status st = ops->policy(self, &policy);
    GB_TEST_CHECK(failures, st == GB_OK, "policy returned %d: %s", st, gb_test_last_error());
    GB_TEST_CHECK(failures, policy.struct_size == sizeof policy, "policy struct_size %zu",
                  policy.struct_size);
    GB_TEST_CHECK(failures, policy.activation_dtype == GB_BF16, "activations are %s",
                  gb_dtype_name(policy.activation_dtype));
    GB_TEST_CHECK(failures, policy.matmul_dtype == GB_BF16, "matmuls are %s",
                  gb_dtype_name(policy.matmul_dtype));
    GB_TEST_CHECK(failures, policy.param_dtype == GB_BF16, "params are %s",
                  gb_dtype_name(policy.param_dtype));
    GB_TEST_CHECK(failures, policy.master_weights == 1, "master_weights %d",
                  policy.master_weights);
    gb_test_clear_error();
    st = ops->policy(self, NULL);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "policy(NULL) returned %d", st);
    return failures;
}

/* The CPU device converts, so bf16 is eligible there too, and says nothing about it. */
static int check_eligible_everywhere(const gb_precision_ops *ops, void *self)
{
    int failures = 0;
    const gb_device_ctx cuda = {.struct_size = sizeof cuda, .device = GB_DEVICE_CUDA};
    const gb_device_ctx *devices[] = {gb_test_cpu_ctx(), &cuda};
    for (int d = 0; d < 2; d++) {
        char reason[128] = "untouched";
        GB_TEST_CHECK(failures, ops->eligible(self, devices[d], reason, sizeof reason) == 1,
                      "not eligible on device 0x%x: %s", devices[d]->device, reason);
        GB_TEST_CHECK(failures, reason[0] == '\0', "eligible but gave a reason: %s", reason);
    }
    return failures;
}

/* Both values of stochastic_rounding give a working instance with the same dtypes, and the
 * policy's ABI 1.1 field says which was asked for (a 1.0-sized struct does not get it). */
static int check_instances(const gb_plugin_desc *desc)
{
    int failures = 0;
    const gb_precision_ops *ops = desc->ops;
    gb_value values[1];
    for (int sr = 0; sr <= 1; sr++) {
        gb_test_default_values(desc, values);
        values[gb_test_option_index(desc, "stochastic_rounding")].i = sr;
        void *self = NULL;
        gb_status st = ops->create(gb_test_host(), values, gb_test_cpu_ctx(), &self);
        GB_TEST_CHECK(failures, st == GB_OK, "create (stochastic_rounding %d) returned %d: %s",
                      sr, st, gb_test_last_error());
        if (st != GB_OK)
            continue;
        failures += check_eligible_everywhere(ops, self);
        failures += check_policy(ops, self);
        gb_precision_policy pol = {.struct_size = sizeof pol, .stochastic_rounding = -1};
        ops->policy(self, &pol);
        GB_TEST_CHECK(failures, pol.stochastic_rounding == sr,
                      "stochastic_rounding %d: the policy says %d", sr, pol.stochastic_rounding);
        gb_precision_policy old = {.struct_size = offsetof(gb_precision_policy,
                                                           stochastic_rounding),
                                   .stochastic_rounding = -1};
        ops->policy(self, &old);
        GB_TEST_CHECK(failures, old.stochastic_rounding == -1,
                      "a 1.0-sized policy struct had its 1.1 field written");
        ops->destroy(self);
    }
    return failures;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s precision-bf16.so\n", argv[0]);
        return 2;
    }
    void *handle;
    const gb_plugin_desc *desc = gb_test_open_plugin(argv[1], &handle);
    if (!desc)
        return 1;
    int failures = gb_test_check_descriptor(desc, GB_KIND_PRECISION, "bf16",
                                            GB_DEVICE_CPU | GB_DEVICE_CUDA,
                                            sizeof(gb_precision_ops));
    GB_TEST_CHECK(failures, desc->n_options == 1, "%zu options, expected 1", desc->n_options);
    failures += gb_test_check_option(desc, "stochastic_rounding", GB_OPT_BOOL, "false");
    const gb_precision_ops *ops = desc->ops;
    GB_TEST_CHECK(failures, ops->create && ops->destroy && ops->eligible && ops->policy,
                  "policy entries missing");
    GB_TEST_CHECK(failures, !ops->loss_scale && !ops->update && !ops->state_bytes &&
                                !ops->save_state && !ops->load_state,
                  "scaler entries are not all NULL");
    if (failures == 0)
        failures += check_instances(desc);
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
