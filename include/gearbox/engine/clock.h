/* Wall-clock and CPU time for step timing and measurements. */
#ifndef GB_CORE_CLOCK_H
#define GB_CORE_CLOCK_H

/* Milliseconds on the monotonic clock (unaffected by clock changes). */
double gb_now_ms(void);

/* Milliseconds of CPU time this process has used, all its threads together: what time
 * given to other programs on a busy machine does not add to. */
double gb_cpu_ms(void);

#endif
