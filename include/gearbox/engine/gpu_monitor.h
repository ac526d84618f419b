/* GPU figures from NVML, NVIDIA's management library: memory used, utilisation, power
 * draw and temperature of the run's GPU, for metrics.jsonl, the progress line and
 * `gearbox doctor`.
 *
 * NVML ships with the driver (libnvidia-ml.so.1); the engine links no GPU library, so it
 * is opened with dlopen when a run on a GPU asks for it, and a machine without it runs as
 * before with the figures absent and the reason said once. The GPU is found by its PCI
 * address (gb_device_info.pci_bus_id, ABI 1.4), which CUDA and NVML agree on whatever
 * CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER do to CUDA's numbering; a device plugin
 * built before 1.4 gives none, and NVML's GPU with the CUDA ordinal's index is taken. */
#ifndef GB_CORE_GPU_MONITOR_H
#define GB_CORE_GPU_MONITOR_H

#include <stddef.h>
#include <stdint.h>

/* One reading; each figure only when its `has_` flag is set (NVML answers "not
 * supported" for some of them on some GPUs). */
typedef struct gb_gpu_sample {
    int has_memory, has_utilization, has_power, has_temperature;
    uint64_t memory_used, memory_total;   /* bytes, every process's */
    unsigned utilization;                 /* percent of the last sample period with a
                                             kernel running */
    double power_watts;
    unsigned temperature_c;
} gb_gpu_sample;

typedef struct gb_gpu_monitor gb_gpu_monitor;

/* The GPU at `pci_bus_id` ("" or NULL: NVML's GPU `index`). NULL with the reason in `why`
 * (no libnvidia-ml.so.1, NVML failed to start, no such GPU). */
gb_gpu_monitor *gb_gpu_monitor_open(const char *pci_bus_id, int index, char *why, size_t cap);
/* 0 with whatever NVML answered, -1 when it answered nothing. */
int gb_gpu_monitor_sample(gb_gpu_monitor *g, gb_gpu_sample *out);
/* NVML's name of the GPU and the driver's version. */
const char *gb_gpu_monitor_name(const gb_gpu_monitor *g);
const char *gb_gpu_monitor_driver(const gb_gpu_monitor *g);
void gb_gpu_monitor_close(gb_gpu_monitor *g);

/* " | GPU 87% 40.1/80.0 GiB 350 W 65 C": the figures `s` has, for the progress line. */
void gb_gpu_sample_text(const gb_gpu_sample *s, char *buf, size_t cap);

#endif
