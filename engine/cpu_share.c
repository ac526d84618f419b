/* Cores other processes keep busy; see cpu_share.h. */
#include "cpu_share.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "clock.h"

/* /proc/stat's first line: "cpu  user nice system idle iowait irq softirq steal ...", in
 * clock ticks summed over the CPUs; busy is all but idle and iowait. */
static int read_busy_seconds(double *busy_s)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -1;
    unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system,
                   &idle, &iowait, &irq, &softirq, &steal);
    fclose(f);
    long ticks = sysconf(_SC_CLK_TCK);
    if (n != 8 || ticks <= 0)
        return -1;
    *busy_s = (double)(user + nice + system + irq + softirq + steal) / (double)ticks;
    return 0;
}

void gb_cpu_sample_take(gb_cpu_sample *s)
{
    s->wall_s = gb_now_ms() / 1e3;
    s->own_s = gb_cpu_ms() / 1e3;
    s->known = read_busy_seconds(&s->busy_s) == 0;
}

int gb_cpu_busy_elsewhere(const gb_cpu_sample *before, const gb_cpu_sample *after)
{
    const double wall = after->wall_s - before->wall_s;
    if (!before->known || !after->known || wall < GB_CPU_SHARE_MIN_S)
        return -1;
    const double others = (after->busy_s - before->busy_s) - (after->own_s - before->own_s);
    return others > 0.0 ? (int)lround(others / wall) : 0;
}
