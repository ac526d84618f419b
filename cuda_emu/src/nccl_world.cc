/* The emulated NCCL's worlds of several ranks: one process per rank, each an emulated
 * GPU, exchanging data through a POSIX shared-memory segment that the unique id names.
 *
 * The id holds a marker and a random token; the segment is /dev/shm/gearbox-emu-nccl-TOKEN,
 * made by whichever rank opens it first and unlinked once every rank has joined (the
 * mappings stay). It holds one slot per rank (its pid, GPU, two step counters and the
 * signature of the collective it is in) and one staging buffer of CHUNK bytes per rank.
 *
 * A collective runs in steps of at most CHUNK bytes, the same steps on every rank: a rank
 * waits until every rank has consumed the previous step (its staging buffer is free again),
 * copies its part into its buffer and posts the step, waits until every rank has posted,
 * then computes its result from all the buffers (reductions in rank order, so every rank
 * gets the same bits) and consumes the step. A reduce-scatter is an all-reduce of which a
 * rank keeps only its part; an all-gather is one broadcast from each rank in turn. Waiting sleeps on a futex (the segment's
 * bell, rung after every post and consume), so ranks that outnumber the cores cost none.
 *
 * A rank holds a write lock (fcntl) on its own byte of the segment from joining to leaving;
 * the kernel drops it when the process dies, however it dies. A rank kept waiting checks
 * the ranks it waits for every WAKE_MS: one whose lock is gone exited (or left, when it
 * says so), and the collective fails with ncclRemoteError naming it, instead of waiting
 * forever. A rank that is alive but never comes (stopped, deadlocked) is waited for until
 * the communicator is aborted, as NCCL's kernels wait: meanwhile the waiting thread is
 * parked (gb_emu::waiting_on_peers), so the caller's watchdog can still query its events,
 * see the collective overdue and abort. GEARBOX_CUDA_EMU_NCCL_TIMEOUT_S (600) bounds the
 * wait for a program that never aborts.
 */
#include "nccl_world.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <type_traits>

#include "emu.h"
#include "gearbox/convert.h"

namespace gb_emu {

namespace {

constexpr char ID_MARKER[] = "gearbox-emu-nccl ";
constexpr size_t TOKEN_CHARS = 32;
constexpr size_t CHUNK = 1 << 20;   /* bytes each rank stages per step */
constexpr int WAKE_MS = 20;         /* how often a waiting rank looks at its peers */

/* What every rank of one step says it is doing; all must agree. */
struct signature {
    char what[24];
    unsigned long long seq;
    size_t count;
    int type, op, root;
};

struct alignas(64) rank_slot {
    std::atomic<uint32_t> joined;   /* 1 once its lock is held and its fields set */
    std::atomic<uint32_t> left;     /* 1 after ncclCommDestroy or ncclCommAbort */
    int32_t pid, device;
    std::atomic<uint64_t> posted;     /* the last step whose buffer this rank filled */
    std::atomic<uint64_t> consumed;   /* the last step this rank has read every buffer of */
    signature sig;                    /* of the step last posted */
};

struct segment {
    std::atomic<uint32_t> bell;   /* rung (incremented, futex-woken) after every change */
    std::atomic<int32_t> nranks;  /* set by the first rank to join */
    rank_slot ranks[NCCL_WORLD_MAX_RANKS];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters shared between processes");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "the bell is a futex word");

constexpr size_t DATA_OFFSET = (sizeof(segment) + 4095) / 4096 * 4096;
constexpr size_t SEGMENT_BYTES = DATA_OFFSET + NCCL_WORLD_MAX_RANKS * CHUNK;

}  // namespace

struct nccl_world {
    segment *seg;
    char *data;
    int nranks, rank;
    uint64_t step = 0;     /* steps this rank has run */
    std::mutex fd_lock;    /* fd: closed by a leave while another thread may check peers */
    int fd;                /* holds this rank's lock; -1 once left */
    bool unlinked = false;
    char name[64];
};

namespace {

std::string printed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string printed(const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return text;
}

void ring(segment *seg)
{
    seg->bell.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&seg->bell), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
}

/* Sleeps until the bell moves from `seen`, or WAKE_MS pass. */
void sleep_on_bell(segment *seg, uint32_t seen)
{
    struct timespec wake = {0, WAKE_MS * 1000000L};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&seg->bell), FUTEX_WAIT, seen, &wake,
            nullptr, 0);
}

/* The byte of the segment whose lock says that `rank` lives. */
struct flock rank_lock(int rank, short type)
{
    struct flock l = {};
    l.l_type = type;
    l.l_whence = SEEK_SET;
    l.l_start = rank;
    l.l_len = 1;
    return l;
}

/* Empty while `peer` (joined) is still there; else what became of it. */
std::string departure(nccl_world *w, int peer)
{
    const rank_slot &slot = w->seg->ranks[peer];
    if (slot.left.load(std::memory_order_acquire))
        return printed("rank %d (pid %d) left the communicator (ncclCommDestroy or ncclCommAbort)",
                       peer, (int)slot.pid);
    std::lock_guard<std::mutex> hold(w->fd_lock);
    if (w->fd < 0)
        return "";   /* this rank left: the caller sees its abort */
    struct flock l = rank_lock(peer, F_WRLCK);
    if (fcntl(w->fd, F_GETLK, &l) == 0 && l.l_type == F_UNLCK)
        return printed("rank %d (pid %d) exited", peer, (int)slot.pid);
    return "";
}

double timeout_s()
{
    static const double limit = [] {
        const char *s = getenv("GEARBOX_CUDA_EMU_NCCL_TIMEOUT_S");
        return s && *s ? atof(s) : 600.0;
    }();
    return limit;
}

/* The calling thread waits on its peers while this lives (gb_emu::waiting_on_peers). */
struct parked_wait {
    parked_wait() { waiting_on_peers(true); }
    ~parked_wait() { waiting_on_peers(false); }
    parked_wait(const parked_wait &) = delete;
    parked_wait &operator=(const parked_wait &) = delete;
};

/* Waits until every rank's `counter` reaches `step`: ncclSuccess, or ncclRemoteError with
 * *error naming the rank that will never get there. Other threads' event queries are
 * answered meanwhile (parked_wait). */
ncclResult_t wait_all(nccl_world *w, std::atomic<uint64_t> rank_slot::*counter, uint64_t step,
                      const nccl_exchange &x, const std::atomic<bool> &aborted,
                      std::string *error)
{
    using clock = std::chrono::steady_clock;
    const parked_wait parked;
    const clock::time_point start = clock::now();
    clock::time_point looked = start;
    for (;;) {
        const uint32_t seen = w->seg->bell.load(std::memory_order_acquire);
        int behind = -1;
        for (int r = 0; r < w->nranks && behind < 0; r++)
            if ((w->seg->ranks[r].*counter).load(std::memory_order_acquire) < step)
                behind = r;
        if (behind < 0)
            return ncclSuccess;
        if (aborted.load()) {
            *error = printed("%s #%llu: the communicator was aborted", x.what, x.seq);
            return ncclRemoteError;
        }
        const clock::time_point now = clock::now();
        if (now - looked >= std::chrono::milliseconds(WAKE_MS)) {
            looked = now;
            for (int r = 0; r < w->nranks; r++) {
                if ((w->seg->ranks[r].*counter).load(std::memory_order_acquire) >= step)
                    continue;
                std::string gone = departure(w, r);
                if (!gone.empty()) {
                    *error = printed("%s #%llu on rank %d: %s before taking part", x.what,
                                     x.seq, w->rank, gone.c_str());
                    return ncclRemoteError;
                }
            }
            if (std::chrono::duration<double>(now - start).count() > timeout_s()) {
                *error = printed("%s #%llu on rank %d: rank %d has not taken part after %g s "
                                 "(GEARBOX_CUDA_EMU_NCCL_TIMEOUT_S); it hangs", x.what, x.seq,
                                 w->rank, behind, timeout_s());
                return ncclRemoteError;
            }
        }
        sleep_on_bell(w->seg, seen);
    }
}

/* ---- reductions ------------------------------------------------------------------------- */

/* Integers wrap, as on the GPU (signed overflow is undefined in C++, so via unsigned). */
template <typename T>
T add(T a, T b)
{
    if constexpr (std::is_integral<T>::value) {
        using U = std::make_unsigned_t<T>;
        return (T)(U)((U)a + (U)b);
    } else {
        return a + b;
    }
}

template <typename T>
T multiply(T a, T b)
{
    if constexpr (std::is_integral<T>::value) {
        using U = std::make_unsigned_t<T>;
        return (T)(U)((U)a * (U)b);
    } else {
        return a * b;
    }
}

template <typename T>
T combine(T a, T b, ncclRedOp_t op)
{
    switch (op) {
    case ncclProd: return multiply(a, b);
    case ncclMax: return b > a ? b : a;
    case ncclMin: return b < a ? b : a;
    default: return add(a, b);   /* ncclSum, ncclAvg */
    }
}

/* An element type as stored, and the type it is computed in: 16-bit floats are computed
 * in f32 and rounded back after each operation, as the GPU's 16-bit arithmetic rounds. */
template <typename T>
struct stored {
    using value = T;
    static T load(const void *p, size_t i) { return static_cast<const T *>(p)[i]; }
    static void store(void *p, size_t i, T v) { static_cast<T *>(p)[i] = v; }
    static T round(T v) { return v; }
};

template <float (*widen)(uint16_t), uint16_t (*narrow)(float)>
struct stored16 {
    using value = float;
    static float load(const void *p, size_t i) { return widen(static_cast<const uint16_t *>(p)[i]); }
    static void store(void *p, size_t i, float v) { static_cast<uint16_t *>(p)[i] = narrow(v); }
    static float round(float v) { return widen(narrow(v)); }
};
using stored_f16 = stored16<gb_f32_from_f16, gb_f16_from_f32>;
using stored_bf16 = stored16<gb_f32_from_bf16, gb_bf16_from_f32>;

/* out[i] = in[0][i] op in[1][i] op ... (rank order; avg divides the sum by the ranks). */
template <typename E>
void reduce(void *out, const void *const *in, int n, size_t count, ncclRedOp_t op)
{
    using V = typename E::value;
    for (size_t i = 0; i < count; i++) {
        V acc = E::load(in[0], i);
        for (int r = 1; r < n; r++)
            acc = E::round(combine(acc, E::load(in[r], i), op));
        if (op == ncclAvg)
            acc = (V)(acc / (V)n);
        E::store(out, i, acc);
    }
}

void reduce_typed(ncclDataType_t type, void *out, const void *const *in, int n, size_t count,
                  ncclRedOp_t op)
{
    switch (type) {
    case ncclInt8: reduce<stored<int8_t>>(out, in, n, count, op); break;
    case ncclUint8: reduce<stored<uint8_t>>(out, in, n, count, op); break;
    case ncclInt32: reduce<stored<int32_t>>(out, in, n, count, op); break;
    case ncclUint32: reduce<stored<uint32_t>>(out, in, n, count, op); break;
    case ncclInt64: reduce<stored<int64_t>>(out, in, n, count, op); break;
    case ncclUint64: reduce<stored<uint64_t>>(out, in, n, count, op); break;
    case ncclFloat16: reduce<stored_f16>(out, in, n, count, op); break;
    case ncclFloat32: reduce<stored<float>>(out, in, n, count, op); break;
    case ncclFloat64: reduce<stored<double>>(out, in, n, count, op); break;
    case ncclBfloat16: reduce<stored_bf16>(out, in, n, count, op); break;
    default: break;   /* refused before queueing: nccl_world_reduces */
    }
}

size_t size_of(ncclDataType_t type)
{
    switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

signature signature_of(const nccl_exchange &x)
{
    signature s;
    snprintf(s.what, sizeof s.what, "%s", x.what);
    s.seq = x.seq;
    s.count = x.count;
    s.type = (int)x.type;
    s.op = x.root >= 0 ? -1 : (int)x.op;
    s.root = x.root;
    return s;
}

/* Empty when every rank posted the same collective as this one; else how they differ. */
std::string disagreement(const nccl_world *w, const signature &mine)
{
    for (int r = 0; r < w->nranks; r++) {
        const signature &s = w->seg->ranks[r].sig;
        if (strcmp(s.what, mine.what) != 0 || s.seq != mine.seq || s.count != mine.count ||
            s.type != mine.type || s.op != mine.op || s.root != mine.root)
            return printed("rank %d runs %s #%llu (count %zu, type %d, op %d, root %d) where "
                           "rank %d runs %s #%llu (count %zu, type %d, op %d, root %d): every "
                           "rank must call the same collectives in the same order", w->rank,
                           mine.what, mine.seq, mine.count, mine.type, mine.op, mine.root, r,
                           s.what, s.seq, s.count, s.type, s.op, s.root);
    }
    return "";
}

/* One step: this rank's `bytes` from `part` staged, every rank's buffer combined into
 * `out` (reduced, or the root's copied). */
ncclResult_t run_step(nccl_world *w, const nccl_exchange &x, const char *part, char *out,
                      size_t bytes, const std::atomic<bool> &aborted, std::string *error)
{
    const uint64_t step = ++w->step;
    ncclResult_t r = wait_all(w, &rank_slot::consumed, step - 1, x, aborted, error);
    if (r != ncclSuccess)
        return r;
    rank_slot &mine = w->seg->ranks[w->rank];
    char *staged = w->data + (size_t)w->rank * CHUNK;
    if (x.root < 0 || x.root == w->rank)
        memcpy(staged, part, bytes);
    mine.sig = signature_of(x);
    mine.posted.store(step, std::memory_order_release);
    ring(w->seg);
    if ((r = wait_all(w, &rank_slot::posted, step, x, aborted, error)) != ncclSuccess)
        return r;
    std::string differs = disagreement(w, mine.sig);
    if (!differs.empty()) {
        *error = x.what + (": " + differs);
        return ncclInvalidUsage;
    }
    if (x.root >= 0) {
        memcpy(out, w->data + (size_t)x.root * CHUNK, bytes);
    } else {
        const void *in[NCCL_WORLD_MAX_RANKS];
        for (int k = 0; k < w->nranks; k++)
            in[k] = w->data + (size_t)k * CHUNK;
        reduce_typed(x.type, out, in, w->nranks, bytes / size_of(x.type), x.op);
    }
    mine.consumed.store(step, std::memory_order_release);
    ring(w->seg);
    return ncclSuccess;
}

}  // namespace

/* ---- the interface ------------------------------------------------------------------------ */

bool nccl_world_make_id(ncclUniqueId *id, std::string *error)
{
    static const char hex[] = "0123456789abcdef";
    memset(id->internal, 0, sizeof id->internal);
    memcpy(id->internal, ID_MARKER, sizeof ID_MARKER - 1);
    try {
        std::random_device source;
        for (size_t i = 0; i < TOKEN_CHARS; i++)
            id->internal[sizeof ID_MARKER - 1 + i] = hex[source() & 15];
    } catch (const std::exception &e) {   /* no entropy source: exceptions stop at the C ABI */
        *error = printed("no random source: %s", e.what());
        return false;
    }
    return true;
}

bool nccl_world_reduces(ncclDataType_t type)
{
    return type != ncclFloat8e4m3 && type != ncclFloat8e5m2;
}

/* The segment's name from the id; false when the id is not one of nccl_world_make_id's. */
static bool segment_name(const ncclUniqueId &id, char *name, size_t size)
{
    const char *token = id.internal + sizeof ID_MARKER - 1;
    if (memcmp(id.internal, ID_MARKER, sizeof ID_MARKER - 1) != 0 ||
        strnlen(token, TOKEN_CHARS + 1) != TOKEN_CHARS)
        return false;
    snprintf(name, size, "/gearbox-emu-nccl-%.*s", (int)TOKEN_CHARS, token);
    return true;
}

/* Maps the segment `name` (made here if first); nullptr with *error. */
static segment *map_segment(const char *name, int *fd, std::string *error)
{
    *fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    struct stat st;
    if (*fd < 0 || fstat(*fd, &st) != 0 ||
        ((size_t)st.st_size < SEGMENT_BYTES && ftruncate(*fd, (off_t)SEGMENT_BYTES) != 0)) {
        *error = printed("shared memory /dev/shm%s: %s", name, strerror(errno));
        if (*fd >= 0)
            close(*fd);
        return nullptr;
    }
    void *p = mmap(nullptr, SEGMENT_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    if (p == MAP_FAILED) {
        *error = printed("mapping /dev/shm%s: %s", name, strerror(errno));
        close(*fd);
        return nullptr;
    }
    return static_cast<segment *>(p);
}

nccl_world *nccl_world_join(const ncclUniqueId &id, int nranks, int rank, int device,
                            std::string *error)
{
    char name[64];
    if (!segment_name(id, name, sizeof name)) {
        *error = "the unique id was not made by ncclGetUniqueId (rank 0's, handed to every rank)";
        return nullptr;
    }
    int fd = -1;
    segment *seg = map_segment(name, &fd, error);
    if (!seg)
        return nullptr;
    int32_t expected = 0;
    struct flock l = rank_lock(rank, F_WRLCK);
    if (!seg->nranks.compare_exchange_strong(expected, nranks) && expected != nranks)
        *error = printed("rank %d says the world has %d ranks, another rank said %d", rank,
                         nranks, (int)expected);
    else if (fcntl(fd, F_SETLK, &l) != 0 || seg->ranks[rank].joined.load())
        *error = printed("rank %d of this unique id was already taken by another process",
                         rank);
    if (!error->empty()) {
        munmap(seg, SEGMENT_BYTES);
        close(fd);
        return nullptr;
    }
    nccl_world *w = new (std::nothrow) nccl_world;
    if (!w) {
        *error = "out of memory";
        munmap(seg, SEGMENT_BYTES);
        close(fd);
        return nullptr;
    }
    w->seg = seg;
    w->data = reinterpret_cast<char *>(seg) + DATA_OFFSET;
    w->nranks = nranks;
    w->rank = rank;
    w->fd = fd;
    snprintf(w->name, sizeof w->name, "%s", name);
    rank_slot &mine = seg->ranks[rank];
    mine.pid = (int32_t)getpid();
    mine.device = device;
    mine.joined.store(1, std::memory_order_release);
    ring(seg);
    return w;
}

ncclResult_t nccl_world_ready(nccl_world *w, std::string *error)
{
    for (int r = 0; r < w->nranks; r++) {
        if (w->seg->ranks[r].joined.load(std::memory_order_acquire))
            continue;
        for (int q = 0; q < w->nranks; q++) {   /* a rank that left will never see it done */
            std::string gone = q == w->rank || !w->seg->ranks[q].joined.load()
                                   ? "" : departure(w, q);
            if (!gone.empty()) {
                *error = printed("setup: %s before rank %d joined", gone.c_str(), r);
                return ncclRemoteError;
            }
        }
        return ncclInProgress;
    }
    if (!w->unlinked) {   /* everyone has it mapped: the name is no longer needed */
        shm_unlink(w->name);
        w->unlinked = true;
    }
    for (int r = 0; r < w->nranks; r++)
        for (int q = 0; q < r; q++)
            if (w->seg->ranks[q].device == w->seg->ranks[r].device) {
                *error = printed("ranks %d and %d both use GPU %d: every rank needs a GPU of "
                                 "its own", q, r, (int)w->seg->ranks[r].device);
                return ncclInvalidUsage;
            }
    return ncclSuccess;
}

namespace {

/* `bytes` of send combined (reduced, or the root's) into recv, step by step. */
ncclResult_t exchange_whole(nccl_world *w, const nccl_exchange &x, const char *send, char *recv,
                            size_t bytes, const std::atomic<bool> &aborted, std::string *error)
{
    size_t done = 0;
    do {   /* at least one step: a collective of nothing still meets the other ranks */
        const size_t part = bytes - done < CHUNK ? bytes - done : CHUNK;
        ncclResult_t r = run_step(w, x, send + done, recv + done, part, aborted, error);
        if (r != ncclSuccess)
            return r;
        done += part;
    } while (done < bytes);
    return ncclSuccess;
}

/* The reduction of every rank's nranks parts, of which this rank keeps part `rank` in recv.
 * Each step's result goes through `reduced`; a step writes recv only over the send bytes it
 * has staged, so recv may be send's own part (in place). */
ncclResult_t exchange_reduce_scatter(nccl_world *w, const nccl_exchange &x, size_t part_bytes,
                                     const std::atomic<bool> &aborted, std::string *error)
{
    std::unique_ptr<char[]> reduced(new (std::nothrow) char[CHUNK]);
    if (!reduced) {
        *error = printed("%s #%llu: out of host memory for a step's reduction", x.what, x.seq);
        return ncclSystemError;
    }
    const char *send = static_cast<const char *>(x.send);
    char *recv = static_cast<char *>(x.recv);
    const size_t bytes = part_bytes * (size_t)w->nranks;
    const size_t mine = part_bytes * (size_t)w->rank, mine_end = mine + part_bytes;
    size_t done = 0;
    do {
        const size_t step = bytes - done < CHUNK ? bytes - done : CHUNK;
        ncclResult_t r = run_step(w, x, send + done, reduced.get(), step, aborted, error);
        if (r != ncclSuccess)
            return r;
        const size_t from = done > mine ? done : mine;
        const size_t to = done + step < mine_end ? done + step : mine_end;
        if (from < to)
            memcpy(recv + (from - mine), reduced.get() + (from - done), to - from);
        done += step;
    } while (done < bytes);
    return ncclSuccess;
}

/* Every rank's part broadcast in rank order to its place in recv. */
ncclResult_t exchange_all_gather(nccl_world *w, const nccl_exchange &x, size_t part_bytes,
                                 const std::atomic<bool> &aborted, std::string *error)
{
    char *recv = static_cast<char *>(x.recv);
    for (int r = 0; r < w->nranks; r++) {
        nccl_exchange from_r = x;
        from_r.root = r;
        ncclResult_t result = exchange_whole(w, from_r, static_cast<const char *>(x.send),
                                             recv + part_bytes * (size_t)r, part_bytes, aborted,
                                             error);
        if (result != ncclSuccess)
            return result;
    }
    return ncclSuccess;
}

}  // namespace

ncclResult_t nccl_world_exchange(nccl_world *w, const nccl_exchange &x,
                                 const std::atomic<bool> &aborted, std::string *error)
{
    const size_t bytes = x.count * size_of(x.type);
    switch (x.form) {
    case exchange_form::reduce_scatter:
        return exchange_reduce_scatter(w, x, bytes, aborted, error);
    case exchange_form::all_gather:
        return exchange_all_gather(w, x, bytes, aborted, error);
    case exchange_form::whole:
        break;
    }
    return exchange_whole(w, x, static_cast<const char *>(x.send), static_cast<char *>(x.recv),
                          bytes, aborted, error);
}

void nccl_world_hold_until_abort(const std::atomic<bool> &aborted)
{
    using clock = std::chrono::steady_clock;
    const parked_wait parked;
    const clock::time_point start = clock::now();
    while (!aborted.load() &&
           std::chrono::duration<double>(clock::now() - start).count() <= timeout_s())
        usleep(WAKE_MS * 1000);
}

void nccl_world_leave(nccl_world *w)
{
    w->seg->ranks[w->rank].left.store(1, std::memory_order_release);
    {
        std::lock_guard<std::mutex> hold(w->fd_lock);
        if (w->fd >= 0)
            close(w->fd);   /* drops this rank's lock */
        w->fd = -1;
    }
    if (!w->unlinked)
        shm_unlink(w->name);
    ring(w->seg);
}

}  // namespace gb_emu
