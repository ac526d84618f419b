/* The CUDA runtime header as the emulated build of a .cu file sees it: the real one (its
 * types, enums and prototypes compile on the host as they are; the emulator's library
 * implements the functions), then the device side that nvcc would have supplied
 * (gb_emu/kernel.h). This folder comes first on the include path of the emulated .cu
 * translation units only; C host files use the real header directly.
 */
#ifndef GB_EMU_CUDA_RUNTIME_H
#define GB_EMU_CUDA_RUNTIME_H

#include_next <cuda_runtime.h>

#ifdef __cplusplus
#include "gb_emu/kernel.h"

/* The real header declares this overload for nvcc only. */
template <class T>
static inline cudaError_t cudaFuncSetAttribute(T *entry, enum cudaFuncAttribute attr, int value)
{
    return ::cudaFuncSetAttribute(reinterpret_cast<const void *>(entry), attr, value);
}
#endif

#endif
