/* Wall-clock and CPU time for step timing and measurements. */
#ifndef GB_CORE_CLOCK_H
#define GB_CORE_CLOCK_H

#include <time.h>

/* Milliseconds on the monotonic clock (unaffected by clock changes). */
static inline double gb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Milliseconds of CPU time this process has used, all its threads together: what time
 * given to other programs on a busy machine does not add to. */
static inline double gb_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#endif
