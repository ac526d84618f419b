/* Conformance checks of communication plugins: topology and collectives on known data.
 *
 * Every rank fills its buffers with values that depend on its rank, in small multiples of
 * 0.5 that f32 sums exactly, so the expected result of a sum, an average or a broadcast
 * is known whatever the world size. Several all-reduces are put in flight at once and
 * waited for in reverse order, as the core does when it overlaps them with backward.
 * With one process these check the bookkeeping of a world of 1; under a launcher such as
 * mpirun every rank runs the kit and the same checks cover N ranks. The sharded
 * collectives of ABI 1.8 are checked where the plugin has them.
 *
 * Left out: dtypes other than f32, timeouts and dead peers.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/comm.h"
#include "kit.h"

#define COUNT 1000
#define IN_FLIGHT 8

typedef struct comm {
    gb_kit *kit;
    const gb_kit_instance *ki;
    const gb_comm_ops *ops;
    int rank, world;
} comm;

/* Rank r's value at i, and the sum of it over every rank. */
static float value_at(int rank, int64_t i, int tag)
{
    return 0.5f * (float)(rank + 1) + (float)((i + tag) % 7);
}

static double sum_at(int world, int64_t i, int tag)
{
    return 0.25 * world * (world + 1) + (double)world * (double)((i + tag) % 7);
}

static int check_topology(comm *c)
{
    const char *check = "rank and world";
    c->rank = c->ops->rank(c->ki->inst.self);
    c->world = c->ops->world(c->ki->inst.self);
    if (c->world < 1 || c->rank < 0 || c->rank >= c->world) {
        gb_kit_report(c->kit, check, GB_KIT_FAIL, "rank %d of world %d: a world has at "
                      "least 1 rank and rank lies in [0, world)", c->rank, c->world);
        return -1;
    }
    gb_kit_report(c->kit, check, GB_KIT_PASS, "rank %d of world %d", c->rank, c->world);
    return 0;
}

/* `n` buffers of COUNT floats reduced with `op`, all started before any is waited for. */
static void check_all_reduce(comm *c, gb_reduce_op op, int n, const char *check)
{
    gb_kit *kit = c->kit;
    float *host = gb_kit_host_alloc(kit, COUNT * sizeof(float));
    float *bufs[IN_FLIGHT];
    gb_comm_request requests[IN_FLIGHT];
    for (int j = 0; j < n; j++) {
        for (int64_t i = 0; host && i < COUNT; i++)
            host[i] = value_at(c->rank, i, j);
        if (!host || !(bufs[j] = gb_kit_device_copy(kit, host, COUNT * sizeof(float)))) {
            gb_kit_report_memory(kit, check);
            return;
        }
    }
    gb_status st;
    for (int j = 0; j < n; j++)
        if ((st = c->ops->all_reduce_start(c->ki->inst.self, bufs[j], COUNT, GB_F32, op,
                                           &requests[j])) != GB_OK) {
            gb_kit_report_call(kit, check, c->ki, "all_reduce_start", st);
            return;
        }
    for (int j = n - 1; j >= 0; j--)
        if ((st = c->ops->all_reduce_wait(c->ki->inst.self, requests[j])) != GB_OK) {
            gb_kit_report_call(kit, check, c->ki, "all_reduce_wait", st);
            return;
        }
    for (int j = 0; j < n; j++) {
        if (gb_kit_download(kit, host, bufs[j], COUNT * sizeof(float))) {
            gb_kit_report_memory(kit, check);
            return;
        }
        for (int64_t i = 0; i < COUNT; i++) {
            double want = sum_at(c->world, i, j) / (op == GB_REDUCE_AVG ? c->world : 1);
            if (!(fabs(host[i] - want) <= 1e-6 * fabs(want))) {
                gb_kit_report(kit, check, GB_KIT_FAIL, "buffer %d element %lld is %.8g, "
                              "expected %.8g", j, (long long)i, (double)host[i], want);
                return;
            }
        }
    }
    gb_kit_report(kit, check, GB_KIT_PASS, "%d x %d f32 values as expected over %d rank%s", n,
                  COUNT, c->world, c->world == 1 ? "" : "s");
}

static void check_broadcast(comm *c)
{
    const char *check = "broadcast from rank 0";
    gb_kit *kit = c->kit;
    unsigned char *host = gb_kit_host_alloc(kit, COUNT);
    void *buf = NULL;
    if (host) {
        memset(host, c->rank + 1, COUNT);
        buf = gb_kit_device_copy(kit, host, COUNT);
    }
    if (!buf) {
        gb_kit_report_memory(kit, check);
        return;
    }
    gb_status st = c->ops->broadcast(c->ki->inst.self, buf, COUNT, 0);
    if (st != GB_OK) {
        gb_kit_report_call(kit, check, c->ki, "broadcast", st);
        return;
    }
    if (gb_kit_download(kit, host, buf, COUNT)) {
        gb_kit_report_memory(kit, check);
        return;
    }
    for (int i = 0; i < COUNT; i++)
        if (host[i] != 1) {
            gb_kit_report(kit, check, GB_KIT_FAIL, "byte %d is %d, rank 0 sent 1", i, host[i]);
            return;
        }
    gb_kit_report(kit, check, GB_KIT_PASS, "%d bytes", COUNT);
}

/* The sharded collectives (ABI 1.8, optional): a buffer of COUNT values per rank
 * reduce-scattered (average) in place, then the parts all-gathered in place, which leaves
 * the whole average on every rank. */
static void check_sharded(comm *c)
{
    const char *check = "reduce_scatter avg + all_gather (f32)";
    gb_kit *kit = c->kit;
    if (!GB_COMM_HAS(c->ops, reduce_scatter_start) || !GB_COMM_HAS(c->ops, all_gather)) {
        gb_kit_report(kit, check, GB_KIT_UNSUPPORTED, "no reduce_scatter_start and all_gather "
                      "(optional, ABI 1.8): [optim] shard_state is refused with this plugin");
        return;
    }
    const int64_t n = (int64_t)COUNT * c->world;
    float *host = gb_kit_host_alloc(kit, (size_t)n * sizeof(float)), *buf = NULL;
    for (int64_t i = 0; host && i < n; i++)
        host[i] = value_at(c->rank, i, 0);
    if (!host || !(buf = gb_kit_device_copy(kit, host, (size_t)n * sizeof(float)))) {
        gb_kit_report_memory(kit, check);
        return;
    }
    float *mine = buf + (int64_t)COUNT * c->rank;
    gb_comm_request request;
    gb_status st = c->ops->reduce_scatter_start(c->ki->inst.self, buf, mine, COUNT, GB_F32,
                                                GB_REDUCE_AVG, &request);
    if (st == GB_OK && (st = c->ops->all_reduce_wait(c->ki->inst.self, request)) == GB_OK)
        st = c->ops->all_gather(c->ki->inst.self, mine, buf, COUNT, GB_F32);
    if (st != GB_OK) {
        gb_kit_report_call(kit, check, c->ki, "reduce_scatter_start, all_gather", st);
        return;
    }
    if (gb_kit_download(kit, host, buf, (size_t)n * sizeof(float))) {
        gb_kit_report_memory(kit, check);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double want = sum_at(c->world, i, 0) / c->world;
        if (!(fabs(host[i] - want) <= 1e-6 * fabs(want))) {
            gb_kit_report(kit, check, GB_KIT_FAIL, "element %lld is %.8g, expected %.8g",
                          (long long)i, (double)host[i], want);
            return;
        }
    }
    gb_kit_report(kit, check, GB_KIT_PASS, "%lld f32 values as expected over %d rank%s",
                  (long long)n, c->world, c->world == 1 ? "" : "s");
}

static void check_barrier(comm *c)
{
    gb_status st = c->ops->barrier(c->ki->inst.self);
    if (st != GB_OK)
        gb_kit_report_call(c->kit, "barrier", c->ki, "barrier", st);
    else
        gb_kit_report(c->kit, "barrier", GB_KIT_PASS, "returned");
}

void gb_kit_check_comm(gb_kit *kit)
{
    gb_kit_instance ki;
    if (gb_kit_create_tested(kit, &ki, "comm: create", NULL, 0))
        return;
    comm c = {.kit = kit, .ki = &ki, .ops = ki.ops};
    if (check_topology(&c) == 0) {
        check_all_reduce(&c, GB_REDUCE_SUM, 1, "all_reduce sum (f32)");
        check_all_reduce(&c, GB_REDUCE_AVG, 1, "all_reduce avg (f32)");
        check_all_reduce(&c, GB_REDUCE_SUM, IN_FLIGHT, "all_reduce, 8 in flight, waited in reverse");
        check_broadcast(&c);
        check_sharded(&c);
        check_barrier(&c);
    }
    gb_kit_destroy(&ki);
}
