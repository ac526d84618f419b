/* device/cuda's graphs (ABI 1.4) through its vtable: work queued while recording does not
 * run; each launch runs it again with the arguments it was recorded with; queued host
 * work is refused while recording (it frees its argument after one run); a call that
 * waits for the GPU breaks the recording, graph_end then says so, and the device goes on
 * working. Also the PCI address info() reports (ABI 1.4), by which NVML finds the GPU.
 * Exits 77 (SKIP) where device/cuda finds no GPU.
 * usage: test_device_graphs CUDA_PLUGIN
 */
#include <stdio.h>
#include <string.h>

#include "gearbox/device.h"
#include "kernel_test.h"
#include "test_host.h"

#define SKIP 77
#define N 1000

static const gb_device_ops *ops;
static void *dev;

static void expect_ok(gb_status st, const char *call)
{
    kt_expect(st == GB_OK, "%s returned %d: %s", call, (int)st, kt_last_error());
}

/* Every element of the device buffer x equals v. */
static int all_equal(const float *x, float v)
{
    static float host[N];
    expect_ok(ops->copy(dev, host, x, sizeof host, GB_COPY_DEVICE_TO_HOST), "copy to host");
    for (int i = 0; i < N; i++)
        if (host[i] != v)
            return 0;
    return 1;
}

static gb_status noop(void *arg)
{
    (void)arg;
    return GB_OK;
}

static void record_and_launch(float *x, float *y)
{
    static float ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    expect_ok(ops->memset_zero(dev, x, N * sizeof(float)), "memset_zero");
    expect_ok(ops->copy(dev, y, ones, sizeof ones, GB_COPY_HOST_TO_DEVICE), "copy to device");
    expect_ok(ops->graph_begin(dev), "graph_begin");
    expect_ok(ops->add(dev, GB_F32, x, x, y, N), "add while recording");
    kt_clear_error();
    gb_status host_work = ops->enqueue_host(dev, NULL, noop, NULL, 0);
    kt_expect(host_work == GB_ERR_UNSUPPORTED && strstr(kt_last_error(), "recorded into a graph"),
              "enqueue_host while recording returned %d (\"%s\"), want GB_ERR_UNSUPPORTED saying "
              "why", (int)host_work, kt_last_error());
    void *graph = NULL;
    expect_ok(ops->graph_end(dev, &graph), "graph_end");
    kt_expect(graph != NULL, "graph_end gave no graph");
    kt_expect(all_equal(x, 0.0f), "the add queued while recording ran before any launch");
    for (int i = 0; i < 3; i++)
        expect_ok(ops->graph_launch(dev, graph), "graph_launch");
    expect_ok(ops->sync(dev), "sync");
    kt_expect(all_equal(x, 3.0f), "three launches of x += y (y = 1) did not give 3");
    ops->graph_destroy(dev, graph);
    printf("ok: recorded work ran once per launch, none while recording; enqueue_host "
           "refused while recording\n");
}

static void broken_recording(float *x)
{
    expect_ok(ops->graph_begin(dev), "graph_begin");
    expect_ok(ops->memset_zero(dev, x, N * sizeof(float)), "memset_zero while recording");
    kt_clear_error();
    gb_status waited = ops->sync(dev);
    void *graph = NULL;
    kt_clear_error();
    gb_status ended = ops->graph_end(dev, &graph);
    kt_expect(waited != GB_OK, "sync while recording returned GB_OK");
    kt_expect(ended == GB_ERR_DEVICE && graph == NULL && strstr(kt_last_error(), "recording"),
              "graph_end after a sync while recording returned %d (\"%s\"), want GB_ERR_DEVICE "
              "saying the recording failed", (int)ended, kt_last_error());
    printf("ok: a sync while recording breaks it: %s\n", kt_last_error());
    expect_ok(ops->sync(dev), "sync after the broken recording");
    expect_ok(ops->memset_zero(dev, x, N * sizeof(float)), "memset_zero after it");
    kt_expect(all_equal(x, 0.0f), "the device does not work after a broken recording");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    gb_test_usage_unless(argc == 2, argv[0], "CUDA_PLUGIN");
    const gb_plugin_desc *desc = gb_test_load_plugin(argv[1]);
    ops = desc->ops;
    kt_expect(GB_DEVICE_HAS(ops, graph_begin) && GB_DEVICE_HAS(ops, graph_end) &&
                  GB_DEVICE_HAS(ops, graph_launch) && GB_DEVICE_HAS(ops, graph_destroy),
              "device/cuda lacks a graph entry");
    gb_host host = kt_host(2);
    if (ops->create(&host, NULL, &dev) != GB_OK) {
        /* no GPU is a skip; any other refusal is a fault */
        int no_gpu = strstr(kt_last_error(), "no NVIDIA GPU") != NULL;
        printf("%s: %s\n", no_gpu ? "SKIP" : "FAIL: device/cuda did not start", kt_last_error());
        return kt_exit_code() || !no_gpu ? 1 : SKIP;
    }
    gb_device_info info = {.struct_size = sizeof info};
    expect_ok(ops->info(dev, &info), "info");
    unsigned domain, bus, slot, function;
    kt_expect(sscanf(info.pci_bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function) == 4,
              "info's pci_bus_id \"%s\" is not a PCI address", info.pci_bus_id);
    printf("ok: PCI address %s\n", info.pci_bus_id);
    float *x = NULL, *y = NULL;
    expect_ok(ops->alloc(dev, N * sizeof(float), (void **)&x), "alloc");
    expect_ok(ops->alloc(dev, N * sizeof(float), (void **)&y), "alloc");
    record_and_launch(x, y);
    broken_recording(x);
    ops->free(dev, x);
    ops->free(dev, y);
    ops->destroy(dev);
    return kt_exit_code();
}
