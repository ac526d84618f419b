/* `gearbox doctor`: what this machine and this build offer a training run, and what to
 * fix before trusting timings: CPU features, threads, the BLAS library, measured sgemm
 * and memory bandwidth, the GPU device/cuda opens (or why not) and NVML's figures of it
 * (or why there are none), GPU and MPI libraries, and every plugin on the search path.
 *
 * It measures through the device plugin a run would use (the config's, or cpu), so the
 * sgemm figure is the one training gets. It changes nothing and creates no plugin but
 * that device; warnings are advice, so the exit status is 0 whatever it finds. It does
 * not test the kernels' numerics: the test suite does that.
 */
#include <omp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gearbox/engine/gpu_monitor.h"
#include "gearbox/engine/loader.h"
#include "gearbox/engine/machine.h"
#include "measure/measure.h"
#include "gearbox/engine/run.h"
#include "gearbox/engine/settings.h"

const gb_cli_spec gb_cli_doctor_spec = {
    .verb = "doctor",
    .usage = "gearbox doctor [CONFIG] [--plugin-path DIRS]",
    .about =
        "Reports what this machine and build offer a training run: CPU model and features,\n"
        "threads, the BLAS library (oneDNN) and its version, a measured 1024^3 sgemm through\n"
        "the device plugin and STREAM triad bandwidth, the GPU device/cuda opens (or why it\n"
        "cannot) and NVML's figures of it (memory, utilisation, power, temperature; or why\n"
        "there are none), CUDA and MPI libraries, the plugin search path with every plugin\n"
        "found, and warnings, each with its fix. With CONFIG,\n"
        "its [run] threads, [run] plugin_path and [device] plugin are the ones checked.\n"
        "Takes a few seconds. Exit status: 0 (warnings are advice), 2 on a bad command line\n"
        "or CONFIG.\n",
    .options = {GB_CLI_OPTION_PLUGIN_PATH},
};

#define MAX_WARNINGS 32

typedef struct warnings {
    char text[MAX_WARNINGS][768];
    int n;
} warnings;

static void warn(warnings *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(warnings *w, const char *fmt, ...)
{
    if (w->n == MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->text[w->n++], sizeof w->text[0], fmt, ap);
    va_end(ap);
}

static void item(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void item(const char *label, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("  %-16s ", label);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* ---- sections ------------------------------------------------------------------------ */

static void check_cpu(warnings *w)
{
    gb_cpu_features cpu, hardware;
    char list[256], missing[128], bad[256];
    gb_cpu_detect(&cpu);
    gb_cpu_detect_hardware(&hardware);
    gb_cpu_feature_list(&hardware, list, sizeof list);
    printf("cpu\n");
    item("model", "%s", cpu.model);
    item("features", "%s", list);
    const char *injected = gb_cpu_features_override(bad, sizeof bad);
    if (injected) {
        gb_cpu_feature_list(&cpu, list, sizeof list);
        item("choices assume", "%s (GEARBOX_CPU_FEATURES=%s: precision = auto and the run's "
             "manifest take these; kernels run on the CPU's own)", list, injected);
    } else if (bad[0]) {
        warn(w, "%s", bad);
    }
    item("build assumes", "%s", gb_build_features());
    if (gb_missing_build_features(&hardware, missing, sizeof missing))
        warn(w, "this build was compiled for %s, which this CPU lacks (built with "
             "-march=native on another machine?): kernels may stop with SIGILL; fix: "
             "rebuild here, or configure with -Dnative=false for a portable build", missing);
}

/* `threads`: the most [run] threads runs; `automatic`: it is `auto` (unset too), so a run
 * may take fewer. */
static void check_threads(const char *config_path, int64_t threads, int automatic,
                          warnings *w)
{
    int online = gb_online_cpus();
    const char *env = getenv("OMP_NUM_THREADS");
    char omp[64];
    gb_openmp_version(omp, sizeof omp);
    printf("threads\n");
    item("online CPUs", "%d", online);
    item("OMP_NUM_THREADS", "%s", env ? env : "unset");
    item("OpenMP", "%s", omp);
    const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    item("OpenMP wait", "OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s (unless the first is set, gearbox "
         "sets the second before OpenMP starts: tools/cli/omp_wait.c)",
         policy ? policy : "unset", spin ? spin : "unset");
    item("[run] threads", "%lld%s (%s)", (long long)threads,
         automatic ? ", or fewer while fewer step faster (auto)" : "",
         config_path ? config_path : "the default");
    if (!env)
        warn(w, "OMP_NUM_THREADS is unset: gearbox sizes its one pool from [run] threads "
             "(%lld), but OpenMP programs measured beside it (PyTorch, llm.c) take every "
             "CPU; fix: export OMP_NUM_THREADS=%lld", (long long)threads, (long long)threads);
    else if (atoll(env) != threads)
        warn(w, "OMP_NUM_THREADS=%s but [run] threads is %lld: gearbox uses %lld and other "
             "OpenMP programs %s, so timings compare unlike runs; fix: export "
             "OMP_NUM_THREADS=%lld or set [run] threads = %s", env, (long long)threads,
             (long long)threads, env, (long long)threads, env);
    if (threads > online)
        warn(w, "[run] threads = %lld is more than the %d online CPUs: threads will wait on "
             "each other; fix: set [run] threads = 0 (every online CPU) or at most %d",
             (long long)threads, online, online);
    double load = 0.0;
    if (getloadavg(&load, 1) == 1 && load > 0.5 * online) {
        item("load average", "%.2f over the last minute", load);
        warn(w, "the machine is busy (load average %.2f on %d CPUs): OpenMP threads that "
             "wait for a busy CPU make training steps and the speed figures above slow and "
             "noisy; fix: measure on a quiet machine; train with [run] threads = auto (the "
             "default), which takes fewer threads when that steps faster", load, online);
    }
}

/* The libraries the device computes with, as its plugin names them (gb_device_info's
 * libraries, ABI 1.2): for device/cpu, oneDNN with its version, runtime and kernels. */
static void check_blas(const gb_instance *inst, const char *device, warnings *w)
{
    printf("blas\n");
    if (!inst->self) {
        item("libraries", "unknown: device/%s did not start", device);
        return;
    }
    const gb_device_ops *ops = inst->plugin->desc->ops;
    gb_device_info info = {.struct_size = sizeof info};
    if (ops->info(inst->self, &info) != GB_OK || !info.libraries[0] ||
        info.struct_size < offsetof(gb_device_info, libraries) + sizeof info.libraries) {
        item("libraries", "unknown: device/%s does not name them (plugin ABI 1.2)", device);
        return;
    }
    const char *onednn = "oneDNN ";
    if (strncmp(info.libraries, onednn, strlen(onednn)) != 0) {
        item("libraries", "%s: the %s device's", info.libraries, device);
        return;
    }
    item("oneDNN", "%s: the %s device's matmul", info.libraries + strlen(onednn), device);
    if (!strstr(info.libraries, "OpenMP runtime"))
        warn(w, "oneDNN does not run on OpenMP, so its threads and the kernels' OpenMP pool "
             "compete for the CPUs; fix: install a oneDNN built with the OpenMP runtime "
             "(Debian's libdnnl-dev is)");
}

/* The device plugin a run would use, created from `cfg`; 0 or -1 with a warning. */
static int open_device(gb_loader *loader, gb_config *cfg, const char *name, int threads,
                       gb_instance *inst, warnings *w)
{
    gb_diag diag = {0};
    const gb_plugin *p = gb_loader_find(loader, GB_KIND_DEVICE, name, 0, &diag);
    int rc = -1;
    if (p && !gb_instance_bind(inst, p, cfg, name, threads, &diag)) {
        const gb_device_ops *ops = p->desc->ops;
        gb_status st = ops->create(&inst->host, gb_instance_options(inst), &inst->self);
        if (st == GB_OK)
            rc = 0;
        else
            gb_diag_add(&diag, "device/%s (%s) could not start (%s): %s", name, p->path,
                        gb_status_name(st), inst->error[0] ? inst->error : "no message");
    }
    if (rc)
        warn(w, "nothing measured on [device] plugin = %s: %s; fix: build it or put its "
             "folder on the search path", name, diag.count ? diag.messages[0] : "not found");
    gb_diag_clear(&diag);
    return rc;
}

/* The CPU's rated and measured peak of each compute side by side, and which of the two
 * MFU divides by (gb_peak_flops: the larger). */
static void cpu_peaks(int threads)
{
    static const gb_compute computes[] = {GB_COMPUTE_F32, GB_COMPUTE_BF16, GB_COMPUTE_F16};
    for (size_t i = 0; i < sizeof computes / sizeof computes[0]; i++) {
        char label[32], how[160];
        const char *isa, *source;
        double rated = gb_cpu_peak_flops(computes[i], how, sizeof how);
        double measured = gb_cpu_measured_peak(computes[i], threads, &isa);
        if (gb_larger_peak(rated, measured, &source) <= 0)
            continue;
        snprintf(label, sizeof label, "cpu peak %s", gb_compute_name(computes[i]));
        item(label, "rated %.1f GFLOP/s (%s) | measured %.1f GFLOP/s (%s, %d threads, the "
             "best seen) | MFU divides by the %s peak", rated / 1e9,
             rated > 0 ? how : "clock unknown", measured / 1e9, isa, threads, source);
    }
}

/* `inst`: the device opened by open_device, or one whose self is NULL. */
static void measure_speed(gb_instance *inst, const char *device, int threads, warnings *w)
{
    printf("speed\n");
    if (inst->self) {
        const gb_device_ops *ops = inst->plugin->desc->ops;
        gb_device_info info = {.struct_size = sizeof info};
        if (ops->info(inst->self, &info) == GB_OK)
            item("device", "%s: %s, %.1f GiB%s", device, info.name,
                 (double)info.memory_bytes / (1024.0 * 1024.0 * 1024.0),
                 info.peak_flops_f32 > 0 ? "" : ", no stated f32 peak (MFU uses the CPU's)");
        if (info.peak_flops_f32 <= 0 && (inst->plugin->desc->devices & GB_DEVICE_CPU))
            cpu_peaks(threads);
        gb_matmul_args shape = {.m = 1024, .n = 1024, .k = 1024, .alpha = 1.0f};
        gb_timing t;
        if (gb_time_matmul(ops, inst->self, shape, 5, &t) == 0)
            item("sgemm", "%.1f GFLOP/s: 1024x1024x1024 f32 through device/%s, best of 5, "
                 "%d threads", gb_matmul_gflops(1024, 1024, 1024, t.best_ms), device, threads);
        else
            warn(w, "device/%s refused a 1024^3 f32 matmul: %s", device, inst->error);
    }
    item("triad", "%.1f GB/s: STREAM triad over 3 x %lld MiB f32, best of %d, %d threads",
         gb_measure_triad_gbs(threads),
         (long long)(GB_TRIAD_ELEMENTS * (int64_t)sizeof(float) >> 20), GB_TRIAD_RUNS,
         threads);
}

static int count_plugins(const gb_plugin **all, int n, gb_kind kind, uint32_t device,
                         const char *name)
{
    int found = 0;
    for (int i = 0; i < n; i++)
        found += all[i]->desc->kind == kind && (!device || (all[i]->desc->devices & device)) &&
                 (!name || strcmp(all[i]->desc->name, name) == 0);
    return found;
}

static void library_item(const char *label, gb_library lib)
{
    char text[256];
    gb_library_version(lib, 1, text, sizeof text);
    item(label, "%s", text);
}

/* device/cuda started on its own (GPU 0 or [device] ordinal's default, no config): the
 * GPU it opens, or why it cannot (no GPU, no driver). Its PCI address goes to
 * `pci_bus_id` ("" when none is known). */
static void describe_cuda_device(gb_loader *loader, char *pci_bus_id, size_t cap)
{
    gb_diag diag = {0};
    gb_config *empty = gb_config_load_string("", "defaults", "/", &diag);
    const gb_plugin *p = empty ? gb_loader_find(loader, GB_KIND_DEVICE, "cuda", GB_DEVICE_CUDA,
                                                &diag) : NULL;
    gb_instance inst = {0};
    if (p && !gb_instance_bind(&inst, p, empty, "cuda", 1, &diag)) {
        const gb_device_ops *ops = p->desc->ops;
        gb_device_info info = {.struct_size = sizeof info};
        gb_status st = ops->create(&inst.host, gb_instance_options(&inst), &inst.self);
        if (st == GB_OK && ops->info(inst.self, &info) == GB_OK) {
            item("device", "%s, compute capability %d.%d, %.1f GiB (%.1f free)", info.name,
                 info.cc_major, info.cc_minor, (double)info.memory_bytes / 1073741824.0,
                 (double)info.free_bytes / 1073741824.0);
            item("device driver", "%s", info.driver);
            item("device libs", "%s", info.libraries);
            snprintf(pci_bus_id, cap, "%s", info.pci_bus_id);
        } else {
            item("device", "none: %s", inst.error[0] ? inst.error : gb_status_name(st));
        }
        if (inst.self)
            ops->destroy(inst.self);
    }
    gb_instance_unbind(&inst);
    gb_diag_clear(&diag);
    gb_config_free(empty);
}

/* What a run on the GPU at `pci_bus_id` (else NVML's first) would log of it, or why a run
 * logs no GPU figures. */
static void describe_nvml(const char *pci_bus_id)
{
    char why[400], figures[96];
    gb_gpu_sample sample;
    gb_gpu_monitor *g = gb_gpu_monitor_open(pci_bus_id, 0, why, sizeof why);
    if (!g) {
        item("nvml", "not available: %s; training logs no GPU memory, utilisation, power or "
             "temperature", why);
        return;
    }
    item("nvml", "%s, driver %s%s%s", gb_gpu_monitor_name(g), gb_gpu_monitor_driver(g),
         pci_bus_id[0] ? ", at PCI " : " (GPU 0: device/cuda did not say its PCI address)",
         pci_bus_id);
    if (gb_gpu_monitor_sample(g, &sample) == 0) {
        gb_gpu_sample_text(&sample, figures, sizeof figures);
        item("gpu now", "%s (utilisation, memory used, power, temperature)", figures + 3);
    } else {
        item("gpu now", "NVML answered no figure for this GPU");
    }
    gb_gpu_monitor_close(g);
}

static void check_cuda(gb_loader *loader, const gb_plugin **all, int n)
{
    printf("cuda\n");
    int plugins = count_plugins(all, n, GB_KIND_DEVICE, GB_DEVICE_CUDA, NULL);
    int nccl = count_plugins(all, n, GB_KIND_COMM, GB_DEVICE_CUDA, "nccl");
    if (plugins)
        item("plugin", "%d CUDA device plugin%s on the search path (below)", plugins,
             plugins == 1 ? "" : "s");
    else
        item("plugin", "no CUDA plugin built%s", nccl ? " except comm/nccl, which needs a CUDA "
             "device plugin to run" : "");
    char pci_bus_id[32] = "";
    if (count_plugins(all, n, GB_KIND_DEVICE, GB_DEVICE_CUDA, "cuda"))
        describe_cuda_device(loader, pci_bus_id, sizeof pci_bus_id);
    describe_nvml(pci_bus_id);
    library_item("driver", GB_LIB_CUDA_DRIVER);
    library_item("runtime", GB_LIB_CUDA_RUNTIME);
    library_item("cuDNN", GB_LIB_CUDNN);
    library_item("NCCL", GB_LIB_NCCL);
}

static void check_mpi(const gb_plugin **all, int n)
{
    printf("mpi\n");
    if (count_plugins(all, n, GB_KIND_COMM, 0, "mpi"))
        item("plugin", "comm/mpi on the search path (below)");
    else
        item("plugin", "no MPI comm plugin built (single-process runs only)");
    library_item("library", GB_LIB_MPI);
}

static void list_plugins(gb_loader *loader, warnings *w)
{
    gb_diag problems = {0};
    const gb_plugin **all = NULL;
    int n = gb_loader_scan(loader, 0, &all, &problems);
    check_cuda(loader, all, n);
    check_mpi(all, n);
    printf("plugins\n");
    item("search path", "%s", gb_loader_path_string(loader));
    gb_cli_list_plugins(all, n, "  ", 0);
    for (int i = 0; i < problems.count; i++) {
        printf("  failed to load: %s\n", problems.messages[i]);
        warn(w, "a plugin failed to load: %s; fix: rebuild it against this gearbox's "
             "headers, or remove it from the search path", problems.messages[i]);
    }
    for (int k = GB_KIND_DEVICE; k <= GB_KIND_COMM; k++)
        if (!count_plugins(all, n, (gb_kind)k, 0, NULL))
            warn(w, "no %s plugin on the search path: no run can start; fix: build the "
                 "plugins (ninja -C build) or pass --plugin-path", gb_kind_name((gb_kind)k));
    gb_diag_clear(&problems);
    free(all);
}

static void print_warnings(const warnings *w)
{
    printf("warnings\n");
    if (w->n == 0)
        printf("  none\n");
    for (int i = 0; i < w->n; i++)
        printf("  - %s\n", w->text[i]);
}

/* ---- the verb ------------------------------------------------------------------------ */

/* 0, -1 after --help, or the exit status of a usage error. */
static int parse_args(int argc, char **argv, const char **config_path,
                      const char **plugin_path)
{
    *plugin_path = NULL;
    return gb_cli_parse_operands(&gb_cli_doctor_spec, argc, argv, gb_cli_keep_value,
                                 plugin_path, 0, 1, "[CONFIG]", config_path);
}

int gb_cmd_doctor(int argc, char **argv)
{
    const char *config_path, *plugin_path;
    int rc = parse_args(argc, argv, &config_path, &plugin_path);
    if (rc)
        return rc < 0 ? 0 : rc;
    gb_diag diag = {0};
    gb_config *cfg = config_path ? gb_config_load(config_path, &diag)
                                 : gb_config_load_string("", "defaults", "/", &diag);
    gb_settings *s = cfg ? gb_settings_open(cfg, &diag) : NULL;
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    if (!s) {
        gb_config_free(cfg);
        return 2;
    }
    const int threads = (int)gb_settings_threads(s);
    gb_loader *loader = gb_loader_new();
    gb_loader_add_path(loader, plugin_path);
    gb_loader_add_path(loader, getenv("GEARBOX_PLUGIN_PATH"));
    gb_loader_add_path(loader, gb_settings_plugin_path(s));
    gb_loader_add_default_path(loader);

    warnings *w = calloc(1, sizeof *w);
    if (!w)
        return 1;
    gb_cli_print_version();
    check_cpu(w);
    const char *threads_set = gb_config_get(cfg, "run", "threads");
    check_threads(config_path, threads, !threads_set || strcmp(threads_set, "auto") == 0, w);
    /* The device a run would use, asked for its libraries and measured. */
    const char *device = gb_settings_plugin(s, GB_KIND_DEVICE);
    omp_set_num_threads(threads);
    gb_instance dev = {0};
    if (open_device(loader, cfg, device, threads, &dev, w))
        dev.self = NULL;
    check_blas(&dev, device, w);
    measure_speed(&dev, device, threads, w);
    if (dev.self)
        ((const gb_device_ops *)dev.plugin->desc->ops)->destroy(dev.self);
    gb_instance_unbind(&dev);
    list_plugins(loader, w);
    print_warnings(w);
    free(w);
    gb_loader_free(loader);
    gb_settings_close(s);
    gb_config_free(cfg);
    return 0;
}
