/* A double of NVML (libnvidia-ml.so.1) for the emulated GPU: the entry points gearbox's
 * GPU monitor asks (engine/gpu_monitor.c), answering for one GPU at the emulator's PCI
 * address (cudaDeviceGetPCIBusId, 0000:65:00.0) with fixed, plausible figures, and NVML's
 * errors where NVML gives them (before nvmlInit, for another address or index). Tests put
 * its folder on LD_LIBRARY_PATH so the monitor's path, and bench/gpu_watch.py's, run
 * without a GPU. */
#include <stdio.h>
#include <string.h>

#include "nvml_types.h"   /* engine/: the types gearbox's monitor passes */

#define EXPORT __attribute__((visibility("default")))

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_FOUND = 6
};


static int initialised;               /* nvmlInit_v2 calls not yet shut down */
static char the_gpu;                  /* its handle is this address */

#define GIB (1024ull * 1024ull * 1024ull)

static int check(const void *device)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    return device == &the_gpu ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

EXPORT int nvmlInit_v2(void)
{
    initialised++;
    return NVML_SUCCESS;
}

EXPORT int nvmlShutdown(void)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    initialised--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(int result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    default: return "Unknown Error";
    }
}

EXPORT int nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    snprintf(version, length, "580.65.06");
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    *count = 1;
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (index != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &the_gpu;
    return NVML_SUCCESS;
}

/* NVML takes the domain in 4 or 8 hex digits. */
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, void **device)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (strcmp(bus_id, "0000:65:00.0") != 0 && strcmp(bus_id, "00000000:65:00.0") != 0)
        return NVML_ERROR_NOT_FOUND;
    *device = &the_gpu;
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetName(void *device, char *name, unsigned int length)
{
    int rc = check(device);
    if (rc == NVML_SUCCESS)
        snprintf(name, length, "NVML double of the emulated GPU");
    return rc;
}

EXPORT int nvmlDeviceGetMemoryInfo(void *device, nvml_memory *memory)
{
    int rc = check(device);
    if (rc == NVML_SUCCESS)
        *memory = (nvml_memory){.total = 80 * GIB, .used = 3 * GIB / 2,
                                .free = 80 * GIB - 3 * GIB / 2};
    return rc;
}

EXPORT int nvmlDeviceGetUtilizationRates(void *device, nvml_utilization *utilization)
{
    int rc = check(device);
    if (rc == NVML_SUCCESS)
        *utilization = (nvml_utilization){.gpu = 87, .memory = 41};
    return rc;
}

EXPORT int nvmlDeviceGetPowerUsage(void *device, unsigned int *milliwatts)
{
    int rc = check(device);
    if (rc == NVML_SUCCESS)
        *milliwatts = 312500;
    return rc;
}

EXPORT int nvmlDeviceGetTemperature(void *device, int sensor, unsigned int *celsius)
{
    int rc = check(device);
    if (rc == NVML_SUCCESS && sensor != 0)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *celsius = 61;
    return rc;
}

/* No process holds a context on the emulated GPU as NVML would see it: the list is empty. */
EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count, void *infos)
{
    (void)infos;
    int rc = check(device);
    if (rc == NVML_SUCCESS && !count)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *count = 0;
    return rc;
}
