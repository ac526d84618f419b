/* Where this process stands in a multi-process launch, read from its launcher's
 * environment variables (launch.c says which, and in what order they are tried). */
#ifndef GB_COMM_NCCL_LAUNCH_H
#define GB_COMM_NCCL_LAUNCH_H

#include "gearbox/plugin.h"

typedef enum launch_kind {
    LAUNCH_SINGLE = 0,   /* no launcher: rank 0 of a world of 1 */
    LAUNCH_MPI = 1,      /* Open MPI's mpirun: rank and world from OMPI_COMM_WORLD_*;
                            rank 0 serves the id over TCP (no MPI library involved) */
    LAUNCH_TCP = 2       /* torchrun-style variables: rank 0 serves the id over TCP */
} launch_kind;

typedef struct launch_plan {
    launch_kind kind;
    int rank, world;        /* RANK and WORLD_SIZE (OMPI_COMM_WORLD_RANK and _SIZE for
                               LAUNCH_MPI); 0 and 1 for LAUNCH_SINGLE */
    int local_rank;         /* LOCAL_RANK (OMPI_COMM_WORLD_LOCAL_RANK for LAUNCH_MPI), or -1
                               when unset; informational only, since the
                               core picks the GPU (the device context's ordinal) */
    char master_addr[256];  /* MASTER_ADDR: rank 0's host, world > 1 only (mpirun on one
                               node: 127.0.0.1 by default) */
    int master_port;        /* MASTER_PORT as given */
    int port;               /* where rank 0 serves the id: MASTER_PORT, or MASTER_PORT + 1
                               when torchrun's agent already serves its own store there */
} launch_plan;

/* Fills *plan from the environment. Returns 0, or -1 with host->set_error() naming the
 * variable at fault and what it should be. Reads getenv() only. */
int launch_read_env(const gb_host *host, launch_plan *plan);

#endif
