/* Tests of comm-nccl's host logic on any machine: the real plugin runs against the fake
 * CUDA runtime and NCCL of fake_nccl.c, preloaded in front of the real libraries.
 *
 * Checked: the communicator is created non-blocking on the context's GPU and waited for
 * through ncclInProgress; each dtype and reduce op maps to its NCCL type and op, in
 * place, on a stream of the plugin's own, ordered after the context's stream by an event
 * and followed by one that all_reduce_wait makes the context's stream wait on (with
 * overlap = false: on the context's stream, with no waits); broadcast and barrier block on
 * their event; an orderly destroy (finalize, then destroy). Then the failures: a collective
 * that never completes does not block all_reduce_wait, and the watchdog aborts the
 * communicator timeout_s after it was queued, so the barrier waiting behind it returns with
 * a message naming it (#seq, count, dtype) and the key to raise, and every later call fails
 * at once; a peer error during setup, during a collective's enqueue or while a collective
 * is queued aborts with NCCL's explanation. Finally two processes started with RANK,
 * WORLD_SIZE, MASTER_ADDR and MASTER_PORT end up with rank 0's id.
 * With `mpi`, run under mpirun, each rank checks that rank and world come from mpirun.
 *
 * Usage: LD_PRELOAD=fake-nccl.so test_comm_nccl_fake PLUGIN.so [mpi]
 */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_nccl.h"
#include "gearbox/comm.h"
#include "test_host.h"

#define FAKE_STREAM ((void *)0x5eed)
#define TIMEOUT_S 1.0

static fake_nccl_log *fake;
static const gb_plugin_desc *desc;
static const gb_comm_ops *ops;

static const gb_device_ctx cuda_ctx = {
    .struct_size = sizeof(gb_device_ctx),
    .device = GB_DEVICE_CUDA,
    .ordinal = 0,
    .stream = FAKE_STREAM,
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* create() with the defaults, timeout_s = `timeout_s` and overlap = `overlap`; NULL
 * (message printed) when it fails. */
static void *create_with(double timeout_s, int overlap)
{
    gb_value values[4];
    gb_test_default_values(desc, values);
    values[gb_test_option_index(desc, "timeout_s")].f = timeout_s;
    values[gb_test_option_index(desc, "overlap")].i = overlap;
    void *self = NULL;
    gb_test_clear_error();
    gb_status st = ops->create(gb_test_host(), values, &cuda_ctx, &self);
    if (st != GB_OK) {
        printf("create returned %d: %s\n", st, gb_test_last_error());
        return NULL;
    }
    return self;
}

static void *create(double timeout_s)
{
    return create_with(timeout_s, 1);
}

/* The i-th stream or event call logged since `since`, or a zeroed one past the end. */
static fake_call call_since(int since, int i)
{
    if (since + i >= fake->n_calls)
        return (fake_call){FAKE_EVENT_SYNC + 1, NULL, NULL};
    return fake->calls[(since + i) % FAKE_NCCL_CALLS];
}

static int is_call(fake_call c, fake_call_kind kind, const void *stream)
{
    return c.kind == kind && c.stream == stream;
}

/* The calls of one all-reduce started at call `since` and waited for: an event on the
 * context's stream that the collectives' stream waits on, the collective, an event behind
 * it, and the context's stream waiting on that one. */
static int check_ordering(int since, const void *comm_stream)
{
    int failures = 0;
    fake_call ready = call_since(since, 0), wait = call_since(since, 1),
              coll = call_since(since, 2), done = call_since(since, 3),
              back = call_since(since, 4);
    GB_TEST_CHECK(failures, fake->n_calls - since == 5 && is_call(ready, FAKE_RECORD, FAKE_STREAM) &&
                                is_call(wait, FAKE_WAIT, comm_stream) && wait.event == ready.event &&
                                is_call(coll, FAKE_COLLECTIVE, comm_stream) &&
                                is_call(done, FAKE_RECORD, comm_stream) &&
                                is_call(back, FAKE_WAIT, FAKE_STREAM) && back.event == done.event &&
                                done.event != ready.event,
                  "an all-reduce made %d stream and event calls, not record on the context's "
                  "stream, wait on the comm stream, collective, record, wait on the context's "
                  "stream", fake->n_calls - since);
    return failures;
}

/* overlap = false: collectives on the context's stream, no stream of their own, no waits. */
static int check_no_overlap(void)
{
    int failures = 0;
    const int created = fake->streams_created;
    void *self = create_with(TIMEOUT_S, 0);
    if (!self)
        return 1;
    float buf[4];
    gb_comm_request req;
    const int since = fake->n_calls;
    gb_status st = ops->all_reduce_start(self, buf, 4, GB_F32, GB_REDUCE_SUM, &req);
    if (st == GB_OK)
        st = ops->all_reduce_wait(self, req);
    int waits = 0;
    for (int i = since; i < fake->n_calls; i++)
        waits += fake->calls[i % FAKE_NCCL_CALLS].kind == FAKE_WAIT;
    GB_TEST_CHECK(failures, st == GB_OK && fake->stream == FAKE_STREAM && waits == 0 &&
                                fake->streams_created == created,
                  "overlap = false: status %d, the collective %s the context's stream, %d stream "
                  "wait(s), %d stream(s) made", st, fake->stream == FAKE_STREAM ? "on" : "not on",
                  waits, fake->streams_created - created);
    ops->destroy(self);
    printf("overlap = false: collectives on the context's stream, no waits\n");
    return failures;
}

static int check_setup_and_mapping(void)
{
    int failures = 0;
    const int inits = fake->inits, finalizes = fake->finalizes, destroys = fake->destroys;
    const int created = fake->streams_created, streams_destroyed = fake->streams_destroyed;
    void *self = create(TIMEOUT_S);
    GB_TEST_CHECK(failures, self != NULL, "create on the fake GPU failed");
    if (!self)
        return failures;
    const void *comm_stream = fake->created_stream;
    GB_TEST_CHECK(failures, fake->streams_created == created + 1 && comm_stream != FAKE_STREAM,
                  "create made %d stream(s) for the collectives", fake->streams_created - created);
    GB_TEST_CHECK(failures, fake->inits == inits + 1 && fake->init_blocking == 0 &&
                                fake->init_nranks == 1 && fake->init_rank == 0 && fake->device == 0,
                  "init: %d call(s), blocking %d, rank %d of %d on device %d", fake->inits - inits,
                  fake->init_blocking, fake->init_rank, fake->init_nranks, fake->device);
    GB_TEST_CHECK(failures, ops->rank(self) == 0 && ops->world(self) == 1, "rank %d of %d",
                  ops->rank(self), ops->world(self));

    static const struct { gb_dtype dtype; int type; } types[] = {
        {GB_F32, ncclFloat32}, {GB_BF16, ncclBfloat16}, {GB_F16, ncclFloat16}, {GB_I32, ncclInt32}};
    static const struct { gb_reduce_op op; int nccl; } reduce_ops[] = {
        {GB_REDUCE_SUM, ncclSum}, {GB_REDUCE_AVG, ncclAvg}};
    float buf[64];
    for (int t = 0; t < 4; t++)
        for (int o = 0; o < 2; o++) {
            gb_comm_request req;
            const int since = fake->n_calls;
            gb_status st = ops->all_reduce_start(self, buf, 10 + t, types[t].dtype,
                                                 reduce_ops[o].op, &req);
            if (st == GB_OK)
                st = ops->all_reduce_wait(self, req);
            GB_TEST_CHECK(failures, st == GB_OK, "all-reduce %s op %d: %s",
                          gb_dtype_name(types[t].dtype), reduce_ops[o].op, gb_test_last_error());
            GB_TEST_CHECK(failures, fake->send == buf && fake->recv == buf &&
                                        fake->count == (size_t)(10 + t) &&
                                        fake->type == types[t].type &&
                                        fake->op == reduce_ops[o].nccl &&
                                        fake->stream == comm_stream,
                          "all-reduce %s op %d reached NCCL as type %d op %d, %zu elements, "
                          "%s, %s its own stream", gb_dtype_name(types[t].dtype),
                          reduce_ops[o].op, fake->type, fake->op, fake->count,
                          fake->send == buf && fake->recv == buf ? "in place" : "not in place",
                          fake->stream == comm_stream ? "on" : "not on");
            failures += check_ordering(since, comm_stream);
        }
    int since = fake->n_calls;
    gb_status st = ops->broadcast(self, buf, 100, 0);
    GB_TEST_CHECK(failures, st == GB_OK && fake->send == buf && fake->recv == buf &&
                                fake->count == 100 && fake->type == ncclUint8 && fake->root == 0,
                  "broadcast returned %d and reached NCCL as %zu x type %d from %d", st,
                  fake->count, fake->type, fake->root);
    fake_call done = call_since(since, 3), sync = call_since(since, 4);
    GB_TEST_CHECK(failures, fake->n_calls - since == 5 &&
                                is_call(call_since(since, 2), FAKE_COLLECTIVE, comm_stream) &&
                                is_call(done, FAKE_RECORD, comm_stream) &&
                                sync.kind == FAKE_EVENT_SYNC && sync.event == done.event,
                  "broadcast: %d stream and event calls, not ending in a record behind the "
                  "collective and a host wait on it", fake->n_calls - since);
    since = fake->n_calls;
    st = ops->barrier(self);
    GB_TEST_CHECK(failures, st == GB_OK && fake->send == fake->recv && fake->send != buf &&
                                fake->count == 1 && fake->type == ncclInt32 && fake->op == ncclSum,
                  "barrier returned %d and reached NCCL as %zu x type %d op %d", st, fake->count,
                  fake->type, fake->op);
    GB_TEST_CHECK(failures, fake->n_calls - since == 5 &&
                                call_since(since, 4).kind == FAKE_EVENT_SYNC,
                  "barrier: %d stream and event calls, not ending in a host wait",
                  fake->n_calls - since);
    ops->destroy(self);
    GB_TEST_CHECK(failures, fake->finalizes == finalizes + 1 && fake->destroys == destroys + 1 &&
                                fake->streams_destroyed == streams_destroyed + 1,
                  "destroy: %d finalize(s), %d destroy(s), %d stream(s) destroyed",
                  fake->finalizes - finalizes, fake->destroys - destroys,
                  fake->streams_destroyed - streams_destroyed);
    printf("setup, dtype and op mapping, stream ordering, broadcast, barrier, orderly destroy\n");
    return failures + check_no_overlap();
}

static int check_timeout(void)
{
    int failures = 0;
    void *self = create(TIMEOUT_S);
    if (!self)
        return 1;
    const int aborts = fake->aborts, destroys = fake->destroys;
    float buf[4];
    gb_comm_request req;
    setenv("FAKE_NCCL_HANG", "1", 1);
    double start = now_s();
    gb_status st = ops->all_reduce_start(self, buf, 4, GB_BF16, GB_REDUCE_AVG, &req);
    GB_TEST_CHECK(failures, st == GB_OK, "all_reduce_start: %s", gb_test_last_error());
    st = ops->all_reduce_wait(self, req);
    double waited = now_s() - start;
    GB_TEST_CHECK(failures, st == GB_OK && waited < 0.5,
                  "all_reduce_wait on a collective that never completes returned %d after %.2f s: "
                  "it must queue a wait on the GPU and return", st, waited);
    st = ops->barrier(self);   /* queued behind it: returns when the watchdog aborts */
    double took = now_s() - start;
    const char *message = gb_test_last_error();
    GB_TEST_CHECK(failures, st == GB_ERR_SYSTEM && strstr(message, "all_reduce #1 (4 x bf16)") &&
                                strstr(message, "timeout_s = 1 s") &&
                                strstr(message, "died or hangs") &&
                                strstr(message, "raise [comm] timeout_s"),
                  "a barrier behind a collective that never completes: status %d, message \"%s\"",
                  st, message);
    GB_TEST_CHECK(failures, took >= TIMEOUT_S && took < TIMEOUT_S + 2,
                  "the watchdog gave up after %.2f s", took);
    GB_TEST_CHECK(failures, fake->aborts == aborts + 1, "%d abort(s) after the timeout",
                  fake->aborts - aborts);
    printf("after %.2f s: %s\n", took, message);
    unsetenv("FAKE_NCCL_HANG");

    gb_test_clear_error();
    start = now_s();
    st = ops->barrier(self);
    GB_TEST_CHECK(failures,
                  st != GB_OK && strstr(gb_test_last_error(), "aborted after all_reduce #1") &&
                      now_s() - start < 0.5,
                  "a barrier after the abort returned %d: \"%s\"", st, gb_test_last_error());
    st = ops->all_reduce_start(self, buf, 4, GB_F32, GB_REDUCE_SUM, &req);
    GB_TEST_CHECK(failures, st != GB_OK, "an all-reduce after the abort returned %d", st);
    printf("then: %s\n", gb_test_last_error());
    ops->destroy(self);
    GB_TEST_CHECK(failures, fake->destroys == destroys && fake->aborts == aborts + 1,
                  "destroy after an abort destroyed %d and aborted %d more",
                  fake->destroys - destroys, fake->aborts - aborts - 1);
    return failures;
}

static int check_peer_errors(void)
{
    int failures = 0;
    const int aborts = fake->aborts;
    setenv("FAKE_NCCL_ASYNC_ERROR", "1", 1);
    void *self = create(TIMEOUT_S);
    const char *message = gb_test_last_error();
    GB_TEST_CHECK(failures, !self && strstr(message, "setup failed") &&
                                strstr(message, "the fake peer went away") &&
                                strstr(message, "a peer rank died"),
                  "setup with a failing peer: \"%s\"", message);
    GB_TEST_CHECK(failures, fake->aborts == aborts + 1, "%d abort(s) after a failed setup",
                  fake->aborts - aborts);
    unsetenv("FAKE_NCCL_ASYNC_ERROR");

    self = create(TIMEOUT_S);
    if (!self)
        return failures + 1;
    fake->collectives = 0;   /* the next collective answers ncclInProgress */
    setenv("FAKE_NCCL_ASYNC_ERROR", "1", 1);
    float buf[8];
    gb_comm_request req;
    gb_status st = ops->all_reduce_start(self, buf, 8, GB_F32, GB_REDUCE_SUM, &req);
    message = gb_test_last_error();
    GB_TEST_CHECK(failures,
                  st == GB_ERR_SYSTEM && strstr(message, "all_reduce #1 (8 x f32) failed"),
                  "a peer failing while an all-reduce is enqueued: status %d, \"%s\"", st, message);
    printf("peer error: %s\n", message);
    unsetenv("FAKE_NCCL_ASYNC_ERROR");
    ops->destroy(self);

    /* a peer dies while a collective is queued: the watchdog sees NCCL's error */
    self = create(30.0);
    if (!self)
        return failures + 1;
    const int before = fake->aborts;
    gb_status queued = ops->all_reduce_start(self, buf, 8, GB_F32, GB_REDUCE_SUM, &req);
    setenv("FAKE_NCCL_ASYNC_ERROR", "1", 1);
    double start = now_s();
    while (__atomic_load_n(&fake->aborts, __ATOMIC_SEQ_CST) == before && now_s() - start < 5)
        usleep(10000);
    double took = now_s() - start;
    gb_test_clear_error();
    st = ops->all_reduce_wait(self, req);
    message = gb_test_last_error();
    GB_TEST_CHECK(failures, queued == GB_OK && took < 1 && st == GB_ERR_SYSTEM &&
                                strstr(message, "aborted after all_reduce #1 (8 x f32) failed") &&
                                strstr(message, "the fake peer went away"),
                  "a peer failing while an all-reduce is queued: aborted after %.2f s, then wait "
                  "returned %d: \"%s\"", took, st, message);
    printf("peer error while queued, after %.2f s: %s\n", took, message);
    unsetenv("FAKE_NCCL_ASYNC_ERROR");
    ops->destroy(self);
    return failures;
}

static void set_torchrun_env(int rank, int port)
{
    char text[16];
    snprintf(text, sizeof text, "%d", rank);
    setenv("RANK", text, 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    snprintf(text, sizeof text, "%d", port);
    setenv("MASTER_PORT", text, 1);
}

/* Rank 1 in a child process sends back the id its communicator was created with. */
static int check_torchrun_launch(void)
{
    int failures = 0, port = gb_test_free_port(), pipe_fds[2];
    if (pipe(pipe_fds))
        return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        set_torchrun_env(1, port);
        void *self = create(5.0);
        int ok = self && ops->rank(self) == 1 && ops->world(self) == 2;
        ssize_t sent = ok ? write(pipe_fds[1], fake->init_id, sizeof fake->init_id) : 0;
        if (self)
            ops->destroy(self);
        fflush(stdout);
        _exit(sent == (ssize_t)sizeof fake->init_id ? 0 : 1);
    }
    set_torchrun_env(0, port);
    void *self = create(5.0);
    GB_TEST_CHECK(failures, self && ops->rank(self) == 0 && ops->world(self) == 2 &&
                                fake->init_nranks == 2,
                  "rank 0 of a launch of 2: %s", gb_test_last_error());
    unsigned char theirs[sizeof fake->init_id];
    ssize_t got = read(pipe_fds[0], theirs, sizeof theirs);
    int status = 0;
    waitpid(pid, &status, 0);
    GB_TEST_CHECK(failures, WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank 1 failed");
    GB_TEST_CHECK(failures, got == (ssize_t)sizeof theirs &&
                                memcmp(theirs, fake->init_id, sizeof theirs) == 0,
                  "rank 1 was created with another id than rank 0");
    if (self)
        ops->destroy(self);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    printf("RANK/WORLD_SIZE launch of 2: both ranks created with rank 0's id\n");
    return failures;
}

/* Under mpirun: rank and world must be mpirun's (OMPI_COMM_WORLD_*), the id handed over
 * TCP (127.0.0.1, every rank being on this host), and a collective must go through. */
static int check_mpi_rank(void)
{
    int failures = 0;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *world = getenv("OMPI_COMM_WORLD_SIZE");
    if (!rank || !world) {
        printf("FAIL: `mpi` needs mpirun (OMPI_COMM_WORLD_RANK and _SIZE are not set)\n");
        return 1;
    }
    void *self = create(10.0);
    if (!self)
        return 1;
    GB_TEST_CHECK(failures, ops->rank(self) == atoi(rank) && ops->world(self) == atoi(world) &&
                                fake->init_nranks == atoi(world),
                  "rank %d of %d under mpirun, which says %s of %s", ops->rank(self),
                  ops->world(self), rank, world);
    float buf[4];
    gb_comm_request req;
    gb_status st = ops->all_reduce_start(self, buf, 4, GB_F32, GB_REDUCE_AVG, &req);
    if (st == GB_OK)
        st = ops->all_reduce_wait(self, req);
    GB_TEST_CHECK(failures, st == GB_OK, "all-reduce under mpirun: %s", gb_test_last_error());
    ops->destroy(self);
    printf("rank %s of %s from mpirun (OMPI_COMM_WORLD_*), id over TCP\n", rank, world);
    return failures;
}

int main(int argc, char **argv)
{
    gb_test_usage_unless(argc == 2 || (argc == 3 && strcmp(argv[2], "mpi") == 0), argv[0],
                         "comm-nccl.so [mpi], with LD_PRELOAD=fake-nccl.so");
    fake_nccl_log_fn get_log;
    /* The object-to-function pointer cast POSIX guarantees for dlsym(). */
    *(void **)&get_log = dlsym(RTLD_DEFAULT, FAKE_NCCL_LOG_SYMBOL);
    if (!get_log) {
        printf("FAIL: the fake NCCL is not loaded: run with LD_PRELOAD=fake-nccl.so\n");
        return 1;
    }
    fake = get_log();
    desc = gb_test_load_plugin(argv[1]);
    ops = desc->ops;
    if (gb_test_option_index(desc, "timeout_s") < 0 || desc->n_options > 4) {
        printf("FAIL: comm-nccl has no timeout_s option, or more options than expected\n");
        return 1;
    }
    int failures = 0;
    if (argc == 3) {
        failures = check_mpi_rank();
    } else {
        const char *launch[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "RANK", "WORLD_SIZE",
                                "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};
        for (size_t i = 0; i < sizeof launch / sizeof launch[0]; i++)
            unsetenv(launch[i]);
        failures += check_setup_and_mapping();
        failures += check_timeout();
        failures += check_peer_errors();
        failures += check_torchrun_launch();
    }
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
