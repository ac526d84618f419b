/* How long an idle OpenMP thread spins before it sleeps, settled before OpenMP starts.
 *
 * libgomp spins 300,000 rounds (milliseconds) at every barrier and between parallel
 * regions before it sleeps, unless OMP_WAIT_POLICY or GOMP_SPINCOUNT say otherwise, and
 * it reads them once, in its constructor, before main. On a machine shared with another
 * busy process that spin is what hurts: the thread that finished first holds its core
 * while its partner waits for the other one. Sleeping at once (OMP_WAIT_POLICY=passive)
 * costs a few per cent on an idle machine, where the next parallel region starts
 * microseconds later. A bounded spin of GB_OMP_SPIN_ROUNDS covers those microseconds and
 * gives the core up soon after. Measured on a 2-core machine (docs/BENCHMARKS.md), the
 * small config's step: idle 29.8 ms with libgomp's default, 30.1 with 1000 rounds, 31.3
 * passive; beside one busy process 64-182 ms, 67, 60. 10,000 rounds were as bad as the
 * default there.
 *
 * Since libgomp has read its environment by the time main runs (and glibc resets the
 * environment after the executable's earliest hook), the setting takes one re-exec of
 * the same executable, same process id, arguments and environment plus that variable.
 * What the user set is left alone; where the re-exec fails the run goes on with
 * libgomp's default. */
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"

#define GB_OMP_SPIN_ROUNDS "1000"

void gb_cli_bound_openmp_spin(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return;
    if (setenv("GOMP_SPINCOUNT", GB_OMP_SPIN_ROUNDS, 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    unsetenv("GOMP_SPINCOUNT");   /* not in force: do not let `doctor` or a child think so */
}
