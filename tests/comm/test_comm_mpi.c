/* Tests for comm-mpi, run once per rank (under mpirun, or alone as a world of 1).
 *
 * Usage: test_comm_mpi PLUGIN.so WORLD            the collectives
 *        test_comm_mpi PLUGIN.so WORLD timeout    the timeout that names the rank at fault
 *
 * The collectives: descriptor and options; rank and world; all-reduce SUM and AVG of f32
 * and SUM of i32 with exact expected values; overlapping requests that each rank waits
 * for in its own order; broadcast from the first and the last rank; the sharded
 * collectives (ABI 1.8: reduce-scatter SUM and AVG in place and apart, all-gather in place
 * and apart, each rank's part checked exactly); barrier; refused
 * requests (they start no collective, so the ranks stay in step).
 *
 * The timeout (WORLD 2, timeout_s = 1): after one all-reduce together, rank 1 sleeps
 * instead of joining the second, and rank 0's wait must fail within about timeout_s with
 * a message naming rank 1. Rank 0 then prints TIMEOUT_PASSED and destroys the instance,
 * which calls MPI_Abort: mpirun exits non-zero and takes the sleeping rank down. The
 * meson test passes when mpirun exits non-zero within the test's time limit and rank 0
 * printed TIMEOUT_PASSED.
 *
 * The executable does not link MPI: the plugin brings it in when it is loaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gearbox/comm.h"
#include "test_host.h"

#define TIMEOUT_PASSED "timeout test passed: rank 0 named rank 1"

typedef struct fixture {
    const gb_comm_ops *ops;
    void *self;
    int rank, world;
} fixture;

/* The value rank r contributes at index i: exact in f32 and distinct per rank. */
static float contribution(int r, int64_t i)
{
    return 0.5f * (float)((r + 1) * (i % 1000)) + (float)r;
}

static float sum_over_ranks(int world, int64_t i)
{
    float sum = 0.0f;
    for (int r = 0; r < world; r++)
        sum += contribution(r, i);
    return sum;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static gb_status all_reduce(const fixture *f, void *buf, int64_t count, gb_dtype dtype,
                            gb_reduce_op op)
{
    gb_comm_request req;
    gb_status st = f->ops->all_reduce_start(f->self, buf, count, dtype, op, &req);
    return st != GB_OK ? st : f->ops->all_reduce_wait(f->self, req);
}

/* Counts the elements of x (count) that differ from the expected reduction. */
static int64_t wrong_f32(const fixture *f, const float *x, int64_t count, gb_reduce_op op)
{
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; i++) {
        float want = sum_over_ranks(f->world, i);
        if (op == GB_REDUCE_AVG)
            want /= (float)f->world;
        wrong += x[i] != want;
    }
    return wrong;
}

static void fill_f32(const fixture *f, float *x, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        x[i] = contribution(f->rank, i);
}

static int check_all_reduce_values(const fixture *f)
{
    enum { N = 1 << 20 };   /* 4 MiB: past the eager limits of Open MPI's transports */
    int failures = 0;
    float *x = malloc(N * sizeof *x);
    int32_t *k = malloc(N * sizeof *k);
    if (!x || !k) {
        printf("FAIL: out of memory\n");
        free(x);
        free(k);
        return 1;
    }
    const gb_reduce_op ops[] = {GB_REDUCE_SUM, GB_REDUCE_AVG};
    for (int o = 0; o < 2; o++) {
        fill_f32(f, x, N);
        gb_status st = all_reduce(f, x, N, GB_F32, ops[o]);
        GB_TEST_CHECK(failures, st == GB_OK, "f32 all-reduce op %d returned %d: %s", ops[o], st,
                      gb_test_last_error());
        int64_t wrong = wrong_f32(f, x, N, ops[o]);
        GB_TEST_CHECK(failures, wrong == 0, "f32 all-reduce op %d: %lld of %d values wrong",
                      ops[o], (long long)wrong, N);
    }
    for (int64_t i = 0; i < N; i++)
        k[i] = (int32_t)(f->rank * 100000 + i);
    gb_status st = all_reduce(f, k, N, GB_I32, GB_REDUCE_SUM);
    GB_TEST_CHECK(failures, st == GB_OK, "i32 all-reduce returned %d: %s", st,
                  gb_test_last_error());
    int64_t wrong = 0;
    for (int64_t i = 0; i < N; i++)
        wrong += k[i] != (int32_t)(100000 * f->world * (f->world - 1) / 2 + f->world * i);
    GB_TEST_CHECK(failures, wrong == 0, "i32 all-reduce: %lld of %d values wrong",
                  (long long)wrong, N);
    free(x);
    free(k);
    return failures;
}

/* Reduce-scatter of N parts per rank (in place when in_place, else into a buffer of its
 * own), then the all-gather of the shards: every rank ends with the whole reduction. */
static int check_sharded_pass(const fixture *f, float *x, float *apart, int64_t part,
                              gb_reduce_op op, int in_place)
{
    int failures = 0;
    int64_t all = part * f->world, mine = part * f->rank;
    fill_f32(f, x, all);
    float *shard = in_place ? x + mine : apart;
    gb_comm_request req;
    gb_status st = f->ops->reduce_scatter_start(f->self, x, shard, part, GB_F32, op, &req);
    if (st == GB_OK)
        st = f->ops->all_reduce_wait(f->self, req);
    GB_TEST_CHECK(failures, st == GB_OK, "reduce-scatter (op %d, in place %d) returned %d: %s",
                  op, in_place, st, gb_test_last_error());
    int64_t wrong = 0;
    for (int64_t i = 0; i < part; i++) {
        float want = sum_over_ranks(f->world, mine + i);
        wrong += shard[i] != (op == GB_REDUCE_AVG ? want / (float)f->world : want);
    }
    GB_TEST_CHECK(failures, wrong == 0, "reduce-scatter (op %d, in place %d): %lld of %lld "
                  "values of rank %d's shard wrong", op, in_place, (long long)wrong,
                  (long long)part, f->rank);
    st = f->ops->all_gather(f->self, shard, x, part, GB_F32);
    GB_TEST_CHECK(failures, st == GB_OK, "all-gather (in place %d) returned %d: %s", in_place,
                  st, gb_test_last_error());
    wrong = wrong_f32(f, x, all, op);
    GB_TEST_CHECK(failures, wrong == 0, "all-gather (in place %d): %lld of %lld values wrong",
                  in_place, (long long)wrong, (long long)all);
    return failures;
}

static int check_sharded(const fixture *f)
{
    enum { PART = 300000 };   /* over a MiB per rank */
    float *x = malloc((size_t)PART * (size_t)f->world * sizeof *x);
    float *apart = malloc(PART * sizeof *apart);
    int failures = 0;
    if (!x || !apart) {
        printf("FAIL: out of memory\n");
        failures = 1;
    }
    for (int in_place = 0; !failures && in_place < 2; in_place++) {
        failures += check_sharded_pass(f, x, apart, PART, GB_REDUCE_SUM, in_place);
        failures += check_sharded_pass(f, x, apart, PART, GB_REDUCE_AVG, in_place);
    }
    free(x);
    free(apart);
    return failures;
}

/* Eight buckets of different sizes (one empty), started together as the core does
 * during backward; even ranks wait newest first, odd ranks oldest first. */
static int check_overlapping_requests(const fixture *f)
{
    enum { K = 8, MAX_COUNT = 70000 };
    static float bufs[K][MAX_COUNT];
    const int64_t counts[K] = {1000, 0, 70000, 17, 4096, 65536, 1, 33333};
    int failures = 0;
    gb_comm_request reqs[K];
    for (int b = 0; b < K; b++) {
        fill_f32(f, bufs[b], counts[b]);
        gb_reduce_op op = b % 2 ? GB_REDUCE_AVG : GB_REDUCE_SUM;
        gb_status st = f->ops->all_reduce_start(f->self, bufs[b], counts[b], GB_F32, op,
                                                &reqs[b]);
        GB_TEST_CHECK(failures, st == GB_OK, "start of bucket %d returned %d: %s", b, st,
                      gb_test_last_error());
    }
    for (int j = 0; j < K; j++) {
        int b = f->rank % 2 ? j : K - 1 - j;
        gb_status st = f->ops->all_reduce_wait(f->self, reqs[b]);
        GB_TEST_CHECK(failures, st == GB_OK, "wait on bucket %d returned %d: %s", b, st,
                      gb_test_last_error());
        int64_t wrong = wrong_f32(f, bufs[b], counts[b], b % 2 ? GB_REDUCE_AVG : GB_REDUCE_SUM);
        GB_TEST_CHECK(failures, wrong == 0, "bucket %d: %lld of %lld values wrong", b,
                      (long long)wrong, (long long)counts[b]);
    }
    return failures;
}

static int check_broadcast_from(const fixture *f, int root)
{
    enum { BYTES = 300001 };
    static unsigned char buf[BYTES];
    int failures = 0;
    for (int i = 0; i < BYTES; i++)
        buf[i] = (unsigned char)(i * 7 + f->rank * 101);
    gb_status st = f->ops->broadcast(f->self, buf, BYTES, root);
    GB_TEST_CHECK(failures, st == GB_OK, "broadcast from rank %d returned %d: %s", root, st,
                  gb_test_last_error());
    int wrong = 0;
    for (int i = 0; i < BYTES; i++)
        wrong += buf[i] != (unsigned char)(i * 7 + root * 101);
    GB_TEST_CHECK(failures, wrong == 0, "broadcast from rank %d: %d of %d bytes differ", root,
                  wrong, BYTES);
    st = f->ops->broadcast(f->self, NULL, 0, root);
    GB_TEST_CHECK(failures, st == GB_OK, "empty broadcast from rank %d returned %d: %s", root,
                  st, gb_test_last_error());
    return failures;
}

/* Refusals start no collective, so every rank runs the same ones. */
static int check_refusals(const fixture *f)
{
    int failures = 0;
    float x[4] = {0};
    int32_t k[4] = {0};
    gb_comm_request req = 0;
    const struct {
        void *buf;
        gb_dtype dtype;
        gb_reduce_op op;
        gb_comm_request *req;
        gb_status want;
        const char *what;
    } cases[] = {
        {x, GB_BF16, GB_REDUCE_SUM, &req, GB_ERR_UNSUPPORTED, "bf16"},
        {x, GB_F16, GB_REDUCE_SUM, &req, GB_ERR_UNSUPPORTED, "f16"},
        {k, GB_I32, GB_REDUCE_AVG, &req, GB_ERR_UNSUPPORTED, "AVG of i32"},
        {x, (gb_dtype)99, GB_REDUCE_SUM, &req, GB_ERR_INVALID_ARG, "unknown dtype"},
        {x, GB_F32, (gb_reduce_op)7, &req, GB_ERR_INVALID_ARG, "unknown reduce op"},
        {x, GB_F32, GB_REDUCE_SUM, NULL, GB_ERR_INVALID_ARG, "no request pointer"},
        {NULL, GB_F32, GB_REDUCE_SUM, &req, GB_ERR_INVALID_ARG, "NULL buffer"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gb_test_clear_error();
        gb_status st = f->ops->all_reduce_start(f->self, cases[c].buf, 4, cases[c].dtype,
                                                cases[c].op, cases[c].req);
        GB_TEST_CHECK(failures, st == cases[c].want && gb_test_last_error()[0],
                      "%s: returned %d, expected %d with a message", cases[c].what, st,
                      cases[c].want);
    }
    gb_test_clear_error();
    gb_status st = f->ops->all_reduce_wait(f->self, 123456789);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "wait on an unknown request returned %d", st);
    GB_TEST_CHECK(failures, all_reduce(f, x, 4, GB_F32, GB_REDUCE_SUM) == GB_OK,
                  "all-reduce failed: %s", gb_test_last_error());
    GB_TEST_CHECK(failures, all_reduce(f, NULL, 0, GB_F32, GB_REDUCE_AVG) == GB_OK,
                  "all-reduce of no elements failed: %s", gb_test_last_error());
    gb_test_clear_error();
    st = f->ops->broadcast(f->self, x, sizeof x, f->world);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "broadcast from rank %d (outside the world) returned %d", f->world, st);
    st = f->ops->broadcast(f->self, NULL, 16, 0);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG, "NULL broadcast buffer returned %d", st);
    return failures;
}

/* GB_COMM_MAX_INFLIGHT outstanding requests are accepted, one more is refused, and a
 * request waited for twice is refused the second time. */
static int check_inflight_limit(const fixture *f)
{
    int failures = 0;
    static float x[GB_COMM_MAX_INFLIGHT];
    gb_comm_request reqs[GB_COMM_MAX_INFLIGHT];
    for (int i = 0; i < GB_COMM_MAX_INFLIGHT; i++) {
        x[i] = (float)f->rank;
        gb_status st = f->ops->all_reduce_start(f->self, &x[i], 1, GB_F32, GB_REDUCE_SUM,
                                                &reqs[i]);
        GB_TEST_CHECK(failures, st == GB_OK, "request %d of %d refused: %s", i + 1,
                      GB_COMM_MAX_INFLIGHT, gb_test_last_error());
        for (int j = 0; j < i; j++)
            GB_TEST_CHECK(failures, reqs[j] != reqs[i], "requests %d and %d share an id", j, i);
    }
    gb_comm_request extra;
    float y = 0.0f;
    gb_test_clear_error();
    gb_status st = f->ops->all_reduce_start(f->self, &y, 1, GB_F32, GB_REDUCE_SUM, &extra);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "request %d beyond the limit returned %d", GB_COMM_MAX_INFLIGHT + 1, st);
    const float want = (float)(f->world * (f->world - 1) / 2);
    for (int i = GB_COMM_MAX_INFLIGHT - 1; i >= 0; i--) {
        GB_TEST_CHECK(failures, f->ops->all_reduce_wait(f->self, reqs[i]) == GB_OK,
                      "wait on request %d failed: %s", i, gb_test_last_error());
        GB_TEST_CHECK(failures, x[i] == want, "request %d: %g, expected %g", i, x[i], want);
    }
    gb_test_clear_error();
    st = f->ops->all_reduce_wait(f->self, reqs[0]);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "waiting twice on request %lld returned %d", (long long)reqs[0], st);
    return failures;
}

static int run_collectives(const fixture *f)
{
    int failures = 0;
    failures += check_all_reduce_values(f);
    failures += check_overlapping_requests(f);
    failures += check_broadcast_from(f, 0);
    failures += check_broadcast_from(f, f->world - 1);
    failures += check_sharded(f);
    failures += check_refusals(f);
    failures += check_inflight_limit(f);
    gb_status st = f->ops->barrier(f->self);
    GB_TEST_CHECK(failures, st == GB_OK, "barrier returned %d: %s", st, gb_test_last_error());
    return failures;
}

/* Rank 1 misses all-reduce #2; rank 0 must time out naming it. Returns on rank 0 only. */
static int run_timeout(const fixture *f, double timeout_s)
{
    int failures = 0;
    float x[16];
    fill_f32(f, x, 16);
    GB_TEST_CHECK(failures, all_reduce(f, x, 16, GB_F32, GB_REDUCE_SUM) == GB_OK,
                  "all-reduce #1 failed: %s", gb_test_last_error());
    if (f->rank == 1) {
        /* mpirun stops this process when rank 0 aborts; the test's time limit is shorter */
        sleep(600);
        _exit(1);
    }
    double start = now_s();
    gb_status st = all_reduce(f, x, 16, GB_F32, GB_REDUCE_SUM);
    double waited = now_s() - start;
    const char *msg = gb_test_last_error();
    printf("rank 0: the wait failed after %.2f s with: %s\n", waited, msg);
    GB_TEST_CHECK(failures, st == GB_ERR_SYSTEM, "all-reduce #2 returned %d, expected %d", st,
                  GB_ERR_SYSTEM);
    GB_TEST_CHECK(failures, waited >= timeout_s && waited < timeout_s + 3.0,
                  "the wait took %.2f s with timeout_s = %g", waited, timeout_s);
    const char *expected[] = {"all-reduce #2 (16 f32)", "rank 1 (host ", "last seen at #1",
                              "timeout_s"};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        GB_TEST_CHECK(failures, strstr(msg, expected[i]), "the message lacks \"%s\"",
                      expected[i]);
    gb_test_clear_error();
    st = f->ops->barrier(f->self);
    GB_TEST_CHECK(failures, st == GB_ERR_SYSTEM && gb_test_last_error()[0],
                  "a barrier after the timeout returned %d", st);
    if (failures == 0)
        printf("%s\n", TIMEOUT_PASSED);
    return failures;
}

static int check_schema(const gb_plugin_desc *desc)
{
    int failures = gb_test_check_descriptor(desc, GB_KIND_COMM, "mpi",
                                            GB_DEVICE_CPU | GB_DEVICE_ANY_HOST,
                                            sizeof(gb_comm_ops));
    failures += gb_test_check_option(desc, "timeout_s", GB_OPT_FLOAT, "300");
    return failures + gb_test_check_comm_entries(desc->ops);
}

static int check_cuda_refused(const gb_comm_ops *ops, const gb_value *values)
{
    int failures = 0;
    const gb_device_ctx cuda = {.struct_size = sizeof cuda, .device = GB_DEVICE_CUDA};
    void *self = NULL;
    gb_test_clear_error();
    gb_status st = ops->create(gb_test_host(), values, &cuda, &self);
    GB_TEST_CHECK(failures, st == GB_ERR_UNSUPPORTED && strstr(gb_test_last_error(), "nccl"),
                  "create on a CUDA context returned %d (%s)", st, gb_test_last_error());
    return failures;
}

int main(int argc, char **argv)
{
    int timeout_mode = argc == 4 && strcmp(argv[3], "timeout") == 0;
    gb_test_usage_unless(argc == 3 || timeout_mode, argv[0], "comm-mpi.so WORLD [timeout]");
    const int want_world = atoi(argv[2]);
    const gb_plugin_desc *desc = gb_test_load_plugin(argv[1]);
    int failures = check_schema(desc);
    if (failures)
        return 1;
    const gb_comm_ops *ops = desc->ops;
    gb_value values[1];
    gb_test_default_values(desc, values);
    const double timeout_s = 1.0;
    if (timeout_mode)
        values[gb_test_option_index(desc, "timeout_s")].f = timeout_s;
    failures += check_cuda_refused(ops, values);

    fixture f = {.ops = ops};
    gb_status st = ops->create(gb_test_host(), values, gb_test_cpu_ctx(), &f.self);
    if (st != GB_OK) {
        printf("FAIL: create returned %d: %s\n", st, gb_test_last_error());
        return 1;
    }
    f.rank = ops->rank(f.self);
    f.world = ops->world(f.self);
    GB_TEST_CHECK(failures, f.world == want_world, "world %d, expected %d", f.world, want_world);
    GB_TEST_CHECK(failures, f.rank >= 0 && f.rank < f.world, "rank %d in a world of %d",
                  f.rank, f.world);
    if (f.world == want_world)
        failures += timeout_mode ? run_timeout(&f, timeout_s) : run_collectives(&f);
    printf("rank %d of %d: %d failure(s)\n", f.rank, f.world, failures);
    fflush(stdout);
    ops->destroy(f.self);
    return failures ? 1 : 0;
}
