/* The peak MFU divides by (engine/machine.h): the dtype a run computes in picks it, on a
 * GPU from the figures its device plugin states, on the CPU from the CPU's features, and
 * never another dtype's figure (a bf16 GPT-2 step on an H100 read MFU 283.6% against the
 * f32 peak). Pure functions, no device needed; gb_peak_flops through a stand-in device. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "machine.h"

static int failures;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        printf("%s: ", (cond) ? "ok" : "FAIL");           \
        printf(__VA_ARGS__);                              \
        printf("\n");                                     \
        failures += !(cond);                              \
    } while (0)

/* The figures device/cuda states for the emulated GPU and an H100 SXM at 1980 MHz:
 * cc 9.0, 132 SMs, 128 f32 FMA lanes and 4096 dense bf16 tensor FLOP per SM per clock. */
#define H100_CLOCK (132 * 1980e6)
static const gb_device_info h100 = {.struct_size = sizeof(gb_device_info),
                                    .peak_flops_f32 = 256 * H100_CLOCK,
                                    .peak_flops_bf16 = 4096 * H100_CLOCK};

static int near(double got, double want)
{
    return fabs(got - want) <= 1e-9 * fabs(want);
}

static void check_compute_of(void)
{
    CHECK(gb_compute_of(GB_F32, 0) == GB_COMPUTE_F32 &&
              gb_compute_of(GB_F32, 1) == GB_COMPUTE_TF32 &&
              gb_compute_of(GB_BF16, 0) == GB_COMPUTE_BF16 &&
              gb_compute_of(GB_BF16, 1) == GB_COMPUTE_BF16 &&
              gb_compute_of(GB_F16, 0) == GB_COMPUTE_F16,
          "a policy's matmul dtype picks the compute; tf32 only turns f32 into TF32");
    CHECK(strcmp(gb_compute_name(GB_COMPUTE_TF32), "tf32") == 0 &&
              strcmp(gb_compute_name(GB_COMPUTE_BF16), "bf16") == 0,
          "compute names");
}

static void check_gpu(void)
{
    const uint32_t cuda = GB_DEVICE_CUDA;
    CHECK(near(gb_device_peak_flops(&h100, cuda, GB_COMPUTE_F32), 66.90816e12),
          "f32 on the H100: %.1f TFLOP/s",
          gb_device_peak_flops(&h100, cuda, GB_COMPUTE_F32) / 1e12);
    CHECK(near(gb_device_peak_flops(&h100, cuda, GB_COMPUTE_BF16), 1070.53056e12) &&
              near(gb_device_peak_flops(&h100, cuda, GB_COMPUTE_F16), 1070.53056e12),
          "bf16 and f16 on the H100: the dense tensor-core peak, %.1f TFLOP/s",
          h100.peak_flops_bf16 / 1e12);
    CHECK(near(gb_device_peak_flops(&h100, cuda, GB_COMPUTE_TF32), h100.peak_flops_bf16 / 2),
          "TF32 on the H100: half the bf16 rate, %.1f TFLOP/s",
          gb_device_peak_flops(&h100, cuda, GB_COMPUTE_TF32) / 1e12);

    /* the step that read 283.6% against the f32 peak */
    const double achieved = 2.836 * h100.peak_flops_f32;
    const double mfu = achieved / gb_device_peak_flops(&h100, cuda, GB_COMPUTE_BF16);
    CHECK(mfu > 0.1 && mfu < 1.0, "the bf16 step that read MFU 283.6%% against f32 reads "
          "%.1f%% against bf16", 100.0 * mfu);

    const gb_device_info unknown = {.struct_size = sizeof unknown, .peak_flops_f32 = 1e13};
    CHECK(gb_device_peak_flops(&unknown, cuda, GB_COMPUTE_BF16) == 0.0 &&
              gb_device_peak_flops(&unknown, cuda, GB_COMPUTE_TF32) == 0.0 &&
              gb_device_peak_flops(&unknown, cuda, GB_COMPUTE_F16) == 0.0,
          "a GPU that states no bf16 peak has none for 16-bit or TF32 runs (not its f32 one)");
    CHECK(gb_device_peak_flops(&h100, GB_DEVICE_CPU, GB_COMPUTE_F16) == 0.0 &&
              gb_device_peak_flops(&h100, GB_DEVICE_CPU, GB_COMPUTE_TF32) == 0.0,
          "tensor-core ratios apply to CUDA devices only");
}

static void check_cpu(void)
{
    const gb_cpu_features avx2 = {.avx2 = 1, .fma = 1};
    const gb_cpu_features bf16 = {.avx2 = 1, .fma = 1, .avx512f = 1, .avx512_bf16 = 1,
                                  .avx512_fp16 = 1};
    const gb_cpu_features amx = {.avx2 = 1, .fma = 1, .avx512f = 1, .avx512_bf16 = 1,
                                 .amx_tile = 1, .amx_bf16 = 1};
    char how[160];
    double f32 = gb_cpu_peak_flops_of(&avx2, 2, 2.0, GB_COMPUTE_F32, how, sizeof how);
    CHECK(near(f32, 2 * 8 * 2 * 2 * 2e9) &&
              strcmp(how, "2 cores x 8 f32 lanes (avx2) x 2 FMA units x 2 FLOP x 2.00 GHz") == 0,
          "f32 with AVX2: %.0f GFLOP/s (%s)", f32 / 1e9, how);
    double b = gb_cpu_peak_flops_of(&avx2, 2, 2.0, GB_COMPUTE_BF16, how, sizeof how);
    CHECK(near(b, f32) && strstr(how, "16-bit computed as f32"),
          "bf16 without bf16 instructions: the f32 rate (%s)", how);
    f32 = gb_cpu_peak_flops_of(&bf16, 4, 3.0, GB_COMPUTE_F32, NULL, 0);
    b = gb_cpu_peak_flops_of(&bf16, 4, 3.0, GB_COMPUTE_BF16, how, sizeof how);
    CHECK(near(b, 2 * f32) && strstr(how, "avx512_bf16"), "bf16 with AVX512_BF16: twice f32 (%s)",
          how);
    b = gb_cpu_peak_flops_of(&bf16, 4, 3.0, GB_COMPUTE_F16, how, sizeof how);
    CHECK(near(b, 2 * f32) && strstr(how, "avx512_fp16"), "f16 with AVX512_FP16: twice f32 (%s)",
          how);
    b = gb_cpu_peak_flops_of(&amx, 4, 3.0, GB_COMPUTE_BF16, how, sizeof how);
    CHECK(near(b, 4 * 1024 * 3e9) && strstr(how, "amx_bf16"), "bf16 with AMX: %.0f GFLOP/s (%s)",
          b / 1e9, how);
    CHECK(near(gb_cpu_peak_flops_of(&amx, 4, 3.0, GB_COMPUTE_TF32, NULL, 0),
               gb_cpu_peak_flops_of(&amx, 4, 3.0, GB_COMPUTE_F32, NULL, 0)),
          "TF32 on a CPU is f32");
    CHECK(gb_cpu_peak_flops_of(&amx, 4, 0.0, GB_COMPUTE_BF16, NULL, 0) == 0.0,
          "an unknown clock gives no peak");
}

/* A device that states `info` (and nothing else of it is used). */
static const gb_device_info *stated;

static gb_status stand_in_info(void *self, gb_device_info *out)
{
    (void)self;
    memcpy(out, stated, sizeof *out);
    return GB_OK;
}

static void check_peak_flops(void)
{
    const gb_device_ops ops = {.struct_size = sizeof ops, .info = stand_in_info};
    const gb_device_info none = {.struct_size = sizeof none};
    const char *source = NULL;
    stated = &h100;
    double p = gb_peak_flops(&ops, NULL, GB_DEVICE_CUDA, GB_COMPUTE_BF16, &source);
    CHECK(near(p, h100.peak_flops_bf16) && strcmp(source, "device") == 0,
          "a GPU's bf16 run: the device's bf16 figure");
    stated = &none;
    p = gb_peak_flops(&ops, NULL, GB_DEVICE_CUDA, GB_COMPUTE_BF16, &source);
    CHECK(p == 0.0, "a GPU that states nothing: no MFU (not the host CPU's peak)");
    p = gb_peak_flops(&ops, NULL, GB_DEVICE_CPU, GB_COMPUTE_BF16, &source);
    CHECK(p == gb_cpu_peak_flops(GB_COMPUTE_BF16, NULL, 0) && strcmp(source, "stated CPU") == 0,
          "the cpu device: the CPU's own bf16 peak, %.1f GFLOP/s", p / 1e9);
}

int main(void)
{
    check_compute_of();
    check_gpu();
    check_cpu();
    check_peak_flops();
    if (failures)
        printf("%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
