/* The kernel entries of the CPU device's vtable, run at once or queued (deferred.c). Each
 * has the signature of its gb_device_ops entry and of the kernel it runs (cpu_device.h). */
#ifndef GB_DEVICE_CPU_DEFERRED_H
#define GB_DEVICE_CPU_DEFERRED_H

#include "device_kernels.h"

GB_DEVICE_KERNELS(cpu_q);
GB_DEVICE_LOSS_KERNELS(cpu_q);

#endif /* GB_DEVICE_CPU_DEFERRED_H */
