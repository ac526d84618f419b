/* Seconds on the monotonic clock: the deadlines of comm/nccl's waits (rendezvous and
 * collectives) are measured with it, so a change of the wall clock cannot shorten or
 * stretch a timeout. */
#ifndef GB_COMM_NCCL_MONOTONIC_H
#define GB_COMM_NCCL_MONOTONIC_H

#include <time.h>

/* Seconds since an arbitrary fixed point; only differences mean anything. */
static inline double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
