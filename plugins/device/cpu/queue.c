/* Memory, streams, events and queued work of the CPU device; see queue.h. */
#include "queue.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_device.h"

#define CPU_ALIGN 64

struct cpu_work {
    cpu_work *next;
    gb_host_fn fn;
    unsigned char arg[];   /* the caller's argument bytes, copied */
};

int cpu_deferring(const cpu_device *dev)
{
    return dev->queue.gpu_like && dev->queue.running == 0;
}

static cpu_stream *stream_of(cpu_device *dev, void *stream)
{
    return stream ? stream : &dev->queue.compute;
}

/* ---- protection of device memory (GPU-like mode) ------------------------------------ */

static void protect_all(cpu_device *dev, int prot)
{
    for (int i = 0; i < dev->queue.n_regions; i++)
        mprotect(dev->queue.regions[i].ptr, dev->queue.regions[i].bytes, prot);
}

/* Queued work runs with device memory open; nested runs (work that waits on another
 * stream) keep it open until the outermost one ends. */
static void begin_running(cpu_device *dev)
{
    if (dev->queue.running++ == 0)
        protect_all(dev, PROT_READ | PROT_WRITE);
}

static void end_running(cpu_device *dev)
{
    if (--dev->queue.running == 0)
        protect_all(dev, PROT_NONE);
}

/* ---- queues ------------------------------------------------------------------------- */

/* Runs the work of `s` until it has run `upto` items. */
static void run_until(cpu_device *dev, cpu_stream *s, uint64_t upto)
{
    if (s->done >= upto)
        return;
    begin_running(dev);
    while (s->done < upto && s->head) {
        cpu_work *w = s->head;
        s->head = w->next;
        if (!s->head)
            s->tail = NULL;
        gb_status st = w->fn(w->arg);
        if (st != GB_OK && dev->queue.failed == GB_OK)
            dev->queue.failed = st;
        free(w);
        s->done++;
    }
    end_running(dev);
}

static gb_status drain(cpu_device *dev, cpu_stream *s)
{
    run_until(dev, s, s->queued);
    return dev->queue.failed;
}

gb_status cpu_submit(cpu_device *dev, void *stream, gb_host_fn fn, const void *arg,
                     size_t bytes)
{
    if (!cpu_deferring(dev))
        return fn((void *)arg);
    cpu_work *w = malloc(sizeof *w + bytes);
    if (!w)
        return cpu_fail(dev, GB_ERR_NO_MEMORY, "cannot queue %zu bytes of work", bytes);
    w->next = NULL;
    w->fn = fn;
    memcpy(w->arg, arg, bytes);
    cpu_stream *s = stream_of(dev, stream);
    if (s->tail)
        s->tail->next = w;
    else
        s->head = w;
    s->tail = w;
    s->queued++;
    return GB_OK;
}

gb_status cpu_sync(void *self)
{
    cpu_device *dev = self;
    /* the other streams first: the compute stream may be waiting on them, and a drain
     * of one that waits on another runs what it needs */
    for (cpu_stream *s = dev->queue.created; s; s = s->next_created)
        drain(dev, s);
    return drain(dev, &dev->queue.compute);
}

/* The queue whose regions the SIGSEGV handler consults (the GPU-like device of the
 * process; one is what a run opens). */
static cpu_queue *volatile fault_queue;

void cpu_queue_close(cpu_device *dev)
{
    cpu_sync(dev);
    if (fault_queue == &dev->queue)
        fault_queue = NULL;
    while (dev->queue.created)
        cpu_stream_destroy(dev, dev->queue.created);
    for (int i = 0; i < dev->queue.n_regions; i++)
        munmap(dev->queue.regions[i].ptr, dev->queue.regions[i].bytes);
    free(dev->queue.regions);
}

/* ---- memory ------------------------------------------------------------------------- */

static size_t page_round(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes ? bytes : 1) + page - 1 - ((bytes ? bytes : 1) + page - 1) % page;
}

/* ---- faults in GPU-like mode ------------------------------------------------------- */

static size_t hex_of(uintptr_t v, char *out)
{
    char tmp[2 * sizeof v];
    size_t n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

/* Says, with write(2) alone, that the host touched protected device memory, then dies of
 * the signal as it would have without the handler. */
static void on_segv(int sig, siginfo_t *info, void *context)
{
    (void)context;
    const cpu_queue *q = fault_queue;
    uintptr_t at = (uintptr_t)info->si_addr;
    int ours = 0;
    for (int i = 0; q && i < q->n_regions; i++) {
        uintptr_t lo = (uintptr_t)q->regions[i].ptr;
        if (at >= lo && at - lo < q->regions[i].bytes)
            ours = 1;
    }
    if (ours) {
        static const char head[] = "gearbox: device cpu (emulate_gpu): the host touched device "
                                   "memory at 0x";
        static const char tail[] = " outside queued work; a plugin or the core dereferenced a "
                                   "device pointer (run under gdb for the place)\n";
        char addr[2 * sizeof at];
        size_t n = hex_of(at, addr);
        ssize_t ignored = write(STDERR_FILENO, head, sizeof head - 1);
        ignored = write(STDERR_FILENO, addr, n);
        ignored = write(STDERR_FILENO, tail, sizeof tail - 1);
        (void)ignored;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Installs the handler once, for the first GPU-like device. */
static void watch_faults(cpu_queue *q)
{
    if (fault_queue)
        return;
    fault_queue = q;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
}

/* GPU-like memory: whole pages, inaccessible until queued work runs. */
static gb_status alloc_protected(cpu_device *dev, size_t bytes, void **ptr)
{
    cpu_queue *q = &dev->queue;
    if (q->n_regions == q->cap_regions) {
        int cap = q->cap_regions ? 2 * q->cap_regions : 64;
        cpu_region *grown = realloc(q->regions, (size_t)cap * sizeof *grown);
        if (!grown)
            return cpu_fail(dev, GB_ERR_NO_MEMORY, "alloc: cannot track another region");
        q->regions = grown;
        q->cap_regions = cap;
    }
    size_t rounded = page_round(bytes);
    void *p = mmap(NULL, rounded, q->running ? PROT_READ | PROT_WRITE : PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return cpu_fail(dev, GB_ERR_NO_MEMORY, "alloc: cannot map %zu bytes", bytes);
    q->regions[q->n_regions++] = (cpu_region){p, rounded};
    watch_faults(q);
    *ptr = p;
    return GB_OK;
}

gb_status cpu_alloc(void *self, size_t bytes, void **ptr)
{
    cpu_device *dev = self;
    if (bytes > SIZE_MAX / 2)
        return cpu_fail(dev, GB_ERR_NO_MEMORY, "alloc: cannot allocate %zu bytes", bytes);
    if (dev->queue.gpu_like)
        return alloc_protected(dev, bytes, ptr);
    return cpu_alloc_host(self, bytes, ptr);
}

void cpu_free(void *self, void *ptr)
{
    cpu_device *dev = self;
    cpu_queue *q = &dev->queue;
    if (!q->gpu_like) {
        free(ptr);
        return;
    }
    cpu_sync(dev); /* queued work may still use it, as cudaFree waits */
    for (int i = 0; i < q->n_regions; i++) {
        if (q->regions[i].ptr != ptr)
            continue;
        munmap(ptr, q->regions[i].bytes);
        q->regions[i] = q->regions[--q->n_regions];
        return;
    }
}

gb_status cpu_alloc_host(void *self, size_t bytes, void **ptr)
{
    // aligned_alloc wants a multiple of the alignment; 0 bytes still get a unique pointer.
    size_t rounded = bytes == 0 ? CPU_ALIGN : (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    *ptr = bytes <= SIZE_MAX - CPU_ALIGN ? aligned_alloc(CPU_ALIGN, rounded) : NULL;
    if (!*ptr)
        return cpu_fail(self, GB_ERR_NO_MEMORY, "alloc: cannot allocate %zu bytes", bytes);
    return GB_OK;
}

void cpu_free_host(void *self, void *ptr)
{
    (void)self;
    free(ptr);
}

/* ---- copies ------------------------------------------------------------------------- */

typedef struct copy_work {
    void *dst;
    const void *src;   /* NULL: the bytes follow, copied at the call (a staged H2D copy) */
    size_t bytes;
    unsigned char staged[];
} copy_work;

static gb_status run_copy(void *arg)
{
    copy_work *c = arg;
    memcpy(c->dst, c->src ? c->src : c->staged, c->bytes);
    return GB_OK;
}

typedef struct zero_work {
    void *ptr;
    size_t bytes;
} zero_work;

static gb_status run_zero(void *arg)
{
    zero_work *z = arg;
    memset(z->ptr, 0, z->bytes);
    return GB_OK;
}

static int known_kind(gb_copy_kind kind)
{
    return kind == GB_COPY_HOST_TO_DEVICE || kind == GB_COPY_DEVICE_TO_HOST ||
           kind == GB_COPY_DEVICE_TO_DEVICE;
}

/* HOST_TO_DEVICE from pageable memory: the bytes are staged now, so `src` may be reused
 * when the call returns, and land in stream order. */
static gb_status queue_staged_copy(cpu_device *dev, void *dst, const void *src, size_t bytes)
{
    copy_work *c = malloc(sizeof *c + bytes);
    if (!c)
        return cpu_fail(dev, GB_ERR_NO_MEMORY, "copy: cannot stage %zu bytes", bytes);
    *c = (copy_work){dst, NULL, bytes};
    memcpy(c->staged, src, bytes);
    gb_status st = cpu_submit(dev, NULL, run_copy, c, sizeof *c + bytes);
    free(c);
    return st;
}

gb_status cpu_copy(void *self, void *dst, const void *src, size_t bytes, gb_copy_kind kind)
{
    cpu_device *dev = self;
    if (!known_kind(kind))
        return cpu_fail(dev, GB_ERR_INVALID_ARG, "copy: unknown copy kind %d", (int)kind);
    if (!bytes)
        return GB_OK;
    if (!cpu_deferring(dev)) {
        memcpy(dst, src, bytes);
        return GB_OK;
    }
    if (kind == GB_COPY_HOST_TO_DEVICE)
        return queue_staged_copy(dev, dst, src, bytes);
    copy_work c = {dst, src, bytes};
    gb_status st = cpu_submit(dev, NULL, run_copy, &c, sizeof c);
    if (st != GB_OK || kind == GB_COPY_DEVICE_TO_DEVICE)
        return st;
    return drain(dev, &dev->queue.compute); /* DEVICE_TO_HOST returns with dst filled */
}

gb_status cpu_copy_async(void *self, void *dst, const void *src, size_t bytes,
                         gb_copy_kind kind, void *stream)
{
    cpu_device *dev = self;
    if (!known_kind(kind))
        return cpu_fail(dev, GB_ERR_INVALID_ARG, "copy_async: unknown copy kind %d",
                        (int)kind);
    if (!bytes)
        return GB_OK;
    copy_work c = {dst, src, bytes};
    return cpu_submit(dev, stream, run_copy, &c, sizeof c);
}

gb_status cpu_memset_zero(void *self, void *ptr, size_t bytes)
{
    zero_work z = {ptr, bytes};
    return bytes ? cpu_submit(self, NULL, run_zero, &z, sizeof z) : GB_OK;
}

/* ---- streams and events ------------------------------------------------------------- */

gb_status cpu_stream_create(void *self, void **stream)
{
    cpu_device *dev = self;
    cpu_stream *s = calloc(1, sizeof *s);
    if (!s)
        return cpu_fail(dev, GB_ERR_NO_MEMORY, "stream_create: out of memory");
    s->next_created = dev->queue.created;
    dev->queue.created = s;
    *stream = s;
    return GB_OK;
}

void cpu_stream_destroy(void *self, void *stream)
{
    cpu_device *dev = self;
    cpu_stream *s = stream;
    drain(dev, s);
    for (cpu_stream **p = &dev->queue.created; *p; p = &(*p)->next_created) {
        if (*p == s) {
            *p = s->next_created;
            break;
        }
    }
    free(s);
}

gb_status cpu_event_create(void *self, void **event)
{
    cpu_event *e = calloc(1, sizeof *e);
    if (!e)
        return cpu_fail(self, GB_ERR_NO_MEMORY, "event_create: out of memory");
    *event = e;
    return GB_OK;
}

void cpu_event_destroy(void *self, void *event)
{
    (void)self;
    free(event);
}

gb_status cpu_event_record(void *self, void *event, void *stream)
{
    cpu_event *e = event;
    e->stream = stream_of(self, stream);
    e->at = e->stream->queued;
    return GB_OK;
}

/* The work of event_sync, also queued by stream_wait_event. */
static gb_status run_until_event(cpu_device *dev, const cpu_event *e)
{
    if (e->stream)
        run_until(dev, e->stream, e->at);
    return dev->queue.failed;
}

typedef struct wait_work {
    cpu_device *dev;
    cpu_event event;   /* copied: the waiting point as it was recorded */
} wait_work;

static gb_status run_wait(void *arg)
{
    wait_work *w = arg;
    return run_until_event(w->dev, &w->event);
}

gb_status cpu_stream_wait_event(void *self, void *stream, void *event)
{
    wait_work w = {self, *(cpu_event *)event};
    return cpu_submit(self, stream, run_wait, &w, sizeof w);
}

/* A GPU finishes queued work by itself; this one finishes it when asked, so a query
 * runs the work up to the event (and the answer is then always "done"). */
gb_status cpu_event_query(void *self, void *event)
{
    return run_until_event(self, event);
}

gb_status cpu_event_sync(void *self, void *event)
{
    return run_until_event(self, event);
}

gb_status cpu_enqueue_host(void *self, void *stream, gb_host_fn fn, const void *arg,
                           size_t arg_bytes)
{
    return cpu_submit(self, stream, fn, arg, arg_bytes);
}
