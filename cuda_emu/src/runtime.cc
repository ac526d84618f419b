/* The CUDA runtime API on the CPU: one emulated GPU, its memory, streams and events, and
 * kernel launches (run by blocks.cc). The prototypes are the real cuda_runtime_api.h's;
 * only what gearbox's CUDA plugins call is here.
 *
 * Adversarial by design, so that code which works here works on a GPU:
 * - Streams are lazy. Queued work runs only when something waits for it (a stream or event
 *   synchronize, an event query, a blocking copy, cudaDeviceSynchronize, a free), and only
 *   the work that the wait depends on runs, in a seeded random interleaving of the streams
 *   involved. A missing cudaStreamWaitEvent therefore gives stale data, not a lucky pass.
 * - Device memory is inaccessible (PROT_NONE) whenever host code runs; a host access
 *   faults with a message naming the allocation. Each allocation lies between two guard
 *   pages in one reserved range, starts filled with 0xff bytes (NaN), and has a shadow
 *   byte per byte (no allocation's, unwritten, written) that the kernels' instrumented
 *   accesses are checked against (device_access): out of bounds to the byte, and reads of
 *   bytes never written.
 * - Copies follow CUDA's rules for host memory: a pageable source is staged before
 *   cudaMemcpyAsync returns; a pageable destination is filled when it returns; pinned
 *   memory is truly asynchronous, and a host access to pinned memory while a copy of it
 *   is pending faults with a message.
 * - A host function (cudaLaunchHostFunc) may not call CUDA.
 * - Stream capture records work into a graph instead of queueing it, and refuses what CUDA
 *   refuses during a capture (synchronizing, allocating, copies with pageable memory,
 *   dependencies that cross the capture's boundary); a graph launch queues copies of the
 *   recorded work, each with the arguments it had when recorded.
 */
#include <cuda_runtime.h>
#include <signal.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "blocks.h"
#include "counters.h"
#include "emu.h"
#include "resources.h"

namespace gb_emu {

/* ---- reports ----------------------------------------------------------------------- */

static bool keep_going()
{
    static const bool go = [] {
        const char *s = getenv("GEARBOX_CUDA_EMU_ON_ERROR");
        return s && strcmp(s, "continue") == 0;
    }();
    return go;
}

static void vsay(const char *fmt, va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "gearbox cuda emulator: %s\n", msg);
    fflush(stderr);
}

void violation(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    abort();
}

void report(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    if (!keep_going())
        abort();
}

void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

static thread_local cudaError_t last_error = cudaSuccess;

cudaError_t set_last_error(cudaError_t err)
{
    if (err != cudaSuccess)
        last_error = err;
    return err;
}

/* A defined CUDA error: said on stderr (CUDA itself only returns a code) and returned. */
static cudaError_t refuse(cudaError_t err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cudaError_t refuse(cudaError_t err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    return set_last_error(err);
}

/* The refusal of `call` given a handle that is not a live stream or event (`what`). */
static cudaError_t not_live(const char *call, const void *handle, const char *what)
{
    return refuse(cudaErrorInvalidResourceHandle, "%s(%p): not %s", call, handle, what);
}

/* ---- state ------------------------------------------------------------------------- */

namespace {

std::recursive_mutex state_lock;   /* every API call; recursive: drains call back in */
/* Whether the thread holding state_lock waits on other processes (waiting_on_peers); it
 * must take park_lock to stop waiting, so state read under park_lock while `parked` holds
 * still. */
std::mutex park_lock;
bool parked = false;
thread_local bool in_host_function = false;
thread_local const char *running_op = nullptr;   /* the library op being run, for faults */

/* CUDA calls from a host function are forbidden (they may deadlock on a GPU). */
void api_entry(const char *call)
{
    if (in_host_function)
        violation("%s called from a host function queued with cudaLaunchHostFunc: such "
                  "functions must not call CUDA", call);
}

size_t page_size()
{
    static const size_t p = (size_t)sysconf(_SC_PAGESIZE);
    return p;
}

size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

/* ---- device memory ------------------------------------------------------------------ */

struct device_block {
    allocation a;
    char *map;           /* its pages of the arena: a guard page, data pages, a guard page */
    size_t map_bytes;
};

/* The arena: one reserved range of addresses that every allocation is carved from (so an
 * instrumented access tells device memory with one comparison), and its shadow, a byte
 * per byte: SHADOW_NONE (no allocation's: guards, alignment slack, freed memory),
 * SHADOW_UNWRITTEN, SHADOW_WRITTEN. Freed pieces are kept by size for the next allocation
 * of that size. */
enum : unsigned char { SHADOW_NONE = 0, SHADOW_UNWRITTEN = 1, SHADOW_WRITTEN = 2 };
unsigned char *device_shadow = nullptr;
size_t arena_next = 0;
std::multimap<size_t, size_t> arena_free;   /* map bytes -> offset */

std::map<uintptr_t, device_block> device_blocks;   /* by base */
unsigned next_allocation_id = 1;
size_t device_used = 0;
bool device_open = false;   /* accessible: only while queued work runs */

size_t device_capacity()
{
    static const size_t bytes = [] {
        const char *s = getenv("GEARBOX_CUDA_EMU_MEMORY_MB");
        size_t mb = s && *s ? strtoull(s, nullptr, 10) : 16384;
        return mb << 20;
    }();
    return bytes;
}

void protect_device(const device_block &d, bool open)
{
    size_t data = d.map_bytes - 2 * page_size();
    if (mprotect(d.map + page_size(), data, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
        violation("mprotect of device allocation #%u failed: %s", d.a.id, strerror(errno));
}

void set_device_open(bool open)
{
    if (device_open == open)
        return;
    device_open = open;
    for (auto &kv : device_blocks)
        protect_device(kv.second, open);
}

/* The allocation whose pages (guards included) hold p: the last that starts at or below
 * p, or the next, whose lower guard and slack lie below its start. */
const device_block *device_block_at(const void *p)
{
    auto it = device_blocks.upper_bound((uintptr_t)p);
    const char *c = (const char *)p;
    if (it != device_blocks.end() && c >= it->second.map)
        return &it->second;
    if (it == device_blocks.begin())
        return nullptr;
    --it;
    const device_block &d = it->second;
    return c >= d.map && c < d.map + d.map_bytes ? &d : nullptr;
}

/* Reserves the arena (at the first cudaMalloc): eight times the emulated GPU's memory, for
 * guard pages and freed pieces, and at least 64 GiB of addresses. */
bool reserve_arena()
{
    if (device_shadow)
        return true;
    const size_t bytes = std::max(device_capacity() * 8, (size_t)64 << 30);
    void *m = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *s = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED || s == MAP_FAILED)
        return false;
    device_shadow = (unsigned char *)s;
    device_arena_lo = (uintptr_t)m;
    device_arena_bytes = bytes;
    return true;
}

/* `map_bytes` of the arena, PROT_NONE: a freed piece of that size, or new addresses. */
char *arena_take(size_t map_bytes)
{
    auto it = arena_free.find(map_bytes);
    size_t offset;
    if (it != arena_free.end()) {
        offset = it->second;
        arena_free.erase(it);
    } else {
        if (arena_next + map_bytes > device_arena_bytes)
            return nullptr;
        offset = arena_next;
        arena_next += map_bytes;
    }
    return (char *)device_arena_lo + offset;
}

/* Gives a piece back: its pages and its shadow dropped (zero: SHADOW_NONE). */
void arena_give(char *map, size_t map_bytes)
{
    const size_t offset = (size_t)(map - (char *)device_arena_lo);
    mmap(map, map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    madvise(device_shadow + offset, map_bytes, MADV_DONTNEED);
    arena_free.emplace(map_bytes, offset);
}

unsigned char *shadow_of(const void *p)
{
    return device_shadow + ((uintptr_t)p - device_arena_lo);
}

/* ---- pinned host memory ------------------------------------------------------------- */

struct pinned_block {
    char *base;
    size_t bytes;
};
std::map<uintptr_t, pinned_block> pinned_blocks;

const pinned_block *pinned_at(const void *p)
{
    auto it = pinned_blocks.upper_bound((uintptr_t)p);
    if (it == pinned_blocks.begin())
        return nullptr;
    --it;
    const char *c = (const char *)p;
    return c >= it->second.base && c < it->second.base + it->second.bytes ? &it->second : nullptr;
}
/* The byte ranges of pinned memory that pending copies read (the host may not write them)
 * or write (the host may not touch them). Protection is by page, so a page is protected
 * when any pending range covers part of it; a host access to the rest of such a page is
 * stepped over (on_fault, on_trap), and only an access inside a range is reported. */
struct pinned_range {
    uintptr_t lo, hi;
    bool written;
    uint64_t id;
    std::string by;
};
std::vector<pinned_range> pinned_ranges;
uint64_t next_range_id = 1;

uintptr_t page_of(uintptr_t a)
{
    return a / page_size() * page_size();
}

/* The protection a page needs while host code runs. */
int page_protection(uintptr_t page)
{
    int prot = PROT_READ | PROT_WRITE;
    for (const pinned_range &r : pinned_ranges)
        if (r.lo < page + page_size() && r.hi > page)
            prot = r.written ? PROT_NONE : (prot & PROT_READ);
    return prot;
}

void protect_pages(uintptr_t lo, uintptr_t hi, bool open)
{
    for (uintptr_t page = page_of(lo); page < hi; page += page_size())
        mprotect((void *)page, page_size(), open ? PROT_READ | PROT_WRITE : page_protection(page));
}

uint64_t hold_pinned(const void *p, size_t bytes, bool written, const std::string &by)
{
    pinned_range r{(uintptr_t)p, (uintptr_t)p + bytes, written, next_range_id++, by};
    pinned_ranges.push_back(r);
    protect_pages(r.lo, r.hi, device_open);
    return r.id;
}

void release_pinned(uint64_t id)
{
    for (size_t i = 0; i < pinned_ranges.size(); i++)
        if (pinned_ranges[i].id == id) {
            pinned_range r = pinned_ranges[i];
            pinned_ranges.erase(pinned_ranges.begin() + (ptrdiff_t)i);
            protect_pages(r.lo, r.hi, device_open);
            return;
        }
}

/* While queued work runs, pinned memory is open to it; protected again after. */
void set_pinned_open(bool open)
{
    for (const pinned_range &r : pinned_ranges)
        protect_pages(r.lo, r.hi, open);
}

/* The pending range a host access at addr breaks, or nullptr. */
const pinned_range *broken_range(uintptr_t addr, bool write)
{
    for (const pinned_range &r : pinned_ranges)
        if (addr >= r.lo && addr < r.hi && (write || r.written))
            return &r;
    return nullptr;
}

bool in_held_page(uintptr_t addr)
{
    for (const pinned_range &r : pinned_ranges)
        if (page_of(addr) >= page_of(r.lo) && page_of(addr) < r.hi)
            return true;
    return false;
}

/* ---- faults ------------------------------------------------------------------------ */

struct sigaction previous_segv;

void write_line(const char *msg)
{
    if (write(2, msg, strlen(msg)) < 0)
        return;
}

/* Whether the faulting access was a write (x86-64 page-fault error code, bit 1; elsewhere
 * every access counts as a write, the stricter reading). */
bool is_write(void *uctx)
{
#if defined(__x86_64__)
    return (static_cast<ucontext_t *>(uctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)uctx;
    return true;
#endif
}

/* The page a stepped-over access opened, protected again by on_trap after one instruction. */
thread_local uintptr_t stepped_page = 0;

bool step_over(uintptr_t addr, void *uctx)
{
#if defined(__x86_64__)
    stepped_page = page_of(addr);
    mprotect((void *)stepped_page, page_size(), PROT_READ | PROT_WRITE);
    static_cast<ucontext_t *>(uctx)->uc_mcontext.gregs[REG_EFL] |= 0x100;   /* trap flag */
    return true;
#else
    (void)addr;
    (void)uctx;
    return false;
#endif
}

struct sigaction previous_trap;

void on_trap(int sig, siginfo_t *info, void *uctx)
{
#if defined(__x86_64__)
    if (stepped_page) {
        mprotect((void *)stepped_page, page_size(), page_protection(stepped_page));
        stepped_page = 0;
        static_cast<ucontext_t *>(uctx)->uc_mcontext.gregs[REG_EFL] &= ~0x100;
        return;
    }
#endif
    if (previous_trap.sa_flags & SA_SIGINFO && previous_trap.sa_sigaction) {
        previous_trap.sa_sigaction(sig, info, uctx);
        return;
    }
    signal(sig, previous_trap.sa_handler == SIG_IGN ? SIG_DFL : previous_trap.sa_handler);
    raise(sig);
}

void on_fault(int sig, siginfo_t *info, void *uctx)
{
    const char *addr = (const char *)info->si_addr;
    char msg[1024], who[512];
    describe_running_thread(who, sizeof who);
    if (!who[0] && running_op)
        snprintf(who, sizeof who, "%s", running_op);
    std::unique_lock<std::recursive_mutex> hold(state_lock, std::try_to_lock);
    /* while queued work runs, the thread that holds the lock waits for it and the table
     * of allocations cannot change: a kernel's helper thread may read it */
    const bool readable = hold.owns_lock() || device_open;
    const device_block *d = readable ? device_block_at(addr) : nullptr;
    if (d) {
        size_t offset = (size_t)(addr - d->a.base);
        if (addr >= d->map + d->map_bytes - page_size() || addr < d->map + page_size())
            snprintf(msg, sizeof msg, "gearbox cuda emulator: %s: access at byte %zd of device "
                     "allocation #%u, which has %zu bytes: out of bounds\n",
                     who[0] ? who : "host code", (ssize_t)(addr - d->a.base), d->a.id, d->a.bytes);
        else
            snprintf(msg, sizeof msg, "gearbox cuda emulator: host code accessed device memory "
                     "(byte %zu of allocation #%u, %zu bytes, from cudaMalloc): device "
                     "allocations stay inaccessible while host code runs; copy with "
                     "cudaMemcpy*, or read it in a kernel\n", offset, d->a.id, d->a.bytes);
        write_line(msg);
        abort();
    }
    if (hold.owns_lock() && in_held_page((uintptr_t)addr)) {
        const bool write = is_write(uctx);
        const pinned_range *r = broken_range((uintptr_t)addr, write);
        if (r) {
            snprintf(msg, sizeof msg, "gearbox cuda emulator: host code %s pinned memory at %p "
                     "while %s is pending on it (host memory of an asynchronous copy may be %s "
                     "only after the stream or an event says the copy is done)\n",
                     write ? "wrote" : "read", (const void *)addr, r->by.c_str(),
                     r->written ? "touched" : "written");
            write_line(msg);
            abort();
        }
        if (step_over((uintptr_t)addr, uctx))
            return;   /* the rest of a page that a pending copy shares: allowed */
    }
    if (const char *meaning = guard_meaning(addr)) {
        snprintf(msg, sizeof msg, "gearbox cuda emulator: %s: %s\n",
                 who[0] ? who : "a CUDA thread", meaning);
        write_line(msg);
        abort();
    }
    /* not ours: the previous handler, or the default action on return */
    if (previous_segv.sa_flags & SA_SIGINFO && previous_segv.sa_sigaction) {
        previous_segv.sa_sigaction(sig, info, uctx);
        return;
    }
    signal(sig, previous_segv.sa_handler == SIG_IGN ? SIG_DFL : previous_segv.sa_handler);
}

void install_fault_handler()
{
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &previous_segv);
        sa.sa_sigaction = on_trap;
        sigaction(SIGTRAP, &sa, &previous_trap);
    });
}

/* ---- streams and events ---------------------------------------------------------- */

struct stream_state;

/* One cudaEventRecord: done when its stream's work up to it has run. */
struct record {
    stream_state *stream;
    uint64_t seq;
    bool done = false;
    unsigned event = 0;   /* the event's number, for the counting mode's line */
};

struct op {
    uint64_t seq;
    std::string what;
    std::function<void()> run;          /* work; empty for records and waits */
    std::shared_ptr<record> records;    /* an event record */
    std::shared_ptr<record> awaits;     /* a cudaStreamWaitEvent */
    bool host = false;                  /* a host function: device memory closed */
};

struct stream_state {
    std::deque<op> queue;
    uint64_t next_seq = 1, done_seq = 0;
    unsigned id;
};

struct event_state {
    std::shared_ptr<record> last;
    unsigned flags;
    unsigned id;   /* 1, 2, ... in the order events are created */
};

stream_state default_stream{{}, 1, 0, 0};
std::set<stream_state *> streams{&default_stream};
std::set<event_state *> events;

/* A new stream or event, made live and handed out as its handle. */
template <typename State, typename Handle>
cudaError_t hand_out(std::set<State *> &live, State *state, Handle *handle)
{
    live.insert(state);
    *handle = reinterpret_cast<Handle>(state);
    return cudaSuccess;
}

unsigned next_stream_id = 1;
uint64_t drain_rng = 0;

stream_state *stream_of(cudaStream_t s)
{
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return &default_stream;
    stream_state *st = reinterpret_cast<stream_state *>(s);
    return streams.count(st) ? st : nullptr;
}

event_state *event_of(cudaEvent_t e)
{
    event_state *ev = reinterpret_cast<event_state *>(e);
    return events.count(ev) ? ev : nullptr;
}

/* GEARBOX_CUDA_EMU_TRACE=FILE appends a line per operation queued ("queue stream S #n
 * WHAT"; a wait names the record it waits for: "cudaStreamWaitEvent on stream T #m") and
 * per operation run ("run E stream S #n WHAT", E counting the runs from 1): the order in
 * which work was queued and ran across streams, for tests of overlap. Stream 0 is the
 * default stream. */
void trace_op(const char *verb, const stream_state *s, const op &o)
{
    static FILE *const out = [] {
        const char *path = getenv("GEARBOX_CUDA_EMU_TRACE");
        FILE *f = path && *path ? fopen(path, "a") : nullptr;
        if (path && *path && !f)
            violation("GEARBOX_CUDA_EMU_TRACE=%s: cannot open it: %s", path, strerror(errno));
        return f;
    }();
    static uint64_t runs = 0;
    if (!out)
        return;
    char run_number[32] = "";
    if (strcmp(verb, "run") == 0)
        snprintf(run_number, sizeof run_number, " %llu", (unsigned long long)++runs);
    fprintf(out, "%s%s stream %u #%llu %s", verb, run_number, s->id, (unsigned long long)o.seq,
            o.what.c_str());
    if (o.awaits && !run_number[0])   /* when queued, the record's stream still exists */
        fprintf(out, " on stream %u #%llu", o.awaits->stream->id,
                (unsigned long long)o.awaits->seq);
    fputc('\n', out);
    fflush(out);
}

bool capture_records(stream_state *s, op &o);

uint64_t push(stream_state *s, op o)
{
    if (capture_records(s, o))
        return 0;   /* recorded into the stream's capture, not queued */
    o.seq = s->next_seq++;
    trace_op("queue", s, o);
    uint64_t seq = o.seq;
    s->queue.push_back(std::move(o));
    return seq;
}

uint64_t next_random()
{
    drain_rng += 0x9e3779b97f4a7c15ull;
    uint64_t x = drain_rng ^ (run_seed() * 0xd1342543de82ef95ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void run_op(op &o)
{
    if (o.records) {
        o.records->done = true;
        if (counting)
            count_record("event", "\"id\":" + std::to_string(o.records->event));
        return;
    }
    if (!o.run)
        return;
    running_op = o.what.c_str();
    if (o.host) {
        set_device_open(false);
        set_pinned_open(false);
        in_host_function = true;
        o.run();
        in_host_function = false;
        set_pinned_open(true);
        set_device_open(true);
    } else {
        o.run();
    }
    running_op = nullptr;
}

bool head_ready(const stream_state *s)
{
    const op &head = s->queue.front();
    return !head.awaits || head.awaits->done;
}

/* What completing `s` up to `seq` needs: that, and the records its waits wait for. */
void add_needs(std::map<stream_state *, uint64_t> &need, stream_state *s, uint64_t seq)
{
    uint64_t &upto = need[s];
    if (upto >= seq)
        return;
    uint64_t from = upto;
    upto = seq;
    for (const op &o : s->queue)
        if (o.seq > from && o.seq <= seq && o.awaits && !o.awaits->done)
            add_needs(need, o.awaits->stream, o.awaits->seq);
}

/* Runs queued work until every stream in `need` has done everything up to its sequence
 * number, and only what that needs; with `steps` > 0, at most that many operations. */
void complete(const std::map<stream_state *, uint64_t> &need, int steps = 0)
{
    bool opened = false;
    for (int done = 0; steps == 0 || done < steps; done++) {
        std::vector<stream_state *> ready;
        bool pending = false;
        for (const auto &kv : need) {
            stream_state *s = kv.first;
            if (s->done_seq >= kv.second || s->queue.empty())
                continue;
            pending = true;
            if (head_ready(s))
                ready.push_back(s);
        }
        if (!pending)
            break;
        if (ready.empty())
            violation("queued work waits for an event that can never complete");
        if (!opened) {
            set_device_open(true);
            set_pinned_open(true);
            opened = true;
        }
        stream_state *s = ready[(size_t)(next_random() % ready.size())];
        op o = std::move(s->queue.front());
        s->queue.pop_front();
        trace_op("run", s, o);
        if (counting)
            set_counted_stream(s->id);
        run_op(o);
        s->done_seq = o.seq;
    }
    if (opened) {
        set_pinned_open(false);
        set_device_open(false);
    }
}

/* A query's answer for `s`'s work up to `seq`, not all done at the call: one operation of
 * progress (polling advances the work), but the answer is the state at the call. */
cudaError_t not_ready(stream_state *s, uint64_t seq)
{
    std::map<stream_state *, uint64_t> need;
    add_needs(need, s, seq);
    complete(need, 1);
    return cudaErrorNotReady;
}

void complete_stream(stream_state *s, uint64_t seq)
{
    std::map<stream_state *, uint64_t> need;
    add_needs(need, s, seq);
    complete(need);
}

void complete_all()
{
    std::map<stream_state *, uint64_t> need;
    for (stream_state *s : streams)
        add_needs(need, s, s->next_seq - 1);
    complete(need);
}

/* ---- graphs: stream capture ------------------------------------------------------------ */

/* A captured sequence of operations: a cudaGraph_t while capture builds it or after, a
 * cudaGraphExec_t once instantiated. Work only: waits within the capture are its order. */
struct graph_state {
    std::vector<op> ops;
};

struct capture_state {
    graph_state *graph;
    enum cudaStreamCaptureMode mode;
    std::thread::id thread;
    std::string broken_by;   /* the call that invalidated the capture; "" while valid */
};

std::map<stream_state *, capture_state> captures;
std::set<graph_state *> graphs, graph_execs;
/* Events last recorded in a capturing stream (CUDA forbids waiting on them from outside),
 * with the stream whose capture recorded them. */
std::map<event_state *, stream_state *> captured_events;

capture_state *capture_of(stream_state *s)
{
    auto it = captures.find(s);
    return it == captures.end() ? nullptr : &it->second;
}

bool capture_records(stream_state *s, op &o)
{
    capture_state *c = captures.empty() ? nullptr : capture_of(s);
    if (c)
        c->graph->ops.push_back(std::move(o));
    return c != nullptr;
}

/* A refused call ends the capture as CUDA does: cudaStreamEndCapture then fails. */
void invalidate(capture_state &c, const char *call)
{
    if (c.broken_by.empty())
        c.broken_by = call;
}

/* Calls that may synchronize or allocate (cudaMalloc, cudaDeviceSynchronize, blocking
 * copies ...) fail while a capture in global mode, or one in thread-local mode begun on
 * this thread, is under way, and invalidate it. */
cudaError_t refuse_while_capturing(const char *call)
{
    for (auto &kv : captures) {
        capture_state &c = kv.second;
        if (c.mode == cudaStreamCaptureModeRelaxed ||
            (c.mode == cudaStreamCaptureModeThreadLocal && c.thread != std::this_thread::get_id()))
            continue;
        invalidate(c, call);
        return refuse(cudaErrorStreamCaptureUnsupported, "%s while stream %u is being captured "
                      "into a graph: CUDA forbids calls that may synchronize or allocate during "
                      "a capture (the capture is now invalid)", call, kv.first->id);
    }
    return cudaSuccess;
}

/* What may not be done to a capturing stream itself (synchronize it, query it, copy host
 * memory on it). */
cudaError_t refuse_on_capturing(stream_state *s, cudaError_t err, const char *call,
                                const char *why)
{
    capture_state *c = capture_of(s);
    if (!c)
        return cudaSuccess;
    invalidate(*c, call);
    return refuse(err, "%s on stream %u, which is being captured into a graph: %s (the capture "
                  "is now invalid)", call, s->id, why);
}

/* cudaStreamWaitEvent where a capture is involved: within one capture the wait is the
 * capture's own order; a capturing stream waiting on work outside it, or a stream outside
 * waiting on a captured event, crosses the boundary. (CUDA lets another stream join a
 * capture that way; the emulator captures one stream at a time.) */
cudaError_t wait_across_capture(stream_state *s, event_state *ev)
{
    auto captured = captured_events.find(ev);
    if (captured != captured_events.end() && captured->second == s)
        return cudaSuccess;
    if (captured != captured_events.end())
        return refuse(cudaErrorNotSupported, "cudaStreamWaitEvent: stream %u waits on an event "
                      "recorded while stream %u was captured; the emulator does not let a "
                      "second stream join a capture (CUDA does)", s->id, captured->second->id);
    return refuse_on_capturing(s, cudaErrorStreamCaptureIsolation, "cudaStreamWaitEvent",
                               "it waits on an event recorded outside the capture (a "
                               "dependency across the capture's boundary; wait before "
                               "cudaStreamBeginCapture, or record with "
                               "cudaEventRecordExternal)");
}

cudaError_t refuse_captured_event(const char *call, event_state *e)
{
    return refuse(cudaErrorCapturedEvent, "%s: the event was last recorded while stream %u was "
                  "captured into a graph, so it marks no point of any stream's work", call,
                  captured_events[e]->id);
}

/* ---- the device's description -------------------------------------------------------- */

int device_count()
{
    static const int n = [] {
        const char *s = getenv("GEARBOX_CUDA_EMU_DEVICES");
        return s && *s ? atoi(s) : 1;
    }();
    return n;
}

thread_local int current_device = 0;

std::map<const void *, int> max_dynamic_shared;   /* cudaFuncSetAttribute, by kernel */
uint64_t launches = 0;

constexpr int SHARED_DEFAULT = 48 << 10;
constexpr int SHARED_OPTIN = 227 << 10;   /* sm_90 */
constexpr int CLOCK_KHZ = 1980000;
constexpr int SM_COUNT = 132;

}  // namespace

cudaError_t enqueue(cudaStream_t s, const char *what, std::function<void()> run)
{
    std::lock_guard<std::recursive_mutex> hold(state_lock);
    stream_state *st = stream_of(s);
    if (!st)
        return refuse(cudaErrorInvalidResourceHandle, "%s: stream %p was destroyed or never "
                      "created", what, (void *)s);
    op o;
    o.what = what;
    o.run = std::move(run);
    push(st, std::move(o));
    return cudaSuccess;
}

void waiting_on_peers(bool waiting)
{
    std::lock_guard<std::mutex> hold(park_lock);
    parked = waiting;
}

const allocation *find_allocation(const void *p, size_t bytes)
{
    std::lock_guard<std::recursive_mutex> hold(state_lock);
    const device_block *d = device_block_at(p);
    if (!d || (const char *)p < d->a.base || (const char *)p + bytes > d->a.base + d->a.bytes)
        return nullptr;
    return &d->a;
}

uintptr_t device_arena_lo = 0;
size_t device_arena_bytes = 0;

void mark_device_written(const void *p, size_t bytes)
{
    if (device_arena_holds(p))
        memset(shadow_of(p), SHADOW_WRITTEN, bytes);
}

size_t first_unwritten(const void *p, size_t bytes)
{
    if (!device_arena_holds(p))
        return SIZE_MAX;
    const unsigned char *shadow = shadow_of(p);
    for (size_t i = 0; i < bytes; i++)
        if (shadow[i] == SHADOW_UNWRITTEN)
            return i;
    return SIZE_MAX;
}

/* "N bytes at byte X of device allocation #I, which has M bytes" for an access at p. */
static std::string device_place(const void *p, size_t bytes)
{
    const device_block *d = device_block_at(p);
    char out[256];
    if (!d)
        snprintf(out, sizeof out, "%zu bytes at %p, device memory that no allocation holds "
                 "(freed, or never allocated)", bytes, p);
    else
        snprintf(out, sizeof out, "%zu bytes at byte %lld of device allocation #%u, which has "
                 "%zu bytes", bytes, (long long)((const char *)p - d->a.base), d->a.id,
                 d->a.bytes);
    return out;
}

[[noreturn]] static void device_violation_at(const void *pc, const char *what)
{
    const char *file;
    int line;
    char who[512];
    access_site(pc, &file, &line);
    describe_running_thread(who, sizeof who);
    violation("%s:%d: %s: %s", file, line, who[0] ? who : "host code", what);
}

/* An access whose bytes are not all written yet, or wider than 8 bytes: checked byte by
 * byte. Out of line, so that device_access's common case needs no stack frame. */
__attribute__((noinline)) static void check_device_bytes(unsigned char *shadow, const void *p,
                                                         size_t bytes, bool write,
                                                         const void *pc)
{
    char what[512];
    bool unwritten = false;
    for (size_t i = 0; i < bytes; i++) {
        if (shadow[i] == SHADOW_NONE) {
            snprintf(what, sizeof what, "%s %s: out of bounds (byte %zu of the access is no "
                     "allocation's)", write ? "writes" : "reads", device_place(p, bytes).c_str(), i);
            device_violation_at(pc, what);
        }
        unwritten = unwritten || shadow[i] == SHADOW_UNWRITTEN;
    }
    if (!write && unwritten && !sampling()) {
        /* Host code (an instrumented test's) faults here, device memory being closed to
         * it, with the fault's own message; a kernel reads the byte harmlessly. */
        (void)*(const volatile unsigned char *)p;
        snprintf(what, sizeof what, "reads %s, never written (a read of uninitialised device "
                 "memory)", device_place(p, bytes).c_str());
        device_violation_at(pc, what);
    }
    if (write)
        memset(shadow, SHADOW_WRITTEN, bytes);
}

/* Kernels run while the table of allocations holds still (the launching thread waits for
 * them with the state lock), so it is read here without the lock. Every write the
 * instrumentation does not see (copies, memsets, the cuBLASLt and NCCL doubles) marks its
 * bytes itself (mark_device_written), so an unwritten byte was never written. */
/* Whether the shadow says an access of 1, 2, 4 or 8 bytes finds them all written: the
 * common case, read with one load of a size the compiler knows (other sizes: false). */
static bool all_written(const unsigned char *shadow, size_t bytes)
{
    uint64_t state = 0;
    switch (bytes) {
    case 1: memcpy(&state, shadow, 1); break;
    case 2: memcpy(&state, shadow, 2); break;
    case 4: memcpy(&state, shadow, 4); break;
    case 8: memcpy(&state, shadow, 8); break;
    default: return false;
    }
    return state == 0x0202020202020202ull >> (8 * (8 - bytes));
}

void device_access(const void *p, size_t bytes, bool write, const void *pc)
{
    unsigned char *shadow = shadow_of(p);
    if (!all_written(shadow, bytes))
        check_device_bytes(shadow, p, bytes, write, pc);
}

/* ---- kernels ------------------------------------------------------------------------- */

void submit_kernel(const launch_site &site, const void *kernel, const launch_bounds &bounds,
                   dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   std::function<void()> body)
{
    api_entry("a kernel launch");
    std::lock_guard<std::recursive_mutex> hold(state_lock);
    const uint64_t threads = (uint64_t)block.x * block.y * block.z;
    const char *f = site.file;
    const int l = site.line;
    if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64) {
        refuse(cudaErrorInvalidConfiguration, "%s:%d: launch of %s: a block of (%u,%u,%u) = "
               "%llu threads; CUDA allows 1 to 1024 threads per block, at most (1024,1024,64)",
               f, l, site.kernel, block.x, block.y, block.z, (unsigned long long)threads);
        return;
    }
    if (bounds.max_threads && threads > bounds.max_threads) {
        refuse(cudaErrorLaunchOutOfResources, "%s:%d: launch of %s: a block of %llu threads, "
               "above the %u of the kernel's __launch_bounds__ (%s:%d): too many resources "
               "requested for launch", f, l, site.kernel, (unsigned long long)threads,
               bounds.max_threads, bounds.file, bounds.line);
        return;
    }
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
        grid.z > 65535) {
        refuse(cudaErrorInvalidConfiguration, "%s:%d: launch of %s: a grid of (%u,%u,%u) "
               "blocks; CUDA allows 1 to (2^31-1, 65535, 65535)", f, l, site.kernel, grid.x,
               grid.y, grid.z);
        return;
    }
    auto opt = max_dynamic_shared.find(kernel);
    const size_t limit = opt != max_dynamic_shared.end() ? (size_t)opt->second : SHARED_DEFAULT;
    if (shared_bytes > limit) {
        refuse(cudaErrorInvalidValue, "%s:%d: launch of %s with %zu bytes of dynamic shared "
               "memory, above the %zu allowed%s", f, l, site.kernel, shared_bytes, limit,
               opt == max_dynamic_shared.end()
                   ? " without cudaFuncSetAttribute(kernel, "
                     "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)"
                   : " by its cudaFuncAttributeMaxDynamicSharedMemorySize");
        return;
    }
    const std::string too_much = launch_resources_refusal(
        site, kernel, (unsigned)threads, shared_bytes, opt != max_dynamic_shared.end());
    if (!too_much.empty()) {
        refuse(cudaErrorLaunchOutOfResources, "%s:%d: launch of %s: %s: too many resources "
               "requested for launch", f, l, site.kernel, too_much.c_str());
        return;
    }
    stream_state *st = stream_of(stream);
    if (!st) {
        refuse(cudaErrorInvalidResourceHandle, "%s:%d: launch of %s on stream %p, which was "
               "destroyed or never created", f, l, site.kernel, (void *)stream);
        return;
    }
    auto run = std::make_shared<kernel_run>();
    run->site = site;
    run->grid = grid;
    run->block = block;
    run->dynamic_bytes = shared_bytes;
    run->shared_limit = std::max(limit, (size_t)SHARED_DEFAULT);
    run->serial = ++launches;
    run->thread_body = std::move(body);
    op o;
    o.what = std::string("kernel ") + site.kernel;
    if (counting)
        o.run = [run, kernel] { run_counted_kernel(*run, kernel); };
    else
        o.run = [run] { run_kernel(*run); };
    push(st, std::move(o));
    record_launch(kernel);
}

}  // namespace gb_emu

using namespace gb_emu;

#define API(name)                                                   \
    api_entry(name);                                                \
    std::lock_guard<std::recursive_mutex> api_hold_(state_lock)
/* An entry that makes the host wait for the GPU (or would, on a real one), so
 * GEARBOX_CUDA_EMU_HOST_CALLS lists it with the line that called it. */
#define WAITING_API(name)                                           \
    API(name);                                                      \
    note_host_call(name)

/* ---- errors ------------------------------------------------------------------------ */

/* cudaFree and cudaFreeHost: `call` of the block at `ptr` among `blocks`, which `allocator`
 * hands out (a pointer it did not is refused with `unknown`). Freeing synchronizes the
 * device; `release` returns the block's memory. */
template <typename Block, typename Release>
static cudaError_t free_block(const char *call, const char *allocator, cudaError_t unknown,
                              std::map<uintptr_t, Block> &blocks, void *ptr, Release release)
{
    if (cudaError_t e = refuse_while_capturing(call))
        return e;
    if (!ptr)
        return cudaSuccess;
    auto it = blocks.find((uintptr_t)ptr);
    if (it == blocks.end())
        return refuse(unknown, "%s(%p): not a pointer %s returned", call, ptr, allocator);
    complete_all();
    release(it->second);
    blocks.erase(it);
    return cudaSuccess;
}

extern "C" {

cudaError_t cudaGetLastError(void)
{
    api_entry("cudaGetLastError");
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    api_entry("cudaPeekAtLastError");
    return last_error;
}

static const struct {
    cudaError_t err;
    const char *name, *text;
} error_texts[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
     "too many resources requested for launch"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the "
     "present state"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched",
     "capture was not initiated in this stream"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
};

const char *cudaGetErrorName(cudaError_t error)
{
    for (const auto &e : error_texts)
        if (e.err == error)
            return e.name;
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
    for (const auto &e : error_texts)
        if (e.err == error)
            return e.text;
    return "unknown error";
}

/* ---- devices ----------------------------------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count)
{
    API("cudaGetDeviceCount");
    *count = device_count();
    return *count > 0 ? cudaSuccess : set_last_error(cudaErrorNoDevice);
}

static cudaError_t check_ordinal(int device)
{
    return device >= 0 && device < device_count() ? cudaSuccess
                                                  : set_last_error(cudaErrorInvalidDevice);
}

/* The current device is the calling thread's alone: no state_lock, so a thread can pick
 * its GPU while another holds the lock for long (a collective waiting on its peers). */
cudaError_t cudaSetDevice(int device)
{
    api_entry("cudaSetDevice");
    cudaError_t e = check_ordinal(device);
    if (e == cudaSuccess)
        current_device = device;
    return e;
}

cudaError_t cudaGetDevice(int *device)
{
    api_entry("cudaGetDevice");
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    API("cudaGetDeviceProperties");
    cudaError_t e = check_ordinal(device);
    if (e != cudaSuccess)
        return e;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "gearbox CUDA emulator (sm_90 rules, on the CPU)");
    prop->totalGlobalMem = device_capacity();
    prop->sharedMemPerBlock = SHARED_DEFAULT;
    prop->sharedMemPerBlockOptin = SHARED_OPTIN;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = SM_COUNT;
    prop->unifiedAddressing = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    API("cudaDeviceGetAttribute");
    cudaError_t e = check_ordinal(device);
    if (e != cudaSuccess)
        return e;
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrClockRate: *value = CLOCK_KHZ; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = SM_COUNT; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = SHARED_OPTIN; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = SHARED_DEFAULT; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    default:
        return refuse(cudaErrorNotSupported, "cudaDeviceGetAttribute: attribute %d is not "
                      "emulated", (int)attr);
    }
}

/* The emulated GPU's PCI address, which the NVML double (cuda_emu/nvml) answers to. */
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    API("cudaDeviceGetPCIBusId");
    cudaError_t e = check_ordinal(device);
    if (e != cudaSuccess)
        return e;
    if (len < 13)
        return refuse(cudaErrorInvalidValue, "cudaDeviceGetPCIBusId: %d bytes cannot hold "
                      "an address like 0000:01:00.0", len);
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x65 + device);
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    API("cudaMemGetInfo");
    *total = device_capacity();
    *free_bytes = device_capacity() - device_used;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    WAITING_API("cudaDeviceSynchronize");
    if (cudaError_t e = refuse_while_capturing("cudaDeviceSynchronize"))
        return e;
    complete_all();
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    API("cudaFuncSetAttribute");
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return refuse(cudaErrorNotSupported, "cudaFuncSetAttribute: attribute %d is not "
                      "emulated", (int)attr);
    if (value < 0 || value > SHARED_OPTIN)
        return refuse(cudaErrorInvalidValue, "cudaFuncSetAttribute: %d bytes of dynamic shared "
                      "memory; sm_90 allows at most %d", value, SHARED_OPTIN);
    max_dynamic_shared[func] = value;
    return cudaSuccess;
}

/* ---- memory ------------------------------------------------------------------------ */

cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    WAITING_API("cudaMalloc");
    install_fault_handler();
    *ptr = nullptr;
    if (cudaError_t e = refuse_while_capturing("cudaMalloc"))
        return e;
    if (device_used + bytes > device_capacity())
        return set_last_error(cudaErrorMemoryAllocation);
    const size_t used = round_up(bytes ? bytes : 1, 256);
    const size_t data = round_up(used, page_size());
    char *m = reserve_arena() ? arena_take(data + 2 * page_size()) : nullptr;
    if (!m)
        return refuse(cudaErrorMemoryAllocation, "cudaMalloc(%zu): the emulator's range of "
                      "device addresses is spent", bytes);
    device_block d;
    d.map = m;
    d.map_bytes = data + 2 * page_size();
    /* 256-byte aligned as CUDA's, the aligned end meeting the upper guard page; the bytes
     * between the end and the guard, and below the start, are no allocation's in the
     * shadow, so an instrumented access there is reported to the byte */
    d.a.base = d.map + page_size() + data - used;
    d.a.bytes = bytes;
    d.a.id = next_allocation_id++;
    protect_device(d, true);
    memset(d.a.base, 0xff, bytes);
    memset(shadow_of(d.a.base), SHADOW_UNWRITTEN, bytes);
    if (!device_open)
        protect_device(d, false);
    device_blocks[(uintptr_t)d.a.base] = d;
    device_used += bytes;
    *ptr = d.a.base;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    WAITING_API("cudaFree");
    return free_block("cudaFree", "cudaMalloc", cudaErrorInvalidDevicePointer, device_blocks,
                      ptr, [](device_block &b) {
                          device_used -= b.a.bytes;
                          arena_give(b.map, b.map_bytes);
                      });
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes)
{
    WAITING_API("cudaMallocHost");
    if (cudaError_t e = refuse_while_capturing("cudaMallocHost"))
        return e;
    install_fault_handler();
    const size_t mapped = round_up(bytes ? bytes : 1, page_size());
    void *m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        *ptr = nullptr;
        return set_last_error(cudaErrorMemoryAllocation);
    }
    pinned_blocks[(uintptr_t)m] = pinned_block{(char *)m, mapped};
    *ptr = m;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags)
{
    (void)flags;
    return cudaMallocHost(ptr, bytes);
}

cudaError_t cudaFreeHost(void *ptr)
{
    WAITING_API("cudaFreeHost");
    return free_block("cudaFreeHost", "cudaMallocHost", cudaErrorInvalidValue, pinned_blocks,
                      ptr, [](pinned_block &b) { munmap(b.base, b.bytes); });
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr)
{
    API("cudaPointerGetAttributes");
    memset(attr, 0, sizeof *attr);
    const device_block *d = device_block_at(ptr);
    if (d && (const char *)ptr >= d->a.base) {
        attr->type = cudaMemoryTypeDevice;
        attr->devicePointer = const_cast<void *>(ptr);
    } else if (pinned_at(ptr)) {
        attr->type = cudaMemoryTypeHost;
        attr->hostPointer = attr->devicePointer = const_cast<void *>(ptr);
    } else {
        attr->type = cudaMemoryTypeUnregistered;
        attr->hostPointer = const_cast<void *>(ptr);
    }
    return cudaSuccess;
}

/* Where a copy's end points live. */
enum class place { device, pinned, pageable };

static place place_of(const void *p)
{
    if (device_block_at(p))
        return place::device;
    return pinned_at(p) ? place::pinned : place::pageable;
}

static const char *place_name(place p)
{
    return p == place::device ? "device" : p == place::pinned ? "pinned host" : "pageable host";
}

/* A copy's kind in the counting mode's line: HtoD, DtoH, DtoD or HtoH. */
static const char *copy_kind(place to, place from)
{
    static const char *const kinds[2][2] = {{"HtoH", "HtoD"}, {"DtoH", "DtoD"}};
    return kinds[from == place::device][to == place::device];
}

static void count_copy(size_t bytes, const char *kind)
{
    count_record("memcpy", "\"bytes\":" + std::to_string(bytes) + ",\"kind\":\"" + kind + "\"");
}

static cudaError_t check_device_range(const char *call, const void *p, size_t bytes)
{
    if (find_allocation(p, bytes))
        return cudaSuccess;
    const device_block *d = device_block_at(p);
    if (!d)
        return refuse(cudaErrorInvalidValue, "%s: %p is not device memory", call, p);
    return refuse(cudaErrorInvalidValue, "%s: %zu bytes at byte %zd of device allocation #%u "
                  "run past its %zu bytes", call, bytes, (ssize_t)((const char *)p - d->a.base),
                  d->a.id, d->a.bytes);
}

static cudaError_t check_kind(const char *call, enum cudaMemcpyKind kind, place dst, place src)
{
    bool ok;
    switch (kind) {
    case cudaMemcpyHostToDevice: ok = dst == place::device && src != place::device; break;
    case cudaMemcpyDeviceToHost: ok = dst != place::device && src == place::device; break;
    case cudaMemcpyDeviceToDevice: ok = dst == place::device && src == place::device; break;
    case cudaMemcpyDefault: ok = dst == place::device || src == place::device; break;
    default: ok = false;
    }
    if (ok)
        return cudaSuccess;
    return refuse(cudaErrorInvalidValue, "%s: kind %d copies %s memory to %s memory, which it "
                  "does not describe", call, (int)kind, place_name(src), place_name(dst));
}

/* The state of the live stream `stream` names (null: the default one), into *s; else
 * call's refusal. */
static cudaError_t live_stream(cudaStream_t stream, const char *call, stream_state **s)
{
    *s = stream_of(stream);
    return *s ? cudaSuccess : not_live(call, stream, "a stream");
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    API("cudaMemcpyAsync");
    stream_state *st;
    if (cudaError_t e = live_stream(stream, "cudaMemcpyAsync", &st))
        return e;
    if (bytes == 0)
        return cudaSuccess;
    const place to = place_of(dst), from = place_of(src);
    cudaError_t e = check_kind("cudaMemcpyAsync", kind, to, from);
    if (e == cudaSuccess && to == place::device)
        e = check_device_range("cudaMemcpyAsync (destination)", dst, bytes);
    if (e == cudaSuccess && from == place::device)
        e = check_device_range("cudaMemcpyAsync (source)", src, bytes);
    if (e == cudaSuccess && (from == place::pageable || to == place::pageable))
        e = refuse_on_capturing(st, cudaErrorStreamCaptureUnsupported, "cudaMemcpyAsync",
                                "a copy with pageable host memory cannot be captured");
    if (e == cudaSuccess && (from == place::pinned || to == place::pinned))
        e = refuse_on_capturing(st, cudaErrorNotSupported, "cudaMemcpyAsync", "the emulator "
                                "does not capture copies with pinned memory (CUDA does)");
    if (e != cudaSuccess)
        return e;
    char by[128];
    snprintf(by, sizeof by, "a cudaMemcpyAsync of %zu bytes on stream %u", bytes, st->id);
    op o;
    o.what = "cudaMemcpyAsync";
    if (from == place::pageable) {
        /* staged now: the caller may reuse its buffer once the call returns */
        auto staged = std::make_shared<std::vector<char>>((const char *)src,
                                                          (const char *)src + bytes);
        o.run = [dst, staged] { memcpy(dst, staged->data(), staged->size()); };
    } else {
        o.run = [dst, src, bytes] { memmove(dst, src, bytes); };
    }
    if (to == place::device && from == place::device)
        o.run = [copy = std::move(o.run), dst, src, bytes] {   /* unwritten stays unwritten */
            copy();
            memmove(shadow_of(dst), shadow_of(src), bytes);
        };
    else if (to == place::device)
        o.run = [copy = std::move(o.run), dst, bytes] {
            copy();
            mark_device_written(dst, bytes);
        };
    if (counting)
        o.run = [copy = std::move(o.run), bytes, what = copy_kind(to, from)] {
            copy();
            count_copy(bytes, what);
        };
    if (from == place::pinned || to == place::pinned) {
        const uint64_t src_hold = from == place::pinned ? hold_pinned(src, bytes, false, by) : 0;
        const uint64_t dst_hold = to == place::pinned ? hold_pinned(dst, bytes, true, by) : 0;
        o.run = [copy = std::move(o.run), src_hold, dst_hold] {
            copy();
            release_pinned(src_hold);
            release_pinned(dst_hold);
        };
    }
    uint64_t seq = push(st, std::move(o));
    if (to == place::pageable) {
        note_host_call("cudaMemcpyAsync into pageable memory");
        complete_stream(st, seq);   /* into pageable memory: done when the call returns */
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    WAITING_API("cudaMemcpy");
    if (cudaError_t e = refuse_while_capturing("cudaMemcpy"))
        return e;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
    if (e == cudaSuccess)
        complete_stream(&default_stream, default_stream.next_seq - 1);
    return e;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream)
{
    API("cudaMemsetAsync");
    stream_state *st;
    if (cudaError_t e = live_stream(stream, "cudaMemsetAsync", &st))
        return e;
    if (bytes == 0)
        return cudaSuccess;
    cudaError_t e = check_device_range("cudaMemsetAsync", ptr, bytes);
    if (e != cudaSuccess)
        return e;
    op o;
    o.what = "cudaMemsetAsync";
    o.run = [ptr, value, bytes] {
        memset(ptr, value, bytes);
        mark_device_written(ptr, bytes);
        if (counting)
            count_copy(bytes, "memset");
    };
    push(st, std::move(o));
    return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t bytes)
{
    WAITING_API("cudaMemset");
    if (cudaError_t e = refuse_while_capturing("cudaMemset"))
        return e;
    cudaError_t e = cudaMemsetAsync(ptr, value, bytes, nullptr);
    if (e == cudaSuccess)
        complete_stream(&default_stream, default_stream.next_seq - 1);
    return e;
}

/* ---- streams ----------------------------------------------------------------------- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    API("cudaStreamCreateWithFlags");
    (void)flags;
    stream_state *s = new stream_state;
    s->id = next_stream_id++;
    return hand_out(streams, s, stream);
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    API("cudaStreamDestroy");
    stream_state *s = stream_of(stream);
    if (!s || s == &default_stream)
        return not_live("cudaStreamDestroy", stream, "a stream");
    complete_stream(s, s->next_seq - 1);   /* its work still runs, as on a GPU */
    streams.erase(s);
    delete s;
    return cudaSuccess;
}

/* The live, uncaptured stream `call` waits for or queries, into *s; else its refusal. */
static cudaError_t stream_to_wait_for(cudaStream_t stream, const char *call, stream_state **s)
{
    if (cudaError_t e = live_stream(stream, call, s))
        return e;
    return refuse_on_capturing(*s, cudaErrorStreamCaptureUnsupported, call,
                               "its work is not run");
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    WAITING_API("cudaStreamSynchronize");
    stream_state *s = nullptr;
    if (cudaError_t e = stream_to_wait_for(stream, "cudaStreamSynchronize", &s))
        return e;
    complete_stream(s, s->next_seq - 1);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    API("cudaStreamQuery");
    stream_state *s = nullptr;
    if (cudaError_t e = stream_to_wait_for(stream, "cudaStreamQuery", &s))
        return e;
    if (s->queue.empty())
        return cudaSuccess;
    return not_ready(s, s->next_seq - 1);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    API("cudaStreamWaitEvent");
    (void)flags;
    stream_state *s = stream_of(stream);
    event_state *ev = event_of(event);
    if (!s || !ev)
        return refuse(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent(%p, %p): unknown "
                      "%s", (void *)stream, (void *)event, s ? "event" : "stream");
    if (captured_events.count(ev) || capture_of(s))
        return wait_across_capture(s, ev);
    if (!ev->last || ev->last->done)
        return cudaSuccess;   /* nothing recorded, or already complete */
    op o;
    o.what = "cudaStreamWaitEvent";
    o.awaits = ev->last;      /* the record as of now: a later record does not matter */
    push(s, std::move(o));
    return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *data)
{
    API("cudaLaunchHostFunc");
    stream_state *s;
    if (cudaError_t e = live_stream(stream, "cudaLaunchHostFunc", &s))
        return e;
    op o;
    o.what = "a host function (cudaLaunchHostFunc)";
    o.run = [fn, data] { fn(data); };
    o.host = true;
    push(s, std::move(o));
    return cudaSuccess;
}

/* ---- events ------------------------------------------------------------------------ */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    API("cudaEventCreateWithFlags");
    static unsigned next_event_id = 1;
    return hand_out(events, new event_state{nullptr, flags, next_event_id++}, event);
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    API("cudaEventDestroy");
    event_state *e = event_of(event);
    if (!e)
        return not_live("cudaEventDestroy", event, "an event");
    events.erase(e);   /* its pending record stays in its stream (shared) */
    captured_events.erase(e);
    delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    API("cudaEventRecord");
    event_state *e = event_of(event);
    stream_state *s = stream_of(stream);
    if (!e || !s)
        return refuse(cudaErrorInvalidResourceHandle, "cudaEventRecord(%p, %p): unknown %s",
                      (void *)event, (void *)stream, e ? "stream" : "event");
    if (capture_of(s)) {
        captured_events[e] = s;   /* a point of the capture, not of the stream's queue */
        return cudaSuccess;
    }
    captured_events.erase(e);
    auto r = std::make_shared<record>();
    r->stream = s;
    r->event = e->id;
    op o;
    o.what = "cudaEventRecord";
    o.records = r;
    r->seq = push(s, std::move(o));
    e->last = r;
    return cudaSuccess;
}

/* The live event `call` waits for or queries, recorded outside a capture, into *e; else
 * its refusal. */
static cudaError_t event_to_wait_for(cudaEvent_t event, const char *call, event_state **e)
{
    *e = event_of(event);
    if (!*e)
        return not_live(call, event, "an event");
    if (captured_events.count(*e))
        return refuse_captured_event(call, *e);
    return cudaSuccess;
}

/* cudaEventQuery's answer while another thread runs an operation that waits on other
 * processes (waiting_on_peers): the event's state as it stands, without progress. false
 * when no operation is parked (the caller waits for state_lock). */
static bool query_while_parked(cudaEvent_t event, cudaError_t *answer)
{
    std::lock_guard<std::mutex> hold(park_lock);
    if (!parked)
        return false;
    event_state *e = nullptr;
    *answer = event_to_wait_for(event, "cudaEventQuery", &e);
    if (*answer == cudaSuccess && e->last && !e->last->done)
        *answer = cudaErrorNotReady;
    return true;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    api_entry("cudaEventQuery");
    /* polled rather than waited for: the thread holding it may park meanwhile */
    std::unique_lock<std::recursive_mutex> hold(state_lock, std::defer_lock);
    for (cudaError_t answer; !hold.try_lock(); usleep(200))
        if (query_while_parked(event, &answer))
            return answer;
    event_state *e = nullptr;
    if (cudaError_t err = event_to_wait_for(event, "cudaEventQuery", &e))
        return err;
    if (!e->last || e->last->done)
        return cudaSuccess;
    return not_ready(e->last->stream, e->last->seq);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    WAITING_API("cudaEventSynchronize");
    event_state *e = nullptr;
    if (cudaError_t err = event_to_wait_for(event, "cudaEventSynchronize", &e))
        return err;
    if (e->last && !e->last->done)
        complete_stream(e->last->stream, e->last->seq);
    return cudaSuccess;
}

/* ---- graphs: stream capture ------------------------------------------------------------ */

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    API("cudaStreamBeginCapture");
    stream_state *s;
    if (cudaError_t e = live_stream(stream, "cudaStreamBeginCapture", &s))
        return e;
    if (s == &default_stream)
        return refuse(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture: the legacy "
                      "default stream cannot be captured; capture a stream of your own");
    if (capture_of(s))
        return refuse(cudaErrorIllegalState, "cudaStreamBeginCapture: stream %u is already "
                      "being captured", s->id);
    graph_state *g = new graph_state;
    captures[s] = capture_state{g, mode, std::this_thread::get_id(), ""};
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    API("cudaStreamEndCapture");
    stream_state *s = stream_of(stream);
    capture_state *c = s ? capture_of(s) : nullptr;
    *graph = nullptr;
    if (!c)
        return refuse(cudaErrorStreamCaptureUnmatched, "cudaStreamEndCapture(%p): the stream "
                      "is not being captured", (void *)stream);
    if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
        return refuse(cudaErrorStreamCaptureWrongThread, "cudaStreamEndCapture: stream %u's "
                      "capture was begun on another thread", s->id);
    capture_state ended = *c;
    captures.erase(s);
    if (!ended.broken_by.empty()) {
        delete ended.graph;
        return refuse(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture: stream %u's "
                      "capture was invalidated by %s", s->id, ended.broken_by.c_str());
    }
    graphs.insert(ended.graph);
    *graph = reinterpret_cast<cudaGraph_t>(ended.graph);
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
    API("cudaStreamIsCapturing");
    stream_state *s;
    if (cudaError_t e = live_stream(stream, "cudaStreamIsCapturing", &s))
        return e;
    capture_state *c = capture_of(s);
    *status = !c ? cudaStreamCaptureStatusNone
                 : c->broken_by.empty() ? cudaStreamCaptureStatusActive
                                        : cudaStreamCaptureStatusInvalidated;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags)
{
    API("cudaGraphInstantiate");
    (void)flags;
    graph_state *g = reinterpret_cast<graph_state *>(graph);
    *exec = nullptr;
    if (!graphs.count(g))
        return refuse(cudaErrorInvalidValue, "cudaGraphInstantiate(%p): not a graph",
                      (void *)graph);
    graph_state *x = new graph_state(*g);
    graph_execs.insert(x);
    *exec = reinterpret_cast<cudaGraphExec_t>(x);
    return cudaSuccess;
}

/* Queues a copy of each recorded operation, in the recorded order. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    API("cudaGraphLaunch");
    graph_state *x = reinterpret_cast<graph_state *>(exec);
    stream_state *s = stream_of(stream);
    if (!graph_execs.count(x) || !s)
        return refuse(cudaErrorInvalidResourceHandle, "cudaGraphLaunch(%p, %p): unknown %s",
                      (void *)exec, (void *)stream, s ? "executable graph" : "stream");
    for (const op &o : x->ops)
        push(s, o);
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    API("cudaGraphExecDestroy");
    graph_state *x = reinterpret_cast<graph_state *>(exec);
    if (!graph_execs.erase(x))
        return refuse(cudaErrorInvalidValue, "cudaGraphExecDestroy(%p): not an executable "
                      "graph", (void *)exec);
    delete x;   /* launched copies stay queued */
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    API("cudaGraphDestroy");
    graph_state *g = reinterpret_cast<graph_state *>(graph);
    if (!graphs.erase(g))
        return refuse(cudaErrorInvalidValue, "cudaGraphDestroy(%p): not a graph",
                      (void *)graph);
    delete g;
    return cudaSuccess;
}

}  // extern "C"
