/* The peak MFU divides by (gearbox/engine/machine.h; the limits measured in
 * tools/measure/): the dtype a run computes in picks it, on a GPU from the figures its
 * device plugin states, on the CPU from the CPU's features, and never another dtype's
 * figure (a bf16 GPT-2 step on an H100 read MFU 283.6% against the f32 peak). Pure
 * functions, no device needed; gb_peak_flops through a stand-in device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader.h"
#include "machine.h"
#include "measure/measure.h"

static int failures;

/* What the shipped devices built before ABI 1.6 say of themselves, from their fixed bit. */
static const gb_device_desc *fixed_device(uint32_t bit)
{
    static gb_device_desc cpu, cuda;
    gb_device_desc *d = bit == GB_DEVICE_CUDA ? &cuda : &cpu;
    d->struct_size = sizeof *d;
    gb_device_describe_fixed(bit, d);
    return d;
}

#define CHECK(cond, ...)                                  \
    do {                                                  \
        printf("%s: ", (cond) ? "ok" : "FAIL");           \
        printf(__VA_ARGS__);                              \
        printf("\n");                                     \
        failures += !(cond);                              \
    } while (0)

/* The figures device/cuda states for the emulated GPU and an H100 SXM (cc 9.0, 132 SMs):
 * 128 f32 FMA lanes per SM at the 1980 MHz the driver reports, and 4096 dense bf16 tensor
 * FLOP per SM at the 1830 MHz NVIDIA rates them at (989.4 TFLOP/s, not 1070). */
static const gb_device_info h100 = {.struct_size = sizeof(gb_device_info),
                                    .peak_flops_f32 = 256 * 132 * 1980e6,
                                    .peak_flops_bf16 = 4096 * 132 * 1830e6};

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
    const gb_device_desc *cuda = fixed_device(GB_DEVICE_CUDA);
    CHECK(near(gb_device_peak_flops(&h100, cuda, GB_COMPUTE_F32), 66.90816e12),
          "f32 on the H100: %.1f TFLOP/s",
          gb_device_peak_flops(&h100, cuda, GB_COMPUTE_F32) / 1e12);
    CHECK(near(gb_device_peak_flops(&h100, cuda, GB_COMPUTE_BF16), 989.42976e12) &&
              near(gb_device_peak_flops(&h100, cuda, GB_COMPUTE_F16), 989.42976e12),
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
    CHECK(gb_device_peak_flops(&h100, fixed_device(GB_DEVICE_CPU), GB_COMPUTE_F16) == 0.0 &&
              gb_device_peak_flops(&h100, fixed_device(GB_DEVICE_CPU), GB_COMPUTE_TF32) == 0.0,
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
    double p = gb_peak_flops(&ops, NULL, fixed_device(GB_DEVICE_CUDA), GB_COMPUTE_BF16, &source);
    CHECK(near(p, h100.peak_flops_bf16) && strcmp(source, "device") == 0,
          "a GPU's bf16 run: the device's bf16 figure");
    stated = &none;
    p = gb_peak_flops(&ops, NULL, fixed_device(GB_DEVICE_CUDA), GB_COMPUTE_BF16, &source);
    CHECK(p == 0.0, "a GPU that states nothing: no MFU (not the host CPU's peak)");
    p = gb_peak_flops(&ops, NULL, fixed_device(GB_DEVICE_CPU), GB_COMPUTE_BF16, &source);
    const double rated = gb_cpu_peak_flops(GB_COMPUTE_BF16, NULL, 0);
    CHECK(p >= rated && (strcmp(source, "rated CPU") == 0 || strcmp(source, "measured CPU") == 0),
          "the cpu device: the CPU's own bf16 peak, %.1f GFLOP/s (%s; rated %.1f)", p / 1e9,
          source, rated / 1e9);
}

/* The Zen 5 that read MFU 120%: its VM reported 2.60 GHz (a rated 332.8 GFLOP/s on 2
 * cores) while an FMA loop measured 547; the run's 401 GFLOP/s are below the measured. */
static void check_larger_peak(void)
{
    const char *source = NULL;
    double p = gb_larger_peak(332.8e9, 547e9, &source);
    CHECK(p == 547e9 && strcmp(source, "measured CPU") == 0 && 401e9 / p < 1.0,
          "rated 332.8 below measured 547 GFLOP/s: the measured, MFU %.1f%%", 100 * 401e9 / p);
    p = gb_larger_peak(256e9, 23.3e9, &source);
    CHECK(p == 256e9 && strcmp(source, "rated CPU") == 0,
          "measured on a busy machine (23.3 of a rated 256): the rated");
}

/* No work runs faster than the measured limit of its instructions, so the peak MFU
 * divides by must be at least every rate measured: work at that rate reads MFU <= 100%. */
static void check_never_above_measured(void)
{
    const gb_device_ops ops = {.struct_size = sizeof ops, .info = stand_in_info};
    static const gb_device_info none = {.struct_size = sizeof none};
    stated = &none;
    const gb_compute computes[] = {GB_COMPUTE_F32, GB_COMPUTE_BF16, GB_COMPUTE_F16};
    for (size_t i = 0; i < sizeof computes / sizeof computes[0]; i++) {
        const char *isa;
        double per_cpu_s;
        double work = gb_measure_compute_flops(computes[i], 0, &isa, &per_cpu_s);
        double peak = gb_peak_flops(&ops, NULL, fixed_device(GB_DEVICE_CPU), computes[i], NULL);
        if (work <= 0) {
            printf("skip: %s: no vector unit measured on this CPU (%s)\n",
                   gb_compute_name(computes[i]), isa);
            continue;
        }
        CHECK(peak > 0 && work / peak <= 1.0 && per_cpu_s / peak <= 1.0, "%s at its measured "
              "limit (%s, %.1f GFLOP/s; %.1f per CPU-second) reads MFU %.1f%% of the peak MFU "
              "uses, %.1f GFLOP/s", gb_compute_name(computes[i]), isa, work / 1e9,
              per_cpu_s / 1e9, 100 * work / peak, peak / 1e9);
    }
}

/* The cache file keeps the best measurement per machine: a higher figure found there
 * raises the measured peak; lines of other keys are kept. `dir` is XDG_CACHE_HOME. */
static void check_cache(const char *dir)
{
    const char *isa;
    double first = gb_cpu_measured_peak(GB_COMPUTE_F32, 1, &isa);
    char path[256], line[256];
    snprintf(path, sizeof path, "%s/gearbox/cpu-peaks", dir);
    if (first <= 0) {
        printf("skip: no vector unit to measure (%s)\n", isa);
        return;
    }
    FILE *f = fopen(path, "r");
    line[0] = '\0';
    while (f && fgets(line, sizeof line, f) && !strstr(line, " f32 1 "))
        line[0] = '\0';
    if (f)
        fclose(f);
    line[strcspn(line, "\n")] = '\0';
    double cached = strtod(line, NULL) * 1e9;
    CHECK(line[0] && fabs(cached - first) <= 0.06e9, "the cache holds the best f32 "
          "measurement on 1 thread, %.1f GFLOP/s: '%s'", first / 1e9, line);
    if (!line[0] || !(f = fopen(path, "w")))
        return;
    fprintf(f, "99999.0 bf16 1 another CPU\n%.1f%s\n", 100.0 * cached / 1e9, strchr(line, ' '));
    fclose(f);
    double raised = gb_cpu_measured_peak(GB_COMPUTE_F32, 1, NULL);
    f = fopen(path, "r");
    int kept = f && fgets(line, sizeof line, f) && strcmp(line, "99999.0 bf16 1 another CPU\n") == 0;
    if (f)
        fclose(f);
    CHECK(fabs(raised - 100.0 * cached) < 1e9 && kept, "a better figure in the cache raises "
          "the measured peak to %.1f GFLOP/s; another machine's line is kept", raised / 1e9);
}

/* An empty scratch folder as XDG_CACHE_HOME, so that no measurement here reaches the
 * user's cache; NULL when it cannot be made. */
static char *scratch_cache(void)
{
    static char dir[] = "/tmp/gearbox-peak-XXXXXX";
    if (!mkdtemp(dir))
        return NULL;
    setenv("XDG_CACHE_HOME", dir, 1);
    return dir;
}

static void remove_scratch(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/gearbox/cpu-peaks", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/gearbox", dir);
    rmdir(path);
    rmdir(dir);
}

/* With oneDNN held below AMX (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16, how a Zen 5 runs),
 * a bf16 run's rated peak is the AVX512_BF16 one, not AMX's. */
static void check_onednn_isa(void)
{
    char how[160];
    setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", 1);
    gb_cpu_peak_flops(GB_COMPUTE_BF16, how, sizeof how);
    CHECK(!strstr(how, "amx"), "ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16: no AMX in the bf16 "
          "peak (%s)", how);
    unsetenv("ONEDNN_MAX_CPU_ISA");
}

int main(void)
{
    char *cache = scratch_cache();
    if (!cache) {
        printf("FAIL: cannot make a scratch folder for the peak cache under /tmp\n");
        return 1;
    }
    check_compute_of();
    check_gpu();
    check_cpu();
    check_peak_flops();
    check_larger_peak();
    check_never_above_measured();
    check_cache(cache);
    check_onednn_isa();
    remove_scratch(cache);
    if (failures)
        printf("%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
