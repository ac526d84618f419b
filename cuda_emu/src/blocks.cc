/* The thread-block executor. A kernel's blocks are shared out among host threads; within a
 * block, each CUDA thread is a fiber (Boost.Context's fcontext: a bare register switch).
 * A fiber gets a stack when it first runs and keeps it only while it is suspended at a
 * barrier or a warp collective, so a block whose threads never wait runs them one after
 * the other on one recycled stack.
 *
 * Barriers and warp collectives are real rendezvous: a thread that arrives suspends, and
 * the last to arrive releases the others. The order in which runnable threads are resumed
 * is GEARBOX_CUDA_EMU_ORDER's: in-order, reversed, or random (seeded per launch and block
 * from GEARBOX_CUDA_EMU_SEED), so a result that depends on it reveals a race.
 *
 * What CUDA leaves undefined is a violation here, reported with the kernel, the block, the
 * thread and the .cu line: threads of a block at different __syncthreads calls, a thread
 * that exits while others wait at (or will reach) a barrier, a warp collective whose lanes
 * disagree on the call, the mask or the width, a mask without the caller, overlapping
 * masks, shared memory above the launch's limit, a WMMA load of shared memory that an
 * asynchronous copy (cp.async) is still filling, a thread that exits with copies it never
 * waited for; wgmma's (a product with no fence since the thread's last wait, shared
 * operands written before the product's retirement, a wait with products not committed, a
 * thread that exits with one unretired, warps of a warpgroup that issue different
 * products). And, for each load and store of the instrumented kernel code
 * (checked_access), an access outside the block's shared objects, a read of shared memory
 * never written, or still filled by a cp.async, or written by another thread with no
 * barrier or __syncwarp of both lanes since.
 */
#include "blocks.h"

#include <boost/context/detail/fcontext.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "counters.h"
#include "emu.h"
#include "resources.h"

namespace ctx = boost::context::detail;

namespace gb_emu {

namespace {

/* ---- settings ---------------------------------------------------------------------- */

enum class resume_order { in_order, reversed, random };

resume_order order_setting()
{
    static const resume_order order = [] {
        const char *s = getenv("GEARBOX_CUDA_EMU_ORDER");
        if (!s || !*s || strcmp(s, "in-order") == 0)
            return resume_order::in_order;
        if (strcmp(s, "reversed") == 0)
            return resume_order::reversed;
        if (strcmp(s, "random") == 0)
            return resume_order::random;
        fprintf(stderr, "gearbox cuda emulator: GEARBOX_CUDA_EMU_ORDER=%s is not in-order, "
                "reversed or random\n", s);
        exit(2);
    }();
    return order;
}

/* splitmix64: a small, good mixer for seeds and scrambles. */
uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* ---- fiber stacks ------------------------------------------------------------------ */

constexpr size_t STACK_BYTES = 256u << 10;

/* Stacks with a guard page below, recycled per host thread. */
struct stack_pool {
    std::vector<char *> free_stacks;

    char *take()
    {
        if (!free_stacks.empty()) {
            char *s = free_stacks.back();
            free_stacks.pop_back();
            return s;
        }
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        void *m = mmap(nullptr, STACK_BYTES + page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            violation("cannot map a %zu-byte fiber stack: %s", STACK_BYTES, strerror(errno));
        mprotect(m, page, PROT_NONE);
        remember_guard((char *)m, page, "stack overflow (each emulated CUDA thread has 256 "
                       "KiB)");
        return (char *)m + page;
    }

    void give(char *s) { free_stacks.push_back(s); }

    static void remember_guard(char *guard, size_t bytes, const char *meaning);
};

/* A guard page: where it is and what an access to it means. */
struct guard_page {
    char *at;
    size_t bytes;
    const char *meaning;
};
std::mutex guards_lock;
std::vector<guard_page> guards;

void stack_pool::remember_guard(char *guard, size_t bytes, const char *meaning)
{
    std::lock_guard<std::mutex> hold(guards_lock);
    guards.push_back(guard_page{guard, bytes, meaning});
}

thread_local stack_pool stacks;

/* ---- a block in execution ---------------------------------------------------------- */

enum class lane_state { fresh, ready, at_barrier, at_warp, done };

/* One __pipeline_memcpy_async: `bytes` into shared memory at `offset` from the block's
 * base, the last `zfill` of them zeros, the rest from `src`. */
struct async_copy {
    size_t offset, bytes, zfill;
    const void *src;
    const char *file;
    int line;
};

/* One wgmma.mma_async of a thread, issued and not yet retired: the accumulators it writes
 * and their values; for the warp's lane 0, the shared bytes it read, [operands_at, +n). */
struct wgmma_result {
    float *d;
    std::vector<float> values;
    const void *operands_at;
    std::vector<unsigned char> operands;
    const char *file;
    int line;
};

/* What a warp issued of wgmma, for its warpgroup's check. */
struct warpgroup_issue {
    warpgroup_key key;
    const char *file;
    int line;
};

struct lane {
    thread_view view;
    int index = 0;                 /* linear thread index in the block */
    lane_state state = lane_state::fresh;
    ctx::fcontext_t fiber = nullptr;
    char *stack = nullptr;
    unsigned barriers = 0;         /* __syncthreads passed */
    const char *file = nullptr;    /* where it waits */
    int line = 0;
    uint64_t bits = 0, result = 0; /* a shuffle's value and answer */
    int arg = 0;
    void *mine = nullptr;          /* a collective's per-lane data */
    std::vector<async_copy> copies_open;              /* issued, not yet committed */
    std::deque<std::vector<async_copy>> copy_groups;  /* committed, not yet waited for */
    bool wgmma_fenced = false;                        /* wgmma.fence since the last wait */
    std::vector<wgmma_result> wgmma_open;             /* issued, not yet committed */
    std::deque<std::vector<wgmma_result>> wgmma_groups;   /* committed, not yet retired */
};

enum class warp_op { shuffle_idx, shuffle_up, shuffle_down, shuffle_xor, syncwarp, collective };

const char *op_name(warp_op op)
{
    switch (op) {
    case warp_op::shuffle_idx: return "__shfl_sync";
    case warp_op::shuffle_up: return "__shfl_up_sync";
    case warp_op::shuffle_down: return "__shfl_down_sync";
    case warp_op::shuffle_xor: return "__shfl_xor_sync";
    case warp_op::syncwarp: return "__syncwarp";
    case warp_op::collective: return "a WMMA call";
    }
    return "?";
}

/* One warp-level rendezvous in progress: the lanes of `mask` meet at one call. */
struct rendezvous {
    bool open = false;
    warp_op op = warp_op::syncwarp;
    const char *what = nullptr;   /* collectives: the call's name */
    const char *file = nullptr;
    int line = 0;
    unsigned mask = 0, arrived = 0;
    int width = 32;
    uint64_t poison = 0;
    collective_key key{};
    const std::function<void(void *const *)> *action = nullptr;
};

const char *call_name(const rendezvous &g)
{
    return g.op == warp_op::collective && g.what ? g.what : op_name(g.op);
}

constexpr int MAX_GROUPS = 32;   /* disjoint masks: at most one per lane */

/* A __syncwarp of some of a warp's lanes: its serial and mask. */
struct partial_sync {
    uint32_t serial, mask;
};

struct warp {
    rendezvous groups[MAX_GROUPS];
    uint32_t open = 0;   /* bit g: groups[g] is open */
    uint32_t busy = 0;   /* the union of the open groups' masks */
    uint32_t full_serial = 0;              /* the last __syncwarp of all its lanes */
    std::vector<partial_sync> partials;    /* those of fewer lanes since then */
};

/* Calls fn(g) for each open group of the warp. */
template <class F> void each_open(warp &wp, F fn)
{
    for (uint32_t o = wp.open; o; o &= o - 1)
        fn(wp.groups[__builtin_ctz(o)]);
}

/* A __shared__ object of the block: where it lies in the shared area, and where it was
 * declared (for reports). */
struct static_slot {
    const void *site;
    size_t offset, bytes;
    const char *file;
    int line;
};

/* The shared memory of the blocks one host thread runs: one mapping, a guard page at each
 * end, laid out per block as
 *   [slack][static objects, a red zone after each][...][dynamic shared memory][slack]
 * with the dynamic bytes (the launch's count, exactly) ending SHARED_SLACK bytes (plus
 * their alignment) below the upper guard. Every byte has a shadow word, checked by the
 * instrumented kernel code at each access (shared_access): SHADOW_OUT for bytes that are
 * no object's, SHADOW_UNWRITTEN, SHADOW_PENDING while a cp.async fills them (the issuing
 * thread in the lane bits), SHADOW_WRITTEN with the writing thread and the block's sync
 * serial at the write. */
constexpr size_t SHARED_AREA = 256u << 10;   /* 227 KiB of objects, red zones, slack */
constexpr size_t SHARED_SLACK = 256;
constexpr size_t RED_ZONE = 64;
constexpr uint32_t SHADOW_OUT = 0, SHADOW_UNWRITTEN = 1u << 30, SHADOW_PENDING = 2u << 30,
                   SHADOW_WRITTEN = 3u << 30, SHADOW_STATE = 3u << 30;
constexpr int SHADOW_LANE_SHIFT = 20;
constexpr uint32_t SHADOW_SERIAL = (1u << SHADOW_LANE_SHIFT) - 1;

uint32_t shadow_word(uint32_t state, int lane_index, uint32_t serial)
{
    return state | (uint32_t)lane_index << SHADOW_LANE_SHIFT | (serial & SHADOW_SERIAL);
}

int shadow_lane(uint32_t w)
{
    return (int)(w >> SHADOW_LANE_SHIFT & 0x3ff);
}

struct shared_area {
    char *base = nullptr;       /* the first byte after the lower guard page */
    uint32_t *shadow = nullptr; /* one word per byte of the area */
    size_t static_end = SHARED_SLACK;   /* the current block's static objects end here */
    size_t dynamic_offset = SHARED_AREA;   /* and its dynamic shared memory starts here */
};

struct block {
    const kernel_run *run = nullptr;
    uint3 index{};
    std::vector<lane> lanes;
    std::vector<warp> warps;
    std::deque<int> ready;         /* runnable lanes, in the order they became runnable */
    uint64_t random_state = 0;
    ctx::fcontext_t scheduler = nullptr;
    lane *running = nullptr;
    int live = 0;                  /* lanes not done */
    int at_barrier = 0;
    const char *barrier_file = nullptr;
    int barrier_line = 0;
    unsigned exited_after = ~0u;   /* fewest barriers any exited lane passed */
    int exited_lane = -1;
    shared_area *area = nullptr;   /* the host thread's */
    size_t static_bytes = 0;       /* the static objects as CUDA counts them (aligned) */
    std::vector<static_slot> statics;
    /* Publication of writes: every __syncthreads and completed __syncwarp takes the next
     * serial; a write carries the serial current when it was made, and another thread may
     * read it once a barrier, or a __syncwarp of both lanes, has a later serial. */
    uint32_t serial = 0, barrier_serial = 0;
    bool in_collective = false;    /* a WMMA action runs on the last lane's behalf */
    std::vector<std::vector<warpgroup_issue>> wgmma_issued;   /* per warp, in order */
};

/* initial-exec: every instrumented access reads it */
__attribute__((tls_model("initial-exec"))) thread_local block *current_block = nullptr;

/* ---- reports ----------------------------------------------------------------------- */

std::string thread_name(const block &b, const lane &l)
{
    char buf[256];
    const kernel_run &r = *b.run;
    snprintf(buf, sizeof buf, "kernel %s (launched at %s:%d), block (%u,%u,%u), thread (%u,%u,%u)",
             r.site.kernel, r.site.file, r.site.line, b.index.x, b.index.y, b.index.z,
             l.view.thread_idx.x, l.view.thread_idx.y, l.view.thread_idx.z);
    return buf;
}

std::string tid(const lane &l)
{
    char buf[64];
    snprintf(buf, sizeof buf, "(%u,%u,%u)", l.view.thread_idx.x, l.view.thread_idx.y,
             l.view.thread_idx.z);
    return buf;
}

/* Where a check was called from: a .cu file and line, or (an instrumented access) the
 * return address into the kernel's code, turned into a file and line only for a report. */
struct site {
    const char *file;
    int line;
    const void *pc;
};

[[noreturn]] void vfail(site at, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (!at.file)
        access_site(at.pc, &at.file, &at.line);
    block &b = *current_block;
    violation("%s:%d: %s: %s", at.file, at.line, thread_name(b, *b.running).c_str(), msg);
}

[[noreturn]] __attribute__((format(printf, 2, 3))) void fail_site(site at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(at, fmt, ap);
}

[[noreturn]] __attribute__((format(printf, 3, 4))) void fail_at(const char *file, int line,
                                                                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(site{file, line, nullptr}, fmt, ap);
}

block &this_block(const char *what)
{
    if (!current_block || !current_block->running)
        violation("%s called outside a kernel", what);
    return *current_block;
}

/* ---- scheduling -------------------------------------------------------------------- */

void make_ready(block &b, lane &l)
{
    l.state = lane_state::ready;
    b.ready.push_back(l.index);
}

int take_ready(block &b)
{
    int index;
    switch (order_setting()) {
    case resume_order::in_order:
        index = b.ready.front();
        b.ready.pop_front();
        return index;
    case resume_order::reversed:
        index = b.ready.back();
        b.ready.pop_back();
        return index;
    case resume_order::random:
        break;
    }
    b.random_state = mix(b.random_state);
    const size_t pick = (size_t)(b.random_state % b.ready.size());
    index = b.ready[pick];
    b.ready[pick] = b.ready.back();
    b.ready.pop_back();
    return index;
}

/* Back to the scheduler until this lane is made ready again. */
void suspend(block &b)
{
    ctx::transfer_t t = ctx::jump_fcontext(b.scheduler, nullptr);
    b.scheduler = t.fctx;
}

/* A copy the lane issued and has not waited for (empty groups aside), or null. */
const async_copy *unwaited_copy(const lane &l)
{
    if (!l.copies_open.empty())
        return &l.copies_open.front();
    for (const std::vector<async_copy> &group : l.copy_groups)
        if (!group.empty())
            return &group.front();
    return nullptr;
}

/* A wgmma the lane issued and has not retired, or null. */
const wgmma_result *unretired_wgmma(const lane &l)
{
    if (!l.wgmma_open.empty())
        return &l.wgmma_open.front();
    for (const std::vector<wgmma_result> &group : l.wgmma_groups)
        if (!group.empty())
            return &group.front();
    return nullptr;
}

void lane_main(ctx::transfer_t t)
{
    block &b = *static_cast<block *>(t.data);
    b.scheduler = t.fctx;
    b.run->thread_body();
    lane &l = *b.running;
    if (b.at_barrier > 0)
        fail_at(b.barrier_file, b.barrier_line, "thread %s exited without reaching this "
                "__syncthreads, which other threads of its block wait at (every thread "
                "that has not exited must reach the same barrier)", tid(l).c_str());
    if (const async_copy *c = unwaited_copy(l))
        fail_at(c->file, c->line, "thread %s exited with asynchronous copies it never waited "
                "for, this one among them (__pipeline_commit and __pipeline_wait_prior(0) "
                "before the thread ends)", tid(l).c_str());
    if (const wgmma_result *r = unretired_wgmma(l))
        fail_at(r->file, r->line, "thread %s exited with a wgmma.mma_async never retired, "
                "this one (wgmma.commit_group and wgmma.wait_group 0 before the thread ends)",
                tid(l).c_str());
    warp &wp = b.warps[(size_t)(l.index / 32)];
    if (wp.busy >> (l.index % 32) & 1)
        each_open(wp, [&](const rendezvous &g) {
            if (g.mask >> (l.index % 32) & 1)
                fail_at(g.file, g.line, "lane %d (thread %s) exited without reaching this %s, "
                        "whose mask 0x%08x names it", l.index % 32, tid(l).c_str(),
                        call_name(g), g.mask);
        });
    l.state = lane_state::done;
    b.live--;
    if (l.barriers < b.exited_after) {
        b.exited_after = l.barriers;
        b.exited_lane = l.index;
    }
    ctx::jump_fcontext(b.scheduler, nullptr);
}

[[noreturn]] void report_deadlock(block &b);

void run_lane(block &b, lane &l)
{
    if (l.state == lane_state::fresh) {
        l.stack = stacks.take();
        l.fiber = ctx::make_fcontext(l.stack + STACK_BYTES, STACK_BYTES, lane_main);
    }
    l.state = lane_state::ready;
    b.running = &l;
    ctx::transfer_t t = ctx::jump_fcontext(l.fiber, &b);
    b.running = nullptr;
    if (l.state == lane_state::done) {
        stacks.give(l.stack);
        l.stack = nullptr;
    } else {
        l.fiber = t.fctx;
    }
}

/* Every warp of a warpgroup issued as many wgmma as its siblings (each one compared as it
 * was issued: wgmma_warp_issued). */
void check_warpgroups_agree(block &b)
{
    const std::vector<std::vector<warpgroup_issue>> &seen = b.wgmma_issued;
    for (size_t w = 0; w < seen.size(); w++) {
        size_t most = w / 4 * 4;
        for (size_t s = most; s < most + 4 && s < seen.size(); s++)
            if (seen[s].size() > seen[most].size())
                most = s;
        if (seen[w].size() == seen[most].size())
            continue;
        const warpgroup_issue &missed = seen[most][seen[w].size()];
        fail_at(missed.file, missed.line, "warp %zu of the block issued %zu wgmma.mma_async "
                "and warp %zu of its warpgroup %zu, this one the first it lacks: the four "
                "warps of a warpgroup issue every wgmma together (.sync.aligned)", w,
                seen[w].size(), most, seen[most].size());
    }
}

void run_block(block &b)
{
    while (b.live > 0) {
        if (b.ready.empty())
            report_deadlock(b);
        run_lane(b, b.lanes[(size_t)take_ready(b)]);
    }
    check_warpgroups_agree(b);
}

/* ---- barriers ------------------------------------------------------------------------ */

/* The serial of the next synchronization of the block. */
uint32_t next_serial(block &b)
{
    return ++b.serial;
}

/* Sets the shadow of `bytes` of the area at `offset`. */
void mark_shadow(block &b, size_t offset, size_t bytes, uint32_t word)
{
    std::fill(b.area->shadow + offset, b.area->shadow + offset + bytes, word);
}

void release_barrier(block &b)
{
    b.barrier_serial = next_serial(b);
    if (counting)
        count_barrier();
    for (warp &wp : b.warps)
        wp.partials.clear();
    for (lane &l : b.lanes)
        if (l.state == lane_state::at_barrier) {
            l.barriers++;
            make_ready(b, l);
        }
    b.at_barrier = 0;
}

/* ---- warp rendezvous --------------------------------------------------------------- */

/* The lanes of warp w that exist (a block's last warp may be partial). */
unsigned existing_lanes(const block &b, int w)
{
    int n = (int)b.lanes.size() - 32 * w;
    return n >= 32 ? 0xffffffffu : (1u << n) - 1;
}

rendezvous &join_group(block &b, lane &l, warp_op op, const char *file, int line,
                       unsigned mask, int width)
{
    const int me = l.index % 32, w = l.index / 32;
    if (!(mask >> me & 1))
        fail_at(file, line, "%s with mask 0x%08x, which does not name the calling lane %d",
                op_name(op), mask, me);
    if (mask & ~existing_lanes(b, w))
        fail_at(file, line, "%s with mask 0x%08x names lanes that do not exist in this block "
                "of %zu threads", op_name(op), mask, b.lanes.size());
    if (width < 1 || width > 32 || (width & (width - 1)))
        fail_at(file, line, "%s with width %d: it must be 1, 2, 4, 8, 16 or 32", op_name(op), width);
    warp &wp = b.warps[(size_t)w];
    rendezvous *mine = nullptr;
    if (wp.busy & mask)
        each_open(wp, [&](rendezvous &g) {
            if (g.mask >> me & 1)
                mine = &g;
            else if (g.mask & mask)
                fail_at(file, line, "%s with mask 0x%08x overlaps the mask 0x%08x of the %s at "
                        "%s:%d that other lanes of the warp wait at", op_name(op), mask, g.mask,
                        call_name(g), g.file, g.line);
        });
    if (mine) {
        if (mine->op != op || mine->file != file || mine->line != line)
            fail_at(file, line, "lane %d arrives at %s while lanes 0x%08x of its mask wait at "
                    "the %s at %s:%d: every lane of a mask must reach the same call", me,
                    op_name(op), mine->arrived, call_name(*mine), mine->file, mine->line);
        if (mine->mask != mask || mine->width != width)
            fail_at(file, line, "lane %d calls %s with mask 0x%08x, width %d, while lanes "
                    "0x%08x called it with mask 0x%08x, width %d", me, op_name(op), mask, width,
                    mine->arrived, mine->mask, mine->width);
        return *mine;
    }
    const int slot = __builtin_ctz(~wp.open);   /* disjoint masks: never more than 32 */
    rendezvous &g = wp.groups[slot];
    g = rendezvous{};
    g.open = true;
    g.op = op;
    g.file = file;
    g.line = line;
    g.mask = mask;
    g.width = width;
    wp.open |= 1u << slot;
    wp.busy |= mask;
    return g;
}

/* The lane whose value lane `me` reads, or -1 when it reads its own. */
int shuffle_source(warp_op op, int me, int arg, int width)
{
    const int base = me & ~(width - 1), offset = me - base;
    switch (op) {
    case warp_op::shuffle_idx: return base + ((arg % width) + width) % width;
    case warp_op::shuffle_up: return offset - arg >= 0 ? me - arg : -1;
    case warp_op::shuffle_down: return offset + arg < width ? me + arg : -1;
    case warp_op::shuffle_xor: {
        int src = me ^ arg;
        return (src & ~(width - 1)) > base ? -1 : src;   // later groups: own value
    }
    default: return -1;
    }
}

void complete_shuffle(block &b, int w, rendezvous &g)
{
    if (counting)
        count_shuffle();
    for (int me = 0; me < 32; me++) {
        if (!(g.mask >> me & 1))
            continue;
        lane &l = b.lanes[(size_t)(32 * w + me)];
        int src = shuffle_source(g.op, me, l.arg, g.width);
        if (src < 0) {
            l.result = l.bits;
        } else if (g.mask >> src & 1) {
            l.result = b.lanes[(size_t)(32 * w + src)].bits;
        } else {
            l.result = g.poison;
            report("%s:%d: %s: %s with mask 0x%08x reads lane %d, which is not in the mask: "
                   "its value is undefined (the emulator returns NaN/0xdeadbeef)", g.file, g.line,
                   thread_name(b, l).c_str(), op_name(g.op), g.mask, src);
        }
    }
}

/* A completed __syncwarp publishes its lanes' writes to one another. */
void publish_in_warp(block &b, int w, unsigned mask)
{
    warp &wp = b.warps[(size_t)w];
    if (mask == existing_lanes(b, w)) {
        wp.full_serial = next_serial(b);
        wp.partials.clear();
    } else {
        wp.partials.push_back(partial_sync{next_serial(b), mask});
    }
}

/* Whether a write that thread `writer` made at `serial` is visible to thread `reader`: a
 * barrier, or a __syncwarp of both lanes, came after it. Past the serials the shadow can
 * hold, every write counts as visible. */
bool published(const block &b, int reader, int writer, uint32_t serial)
{
    if (b.serial > SHADOW_SERIAL || b.barrier_serial > serial)
        return true;
    if (reader / 32 != writer / 32)
        return false;
    const warp &wp = b.warps[(size_t)(reader / 32)];
    if (wp.full_serial > serial)
        return true;
    const unsigned both = 1u << (reader % 32) | 1u << (writer % 32);
    for (const partial_sync &p : wp.partials)
        if (p.serial > serial && (p.mask & both) == both)
            return true;
    return false;
}

void complete_group(block &b, int w, rendezvous &g)
{
    if (g.op == warp_op::collective) {
        void *lanes[32];
        for (int i = 0; i < 32; i++)
            lanes[i] = b.lanes[(size_t)(32 * w + i)].mine;
        b.in_collective = true;
        (*g.action)(lanes);
        b.in_collective = false;
    } else if (g.op != warp_op::syncwarp) {
        complete_shuffle(b, w, g);
    } else {
        publish_in_warp(b, w, g.mask);
    }
    for (int i = 0; i < 32; i++)
        if (g.mask >> i & 1)
            make_ready(b, b.lanes[(size_t)(32 * w + i)]);
    g.open = false;
    warp &wp = b.warps[(size_t)w];
    wp.open &= ~(1u << (&g - wp.groups));
    wp.busy &= ~g.mask;
}

/* Arrives at a rendezvous and returns once every lane of the mask has. */
void meet(block &b, lane &l, rendezvous &g)
{
    const int w = l.index / 32;
    g.arrived |= 1u << (l.index % 32);
    l.state = lane_state::at_warp;
    l.file = g.file;
    l.line = g.line;
    if (g.arrived == g.mask)
        complete_group(b, w, g);
    suspend(b);
}

warp_op op_of(shuffle_kind kind)
{
    switch (kind) {
    case SHFL_IDX: return warp_op::shuffle_idx;
    case SHFL_UP: return warp_op::shuffle_up;
    case SHFL_DOWN: return warp_op::shuffle_down;
    case SHFL_XOR: return warp_op::shuffle_xor;
    }
    return warp_op::shuffle_idx;
}

/* ---- deadlock ------------------------------------------------------------------------ */

[[noreturn]] void report_deadlock(block &b)
{
    for (size_t w = 0; w < b.warps.size(); w++)
        for (const rendezvous &g : b.warps[w].groups) {
            if (!g.open)
                continue;
            std::string missing;
            for (int i = 0; i < 32; i++) {
                if (!(g.mask >> i & 1) || (g.arrived >> i & 1))
                    continue;
                const lane &l = b.lanes[32 * w + (size_t)i];
                char buf[160];
                snprintf(buf, sizeof buf, "%slane %d %s", missing.empty() ? "" : ", ", i,
                         l.state == lane_state::done ? "has exited" : "waits elsewhere");
                if (l.state != lane_state::done && l.file)
                    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), " (%s:%d)", l.file,
                             l.line);
                missing += buf;
            }
            b.running = &b.lanes[32 * w + (size_t)__builtin_ctz(g.arrived)];
            fail_at(g.file, g.line, "%s with mask 0x%08x never completes: %s", call_name(g),
                    g.mask, missing.c_str());
        }
    for (lane &l : b.lanes)
        if (l.state == lane_state::at_barrier) {
            b.running = &l;
            fail_at(l.file, l.line, "__syncthreads never completes: %d of %d live threads "
                    "arrived", b.at_barrier, b.live);
        }
    violation("kernel %s: block (%u,%u,%u) stopped with no runnable thread", b.run->site.kernel,
              b.index.x, b.index.y, b.index.z);
}

/* ---- running a launch ---------------------------------------------------------------- */

/* This host thread's shared area, mapped on first use with a guard page at each end. */
shared_area *thread_area()
{
    static thread_local shared_area area;
    if (area.base)
        return &area;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *m = mmap(nullptr, SHARED_AREA + 2 * page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *w = mmap(nullptr, SHARED_AREA * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED || w == MAP_FAILED)
        violation("cannot map a block's shared memory: %s", strerror(errno));
    mprotect(m, page, PROT_NONE);
    mprotect((char *)m + page + SHARED_AREA, page, PROT_NONE);
    stack_pool::remember_guard((char *)m, page, "an access below the block's shared memory "
                               "(out of bounds)");
    stack_pool::remember_guard((char *)m + page + SHARED_AREA, page, "an access above the "
                               "block's shared memory (out of bounds)");
    area.base = (char *)m + page;
    area.shadow = (uint32_t *)w;   /* zero: SHADOW_OUT */
    return &area;
}

/* Gives the block the area with nothing in it but the launch's dynamic shared memory,
 * every byte 0xff (NaN) and unwritten. */
void setup_shared(block &b, const kernel_run &run)
{
    shared_area &a = *(b.area = thread_area());
    mark_shadow(b, 0, a.static_end, SHADOW_OUT);
    mark_shadow(b, a.dynamic_offset, SHARED_AREA - a.dynamic_offset, SHADOW_OUT);
    a.dynamic_offset = (SHARED_AREA - SHARED_SLACK - run.dynamic_bytes) & ~(size_t)255;
    std::memset(a.base + a.dynamic_offset, 0xff, run.dynamic_bytes);
    mark_shadow(b, a.dynamic_offset, run.dynamic_bytes, SHADOW_UNWRITTEN);
    a.static_end = SHARED_SLACK;
    b.static_bytes = 0;
    b.statics.clear();
    b.serial = b.barrier_serial = 0;
}

void setup_block(block &b, const kernel_run &run, uint64_t linear)
{
    const dim3 g = run.grid, k = run.block;
    b.run = &run;
    b.index = uint3{(unsigned)(linear % g.x), (unsigned)(linear / g.x % g.y),
                    (unsigned)(linear / ((uint64_t)g.x * g.y))};
    const size_t n = (size_t)k.x * k.y * k.z;
    b.lanes.resize(n);
    b.warps.resize((n + 31) / 32);
    for (warp &wp : b.warps) {
        wp.open = wp.busy = 0;
        wp.full_serial = 0;
        wp.partials.clear();
    }
    b.ready.clear();
    b.wgmma_issued.clear();
    for (size_t i = 0; i < n; i++) {
        lane &l = b.lanes[i];
        l = lane{};
        l.index = (int)i;
        l.view = thread_view{uint3{(unsigned)(i % k.x), (unsigned)(i / k.x % k.y),
                                   (unsigned)(i / ((size_t)k.x * k.y))},
                             b.index, k, g};
        b.ready.push_back((int)i);
    }
    b.random_state = mix(run_seed() ^ mix(run.serial) ^ mix(linear + 1));
    b.live = (int)n;
    b.at_barrier = 0;
    b.exited_after = ~0u;
    b.exited_lane = -1;
    setup_shared(b, run);
}

/* The blocks of a launch are taken in the resume order too: first to last, last to
 * first, or a seeded permutation (first + i * stride modulo the count, the stride prime to
 * it). A block that writes another block's rows then loses or wins against that block's
 * own writes in each order, whatever the number of host threads. */
struct launch_job {
    const kernel_run *run;
    uint64_t blocks;        /* how many run: all, or a sample (counters.h) */
    uint64_t grid_blocks;
    uint64_t first = 0, stride = 1;
    std::atomic<uint64_t> next{0};
};

void order_blocks(launch_job &job)
{
    if (order_setting() != resume_order::random || job.blocks < 2)
        return;
    uint64_t r = mix(run_seed() ^ mix(job.run->serial) ^ 0xb10c5ull);
    job.first = r % job.blocks;
    job.stride = mix(r) % job.blocks | 1;
    while (std::gcd(job.stride, job.blocks) != 1)
        job.stride = (job.stride + 1) % job.blocks;
}

uint64_t block_at(const launch_job &job, uint64_t i)
{
    if (order_setting() == resume_order::reversed)
        return job.blocks - 1 - i;
    return (job.first + (unsigned __int128)i * job.stride % job.blocks) % job.blocks;
}

void work_on(launch_job &job)
{
    block b;
    current_block = &b;
    for (;;) {
        uint64_t i = job.next.fetch_add(1);
        if (i >= job.blocks)
            break;
        setup_block(b, *job.run, sampled_block(block_at(job, i), job.blocks, job.grid_blocks));
        run_block(b);
        if (counting)
            count_block_done(b.static_bytes);
    }
    current_block = nullptr;
}

/* Host threads that run blocks beside the caller of run_kernel. */
class executor {
  public:
    explicit executor(int helpers) : owner_(getpid())
    {
        for (int i = 0; i < helpers; i++)
            threads_.emplace_back([this] { serve(); });
    }

    ~executor()
    {
        {
            std::lock_guard<std::mutex> hold(lock_);
            stopping_ = true;
        }
        wake_.notify_all();
        for (std::thread &t : threads_)
            t.join();
    }

    void run(launch_job &job)
    {
        if (getpid() != owner_) {   /* a forked child has none of the helper threads */
            work_on(job);
            return;
        }
        {
            std::lock_guard<std::mutex> hold(lock_);
            job_ = &job;
            generation_++;
            busy_ = (int)threads_.size();
        }
        wake_.notify_all();
        work_on(job);
        std::unique_lock<std::mutex> hold(lock_);
        done_.wait(hold, [this] { return busy_ == 0; });
        job_ = nullptr;
    }

  private:
    void serve()
    {
        uint64_t seen = 0;
        for (;;) {
            launch_job *job;
            {
                std::unique_lock<std::mutex> hold(lock_);
                wake_.wait(hold, [&] { return stopping_ || generation_ != seen; });
                if (stopping_)
                    return;
                seen = generation_;
                job = job_;
            }
            work_on(*job);
            std::lock_guard<std::mutex> hold(lock_);
            if (--busy_ == 0)
                done_.notify_all();
        }
    }

    pid_t owner_;
    std::vector<std::thread> threads_;
    std::mutex lock_;
    std::condition_variable wake_, done_;
    launch_job *job_ = nullptr;
    uint64_t generation_ = 0;
    int busy_ = 0;
    bool stopping_ = false;
};

}  // namespace

int executor_threads()
{
    static const int n = [] {
        const char *s = getenv("GEARBOX_CUDA_EMU_THREADS");
        int v = s ? atoi(s) : 0;
        if (v <= 0)
            v = (int)std::thread::hardware_concurrency();
        return std::max(1, std::min(v, 64));
    }();
    return n;
}

void run_kernel(const kernel_run &run)
{
    static executor pool(executor_threads() - 1);
    launch_job job;
    job.run = &run;
    job.grid_blocks = (uint64_t)run.grid.x * run.grid.y * run.grid.z;
    job.blocks = blocks_to_run(job.grid_blocks);
    order_blocks(job);
    pool.run(job);
}

void describe_running_thread(char *buf, size_t cap)
{
    block *b = current_block;
    if (!b || !b->running) {
        buf[0] = '\0';
        return;
    }
    snprintf(buf, cap, "%s", thread_name(*b, *b->running).c_str());
}

const char *guard_meaning(const void *addr)
{
    std::unique_lock<std::mutex> hold(guards_lock, std::try_to_lock);
    if (!hold.owns_lock())
        return nullptr;
    for (const guard_page &g : guards)
        if ((const char *)addr >= g.at && (const char *)addr < g.at + g.bytes)
            return g.meaning;
    return nullptr;
}

uint64_t run_seed()
{
    static const uint64_t seed = [] {
        const char *s = getenv("GEARBOX_CUDA_EMU_SEED");
        return s && *s ? strtoull(s, nullptr, 0) : 0x5eedull;
    }();
    return seed;
}

/* ---- the device-side API ----------------------------------------------------------- */

const thread_view &here()
{
    return this_block("a built-in variable (threadIdx, blockIdx...)").running->view;
}

void syncthreads(const char *file, int line)
{
    block &b = this_block("__syncthreads");
    lane &l = *b.running;
    if (l.barriers >= b.exited_after)
        fail_at(file, line, "__syncthreads reached after thread %s exited without reaching it "
                "(an early return before a barrier: every thread that has not exited must "
                "reach the same barrier)", tid(b.lanes[(size_t)b.exited_lane]).c_str());
    if (b.at_barrier > 0 && (b.barrier_file != file || b.barrier_line != line))
        fail_at(file, line, "threads of one block wait at different __syncthreads: this one "
                "and %s:%d (a barrier in divergent code)", b.barrier_file, b.barrier_line);
    b.barrier_file = file;
    b.barrier_line = line;
    l.state = lane_state::at_barrier;
    l.file = file;
    l.line = line;
    if (++b.at_barrier == b.live)
        release_barrier(b);
    suspend(b);
}

void syncwarp(const char *file, int line, unsigned mask)
{
    block &b = this_block("__syncwarp");
    lane &l = *b.running;
    meet(b, l, join_group(b, l, warp_op::syncwarp, file, line, mask, 32));
}

uint64_t shuffle_bits(shuffle_kind kind, const char *file, int line, unsigned mask,
                      uint64_t bits, uint64_t poison, int arg, int width)
{
    block &b = this_block("a __shfl*_sync");
    lane &l = *b.running;
    rendezvous &g = join_group(b, l, op_of(kind), file, line, mask, width);
    g.poison = poison;
    l.bits = bits;
    l.arg = arg;
    meet(b, l, g);
    return l.result;
}

void warp_collective(const char *file, int line, const char *what, const collective_key &key,
                     void *mine, const std::function<void(void *const *lanes)> &action)
{
    block &b = this_block(what);
    lane &l = *b.running;
    const int me = l.index % 32;
    rendezvous &g = join_group(b, l, warp_op::collective, file, line, 0xffffffffu, 32);
    if (g.arrived == 0) {
        g.what = what;
        g.key = key;
        g.action = &action;
    } else if (g.key.ptr != key.ptr || g.key.ldm != key.ldm || g.key.layout != key.layout) {
        fail_at(file, line, "%s: lane %d passes pointer %p, ldm %u, layout %d where lanes "
                "0x%08x passed %p, ldm %u, layout %d: all 32 lanes must pass the same", what,
                me, key.ptr, key.ldm, key.layout, g.arrived, g.key.ptr, g.key.ldm, g.key.layout);
    }
    l.mine = mine;
    meet(b, l, g);
}

void device_violation(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    this_block("device code");
    fail_at(file, line, "%s", msg);
}

/* ---- asynchronous copies ----------------------------------------------------------- */

namespace {

/* ---- checked accesses ---------------------------------------------------------------- */

/* The object of the block's shared memory nearest the byte at `off` (the one that holds
 * it, or the one whose end or start is closest): its start, size and description. */
void nearest_object(const block &b, size_t off, size_t *start, size_t *bytes, char *what,
                    size_t cap)
{
    size_t best = SIZE_MAX;
    auto consider = [&](size_t s, size_t n, const char *file, int line) {
        const size_t distance = off < s ? s - off : off < s + n ? 0 : off - (s + n) + 1;
        if (distance >= best)
            return;
        best = distance;
        *start = s;
        *bytes = n;
        if (file)
            snprintf(what, cap, "the __shared__ object declared at %s:%d", file, line);
        else
            snprintf(what, cap, "the dynamic shared memory (extern __shared__)");
    };
    consider(b.area->dynamic_offset, b.run->dynamic_bytes, nullptr, 0);
    for (const static_slot &s : b.statics)
        consider(s.offset, s.bytes, s.file, s.line);
}

/* "N bytes at byte X of <object>, which has M bytes" for an access of `size` bytes at
 * area offset `off`. */
std::string shared_place(const block &b, size_t off, size_t size)
{
    size_t start = 0, bytes = 0;
    char what[256], out[512];
    nearest_object(b, off, &start, &bytes, what, sizeof what);
    snprintf(out, sizeof out, "%zu bytes at byte %lld of %s, which has %zu bytes", size,
             (long long)off - (long long)start, what, bytes);
    return out;
}

[[noreturn]] void shared_violation(const block &b, site at, const char *verb, size_t bad,
                                   size_t size, size_t off)
{
    fail_site(at, "%s %s: out of bounds (byte %zu of the access is no object's; the "
            "block has %zu bytes of dynamic and %zu of static shared memory)", verb,
            shared_place(b, off, size).c_str(), bad - off, b.run->dynamic_bytes,
            b.static_bytes);
}

/* How much of a read is checked: bounds only (a WMMA action's own loads, which the call's
 * shared_read checked for its lanes), or everything. */
enum class read_check { bounds, all };

/* Reads of `size` bytes at area offset `off` by the running thread: inside an object,
 * written, not an unfinished cp.async's, and another thread's write only once published. */
void check_shared_read(block &b, site at, const char *what, size_t off, size_t size,
                       read_check level)
{
    const bool checks_values = level == read_check::all;
    const lane &me = *b.running;
    for (size_t i = off; i < off + size && i < SHARED_AREA; i++) {
        const uint32_t w = b.area->shadow[i];
        switch (w & SHADOW_STATE) {
        case SHADOW_OUT:
            shared_violation(b, at, what, i, size, off);
        case SHADOW_UNWRITTEN:
            if (checks_values)
                fail_site(at, "%s %s: byte %zu of them was never written (a read of "
                        "uninitialised shared memory)", what, shared_place(b, off, size).c_str(),
                        i - off);
            break;
        case SHADOW_PENDING:
            if (checks_values)
                fail_site(at, "%s shared memory (offset %zu) that an asynchronous copy "
                        "of thread %s still fills: __pipeline_wait_prior, then __syncthreads, "
                        "must come before the read", what, i,
                        tid(b.lanes[(size_t)shadow_lane(w)]).c_str());
            break;
        default:
            if (checks_values && shadow_lane(w) != me.index &&
                !published(b, me.index, shadow_lane(w), w & SHADOW_SERIAL))
                fail_site(at, "%s %s, which thread %s wrote with no __syncthreads (nor "
                        "a __syncwarp of both lanes) between that write and this read (a race: "
                        "the value read is undefined)", what, shared_place(b, off, size).c_str(),
                        tid(b.lanes[(size_t)shadow_lane(w)]).c_str());
        }
    }
}

/* Whether the shadow of [off, off + size) is that of a write by the running thread since
 * the last synchronization: reading or writing those bytes again changes nothing. */
bool all_mine(const block &b, size_t off, size_t size)
{
    const uint32_t mine = shadow_word(SHADOW_WRITTEN, b.running->index, b.serial);
    const uint32_t *w = b.area->shadow + off;
    for (size_t i = 0; i < size; i++)
        if (w[i] != mine)
            return false;
    return true;
}

void check_shared_write(block &b, site at, size_t off, size_t size)
{
    for (size_t i = off; i < off + size; i++) {
        const uint32_t w = i < SHARED_AREA ? b.area->shadow[i] : SHADOW_OUT;
        if ((w & SHADOW_STATE) == SHADOW_OUT)
            shared_violation(b, at, "writes", i, size, off);
        if ((w & SHADOW_STATE) == SHADOW_PENDING)
            fail_site(at, "writes shared memory (offset %zu) that an asynchronous copy of "
                    "thread %s still fills: wait for the copy first", i,
                    tid(b.lanes[(size_t)shadow_lane(w)]).c_str());
    }
    mark_shadow(b, off, size, shadow_word(SHADOW_WRITTEN, b.running->index, b.serial));
}

}  // namespace

/* The area's offset of p when p lies in it (guards aside), else SIZE_MAX. */
static size_t area_offset(const block &b, const void *p)
{
    const size_t off = (size_t)((const char *)p - b.area->base);
    return off < SHARED_AREA ? off : SIZE_MAX;
}

void async_copy_issue(const char *file, int line, void *dst, const void *src, size_t bytes,
                      size_t zfill)
{
    block &b = this_block("__pipeline_memcpy_async");
    lane &l = *b.running;
    if (bytes != 4 && bytes != 8 && bytes != 16)
        fail_at(file, line, "__pipeline_memcpy_async of %zu bytes: it copies 4, 8 or 16", bytes);
    if (zfill > bytes)
        fail_at(file, line, "__pipeline_memcpy_async: zfill %zu is more than the %zu bytes "
                "copied", zfill, bytes);
    const size_t off = area_offset(b, dst);
    if (off == SIZE_MAX)
        fail_at(file, line, "__pipeline_memcpy_async: destination %p is not in the block's "
                "shared memory", dst);
    if (area_offset(b, src) != SIZE_MAX)
        fail_at(file, line, "__pipeline_memcpy_async: source %p is shared memory; it copies "
                "from global memory", src);
    if ((uintptr_t)dst % bytes || (uintptr_t)src % bytes)
        fail_at(file, line, "__pipeline_memcpy_async of %zu bytes: destination %p and source "
                "%p must both be %zu-byte aligned", bytes, dst, src, bytes);
    for (size_t i = off; i < off + bytes; i++) {
        const uint32_t w = b.area->shadow[i];
        if ((w & SHADOW_STATE) == SHADOW_OUT)
            shared_violation(b, site{file, line, nullptr}, "__pipeline_memcpy_async into", i,
                             bytes, off);
        if ((w & SHADOW_STATE) == SHADOW_PENDING)
            fail_at(file, line, "__pipeline_memcpy_async into shared memory that thread %d's "
                    "copy still fills (offset %zu): wait for it first", shadow_lane(w), i);
    }
    std::memset(dst, 0xff, bytes);   // undefined until waited for: NaN, as a GPU may show
    mark_shadow(b, off, bytes, shadow_word(SHADOW_PENDING, l.index, 0));
    l.copies_open.push_back(async_copy{off, bytes, zfill, src, file, line});
    if (counting) {   /* a global load and a shared store, the site its file and line */
        const uintptr_t site = copy_site(file, line);
        count_access(l.index, space::global, access_kind::cp_async, src, bytes, false, site);
        count_access(l.index, space::shared, access_kind::cp_async, dst, bytes, true, site);
    }
}

void async_commit(const char *file, int line)
{
    (void)file;
    (void)line;
    lane &l = *this_block("__pipeline_commit").running;
    l.copy_groups.push_back(std::move(l.copies_open));
    l.copies_open.clear();
}

/* The copy lands at its thread's wait: written by that thread, for the others to read
 * after a barrier (or a __syncwarp of both lanes). */
void async_wait_prior(const char *file, int line, size_t prior)
{
    (void)file;
    (void)line;
    block &b = this_block("__pipeline_wait_prior");
    lane &l = *b.running;
    char *base = b.area->base;
    while (l.copy_groups.size() > prior) {
        for (const async_copy &c : l.copy_groups.front()) {
            std::memcpy(base + c.offset, c.src, c.bytes - c.zfill);
            std::memset(base + c.offset + c.bytes - c.zfill, 0, c.zfill);
            mark_shadow(b, c.offset, c.bytes, shadow_word(SHADOW_WRITTEN, l.index, b.serial));
        }
        l.copy_groups.pop_front();
    }
}

uint32_t shared_window(const char *file, int line, const void *p)
{
    const size_t off = area_offset(this_block("__cvta_generic_to_shared"), p);
    if (off == SIZE_MAX)
        fail_at(file, line, "%p is not in the block's shared memory: it has no shared-window "
                "address", p);
    return (uint32_t)off;
}

const void *shared_window_pointer(uint32_t address)
{
    return this_block("a shared-memory descriptor").area->base + address;
}

/* ---- wgmma's asynchronous groups ------------------------------------------------------ */

void wgmma_fence(const char *file, int line)
{
    (void)file;
    (void)line;
    this_block("wgmma.fence").running->wgmma_fenced = true;
}

/* The newest pending result of the lane for accumulators d, or null. */
static const wgmma_result *pending_for(const lane &l, const float *d)
{
    for (auto r = l.wgmma_open.rbegin(); r != l.wgmma_open.rend(); ++r)
        if (r->d == d)
            return &*r;
    for (auto g = l.wgmma_groups.rbegin(); g != l.wgmma_groups.rend(); ++g)
        for (auto r = g->rbegin(); r != g->rend(); ++r)
            if (r->d == d)
                return &*r;
    return nullptr;
}

void wgmma_chain_input(float *d, int n, float *in)
{
    const wgmma_result *r = pending_for(*this_block("wgmma.mma_async").running, d);
    std::memcpy(in, r ? r->values.data() : d, sizeof(float) * (size_t)n);
}

void wgmma_issue(const char *file, int line, float *d, int n, const float *values,
                 const void *operands, size_t n_bytes)
{
    lane &l = *this_block("wgmma.mma_async").running;
    if (!l.wgmma_fenced)
        fail_at(file, line, "wgmma.mma_async with no wgmma.fence since the thread's last "
                "wgmma.wait_group (or its start): PTX asks for one before the first wgmma and "
                "after any register a wgmma reads was written");
    wgmma_result r{d, std::vector<float>(values, values + n), operands, {}, file, line};
    if (l.index % 32 == 0 && operands)
        r.operands.assign((const unsigned char *)operands,
                          (const unsigned char *)operands + n_bytes);
    l.wgmma_open.push_back(std::move(r));
    for (int i = 0; i < n; i++)   // undefined until retired: NaN, as a GPU may show
        d[i] = std::numeric_limits<float>::quiet_NaN();
}

void wgmma_commit(const char *file, int line)
{
    (void)file;
    (void)line;
    lane &l = *this_block("wgmma.commit_group").running;
    l.wgmma_groups.push_back(std::move(l.wgmma_open));
    l.wgmma_open.clear();
}

/* A product retires: its values land in its accumulators, and the shared memory it read
 * must hold what it held at the issue (the hardware reads it at any time until then). */
static void retire(const wgmma_result &r)
{
    if (!r.operands.empty() && std::memcmp(r.operands_at, r.operands.data(), r.operands.size()))
        fail_at(r.file, r.line, "the shared memory this wgmma.mma_async reads (%zu bytes at "
                "%p) was written before the wgmma.wait_group that retired it: the hardware "
                "reads its operands at any time until then", r.operands.size(), r.operands_at);
    std::memcpy(r.d, r.values.data(), sizeof(float) * r.values.size());
}

void wgmma_wait(const char *file, int line, int newest_left)
{
    lane &l = *this_block("wgmma.wait_group").running;
    if (!l.wgmma_open.empty())
        fail_at(file, line, "wgmma.wait_group with wgmma.mma_async issued since the last "
                "wgmma.commit_group: those belong to no group and are never waited for");
    while (l.wgmma_groups.size() > (size_t)newest_left) {
        for (const wgmma_result &r : l.wgmma_groups.front())
            retire(r);
        l.wgmma_groups.pop_front();
    }
    l.wgmma_fenced = false;
}

void wgmma_warp_issued(const char *file, int line, const warpgroup_key &key)
{
    block &b = this_block("wgmma.mma_async");
    const size_t w = (size_t)b.running->index / 32, first = w / 4 * 4;
    if (first + 4 > b.warps.size())
        fail_at(file, line, "wgmma.mma_async in warp %zu of a block of %zu warps: a warpgroup "
                "is four whole warps (blockDim a multiple of 128)", w, b.warps.size());
    b.wgmma_issued.resize(b.warps.size());
    std::vector<warpgroup_issue> &mine = b.wgmma_issued[w];
    const size_t i = mine.size();
    mine.push_back(warpgroup_issue{key, file, line});
    for (size_t s = first; s < first + 4; s++) {
        const std::vector<warpgroup_issue> &other = b.wgmma_issued[s];
        if (s == w || other.size() <= i)
            continue;
        const warpgroup_key &k = other[i].key;
        if (k.n != key.n || k.kind != key.kind || k.desc_a != key.desc_a ||
            k.desc_b != key.desc_b || other[i].line != line || strcmp(other[i].file, file) != 0)
            fail_at(file, line, "wgmma.mma_async number %zu of warp %zu differs from warp "
                    "%zu's (%s:%d: n %u, descriptors 0x%llx, 0x%llx; here n %u, 0x%llx, "
                    "0x%llx): the four warps of a warpgroup issue the same wgmma together",
                    i, w, s, other[i].file, other[i].line, k.n, (unsigned long long)k.desc_a,
                    (unsigned long long)k.desc_b, key.n, (unsigned long long)key.desc_a,
                    (unsigned long long)key.desc_b);
    }
}

void shared_read(const char *file, int line, const char *what, const void *p, size_t bytes)
{
    block &b = this_block(what);
    const size_t off = area_offset(b, p);
    if (off != SIZE_MAX)
        check_shared_read(b, site{file, line, nullptr}, what, off, bytes, read_check::all);
}

bool shared_holds(const void *p)
{
    return area_offset(this_block("ldmatrix"), p) != SIZE_MAX;
}

void *dynamic_shared_base()
{
    block &b = this_block("extern __shared__");
    return b.area->base + b.area->dynamic_offset;
}

void *block_static(const void *site, size_t bytes, size_t align, const char *file, int line)
{
    block &b = this_block("__shared__");
    for (const static_slot &s : b.statics)
        if (s.site == site)
            return b.area->base + s.offset;
    const size_t counted = (b.static_bytes + align - 1) / align * align + bytes;
    if (counted + b.run->dynamic_bytes > b.run->shared_limit)
        fail_at(file, line, "__shared__ object of %zu bytes: with the launch's %zu bytes of "
                "dynamic shared memory the block needs %zu bytes, above its limit of %zu (48 "
                "KiB unless cudaFuncSetAttribute raised it)", bytes, b.run->dynamic_bytes,
                counted + b.run->dynamic_bytes, b.run->shared_limit);
    shared_area &a = *b.area;
    const size_t offset = (a.static_end + align - 1) / align * align;
    if (offset + bytes + RED_ZONE > a.dynamic_offset)
        fail_at(file, line, "__shared__ object of %zu bytes: the emulator's shared area has no "
                "room for it beside its red zones (%zu static bytes so far)", bytes,
                b.static_bytes);
    b.static_bytes = counted;
    a.static_end = offset + bytes + RED_ZONE;
    b.statics.push_back(static_slot{site, offset, bytes, file, line});
    std::memset(a.base + offset, 0xff, bytes);
    mark_shadow(b, offset, bytes, SHADOW_UNWRITTEN);
    return a.base + offset;
}

/* ---- instrumented accesses ------------------------------------------------------------ */

void access_site(const void *pc, const char **file, int *line)
{
    static char path[1024];
    *file = "(unknown .cu line: the emulated build has no line table)";
    *line = 0;
    if (!pc)
        return;
    const SourceLine at = source_lines({(const char *)pc - 1})[0];   /* the call before pc */
    if (at.file.empty())
        return;
    snprintf(path, sizeof path, "%s", at.file.c_str());
    *file = path;
    *line = at.line;
}

/* Device memory is global, the block's shared area shared; the rest (stacks, host memory)
 * and a WMMA call's element loop (counted by its real pattern instead) are not counted. */
void counted_access(const void *p, size_t bytes, bool write, const void *pc)
{
    const block *b = current_block;
    const space where = device_arena_holds(p) ? space::global : space::shared;
    if (b && b->running && !b->in_collective &&
        (where == space::global || area_offset(*b, p) != SIZE_MAX))
        count_access(b->running->index, where, access_kind::plain, p, bytes, write,
                     (uintptr_t)pc);
    checked_access(p, bytes, write, pc);
}

/* The checks of an access at area offset `off` of the running block's shared memory that
 * is not the running thread's own write. Out of line: checked_access, which every
 * instrumented load and store calls and which mostly returns at once, needs no stack frame
 * then (with these checks inlined, g++ gave it a full prologue with a realigned stack:
 * about a quarter of the CPU time of an emulated attn/flash training run). */
__attribute__((noinline)) static void check_shared_access(block &b, size_t off, size_t bytes,
                                                          bool write, const void *pc)
{
    if (write)
        check_shared_write(b, site{nullptr, 0, pc}, off, bytes);
    else
        check_shared_read(b, site{nullptr, 0, pc}, "reads", off, bytes,
                          b.in_collective ? read_check::bounds : read_check::all);
}

void checked_access(const void *p, size_t bytes, bool write, const void *pc)
{
    if (device_arena_holds(p)) {
        device_access(p, bytes, write, pc);
        return;
    }
    block *b = current_block;
    if (!b || !b->running)
        return;
    const size_t off = area_offset(*b, p);
    if (off == SIZE_MAX)
        return;
    if (off + bytes <= SHARED_AREA && all_mine(*b, off, bytes))
        return;   /* the common case: the running thread's own bytes, as it wrote them */
    check_shared_access(*b, off, bytes, write, pc);
}

/* ---- launch bounds ----------------------------------------------------------------- */

namespace {
thread_local bool probing = false;
thread_local launch_bounds declared;
}  // namespace

bool bounds_probe()
{
    return probing;
}

void declare_bounds(const char *file, int line, unsigned max_threads, unsigned min_blocks,
                    unsigned max_blocks_per_cluster)
{
    (void)min_blocks;
    (void)max_blocks_per_cluster;
    declared = launch_bounds{max_threads, file, line};
}

launch_bounds probe_bounds(const std::function<void()> &call_kernel)
{
    declared = launch_bounds{0, nullptr, 0};
    probing = true;
    call_kernel();
    probing = false;
    return declared;
}

}  // namespace gb_emu
