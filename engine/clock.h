/* Wall-clock time for step timing and measurements. */
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

#endif
