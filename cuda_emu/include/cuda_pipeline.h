/* CUDA's pipeline primitives (cuda_pipeline.h, cuda_pipeline_primitives.h) on the
 * emulator: cp.async from global to shared memory, committed in groups and waited for by
 * the thread that issued them. gb_emu::async_copy_issue (gb_emu/kernel.h) says what is
 * checked; the data lands at the wait, and until then the destination reads as NaN.
 */
#ifndef GB_EMU_CUDA_PIPELINE_H
#define GB_EMU_CUDA_PIPELINE_H

#include <cstddef>

#include "cuda_runtime.h"

inline void __pipeline_memcpy_async(void *dst_shared, const void *src_global,
                                    size_t size_and_align, size_t zfill = 0,
                                    const char *file = __builtin_FILE(),
                                    int line = __builtin_LINE())
{
    ::gb_emu::async_copy_issue(file, line, dst_shared, src_global, size_and_align, zfill);
}

inline void __pipeline_commit(const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    ::gb_emu::async_commit(file, line);
}

inline void __pipeline_wait_prior(size_t prior, const char *file = __builtin_FILE(),
                                  int line = __builtin_LINE())
{
    ::gb_emu::async_wait_prior(file, line, prior);
}

#endif
