/* gearbox: which x86-64 instruction-set extensions this CPU has and its operating system
 * has enabled, for the core and for plugins (header-only; nothing to link). The core's
 * run-time choices (doctor, manifest.json) and device/cpu's description read the CPU the
 * same way through it.
 *
 * A feature counts only when the OS saves the registers it uses (xgetbv): AVX state for
 * AVX2 and FMA, the opmask and ZMM state too for AVX-512, the tile state for AMX. On other
 * architectures every feature reads as absent. (__builtin_cpu_supports would do on gcc,
 * but clang before 16 knows neither "amx-bf16" nor "avx512fp16".) */
#ifndef GEARBOX_CPU_ISA_H
#define GEARBOX_CPU_ISA_H

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

typedef struct gb_cpu_isa {
    int avx2, fma, avx512f, avx512_bf16, avx512_fp16, amx_tile, amx_bf16;
} gb_cpu_isa;

static inline void gb_cpu_isa_detect(gb_cpu_isa *out)
{
    memset(out, 0, sizeof *out);
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const uint64_t xcr0 = (uint64_t)hi << 32 | lo;
    const int avx_state = (xcr0 & 0x6) == 0x6;                    /* SSE and AVX registers */
    const int avx512_state = avx_state && (xcr0 & 0xe0) == 0xe0;  /* opmask, ZMM halves */
    const int amx_state = (xcr0 & 0x60000) == 0x60000;            /* XTILECFG, XTILEDATA */
    out->fma = avx_state && (c & bit_FMA);
    if (__get_cpuid_max(0, NULL) < 7)
        return;
    __cpuid_count(7, 0, a, b, c, d);
    out->avx2 = avx_state && (b & bit_AVX2);
    out->avx512f = avx512_state && (b & bit_AVX512F);
    out->avx512_fp16 = avx512_state && (d & (1u << 23));
    out->amx_tile = amx_state && (d & (1u << 24));
    out->amx_bf16 = amx_state && (d & (1u << 22));
    __cpuid_count(7, 1, a, b, c, d);
    out->avx512_bf16 = avx512_state && (a & (1u << 5));
#endif
}

#endif /* GEARBOX_CPU_ISA_H */
