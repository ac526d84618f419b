/* How many cores other processes keep busy, from the kernel's CPU accounting: the
 * machine's busy time (/proc/stat, every CPU; time the hypervisor gave to other guests
 * included) less this process's own CPU time, over a stretch of wall time. `[run] threads
 * = auto` starts its step down from all threads there (threads_auto.h): a team that
 * leaves the neighbours' cores to them. Linux only; elsewhere the samples read as
 * unknown and the team steps down one thread at a time. */
#ifndef GB_CORE_CPU_SHARE_H
#define GB_CORE_CPU_SHARE_H

typedef struct gb_cpu_sample {
    double wall_s;    /* monotonic clock */
    double busy_s;    /* every CPU's non-idle time, added up */
    double own_s;     /* this process's CPU time, all its threads */
    int known;        /* 0: /proc/stat could not be read */
} gb_cpu_sample;

void gb_cpu_sample_take(gb_cpu_sample *s);

/* The cores other processes kept busy from `before` to `after`, rounded to the nearest
 * (0.6 cores: a neighbour that shared a core with us); -1 when either sample is unknown
 * or they are less than GB_CPU_SHARE_MIN_S apart (the kernel counts in ticks of 10 ms). */
#define GB_CPU_SHARE_MIN_S 0.2
int gb_cpu_busy_elsewhere(const gb_cpu_sample *before, const gb_cpu_sample *after);

#endif /* GB_CORE_CPU_SHARE_H */
