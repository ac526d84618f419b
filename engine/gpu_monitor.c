/* GPU figures from NVML; see gpu_monitor.h. The few NVML entry points used are looked up
 * by name and called with the types of nvml_types.h (nvml.h is not needed to build). */
#include "gpu_monitor.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_types.h"

struct gb_gpu_monitor {
    nvml_device device;
    char name[96];
    char driver[80];
    nvml_return (*shutdown)(void);
    nvml_return (*memory)(nvml_device, nvml_memory *);
    nvml_return (*utilization)(nvml_device, nvml_utilization *);
    nvml_return (*power)(nvml_device, unsigned int *);          /* milliwatts */
    nvml_return (*temperature)(nvml_device, int, unsigned int *);
};

/* dlsym into a typed function pointer; NULL when the library lacks the symbol. */
#define RESOLVE(lib, fn, symbol) ((fn) = (__typeof__(fn))dlsym((lib), (symbol)))

/* NVML's words for a failure, or its number where nvmlErrorString is missing. */
static const char *nvml_error(void *lib, nvml_return rc, char *buf, size_t cap)
{
    const char *(*text)(nvml_return);
    if (RESOLVE(lib, text, "nvmlErrorString"))
        return text(rc);
    snprintf(buf, cap, "NVML error %d", rc);
    return buf;
}

/* NVML's handle of the run's GPU, by PCI address or index; 0 or the failed call's code. */
static nvml_return find_device(void *lib, const char *pci_bus_id, int index, nvml_device *out,
                               const char **call)
{
    nvml_return (*by_bus)(const char *, nvml_device *);
    nvml_return (*by_index)(unsigned int, nvml_device *);
    if (pci_bus_id && *pci_bus_id && RESOLVE(lib, by_bus, "nvmlDeviceGetHandleByPciBusId_v2")) {
        *call = "nvmlDeviceGetHandleByPciBusId_v2";
        return by_bus(pci_bus_id, out);
    }
    *call = "nvmlDeviceGetHandleByIndex_v2";
    if (!RESOLVE(lib, by_index, "nvmlDeviceGetHandleByIndex_v2"))
        return -1;
    return by_index((unsigned int)index, out);
}

static void describe(gb_gpu_monitor *g, void *lib)
{
    nvml_return (*name)(nvml_device, char *, unsigned int);
    nvml_return (*driver)(char *, unsigned int);
    if (!RESOLVE(lib, name, "nvmlDeviceGetName") || name(g->device, g->name, sizeof g->name))
        snprintf(g->name, sizeof g->name, "unnamed GPU");
    if (!RESOLVE(lib, driver, "nvmlSystemGetDriverVersion") ||
        driver(g->driver, sizeof g->driver))
        snprintf(g->driver, sizeof g->driver, "unknown");
    RESOLVE(lib, g->memory, "nvmlDeviceGetMemoryInfo");
    RESOLVE(lib, g->utilization, "nvmlDeviceGetUtilizationRates");
    RESOLVE(lib, g->power, "nvmlDeviceGetPowerUsage");
    RESOLVE(lib, g->temperature, "nvmlDeviceGetTemperature");
}

gb_gpu_monitor *gb_gpu_monitor_open(const char *pci_bus_id, int index, char *why, size_t cap)
{
    /* the driver's library stays loaded: unloading it under a CUDA runtime is not safe */
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, cap, "NVML, NVIDIA's driver library, cannot be opened (%s); the "
                 "driver installs it, or put its folder on LD_LIBRARY_PATH", dlerror());
        return NULL;
    }
    nvml_return (*init)(void);
    gb_gpu_monitor *g = calloc(1, sizeof *g);
    char number[32];
    const char *call = "nvmlInit_v2";
    nvml_return rc = -1;
    if (g && RESOLVE(lib, init, "nvmlInit_v2") && RESOLVE(lib, g->shutdown, "nvmlShutdown") &&
        (rc = init()) == 0) {
        rc = find_device(lib, pci_bus_id, index, &g->device, &call);
        if (rc == 0) {
            describe(g, lib);
            return g;
        }
        g->shutdown();
    }
    if (!g)
        snprintf(why, cap, "out of memory");
    else if (pci_bus_id && *pci_bus_id && strcmp(call, "nvmlInit_v2") != 0)
        snprintf(why, cap, "NVML has no GPU at PCI address %s: %s", pci_bus_id,
                 nvml_error(lib, rc, number, sizeof number));
    else
        snprintf(why, cap, "NVML: %s failed: %s", call,
                 rc == -1 ? "the library lacks it" : nvml_error(lib, rc, number, sizeof number));
    free(g);
    return NULL;
}

int gb_gpu_monitor_sample(gb_gpu_monitor *g, gb_gpu_sample *out)
{
    memset(out, 0, sizeof *out);
    nvml_memory mem;
    nvml_utilization util;
    unsigned int milliwatts, celsius;
    if (g->memory && g->memory(g->device, &mem) == 0) {
        out->has_memory = 1;
        out->memory_used = mem.used;
        out->memory_total = mem.total;
    }
    if (g->utilization && g->utilization(g->device, &util) == 0) {
        out->has_utilization = 1;
        out->utilization = util.gpu;
    }
    if (g->power && g->power(g->device, &milliwatts) == 0) {
        out->has_power = 1;
        out->power_watts = milliwatts / 1000.0;
    }
    if (g->temperature && g->temperature(g->device, NVML_TEMPERATURE_GPU, &celsius) == 0) {
        out->has_temperature = 1;
        out->temperature_c = celsius;
    }
    return out->has_memory || out->has_utilization || out->has_power || out->has_temperature
               ? 0 : -1;
}

const char *gb_gpu_monitor_name(const gb_gpu_monitor *g)
{
    return g->name;
}

const char *gb_gpu_monitor_driver(const gb_gpu_monitor *g)
{
    return g->driver;
}

void gb_gpu_monitor_close(gb_gpu_monitor *g)
{
    if (!g)
        return;
    g->shutdown();
    free(g);
}

void gb_gpu_sample_text(const gb_gpu_sample *s, char *buf, size_t cap)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    size_t n = (size_t)snprintf(buf, cap, " | GPU");
    if (s->has_utilization && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, " %u%%", s->utilization);
    if (s->has_memory && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, " %.1f/%.1f GiB", s->memory_used / gib,
                              s->memory_total / gib);
    if (s->has_power && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, " %.0f W", s->power_watts);
    if (s->has_temperature && n < cap)
        snprintf(buf + n, cap - n, " %u C", s->temperature_c);
}
