/* Where this process stands in a multi-process launch, from its launcher's environment.
 *
 * NCCL needs a rank, a world size and, with more than one rank, a way to hand rank 0's
 * unique id to the others before the communicator exists. The id always goes over TCP
 * (tcp_bootstrap.c: rank 0 serves it); the plugin links no MPI library, so it builds and
 * loads where Open MPI is absent. Three launches are recognised, tried in this order:
 *  1. torchrun-style variables RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
 *     Under torchrun the agent process already serves its own store on MASTER_PORT (it
 *     says so with TORCHELASTIC_USE_AGENT_STORE=True), so the id then moves to
 *     MASTER_PORT + 1.
 *  2. Open MPI's mpirun: OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK and
 *     OMPI_COMM_WORLD_LOCAL_RANK give world, rank and local rank. Rank 0's address is
 *     MASTER_ADDR, or 127.0.0.1 when every rank is on one node
 *     (OMPI_COMM_WORLD_LOCAL_SIZE = OMPI_COMM_WORLD_SIZE); across nodes MASTER_ADDR must
 *     be passed (mpirun -x MASTER_ADDR=host). The port is MASTER_PORT, or by default
 *     20000 + (a hash of PMIX_NAMESPACE, which names the mpirun job) mod 20000, so two
 *     jobs on one host do not meet, and 29500 when PMIX_NAMESPACE is unset.
 *  3. None of them: rank 0 of a world of 1.
 * A launch that cannot be understood is refused here, with the variable named, before
 * any GPU or network work starts; in particular a PMIx launch that is not Open MPI's
 * (PMIX_RANK without OMPI_COMM_WORLD_SIZE) is refused rather than run as N unrelated
 * worlds of 1.
 *
 * LOCAL_RANK is read and checked but chooses nothing: the core picks the GPU and hands
 * it over as the device context's ordinal (LOCAL_RANK, or OMPI_COMM_WORLD_LOCAL_RANK
 * under mpirun, is the usual choice there). Reads getenv() only.
 */
#include "launch.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Reads variable `name` as a decimal integer in [min, max]. Returns 1 when read, 0 when
 * unset or empty, -1 (with the error set) when it is something else. */
static int read_int(const gb_host *host, const char *name, long min, long max, int *out)
{
    const char *text = getenv(name);
    if (!text || !*text)
        return 0;
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end || value < min || value > max) {
        host->set_error(host, "environment variable %s = \"%s\" is not an integer in [%ld, %ld]",
                        name, text, min, max);
        return -1;
    }
    *out = (int)value;
    return 1;
}

/* The rendezvous address of a world of more than one: MASTER_ADDR and MASTER_PORT, or,
 * when default_addr / default_port are given (mpirun), those in their absence. */
static int read_master(const gb_host *host, launch_plan *plan, const char *default_addr,
                       int default_port)
{
    const char *addr = getenv("MASTER_ADDR");
    if ((!addr || !*addr) && default_addr)
        addr = default_addr;
    if (!addr || !*addr) {
        host->set_error(host, "MASTER_ADDR is not set: with WORLD_SIZE = %d every rank needs "
                        "rank 0's host name or address there%s", plan->world,
                        default_port ? " (ranks on several nodes under mpirun: pass it with "
                                       "mpirun -x MASTER_ADDR=HOST)" : "");
        return -1;
    }
    if (strlen(addr) >= sizeof plan->master_addr) {
        host->set_error(host, "MASTER_ADDR is %zu characters long; at most %zu are accepted",
                        strlen(addr), sizeof plan->master_addr - 1);
        return -1;
    }
    strcpy(plan->master_addr, addr);
    int has_port = read_int(host, "MASTER_PORT", 1, 65535, &plan->master_port);
    if (has_port < 0)
        return -1;
    if (!has_port && default_port) {
        plan->master_port = default_port;
        has_port = 1;
    }
    if (!has_port) {
        host->set_error(host, "MASTER_PORT is not set: with WORLD_SIZE = %d rank 0 needs a free "
                        "TCP port to hand its NCCL id to the other ranks", plan->world);
        return -1;
    }
    plan->port = plan->master_port;
    const char *agent_store = getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && strcmp(agent_store, "True") == 0) {
        if (plan->master_port == 65535) {
            host->set_error(host, "MASTER_PORT = 65535: torchrun's agent serves its store there "
                            "(TORCHELASTIC_USE_AGENT_STORE=True) and the NCCL id needs the port "
                            "above it; pick a lower --master-port");
            return -1;
        }
        plan->port = plan->master_port + 1;
    }
    return 0;
}

/* Launch 2: RANK and WORLD_SIZE (at least one of them is set). */
static int read_torchrun(const gb_host *host, int has_rank, int has_world, launch_plan *plan)
{
    if (!has_rank || !has_world) {
        host->set_error(host, "%s is set but %s is not: a torchrun-style launch sets RANK, "
                        "WORLD_SIZE, MASTER_ADDR and MASTER_PORT for every process",
                        has_rank ? "RANK" : "WORLD_SIZE", has_rank ? "WORLD_SIZE" : "RANK");
        return -1;
    }
    if (plan->rank >= plan->world) {
        host->set_error(host, "RANK = %d is not below WORLD_SIZE = %d", plan->rank, plan->world);
        return -1;
    }
    plan->kind = LAUNCH_TCP;
    return plan->world > 1 ? read_master(host, plan, NULL, 0) : 0;
}

/* The default port of an mpirun launch: from the job's PMIx namespace, the same on every
 * rank of the job and (almost always) different between jobs; 29500 without one. */
static int mpirun_default_port(void)
{
    const char *ns = getenv("PMIX_NAMESPACE");
    if (!ns || !*ns)
        return 29500;
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)ns; *c; c++)
        h = (h ^ *c) * 16777619u;
    return 20000 + (int)(h % 20000u);
}

/* Launch 2: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE is set); the id goes over TCP too. */
static int read_mpirun(const gb_host *host, int world, launch_plan *plan)
{
    int rank = 0, local_size = 0;
    int has_rank = read_int(host, "OMPI_COMM_WORLD_RANK", 0, INT_MAX - 1, &rank);
    int has_local_rank = read_int(host, "OMPI_COMM_WORLD_LOCAL_RANK", 0, INT_MAX,
                                  &plan->local_rank);
    int has_local_size = read_int(host, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, INT_MAX, &local_size);
    if (has_rank < 0 || has_local_rank < 0 || has_local_size < 0)
        return -1;
    if (!has_rank) {
        host->set_error(host, "OMPI_COMM_WORLD_SIZE = %d is set but OMPI_COMM_WORLD_RANK is not: "
                        "Open MPI's mpirun sets both", world);
        return -1;
    }
    if (rank >= world) {
        host->set_error(host, "OMPI_COMM_WORLD_RANK = %d is not below OMPI_COMM_WORLD_SIZE = %d",
                        rank, world);
        return -1;
    }
    plan->kind = LAUNCH_MPI;
    plan->rank = rank;
    plan->world = world;
    if (world == 1)
        return 0;
    /* One node: rank 0 is on this host. Across nodes MASTER_ADDR must say where. */
    return read_master(host, plan, has_local_size && local_size == world ? "127.0.0.1" : NULL,
                       mpirun_default_port());
}

int launch_read_env(const gb_host *host, launch_plan *plan)
{
    *plan = (launch_plan){.kind = LAUNCH_SINGLE, .rank = 0, .world = 1, .local_rank = -1};

    int mpi_world = 1, pmix_rank = 0;
    int has_mpi_world = read_int(host, "OMPI_COMM_WORLD_SIZE", 1, INT_MAX, &mpi_world);
    int has_pmix_rank = read_int(host, "PMIX_RANK", 0, INT_MAX, &pmix_rank);
    if (has_mpi_world < 0 || has_pmix_rank < 0)
        return -1;

    int has_rank = read_int(host, "RANK", 0, INT_MAX - 1, &plan->rank);
    int has_world = read_int(host, "WORLD_SIZE", 1, INT_MAX, &plan->world);
    int has_local_rank = read_int(host, "LOCAL_RANK", 0, INT_MAX, &plan->local_rank);
    if (has_rank < 0 || has_world < 0 || has_local_rank < 0)
        return -1;
    if (has_rank || has_world)
        return read_torchrun(host, has_rank, has_world, plan);
    if (has_mpi_world)
        return read_mpirun(host, mpi_world, plan);

    if (pmix_rank > 0) {
        host->set_error(host, "started by a PMIx launcher (PMIX_RANK = %d) that is not Open MPI's "
                        "mpirun (OMPI_COMM_WORLD_SIZE is not set): launch with torchrun-style "
                        "variables RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT", pmix_rank);
        return -1;
    }
    return 0;
}
