/* Tests for precision-tf32: descriptor, the f32 policy without master weights or loss
 * scaler, and eligibility: yes on CUDA of compute capability 8.0 or later (or not
 * saying), no on a 7.0 GPU nor on the CPU with a reason that names the
 * device and what to use instead, cut short safely in a small buffer.
 *
 * Usage: test_precision_tf32 PLUGIN.so
 */
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
    GB_TEST_CHECK(failures, policy.activation_dtype == GB_F32 && policy.matmul_dtype == GB_F32 &&
                                policy.param_dtype == GB_F32,
                  "activations %s, matmuls %s, params %s; expected f32 storage for all",
                  gb_dtype_name(policy.activation_dtype), gb_dtype_name(policy.matmul_dtype),
                  gb_dtype_name(policy.param_dtype));
    GB_TEST_CHECK(failures, policy.master_weights == 0, "master_weights %d",
                  policy.master_weights);
    gb_test_clear_error();
    st = ops->policy(self, NULL);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "policy(NULL) returned %d", st);
    return failures;
}

static int check_eligibility(const gb_precision_ops *ops, void *self)
{
    int failures = 0;
    // an Ampere and a Hopper GPU, and a context from before ABI 1.2 that does not say
    const gb_device_ctx cudas[] = {
        {.struct_size = sizeof cudas[0], .device = GB_DEVICE_CUDA, .cc_major = 8},
        {.struct_size = sizeof cudas[0], .device = GB_DEVICE_CUDA, .cc_major = 9},
        {.struct_size = offsetof(gb_device_ctx, ops), .device = GB_DEVICE_CUDA},
    };
    char reason[256] = "untouched";
    for (int i = 0; i < 3; i++) {
        GB_TEST_CHECK(failures, ops->eligible(self, &cudas[i], reason, sizeof reason) == 1,
                      "not eligible on CUDA (case %d): %s", i, reason);
        GB_TEST_CHECK(failures, reason[0] == '\0', "eligible on CUDA but gave a reason: %s",
                      reason);
    }
    const gb_device_ctx volta = {.struct_size = sizeof volta, .device = GB_DEVICE_CUDA,
                                 .cc_major = 7, .cc_minor = 0};
    GB_TEST_CHECK(failures, ops->eligible(self, &volta, reason, sizeof reason) == 0,
                  "eligible on a compute capability 7.0 GPU");
    GB_TEST_CHECK(failures, strstr(reason, "7.0") && strstr(reason, "8.0"),
                  "the refusal on a 7.0 GPU \"%s\" does not name 7.0 and 8.0", reason);
    printf("refused on a 7.0 GPU: %s\n", reason);

    reason[0] = '\0';
    GB_TEST_CHECK(failures, ops->eligible(self, gb_test_cpu_ctx(), reason, sizeof reason) == 0,
                  "eligible on the CPU");
    GB_TEST_CHECK(failures, strstr(reason, "cpu") && strstr(reason, "fp32"),
                  "the CPU refusal \"%s\" does not name the device and fp32", reason);
    printf("refused on the CPU: %s\n", reason);

    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    ops->eligible(self, gb_test_cpu_ctx(), tiny, sizeof tiny);
    GB_TEST_CHECK(failures, memchr(tiny, '\0', sizeof tiny) != NULL,
                  "the reason overran an 8-byte buffer");
    GB_TEST_CHECK(failures, ops->eligible(self, gb_test_cpu_ctx(), NULL, 0) == 0,
                  "eligible on the CPU without a reason buffer");
    return failures;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s precision-tf32.so\n", argv[0]);
        return 2;
    }
    void *handle;
    const gb_plugin_desc *desc = gb_test_open_plugin(argv[1], &handle);
    if (!desc)
        return 1;
    int failures = gb_test_check_descriptor(desc, GB_KIND_PRECISION, "tf32",
                                            GB_DEVICE_CPU | GB_DEVICE_CUDA,
                                            sizeof(gb_precision_ops));
    GB_TEST_CHECK(failures, desc->n_options == 0, "%zu options, expected none",
                  desc->n_options);
    const gb_precision_ops *ops = desc->ops;
    GB_TEST_CHECK(failures, ops->create && ops->destroy && ops->eligible && ops->policy,
                  "policy entries missing");
    GB_TEST_CHECK(failures, !ops->loss_scale && !ops->update && !ops->state_bytes &&
                                !ops->save_state && !ops->load_state,
                  "scaler entries are not all NULL");
    if (failures == 0) {
        void *self = NULL;
        gb_status st = ops->create(gb_test_host(), NULL, gb_test_cpu_ctx(), &self);
        GB_TEST_CHECK(failures, st == GB_OK, "create returned %d: %s", st,
                      gb_test_last_error());
        if (st == GB_OK) {
            failures += check_eligibility(ops, self);
            failures += check_policy(ops, self);
            ops->destroy(self);
        }
    }
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
