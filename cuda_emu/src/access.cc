/* The entry points of -fsanitize=thread's instrumentation, which the emulated .cu files are
 * compiled with (cuda_emu/meson.build): g++ calls __tsan_readN/__tsan_writeN before every
 * load and store the code cannot prove private to the thread, and these hand each access
 * to the emulator's checks (blocks.h: checked_access) with the return address, which
 * locates the access in the .cu file, and in the counting mode to the counters first. No ThreadSanitizer runtime is linked; the atomics
 * and the rest of its interface that the instrumented code calls are done here plainly.
 */
#include <cstddef>
#include <cstdint>

#include "blocks.h"
#include "counters.h"

#define GB_EMU_EXPORT extern "C" __attribute__((visibility("default")))

/* One predictable branch when the counting mode is off, and a tail call either way (a
 * call before the checks would give the checks' fast paths a full prologue). */
#define GB_EMU_ACCESS(entry, n, is_write)                                                  \
    GB_EMU_EXPORT void entry(void *p)                                                       \
    {                                                                                       \
        if (__builtin_expect(gb_emu::counting, false))                                      \
            gb_emu::counted_access(p, n, is_write, __builtin_return_address(0));           \
        else                                                                                \
            gb_emu::checked_access(p, n, is_write, __builtin_return_address(0));           \
    }

#define GB_EMU_ACCESSES(n)                                                                \
    GB_EMU_ACCESS(__tsan_read##n, n, false)                                                 \
    GB_EMU_ACCESS(__tsan_write##n, n, true)                                                 \
    GB_EMU_ACCESS(__tsan_unaligned_read##n, n, false)                                       \
    GB_EMU_ACCESS(__tsan_unaligned_write##n, n, true)

GB_EMU_ACCESSES(1)
GB_EMU_ACCESSES(2)
GB_EMU_ACCESSES(4)
GB_EMU_ACCESSES(8)
GB_EMU_ACCESSES(16)

GB_EMU_EXPORT void __tsan_read_range(void *p, size_t bytes)
{
    if (gb_emu::counting)
        gb_emu::counted_access(p, bytes, false, __builtin_return_address(0));
    else
        gb_emu::checked_access(p, bytes, false, __builtin_return_address(0));
}

GB_EMU_EXPORT void __tsan_write_range(void *p, size_t bytes)
{
    if (gb_emu::counting)
        gb_emu::counted_access(p, bytes, true, __builtin_return_address(0));
    else
        gb_emu::checked_access(p, bytes, true, __builtin_return_address(0));
}

/* Called by each instrumented object's constructor; nothing to set up. */
GB_EMU_EXPORT void __tsan_init(void) {}
GB_EMU_EXPORT void __tsan_func_entry(void *) {}
GB_EMU_EXPORT void __tsan_func_exit(void) {}
GB_EMU_EXPORT void __tsan_vptr_update(void **, void *) {}
GB_EMU_EXPORT void __tsan_vptr_read(void **) {}

/* The guard of a function's static local (mma.h's fragment layouts) reads a flag
 * atomically. `order` is a std::memory_order; the strongest serves every one. */
GB_EMU_EXPORT uint8_t __tsan_atomic8_load(const volatile uint8_t *p, int order)
{
    (void)order;
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

/* Host code in an instrumented test (a flag another thread waits on) stores one. */
GB_EMU_EXPORT void __tsan_atomic8_store(volatile uint8_t *p, uint8_t value, int order)
{
    (void)order;
    __atomic_store_n(p, value, __ATOMIC_SEQ_CST);
}
