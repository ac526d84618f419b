/* The few NVML types gearbox's GPU monitor (gpu_monitor.c) passes to NVML's entry points,
 * declared as NVML's public API (nvml.h) defines them, so nothing of NVML is needed to
 * build; the emulator's NVML double (cuda_emu/nvml) answers in the same types. */
#ifndef GB_CORE_NVML_TYPES_H
#define GB_CORE_NVML_TYPES_H

typedef int nvml_return;          /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_device *nvml_device;
typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;
typedef struct nvml_utilization {
    unsigned int gpu, memory;
} nvml_utilization;
#define NVML_TEMPERATURE_GPU 0

#endif
