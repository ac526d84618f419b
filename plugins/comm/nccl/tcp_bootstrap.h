/* The one-shot TCP broadcast that carries rank 0's NCCL unique id to the other ranks of
 * a torchrun-style launch (tcp_bootstrap.c has the protocol). Plain POSIX sockets: no
 * GPU, no NCCL, so it is tested on any machine. */
#ifndef GB_COMM_NCCL_TCP_BOOTSTRAP_H
#define GB_COMM_NCCL_TCP_BOOTSTRAP_H

#include <stddef.h>

#include "gearbox/plugin.h"

/* Rank 0: listens on `port` on every interface and sends the `bytes` of `blob` to each of
 * ranks 1 .. world-1 as they connect. Returns 0 once every rank has it, or -1 with
 * host->set_error() saying why: the port is taken, a rank never connected within
 * timeout_s (the message lists which), or a peer announced another WORLD_SIZE or a RANK
 * that is already served. */
int tcp_bootstrap_serve(const gb_host *host, int port, int world, const void *blob,
                        size_t bytes, double timeout_s);

/* Rank `rank` (1 .. world-1): connects to rank 0 at addr:port, retrying while nobody
 * listens yet, and receives `bytes` into `blob`. Returns 0, or -1 with host->set_error()
 * naming MASTER_ADDR:MASTER_PORT when rank 0 did not answer within timeout_s, the address
 * does not resolve, or what answered is not rank 0 of this launch. */
int tcp_bootstrap_fetch(const gb_host *host, const char *addr, int port, int rank, int world,
                        void *blob, size_t bytes, double timeout_s);

#endif
