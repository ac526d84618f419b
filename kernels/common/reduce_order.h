/* The summation orders of the device kernels' reductions, shared by the CPU device and
 * the CUDA device so that both add the same numbers in the same order.
 *
 * A float sum's bits depend on its order, so gearbox fixes the order by the sizes alone,
 * never by thread counts, block sizes or timing:
 * - a sum along one row (LayerNorm's statistics, a softmax denominator, a block of the sum
 *   of squares) keeps GB_ROW_LANES partial sums, element i going to lane i % GB_ROW_LANES
 *   in increasing i, then folds the lanes as a tree: lane j += lane j + w for w = 8, 4,
 *   2, 1. On the CPU the lanes are one vector register; on a GPU they are 16 threads of
 *   a warp folding with shuffles.
 * - a sum across rows (the gradients of biases and of LayerNorm's weights) cuts the rows
 *   into gb_chunk_count() chunks, sums each chunk's rows in increasing order into a double
 *   partial, and adds the partials in chunk order; CPU threads or GPU blocks take whole
 *   chunks.
 * Given the same element values, the CPU and the CUDA kernels then give the same sums.
 * Header-only.
 */
#ifndef GEARBOX_KERNELS_COMMON_REDUCE_ORDER_H
#define GEARBOX_KERNELS_COMMON_REDUCE_ORDER_H

#include <stdint.h>

#include "hostdevice.h"

#define GB_ROW_LANES 16

/* Rows per chunk of the sums over rows (LayerNorm's dweight and dbias, bias gradients). */
#define GB_CHUNK_ROWS 64
/* Elements per chunk of the sum of squares. */
#define GB_CHUNK_ELEMENTS 65536

/* How many chunks a sum over `rows` rows (or elements) is cut into: one per `per_chunk`,
 * at least one. */
GB_HD_FN int64_t gb_chunk_count(int64_t rows, int64_t per_chunk)
{
    return rows > per_chunk ? (rows + per_chunk - 1) / per_chunk : 1;
}

/* Chunk `chunk` of `chunks` covers [rows * chunk / chunks, rows * (chunk+1) / chunks). */
GB_HD_FN int64_t gb_chunk_begin(int64_t rows, int64_t chunk, int64_t chunks)
{
    return rows * chunk / chunks;
}

#endif /* GEARBOX_KERNELS_COMMON_REDUCE_ORDER_H */
