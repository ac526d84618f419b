/* The machine's description and the peaks MFU divides by; see machine.h. x86-64 features come
 * from cpuid and xgetbv (a feature counts only when the OS saves its registers too);
 * on other architectures every feature reads as absent. GPU and MPI libraries are
 * probed with dlopen and asked for versions through dlsym, so the core links against
 * none of them; the device's own libraries (oneDNN for cpu) are the device plugin's to
 * report, in gb_device_info.libraries. */
#include "machine.h"

#include <ctype.h>
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "fsutil.h"
#include "gearbox/cpu_isa.h"

/* ---- CPU ----------------------------------------------------------------------------- */

#if defined(__x86_64__) || defined(__i386__)
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

#else
static void read_brand(char *out, size_t cap)
{
    (void)out;
    (void)cap;
}
#endif

/* AMD's family 25: Zen 3, and Zen 4, whose AVX-512 runs each 512-bit operation as two
 * 256-bit halves (kernels/cpu chooses its 256-bit loops there). */
static int amd_family_25(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_is("amdfam19h");
#else
    return 0;
#endif
}

void gb_cpu_detect_hardware(gb_cpu_features *out)
{
    gb_cpu_isa isa;
    gb_cpu_isa_detect(&isa);
    *out = (gb_cpu_features){.avx2 = isa.avx2, .fma = isa.fma, .avx512f = isa.avx512f,
                             .avx512_bf16 = isa.avx512_bf16, .avx512_fp16 = isa.avx512_fp16,
                             .amx_tile = isa.amx_tile, .amx_bf16 = isa.amx_bf16,
                             .avx512_split = isa.avx512f && amd_family_25()};
    snprintf(out->model, sizeof out->model, "unknown CPU");
    read_brand(out->model, sizeof out->model);
}

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
    {"avx512_split", offsetof(gb_cpu_features, avx512_split)},
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
                 "avx512f, avx512_bf16, avx512_fp16, amx_tile, amx_bf16, avx512_split, none); the "
                 "CPU's own features are used", list, bad);
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
    return gb_larger_peak(gb_cpu_peak_flops(c, NULL, 0), gb_cpu_cached_peak(c, 0), source);
}

/* ---- the measured peaks, kept per machine ---------------------------------------------- */

#define PEAK_PATH_MAX 4096

/* The threads a measurement ran on: `threads`, or the pool's default for 0. */
static int team_size(int threads)
{
    return threads > 0 ? threads : omp_get_max_threads();
}

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
    /* rounded up: the peak read back is never below a rate measured */
    fprintf(out, "%.1f %s\n", ceil(flops / 1e8) / 10, key);
    if (fclose(out) != 0 || rename(tmp, path) != 0)
        remove(tmp);
}

double gb_larger_peak(double rated, double measured, const char **source)
{
    if (source)
        *source = measured > rated ? "measured CPU" : "rated CPU";
    return measured > rated ? measured : rated;
}

double gb_cpu_cached_peak(gb_compute c, int threads)
{
    char path[PEAK_PATH_MAX], key[160];
    peak_key(c, threads, key, sizeof key);
    return peak_cache_path(path, sizeof path, 0) == 0 ? read_cached_peak(path, key) : 0.0;
}

void gb_cpu_record_peak(gb_compute c, int threads, double flops)
{
    char path[PEAK_PATH_MAX], key[160];
    peak_key(c, threads, key, sizeof key);
    if (flops > gb_cpu_cached_peak(c, threads) * 1.001 &&
        peak_cache_path(path, sizeof path, 1) == 0)
        write_cached_peak(path, key, flops);
}
