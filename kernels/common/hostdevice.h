/* The marker for per-element formulas that the CPU and the CUDA plugins share: compiled by
 * nvcc they are __host__ __device__, so a CPU test of the formula tests what the GPU runs
 * (the same formula, not always the same bits: reduction order and fused multiply-adds
 * differ between the two; each header says where). Header-only.
 */
#ifndef GEARBOX_KERNELS_HOSTDEVICE_H
#define GEARBOX_KERNELS_HOSTDEVICE_H

#ifdef __CUDACC__
#define GB_HD_FN static inline __host__ __device__
#else
#define GB_HD_FN static inline
#endif

#endif
