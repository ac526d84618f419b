/* The GPU time model behind `gearbox bench ... --predict`: a table of each GPU's figures
 * (H100 SXM, H200) and the time a kernel launch, a cuBLASLt matmul or a cuDNN attention
 * call takes on it, predicted from what the CUDA emulator counted (the records its counting
 * mode writes, one JSON object per line; cuda_emu/README.md) or from the call's shapes.
 *
 * A kernel's time is the largest of its bounds (compute, DRAM, L2, shared memory, the
 * latency floor of a grid that does not fill the GPU) plus the launch overhead; the
 * formulas, their sources and their limits are in docs/gpu.md ("Predicting GPU time").
 * Everything here is a prediction and says so where it is printed.
 */
#ifndef GB_GPUMODEL_H
#define GB_GPUMODEL_H

#include <stddef.h>
#include <stdint.h>

/* One GPU's figures. Rates are per second; each has its source in gpumodel.c. */
typedef struct gb_gpu_spec {
    const char *name;          /* "H100", as --predict takes it */
    const char *full_name;     /* "NVIDIA H100 SXM5 80GB" */
    int sms;
    double boost_ghz;          /* the SM clock the CUDA-core and shared-memory rates use */
    double base_ghz;
    double hbm_bytes_s;        /* the datasheet's HBM bandwidth */
    double hbm_efficiency;     /* the share of it a copy reaches (measured) */
    double l2_bytes;
    double l2_bytes_s;
    double smem_wavefronts_per_clock;  /* per SM: 32 banks x 4 B each clock */
    double tensor_bf16_flops;  /* dense, the datasheet's */
    double tensor_tf32_flops;
    double fp32_flops;         /* CUDA cores, an FMA counted as 2 FLOPs */
    double sfu_per_clock;      /* per SM */
    double launch_s;           /* one kernel's launch overhead on a queue */
    double pcie_bytes_s;       /* host-device copies */
    double dram_latency_s;     /* a global load's round trip */
    double smem_latency_s;
    double loads_in_flight;    /* independent global loads a warp issues before it waits,
                                  where the record does not say */
    int schedulers_per_sm;     /* warp schedulers, each issuing one instruction a clock */
    double dependent_issue_clocks;  /* a warp's next dependent instruction waits this long */
    /* the occupancy rules of its compute capability (sm_90) */
    int max_threads_per_sm, max_warps_per_sm, max_blocks_per_sm;
    double smem_per_sm, smem_reserved_per_block;
} gb_gpu_spec;

/* The GPU called `name` ("H100" or "H200", case ignored), or NULL. */
const gb_gpu_spec *gb_gpu_find(const char *name);
/* The names gb_gpu_find knows, for messages: "H100, H200". */
const char *gb_gpu_names(void);

/* What the emulator counted for one kernel launch (the fields of a "kernel" record;
 * cuda_emu/README.md defines them after Nsight Compute). Counts are whole-grid totals,
 * already scaled when the emulator sampled blocks. */
typedef struct gb_kernel_counts {
    char kernel[128];
    int64_t grid[3], block[3];
    double dyn_smem, static_smem;
    double blocks_total;
    double gld_requests, gld_bytes, gld_sectors;
    double gst_requests, gst_bytes, gst_sectors;
    double unique_sectors;     /* distinct sectors the launch touched, loads and stores
                                  summed; < 0: not counted */
    double gld_phases;         /* per warp, summed: the barrier-delimited phases with a
                                  global load; < 0: not counted */
    double instructions;       /* warp-level instructions issued; < 0: not counted */
    double loads_in_flight;    /* global loads per iteration of the kernel's loading loops
                                  in the real build's PTX; < 0: the GPU table's */
    double shld_requests, shld_wavefronts, shst_requests, shst_wavefronts;
    double wgmma_requests;     /* of shld_requests, wgmma's operand reads: the tensor
                                  cores', which no warp waits on one by one */
    double tensor_flops_16;    /* 2 m n k per mma, summed by dtype */
    double tensor_flops_tf32;
    double fp32_ops, sfu_ops, barriers;
    double occupancy_blocks_per_sm;   /* from the real build's resources; < 0: unknown */
    double occupancy_fraction;
    char occupancy_limiter[32];
} gb_kernel_counts;

/* A cuBLASLt matmul as the emulator recorded it. */
typedef struct gb_matmul_shape {
    double m, n, k, batch;
    char a_type[16], c_type[16];
    char compute[16];     /* what its products run on: "bf16", "f16", "tf32" or "f32" */
    char epilogue[32];    /* cuBLASLt's name less CUBLASLT_EPILOGUE_ ("GELU_BIAS"); "" none */
} gb_matmul_shape;

typedef enum gb_gpu_bound {
    GB_BOUND_COMPUTE,
    GB_BOUND_DRAM,
    GB_BOUND_L2,
    GB_BOUND_SHARED,
    GB_BOUND_LATENCY,
    GB_BOUND_FITTED,     /* a library call timed at an efficiency fitted to a measurement */
    GB_BOUND_PCIE,       /* a copy between host and device */
    GB_BOUND_ISSUE,      /* warp instructions at what the resident warps can issue */
    GB_BOUND_COUNT
} gb_gpu_bound;

const char *gb_gpu_bound_name(gb_gpu_bound b);
/* The bound with the most seconds in bound_s[GB_BOUND_COUNT]. */
gb_gpu_bound gb_gpu_largest_bound(const double *bound_s);

/* One call's prediction. Each bound in seconds; `seconds` is the largest plus the launch. */
typedef struct gb_gpu_estimate {
    double seconds;
    double bound_s[GB_BOUND_COUNT];
    double launch_s;
    gb_gpu_bound bound;
    double roofline_s;     /* the work at the whole GPU's peak compute or DRAM bandwidth */
    double flops;          /* counted or from the shape */
    /* the counters the report prints, aggregated as sums */
    double bytes_requested, sector_bytes;       /* coalescing = requested / sector bytes */
    double smem_requests, smem_wavefronts;      /* bank conflicts = wavefronts / requests */
    double occupancy;      /* achieved-occupancy limit, 0..1; < 0: n/a */
    int occupancy_estimated;   /* 1: from threads and shared memory alone (no registers) */
} gb_gpu_estimate;

/* The time of one kernel launch on `gpu`. */
gb_gpu_estimate gb_gpu_predict_kernel(const gb_gpu_spec *gpu, const gb_kernel_counts *k);

/* Which pass a matmul serves; the measured efficiencies of an odd product differ by pass. */
typedef enum gb_matmul_pass { GB_PASS_FORWARD, GB_PASS_DX, GB_PASS_DW } gb_matmul_pass;

/* The time of a cuBLASLt matmul from its shape, at the efficiency measured on an H100 for
 * products of whole 16-byte units, or for an odd one in its pass (docs/gpu.md), never
 * below its operands' DRAM time. */
gb_gpu_estimate gb_gpu_predict_matmul(const gb_gpu_spec *gpu, const gb_matmul_shape *s,
                                      gb_matmul_pass pass);

/* The time of cuDNN's fused attention executing `flops` (forward or backward), at the
 * efficiency measured on an H100. */
gb_gpu_estimate gb_gpu_predict_cudnn_attn(const gb_gpu_spec *gpu, double flops, int backward);

/* A copy or memset the emulator recorded ("memcpy" records). */
typedef struct gb_copy {
    double bytes;
    char kind[16];        /* "HtoD", "DtoH", "DtoD", "HtoH" or "memset" */
} gb_copy;

/* The time of a copy: a memset writes its bytes through DRAM, a device copy reads and
 * writes them, a host copy crosses PCIe; plus a launch. */
gb_gpu_estimate gb_gpu_predict_copy(const gb_gpu_spec *gpu, const gb_copy *c);

/* The dense peak MFU divides by for a matmul dtype ("bf16", "f16", "tf32", "f32"). */
double gb_gpu_peak_flops(const gb_gpu_spec *gpu, const char *compute);

/* One record line of the emulator's counting mode. */
typedef enum gb_record_type {
    GB_RECORD_OTHER,       /* nccl, event, or a type not understood */
    GB_RECORD_KERNEL,
    GB_RECORD_MATMUL,
    GB_RECORD_COPY
} gb_record_type;

typedef struct gb_record {
    gb_record_type type;
    gb_kernel_counts kernel;
    gb_matmul_shape matmul;
    gb_copy copy;
} gb_record;

/* Parses `line` into *out: 0, or -1 with why[] filled when it is not a JSON object or a
 * kernel or cublaslt record lacks a field. */
int gb_record_parse(const char *line, gb_record *out, char *why, size_t cap);

#endif
