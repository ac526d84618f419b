/* The size and the split of a CPU plugin's parallel regions, read at each call.
 *
 * A plugin is created with the most threads it may use (gb_host.num_threads); the
 * engine may run on fewer for a while (`[run] threads = auto` tries one thread on a busy
 * machine) by lowering the OpenMP pool with omp_set_num_threads, which a num_threads()
 * clause would override. So every region asks for gb_omp_team(most): the smaller of the
 * two, read when the region starts.
 *
 * Loops over many independent items take them in pieces from a shared counter
 * (schedule(dynamic, gb_omp_piece(...))) rather than one static share per thread: when
 * another process takes a core from one of the threads, the others take its remaining
 * pieces instead of waiting at the end of the loop for it. Each piece is still a whole
 * row or chunk, so the results do not depend on which thread ran it. */
#ifndef GB_KERNELS_CPU_OMP_TEAM_H
#define GB_KERNELS_CPU_OMP_TEAM_H

#include <stdint.h>

#include <omp.h>

/* Pieces per thread a dynamic loop is cut into: enough that a thread that lost its core
 * leaves little behind, few enough that taking one (an atomic add) costs nothing next
 * to its work. */
#define GB_OMP_PIECES_PER_THREAD 8

/* The threads a parallel region of a plugin created for `most` threads runs on now. */
static inline int gb_omp_team(int most)
{
    const int pool = omp_get_max_threads();
    return pool < most ? pool : most;
}

/* The items of one piece of a dynamic loop over `items` on `team` threads: at least 1. */
static inline int64_t gb_omp_piece(int64_t items, int team)
{
    const int64_t piece = items / ((int64_t)team * GB_OMP_PIECES_PER_THREAD);
    return piece > 0 ? piece : 1;
}

#endif /* GB_KERNELS_CPU_OMP_TEAM_H */
