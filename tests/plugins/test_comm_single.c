/* Tests for comm-single: descriptor, rank 0 of 1, collectives that leave buffers as they
 * are, request bookkeeping (unknown, repeated and too many requests are refused) and
 * broadcast from a root that does not exist.
 *
 * Usage: test_comm_single PLUGIN.so
 */
#include <stdio.h>
#include <string.h>

#include "gearbox/comm.h"
#include "test_host.h"

static int check_all_reduce_is_identity(const gb_comm_ops *ops, void *self)
{
    enum { N = 37 };
    int failures = 0;
    float buf[N], saved[N];
    for (int i = 0; i < N; i++)
        buf[i] = saved[i] = 1.5f * (float)i - 7.0f;
    const gb_reduce_op reduce_ops[] = {GB_REDUCE_SUM, GB_REDUCE_AVG};
    for (int o = 0; o < 2; o++) {
        gb_comm_request req = -1;
        gb_status st = ops->all_reduce_start(self, buf, N, GB_F32, reduce_ops[o], &req);
        GB_TEST_CHECK(failures, st == GB_OK, "all_reduce_start returned %d: %s", st,
                      gb_test_last_error());
        st = ops->all_reduce_wait(self, req);
        GB_TEST_CHECK(failures, st == GB_OK, "all_reduce_wait returned %d: %s", st,
                      gb_test_last_error());
        GB_TEST_CHECK(failures, memcmp(buf, saved, sizeof buf) == 0,
                      "all-reduce op %d over one rank changed the buffer", reduce_ops[o]);
        gb_test_clear_error();
        st = ops->all_reduce_wait(self, req);
        GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                      "waiting twice on request %lld returned %d", (long long)req, st);
    }
    return failures;
}

static int check_broadcast_and_barrier(const gb_comm_ops *ops, void *self)
{
    int failures = 0;
    unsigned char buf[16], saved[16];
    for (int i = 0; i < 16; i++)
        buf[i] = saved[i] = (unsigned char)(i * 13);
    gb_status st = ops->broadcast(self, buf, sizeof buf, 0);
    GB_TEST_CHECK(failures, st == GB_OK, "broadcast from root 0 returned %d: %s", st,
                  gb_test_last_error());
    GB_TEST_CHECK(failures, memcmp(buf, saved, sizeof buf) == 0, "broadcast changed the buffer");
    gb_test_clear_error();
    st = ops->broadcast(self, buf, sizeof buf, 1);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "broadcast from root 1 returned %d", st);
    printf("broadcast from root 1 refused: %s\n", gb_test_last_error());
    st = ops->barrier(self);
    GB_TEST_CHECK(failures, st == GB_OK, "barrier returned %d", st);
    return failures;
}

int main(int argc, char **argv)
{
    gb_test_usage_unless(argc == 2, argv[0], "comm-single.so");
    const gb_plugin_desc *desc = gb_test_load_plugin(argv[1]);
    int failures = gb_test_check_descriptor(desc, GB_KIND_COMM, "single",
                                            GB_DEVICE_CPU | GB_DEVICE_CUDA | GB_DEVICE_ANY_HOST,
                                            sizeof(gb_comm_ops));
    GB_TEST_CHECK(failures, desc->n_options == 0, "%zu options, expected none",
                  desc->n_options);
    const gb_comm_ops *ops = desc->ops;
    failures += gb_test_check_comm_entries(ops);
    if (failures == 0) {
        void *self = NULL;
        gb_status st = ops->create(gb_test_host(), NULL, gb_test_cpu_ctx(), &self);
        GB_TEST_CHECK(failures, st == GB_OK, "create returned %d: %s", st,
                      gb_test_last_error());
        if (st == GB_OK) {
            GB_TEST_CHECK(failures, ops->rank(self) == 0, "rank %d", ops->rank(self));
            GB_TEST_CHECK(failures, ops->world(self) == 1, "world %d", ops->world(self));
            failures += check_all_reduce_is_identity(ops, self);
            float buf[16 * GB_COMM_MAX_INFLIGHT] = {0};
            failures += gb_test_check_requests(ops, self, buf);
            failures += check_broadcast_and_barrier(ops, self);
            ops->destroy(self);
        }
    }
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
