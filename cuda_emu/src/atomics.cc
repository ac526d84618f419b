/* The atomic functions device code calls (gb_emu/kernel.h: atomicAdd): each checked as the
 * calling thread's read and write of its bytes, then done with the host's atomics, since a
 * grid's blocks run on several host threads at once, and counted in the counting mode.
 * Only device memory: a shared-memory atomic stops the kernel naming the .cu line.
 */
#include <cstdint>
#include <cstring>

#include "blocks.h"
#include "counters.h"
#include "emu.h"

namespace gb_emu {

namespace {

/* *p = update(*p) atomically, on the value's bits; returns the old value. */
template <class T, class Update>
T atomic_update(const char *file, int line, T *p, Update update, const void *pc)
{
    static_assert(sizeof(T) == 4, "the 32-bit atomics");
    if (!device_arena_holds(p))
        device_violation(file, line, "atomicAdd on %p, which is not device memory (the "
                         "emulator implements atomics on global memory only)", (void *)p);
    checked_access(p, sizeof(T), false, pc);
    checked_access(p, sizeof(T), true, pc);
    if (counting)
        count_atomic();
    uint32_t *bits = reinterpret_cast<uint32_t *>(p);
    uint32_t seen = __atomic_load_n(bits, __ATOMIC_RELAXED);
    for (;;) {
        T old, next;
        std::memcpy(&old, &seen, sizeof old);
        next = update(old);
        uint32_t want;
        std::memcpy(&want, &next, sizeof want);
        if (__atomic_compare_exchange_n(bits, &seen, want, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED))
            return old;
    }
}

}  // namespace

float atomic_add(const char *file, int line, float *p, float value)
{
    return atomic_update(file, line, p, [value](float v) { return v + value; },
                         __builtin_return_address(0));
}

int atomic_add(const char *file, int line, int *p, int value)
{
    /* wraps as the GPU's does: the sum of the bits, unsigned */
    return atomic_update(file, line, p,
                         [value](int v) { return (int)((unsigned)v + (unsigned)value); },
                         __builtin_return_address(0));
}

unsigned atomic_add(const char *file, int line, unsigned *p, unsigned value)
{
    return atomic_update(file, line, p, [value](unsigned v) { return v + value; },
                         __builtin_return_address(0));
}

}  // namespace gb_emu
