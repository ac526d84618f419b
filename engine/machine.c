/* The machine's description and measured limits; see machine.h. x86-64 features come
 * from cpuid and xgetbv (a feature counts only when the OS saves its registers too);
 * on other architectures every feature reads as absent. GPU and MPI libraries are
 * probed with dlopen and asked for versions through dlsym, so the core links against
 * none of them; the device's own libraries (oneDNN for cpu) are the device plugin's to
 * report, in gb_device_info.libraries. */
#include "machine.h"

#include <ctype.h>
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "clock.h"
#include "gearbox/convert.h"
#include "fsutil.h"

/* ---- CPU ----------------------------------------------------------------------------- */

#if defined(__x86_64__) || defined(__i386__)
static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static void read_brand(char *out, size_t cap)
{
    unsigned regs[12] = {0};
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) < 0x80000004u) /* int in clang's cpuid.h */
        return;
    for (unsigned i = 0; i < 3; i++)
        __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                    &regs[4 * i + 3]);
    char brand[49];
    memcpy(brand, regs, 48);
    brand[48] = '\0';
    const char *start = brand + strspn(brand, " ");
    size_t len = strlen(start);
    while (len > 0 && start[len - 1] == ' ')
        len--;
    snprintf(out, cap, "%.*s", (int)len, start);
}

void gb_cpu_detect_hardware(gb_cpu_features *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "unknown CPU");
    read_brand(out->model, sizeof out->model);
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return;
    uint64_t xcr0 = read_xcr0();
    int avx_state = (xcr0 & 0x6) == 0x6;             /* SSE and AVX registers */
    int avx512_state = avx_state && (xcr0 & 0xe0) == 0xe0;  /* opmask, ZMM halves */
    int amx_state = (xcr0 & 0x60000) == 0x60000;     /* XTILECFG, XTILEDATA */
    out->fma = avx_state && (c & bit_FMA);
    if (__get_cpuid_max(0, NULL) < 7)
        return;
    __cpuid_count(7, 0, a, b, c, d);
    out->avx2 = avx_state && (b & bit_AVX2);
    out->avx512f = avx512_state && (b & bit_AVX512F);
    out->avx512_fp16 = avx512_state && (d & (1u << 23));
    out->amx_tile = amx_state && (d & (1u << 24));
    out->amx_bf16 = amx_state && (d & (1u << 22));
    __cpuid_count(7, 1, a, b, c, d);
    out->avx512_bf16 = avx512_state && (a & (1u << 5));
}
#else
void gb_cpu_detect_hardware(gb_cpu_features *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "unknown CPU");
}
#endif

/* The features by name, as gb_cpu_feature_list and GEARBOX_CPU_FEATURES spell them. */
static const struct {
    const char *name;
    size_t offset;
} feature_names[] = {
    {"avx2", offsetof(gb_cpu_features, avx2)},
    {"fma", offsetof(gb_cpu_features, fma)},
    {"avx512f", offsetof(gb_cpu_features, avx512f)},
    {"avx512_bf16", offsetof(gb_cpu_features, avx512_bf16)},
    {"avx512_fp16", offsetof(gb_cpu_features, avx512_fp16)},
    {"amx_tile", offsetof(gb_cpu_features, amx_tile)},
    {"amx_bf16", offsetof(gb_cpu_features, amx_bf16)},
};

static int *feature_flag(gb_cpu_features *f, size_t i)
{
    return (int *)((char *)f + feature_names[i].offset);
}

static int feature_on(const gb_cpu_features *f, size_t i)
{
    return *(const int *)((const char *)f + feature_names[i].offset);
}

/* Sets out's features from a list such as "avx2,fma,avx512_bf16" ("none": no feature);
 * 0, or -1 with the unknown name in bad. */
static int parse_feature_list(const char *list, gb_cpu_features *out, char *bad, size_t cap)
{
    for (size_t i = 0; i < sizeof feature_names / sizeof feature_names[0]; i++)
        *feature_flag(out, i) = 0;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ", ");
        int known = len == 0 || (len == 4 && strncmp(p, "none", 4) == 0);
        for (size_t i = 0; !known && i < sizeof feature_names / sizeof feature_names[0]; i++)
            if (strlen(feature_names[i].name) == len && strncmp(p, feature_names[i].name, len) == 0) {
                *feature_flag(out, i) = 1;
                known = 1;
            }
        if (!known) {
            snprintf(bad, cap, "%.*s", (int)len, p);
            return -1;
        }
        p += len + (p[len] != '\0');
    }
    return 0;
}

const char *gb_cpu_features_override(char *error, size_t cap)
{
    const char *list = getenv("GEARBOX_CPU_FEATURES");
    if (error && cap)
        error[0] = '\0';
    if (!list || !*list)
        return NULL;
    gb_cpu_features probe;
    char bad[64];
    if (parse_feature_list(list, &probe, bad, sizeof bad) == 0)
        return list;
    if (error)
        snprintf(error, cap, "GEARBOX_CPU_FEATURES=%s: unknown feature '%s' (known: avx2, fma, "
                 "avx512f, avx512_bf16, avx512_fp16, amx_tile, amx_bf16, none); the CPU's own "
                 "features are used", list, bad);
    return NULL;
}

void gb_cpu_detect(gb_cpu_features *out)
{
    gb_cpu_detect_hardware(out);
    const char *list = gb_cpu_features_override(NULL, 0);
    if (list) {
        char bad[64];
        parse_feature_list(list, out, bad, sizeof bad);
    }
}

void gb_cpu_feature_list(const gb_cpu_features *f, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof feature_names / sizeof feature_names[0]; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s %s", i ? ", " : "",
                 feature_names[i].name, feature_on(f, i) ? "yes" : "no");
}
/* What the compiler was allowed to assume, by feature. */
static const struct {
    const char *name;
    size_t offset;
} build_features[] = {
#ifdef __AVX2__
    {"avx2", offsetof(gb_cpu_features, avx2)},
#endif
#ifdef __FMA__
    {"fma", offsetof(gb_cpu_features, fma)},
#endif
#ifdef __AVX512F__
    {"avx512f", offsetof(gb_cpu_features, avx512f)},
#endif
#ifdef __AVX512BF16__
    {"avx512_bf16", offsetof(gb_cpu_features, avx512_bf16)},
#endif
#ifdef __AVX512FP16__
    {"avx512_fp16", offsetof(gb_cpu_features, avx512_fp16)},
#endif
#ifdef __AMX_TILE__
    {"amx_tile", offsetof(gb_cpu_features, amx_tile)},
#endif
    {NULL, 0},
};

const char *gb_build_features(void)
{
    static char list[128];
    list[0] = '\0';
    for (size_t i = 0; build_features[i].name; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "",
                 build_features[i].name);
    return list[0] ? list : "baseline x86-64";
}

int gb_missing_build_features(const gb_cpu_features *cpu, char *buf, size_t cap)
{
    int missing = 0;
    buf[0] = '\0';
    for (size_t i = 0; build_features[i].name; i++) {
        const int *has = (const int *)((const char *)cpu + build_features[i].offset);
        if (*has)
            continue;
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", missing ? " " : "",
                 build_features[i].name);
        missing++;
    }
    return missing;
}

int gb_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void gb_rss_bytes(uint64_t *current, uint64_t *peak)
{
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%llu %llu", &size, &resident) != 2)
        resident = 0;
    if (f)
        fclose(f);
    *current = (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
    struct rusage ru;
    *peak = getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss * 1024 : 0;
}

/* ---- libraries ----------------------------------------------------------------------- */

void gb_openmp_version(char *buf, size_t cap)
{
    static const struct {
        long date;
        const char *version;
    } versions[] = {{202111, "5.2"}, {202011, "5.1"}, {201811, "5.0"}, {201511, "4.5"},
                    {201307, "4.0"}, {201107, "3.1"}, {200805, "3.0"}};
    const char *version = "before 3.0";
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
        if (_OPENMP >= versions[i].date) {
            version = versions[i].version;
            break;
        }
    snprintf(buf, cap, "%s (_OPENMP %ld)", version, (long)_OPENMP);
}

typedef struct library_desc {
    const char *name;
    const char *const files[4];   /* sonames, newest first; NULL-terminated */
} library_desc;

static const library_desc libraries[GB_LIB_COUNT] = {
    [GB_LIB_CUDA_DRIVER] = {"cuda_driver", {"libcuda.so.1", NULL}},
    [GB_LIB_CUDA_RUNTIME] = {"cuda_runtime", {"libcudart.so.13", "libcudart.so.12",
                                              "libcudart.so", NULL}},
    [GB_LIB_CUDNN] = {"cudnn", {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so", NULL}},
    [GB_LIB_NCCL] = {"nccl", {"libnccl.so.2", "libnccl.so", NULL}},
    [GB_LIB_MPI] = {"mpi", {"libmpi.so.40", "libmpi.so.12", "libmpi.so", NULL}},
};

const char *gb_library_name(gb_library lib)
{
    return lib < GB_LIB_COUNT ? libraries[lib].name : "?";
}

/* The library by soname, then from the usual CUDA install folder. */
static void *open_library(gb_library lib, int load)
{
    int flags = RTLD_LAZY | RTLD_LOCAL | (load ? 0 : RTLD_NOLOAD);
    for (int i = 0; libraries[lib].files[i]; i++) {
        const char *file = libraries[lib].files[i];
        void *handle = dlopen(file, flags);
        char path[256];
        snprintf(path, sizeof path, "/usr/local/cuda/lib64/%s", file);
        if (!handle && lib != GB_LIB_MPI)
            handle = dlopen(path, flags);
        if (handle)
            return handle;
    }
    return NULL;
}

/* "13.0" from CUDA's 1000 * major + 10 * minor. */
static void cuda_version_text(int v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%d.%d", v / 1000, (v % 1000) / 10);
}

static int ask_cuda_runtime(void *h, char *buf, size_t cap)
{
    int (*runtime_version)(int *) = (int (*)(int *))dlsym(h, "cudaRuntimeGetVersion");
    int (*device_count)(int *) = (int (*)(int *))dlsym(h, "cudaGetDeviceCount");
    const char *(*error_name)(int) = (const char *(*)(int))dlsym(h, "cudaGetErrorName");
    int v = 0, n = 0;
    if (!runtime_version || runtime_version(&v) != 0)
        return 0;
    char version[32];
    cuda_version_text(v, version, sizeof version);
    int err = device_count ? device_count(&n) : -1;
    if (err == 0)
        snprintf(buf, cap, "%s, %d device%s", version, n, n == 1 ? "" : "s");
    else
        snprintf(buf, cap, "%s, no device (%s)", version,
                 error_name && err > 0 ? error_name(err) : "cudaGetDeviceCount missing");
    return 1;
}

/* cuDNN 9 and NCCL 2.9+ encode major * 10000 + minor * 100 + patch. */
static void dotted(long v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%ld.%ld.%ld", v / 10000, (v / 100) % 100, v % 100);
}

static int ask_version(gb_library lib, void *h, char *buf, size_t cap)
{
    int v = 0;
    switch (lib) {
    case GB_LIB_CUDA_DRIVER: {
        int (*get)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
        if (!get || get(&v) != 0)
            return 0;
        cuda_version_text(v, buf, cap);
        return 1;
    }
    case GB_LIB_CUDA_RUNTIME:
        return ask_cuda_runtime(h, buf, cap);
    case GB_LIB_CUDNN: {
        size_t (*get)(void) = (size_t (*)(void))dlsym(h, "cudnnGetVersion");
        if (!get)
            return 0;
        dotted((long)get(), buf, cap);
        return 1;
    }
    case GB_LIB_NCCL: {
        int (*get)(int *) = (int (*)(int *))dlsym(h, "ncclGetVersion");
        if (!get || get(&v) != 0)
            return 0;
        dotted(v, buf, cap);
        return 1;
    }
    case GB_LIB_MPI: {
        /* callable before MPI_Init (MPI-3) */
        int (*get)(char *, int *) = (int (*)(char *, int *))dlsym(h, "MPI_Get_library_version");
        char text[8192];
        int len = 0;
        if (!get || get(text, &len) != 0)
            return 0;
        snprintf(buf, cap, "%.*s", (int)strcspn(text, ",\n"), text);
        return 1;
    }
    case GB_LIB_COUNT:
        break;
    }
    return 0;
}

int gb_library_version(gb_library lib, int load, char *buf, size_t cap)
{
    if (lib >= GB_LIB_COUNT) {
        snprintf(buf, cap, "unknown library");
        return 0;
    }
    void *h = open_library(lib, load);
    if (!h) {
        snprintf(buf, cap, load ? "not found" : "not loaded");
        return 0;
    }
    int found = ask_version(lib, h, buf, cap);
    if (!found)
        snprintf(buf, cap, "present, version unknown");
    /* a library this call loaded stays: unloading GPU runtimes at will is not safe */
    if (!load)
        dlclose(h);
    return found;
}

/* ---- measurements -------------------------------------------------------------------- */

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

gb_timing gb_timing_of(double *ms, int n)
{
    qsort(ms, (size_t)n, sizeof *ms, compare_doubles);
    return (gb_timing){ms[0], n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]), ms[n - 1]};
}

void *gb_device_pattern(const gb_device_ops *ops, void *dev, gb_dtype dtype, size_t count)
{
    size_t size = gb_dtype_size(dtype);
    unsigned char *host = malloc(count * size);
    void *buf = NULL;
    if (host) {
        for (size_t i = 0; i < count; i++) {
            float v = 0.25f + (float)(i % 61) / 128.0f;
            uint16_t half = dtype == GB_BF16 ? gb_bf16_from_f32(v) : gb_f16_from_f32(v);
            memcpy(host + i * size, dtype == GB_F32 ? (const void *)&v : (const void *)&half,
                   size);
        }
        if (ops->alloc(dev, count * size, &buf) != GB_OK ||
            ops->copy(dev, buf, host, count * size, GB_COPY_HOST_TO_DEVICE) != GB_OK) {
            if (buf)
                ops->free(dev, buf);
            buf = NULL;
        }
    }
    free(host);
    return buf;
}

int gb_time_matmul_call(const gb_device_ops *ops, void *dev, const gb_matmul_args *call,
                        int reps, gb_timing *out)
{
    double *ms = calloc((size_t)reps + 1, sizeof *ms);
    int rc = ms && reps > 0 ? 0 : -1;
    for (int i = 0; rc == 0 && i <= reps; i++) {
        double t0 = gb_now_ms();
        if (ops->matmul(dev, call) != GB_OK || ops->sync(dev) != GB_OK)
            rc = -1;
        if (i > 0)
            ms[i - 1] = gb_now_ms() - t0;
    }
    if (rc == 0)
        *out = gb_timing_of(ms, reps);
    free(ms);
    return rc;
}

int gb_time_matmul(const gb_device_ops *ops, void *dev, gb_matmul_args shape, int reps,
                   gb_timing *out)
{
    void *a = gb_device_pattern(ops, dev, GB_F32, (size_t)(shape.m * shape.k));
    void *b = gb_device_pattern(ops, dev, GB_F32, (size_t)(shape.k * shape.n));
    void *c = gb_device_pattern(ops, dev, GB_F32, (size_t)(shape.m * shape.n));
    shape.struct_size = sizeof shape;
    shape.a = a;
    shape.lda = shape.trans_a ? shape.m : shape.k;
    shape.b = b;
    shape.ldb = shape.trans_b ? shape.k : shape.n;
    shape.c = c;
    shape.ldc = shape.n;
    shape.dtype_a = shape.dtype_b = shape.dtype_c = GB_F32;
    int rc = a && b && c ? gb_time_matmul_call(ops, dev, &shape, reps, out) : -1;
    if (a)
        ops->free(dev, a);
    if (b)
        ops->free(dev, b);
    if (c)
        ops->free(dev, c);
    return rc;
}

double gb_matmul_gflops(int64_t m, int64_t n, int64_t k, double ms)
{
    return ms > 0 ? 2.0 * (double)m * (double)n * (double)k / (ms * 1e6) : 0.0;
}

/* A number that follows `key` in the text file at `path` (first occurrence); 0 if none. */
static double number_after(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[512];
    double v = 0.0;
    while (f && v == 0.0 && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, key);
        if (at)
            v = strtod(at + strlen(key) + strspn(at + strlen(key), " \t:"), NULL);
    }
    if (f)
        fclose(f);
    return v;
}

/* The CPU's rated clock in GHz: cpufreq's highest frequency, else the brand string's
 * "@ 2.40GHz" (Intel names its base clock there), else the clock /proc/cpuinfo reports
 * (what a virtual machine shows); 0 when none says. */
static double cpu_clock_ghz(const char *brand)
{
    double khz = number_after("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "");
    if (khz > 0)
        return khz / 1e6;
    const char *at = strstr(brand, "@ ");
    double ghz = at ? strtod(at + 2, NULL) : 0.0;
    if (ghz > 0)
        return ghz;
    return number_after("/proc/cpuinfo", "cpu MHz") / 1e3;
}

gb_compute gb_compute_of(gb_dtype matmul_dtype, int tf32)
{
    if (matmul_dtype == GB_BF16)
        return GB_COMPUTE_BF16;
    if (matmul_dtype == GB_F16)
        return GB_COMPUTE_F16;
    return tf32 ? GB_COMPUTE_TF32 : GB_COMPUTE_F32;
}

const char *gb_compute_name(gb_compute c)
{
    static const char *const names[] = {"f32", "tf32", "bf16", "f16"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "f32";
}

double gb_device_peak_flops(const gb_device_info *info, const gb_device_desc *device,
                            gb_compute c)
{
    const uint32_t tensor_cores = GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16);
    const int rated_alike = device->memory == GB_MEMORY_DEVICE &&
                            (device->native_dtypes & tensor_cores) == tensor_cores;
    switch (c) {
    case GB_COMPUTE_BF16:
        return info->peak_flops_bf16;
    case GB_COMPUTE_F16:
        return rated_alike ? info->peak_flops_bf16 : 0.0;
    case GB_COMPUTE_TF32:
        return rated_alike ? info->peak_flops_bf16 / 2.0 : 0.0;
    case GB_COMPUTE_F32:
        break;
    }
    return info->peak_flops_f32;
}

double gb_cpu_peak_flops_of(const gb_cpu_features *f, int cores, double ghz, gb_compute c,
                            char *how, size_t cap)
{
    const int lanes = f->avx512f ? 16 : (f->avx2 || f->fma) ? 8 : 4;
    const char *isa = f->avx512f ? "avx512" : (f->avx2 || f->fma) ? "avx2" : "sse";
    const double f32 = (double)cores * lanes * 2.0 * 2.0 * ghz * 1e9;
    if (c == GB_COMPUTE_BF16 && f->amx_bf16) {
        if (how)
            snprintf(how, cap, "%d cores x 1024 bf16 FLOP per cycle (amx_bf16) x %.2f GHz",
                     cores, ghz);
        return (double)cores * 1024.0 * ghz * 1e9;
    }
    if ((c == GB_COMPUTE_BF16 && f->avx512_bf16) || (c == GB_COMPUTE_F16 && f->avx512_fp16)) {
        const int bf16 = c == GB_COMPUTE_BF16;
        if (how)
            snprintf(how, cap, "%d cores x %s (%s) x 2 FMA units x 2 FLOP x %.2f GHz", cores,
                     bf16 ? "16 f32 lanes x 2 bf16 products" : "32 f16 lanes",
                     bf16 ? "avx512_bf16" : "avx512_fp16", ghz);
        return 2.0 * f32;
    }
    if (how)
        snprintf(how, cap, "%d cores x %d f32 lanes (%s) x 2 FMA units x 2 FLOP x %.2f GHz%s",
                 cores, lanes, isa, ghz,
                 c == GB_COMPUTE_BF16 || c == GB_COMPUTE_F16 ? ", 16-bit computed as f32" : "");
    return f32;
}

/* oneDNN's matmuls use AMX only where ONEDNN_MAX_CPU_ISA (or its older name
 * DNNL_MAX_CPU_ISA) lets them: unset, ALL or an ISA whose name has AMX in it. */
static int onednn_may_use_amx(void)
{
    const char *isa = getenv("ONEDNN_MAX_CPU_ISA");
    if (!isa || !*isa)
        isa = getenv("DNNL_MAX_CPU_ISA");
    if (!isa || !*isa)
        return 1;
    char upper[64];
    size_t i = 0;
    for (; isa[i] && i + 1 < sizeof upper; i++)
        upper[i] = (char)toupper((unsigned char)isa[i]);
    upper[i] = '\0';
    return strcmp(upper, "ALL") == 0 || strstr(upper, "AMX") != NULL;
}

double gb_cpu_peak_flops(gb_compute c, char *how, size_t cap)
{
    gb_cpu_features f;
    gb_cpu_detect_hardware(&f);
    if (!onednn_may_use_amx())
        f.amx_tile = f.amx_bf16 = 0;
    return gb_cpu_peak_flops_of(&f, gb_online_cpus(), cpu_clock_ghz(f.model), c, how, cap);
}

double gb_cpu_peak_flops_f32(char *how, size_t cap)
{
    return gb_cpu_peak_flops(GB_COMPUTE_F32, how, cap);
}

double gb_peak_flops(const gb_device_ops *ops, void *dev, const gb_device_desc *device,
                     gb_compute c, const char **source)
{
    gb_device_info info = {.struct_size = sizeof info};
    const double stated = ops->info(dev, &info) == GB_OK
                              ? gb_device_peak_flops(&info, device, c) : 0.0;
    if (stated > 0) {
        if (source)
            *source = "device";
        return stated;
    }
    if (source)
        *source = "rated CPU";
    if (device->memory != GB_MEMORY_HOST)  /* host memory: it computes on this CPU */
        return 0.0;
    return gb_larger_peak(gb_cpu_peak_flops(c, NULL, 0), gb_cpu_measured_peak(c, 0, NULL),
                          source);
}

double gb_measured_sgemm_flops(const gb_device_ops *ops, void *dev)
{
    static double measured;   /* per process: the device does not change under a run */
    if (measured == 0) {
        gb_matmul_args shape = {.m = 1024, .n = 1024, .k = 1024, .alpha = 1.0f};
        gb_timing t;
        if (gb_time_matmul(ops, dev, shape, GB_PEAK_CALLS, &t) == 0)
            measured = gb_matmul_gflops(shape.m, shape.n, shape.k, t.best_ms) * 1e9;
    }
    return measured;
}

/* ---- the measured limits -------------------------------------------------------------- */

/* Each thread runs chains of vector FMAs (or dot products) into independent accumulators,
 * more chains than latency x units (4 x 2 on the CPUs seen), so the units never wait on a
 * result: the loop then runs at the instruction's throughput and nothing else (no loads,
 * no stores). Built for each unit with target attributes, so a portable build measures it
 * too. */
#define FMA_ITERS ((int64_t)1 << 24)
/* Start-up measurements (gb_cpu_measured_peak) are shorter: a few ms per pass. */
#define QUICK_ITERS ((int64_t)1 << 21)
#define QUICK_RUNS 3

typedef float (*chain_loop)(int64_t iters, float seed);

#if defined(__x86_64__)
#define FMA_CHAINS 12

__attribute__((target("avx2,fma"))) static float fma_chains_avx2(int64_t iters, float seed)
{
    __m256 acc[FMA_CHAINS];
    const __m256 mul = _mm256_set1_ps(0.9999999f), add = _mm256_set1_ps(seed);
    for (int j = 0; j < FMA_CHAINS; j++)
        acc[j] = _mm256_set1_ps((float)j);
    for (int64_t i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < FMA_CHAINS; j++)
            acc[j] = _mm256_fmadd_ps(acc[j], mul, add);
    }
    __m256 sum = acc[0];
    for (int j = 1; j < FMA_CHAINS; j++)
        sum = _mm256_add_ps(sum, acc[j]);
    float lanes[8];
    _mm256_storeu_ps(lanes, sum);
    return lanes[0];
}

__attribute__((target("avx512f"))) static float fma_chains_avx512(int64_t iters, float seed)
{
    __m512 acc[FMA_CHAINS];
    const __m512 mul = _mm512_set1_ps(0.9999999f), add = _mm512_set1_ps(seed);
    for (int j = 0; j < FMA_CHAINS; j++)
        acc[j] = _mm512_set1_ps((float)j);
    for (int64_t i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < FMA_CHAINS; j++)
            acc[j] = _mm512_fmadd_ps(acc[j], mul, add);
    }
    __m512 sum = acc[0];
    for (int j = 1; j < FMA_CHAINS; j++)
        sum = _mm512_add_ps(sum, acc[j]);
    return _mm512_reduce_add_ps(sum);
}

/* vdpbf16ps: each f32 lane adds two bf16 products, 4 FLOP. The operands are small, so the
 * sums stay finite and normal over any number of iterations. */
__attribute__((target("avx512f,avx512bf16"))) static float dpbf16_chains(int64_t iters,
                                                                          float seed)
{
    __m512 acc[FMA_CHAINS];
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(seed), _mm512_set1_ps(1e-3f));
    const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(seed));
    for (int j = 0; j < FMA_CHAINS; j++)
        acc[j] = _mm512_set1_ps((float)j);
    for (int64_t i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < FMA_CHAINS; j++)
            acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
    }
    __m512 sum = acc[0];
    for (int j = 1; j < FMA_CHAINS; j++)
        sum = _mm512_add_ps(sum, acc[j]);
    return _mm512_reduce_add_ps(sum);
}

/* vfmadd on 32 f16 lanes; the chains settle at add / (1 - mul), well inside f16's range. */
__attribute__((target("avx512f,avx512fp16"))) static float fma_chains_fp16(int64_t iters,
                                                                            float seed)
{
    __m512h acc[FMA_CHAINS];
    const __m512h mul = _mm512_set1_ph((_Float16)0.5f), add = _mm512_set1_ph((_Float16)seed);
    for (int j = 0; j < FMA_CHAINS; j++)
        acc[j] = _mm512_set1_ph((_Float16)j);
    for (int64_t i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < FMA_CHAINS; j++)
            acc[j] = _mm512_fmadd_ph(acc[j], mul, add);
    }
    __m512h sum = acc[0];
    for (int j = 1; j < FMA_CHAINS; j++)
        sum = _mm512_add_ph(sum, acc[j]);
    return (float)_mm512_reduce_add_ph(sum);
}
#endif

/* The loop that measures `c` on a CPU with features `f`, its FLOP per iteration and the
 * unit's name; NULL (and "not measured") where there is none. A 16-bit dtype without
 * instructions of its own is computed as f32, so it gets the f32 loop. */
static chain_loop limit_loop(const gb_cpu_features *f, gb_compute c, double *flop_per_iter,
                             const char **isa)
{
    *isa = "not measured";
#if defined(__x86_64__)
    if (c == GB_COMPUTE_BF16 && f->avx512_bf16) {
        *flop_per_iter = FMA_CHAINS * 16 * 4.0;
        *isa = "AVX512_BF16 dot products";
        return dpbf16_chains;
    }
    if (c == GB_COMPUTE_F16 && f->avx512_fp16) {
        *flop_per_iter = FMA_CHAINS * 32 * 2.0;
        *isa = "AVX512_FP16 FMA";
        return fma_chains_fp16;
    }
    if (f->avx512f) {
        *flop_per_iter = FMA_CHAINS * 16 * 2.0;
        *isa = "AVX-512 FMA";
        return fma_chains_avx512;
    }
    if (f->avx2 && f->fma) {
        *flop_per_iter = FMA_CHAINS * 8 * 2.0;
        *isa = "AVX2 FMA";
        return fma_chains_avx2;
    }
#else
    (void)f;
    (void)c;
    (void)flop_per_iter;
#endif
    return NULL;
}

/* The best of `runs` passes of `loop` on `threads` threads (0: the pool's default), in
 * FLOP/s of wall time; *per_cpu_s gets the best in FLOP per second of the process's CPU
 * time, times the team (what each thread does while it runs, whatever else the machine
 * runs). */
static double time_loop(chain_loop loop, double flop_per_iter, int threads, int runs,
                        int64_t iters, double *per_cpu_s)
{
    int team = threads > 0 ? threads : omp_get_max_threads();
    double best = 0.0;
    volatile float sink = 0.0f;   /* keeps the chains' results alive */
    const double flops = (double)team * (double)iters * flop_per_iter;
    *per_cpu_s = 0.0;
    for (int run = 0; run < runs; run++) {
        double t0 = gb_now_ms(), cpu0 = gb_cpu_ms();
#pragma omp parallel num_threads(team)
        {
            float r = loop(iters, 1e-7f * (float)(omp_get_thread_num() + 1));
#pragma omp atomic
            sink += r;
        }
        double rate = flops / ((gb_now_ms() - t0) * 1e-3);
        double cpu_ms = gb_cpu_ms() - cpu0;
        double per_cpu = cpu_ms > 0 ? flops * team / (cpu_ms * 1e-3) : 0.0;
        best = rate > best ? rate : best;
        *per_cpu_s = per_cpu > *per_cpu_s ? per_cpu : *per_cpu_s;
    }
    return best;
}

/* The best rate of each compute measured in this process, by thread count: what the
 * cache file is raised to and gb_peak_flops never goes below. */
#define MEMO_THREADS 1024
static double memo_best[GB_COMPUTE_F16 + 1][MEMO_THREADS];

static int team_size(int threads)
{
    int team = threads > 0 ? threads : omp_get_max_threads();
    return team < MEMO_THREADS ? team : MEMO_THREADS - 1;
}

static double measure_limit(gb_compute c, int threads, int runs, int64_t iters,
                            const char **isa, double *per_cpu_s)
{
    gb_cpu_features f;
    gb_cpu_detect_hardware(&f);
    double flop_per_iter = 0.0;
    const char *name;
    chain_loop loop = limit_loop(&f, c, &flop_per_iter, &name);
    if (isa)
        *isa = name;
    double cpu_rate = 0.0;
    if (per_cpu_s)
        *per_cpu_s = 0.0;
    if (!loop)
        return 0.0;
    double *cpu = per_cpu_s ? per_cpu_s : &cpu_rate;
    double rate = time_loop(loop, flop_per_iter, threads, runs, iters, cpu);
    /* the CPU-time rate is what the hardware did while it ran: on a busy machine it is
     * the better estimate of the peak, and no step can beat it either */
    double best = rate > *cpu ? rate : *cpu;
    double *memo = &memo_best[c][team_size(threads)];
    *memo = best > *memo ? best : *memo;
    return rate;
}

double gb_measure_compute_flops(gb_compute c, int threads, const char **isa,
                                double *per_cpu_s)
{
    return measure_limit(c, threads, GB_FMA_RUNS, FMA_ITERS, isa, per_cpu_s);
}

double gb_measure_fma_flops(int threads, const char **isa)
{
    return gb_measure_compute_flops(GB_COMPUTE_F32, threads, isa, NULL);
}

/* ---- the measured peaks, kept per machine ---------------------------------------------- */

#define PEAK_PATH_MAX 4096

/* ${XDG_CACHE_HOME:-$HOME/.cache}/gearbox/cpu-peaks into buf; 0, or -1 when neither is set. */
static int peak_cache_path(char *buf, size_t cap, int make_folder)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char folder[PEAK_PATH_MAX - 16];
    if (xdg && *xdg)
        snprintf(folder, sizeof folder, "%s/gearbox", xdg);
    else if (home && *home)
        snprintf(folder, sizeof folder, "%s/.cache/gearbox", home);
    else
        return -1;
    if (make_folder && gb_make_dirs(folder) != 0)
        return -1;
    snprintf(buf, cap, "%s/cpu-peaks", folder);
    return 0;
}

/* The cache's key of a measurement: "bf16 2 Intel(R) Xeon(R) Processor" (compute, threads,
 * the CPU's brand string). */
static void peak_key(gb_compute c, int threads, char *buf, size_t cap)
{
    gb_cpu_features f;
    gb_cpu_detect_hardware(&f);
    snprintf(buf, cap, "%s %d %s", gb_compute_name(c), team_size(threads), f.model);
}

/* Lines of the cache are "GFLOP/s KEY". The value cached for `key`, 0 when none. */
static double read_cached_peak(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[512];
    double found = 0.0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *rest;
        double v = strtod(line, &rest);
        if (rest != line && *rest == ' ' && strcmp(rest + 1, key) == 0)
            found = v * 1e9;
    }
    if (f)
        fclose(f);
    return found;
}

/* Rewrites the cache with `key` at `flops`, every other line kept; written to a file of
 * its own and renamed over the cache, so a reader never sees half a file. Best effort: a
 * cache that cannot be written only costs the next run its memory of the best. */
static void write_cached_peak(const char *path, const char *key, double flops)
{
    char tmp[PEAK_PATH_MAX + 32], line[512];
    snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out)
        return;
    FILE *in = fopen(path, "r");
    while (in && fgets(line, sizeof line, in)) {
        const char *at = strchr(line, ' ');
        if (!at || strncmp(at + 1, key, strlen(key)) != 0 || at[1 + strlen(key)] != '\n')
            fputs(line, out);
    }
    if (in)
        fclose(in);
    fprintf(out, "%.1f %s\n", flops / 1e9, key);
    if (fclose(out) != 0 || rename(tmp, path) != 0)
        remove(tmp);
}

double gb_cpu_measured_peak(gb_compute c, int threads, const char **isa)
{
    double now = measure_limit(c, threads, QUICK_RUNS, QUICK_ITERS, isa, NULL);
    if (now <= 0)
        return 0.0;
    double best = memo_best[c][team_size(threads)];
    char path[PEAK_PATH_MAX], key[160];
    peak_key(c, threads, key, sizeof key);
    if (peak_cache_path(path, sizeof path, 0) == 0) {
        double cached = read_cached_peak(path, key);
        if (cached > best)
            best = cached;
        else if (best > cached * 1.001 && peak_cache_path(path, sizeof path, 1) == 0)
            write_cached_peak(path, key, best);
    }
    return best;
}

double gb_larger_peak(double rated, double measured, const char **source)
{
    if (source)
        *source = measured > rated ? "measured CPU" : "rated CPU";
    return measured > rated ? measured : rated;
}

double gb_measure_triad_gbs(int threads)
{
    const int64_t n = GB_TRIAD_ELEMENTS;
    int team = threads > 0 ? threads : omp_get_max_threads();
    float *a = aligned_alloc(64, (size_t)n * sizeof *a);
    float *b = aligned_alloc(64, (size_t)n * sizeof *b);
    float *c = aligned_alloc(64, (size_t)n * sizeof *c);
    double best = 0.0;
    if (a && b && c) {
#pragma omp parallel for schedule(static) num_threads(team)
        for (int64_t i = 0; i < n; i++) {
            a[i] = 0.0f;
            b[i] = 1.0f;
            c[i] = 2.0f;
        }
        const float s = 3.0f;
        for (int run = 0; run < GB_TRIAD_RUNS; run++) {
            double t0 = gb_now_ms();
#pragma omp parallel for schedule(static) num_threads(team)
            for (int64_t i = 0; i < n; i++)
                a[i] = b[i] + s * c[i];
            double gbs = 3.0 * sizeof(float) * (double)n / ((gb_now_ms() - t0) * 1e6);
            best = gbs > best ? gbs : best;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}
