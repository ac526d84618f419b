/* The clocks of clock.h, here rather than inline in the public header: clock_gettime needs
 * POSIX, which a program built as strict C11 on the engine does not declare. */
#include "clock.h"

#include <time.h>

static double milliseconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double gb_now_ms(void)
{
    return milliseconds(CLOCK_MONOTONIC);
}

double gb_cpu_ms(void)
{
    return milliseconds(CLOCK_PROCESS_CPUTIME_ID);
}
