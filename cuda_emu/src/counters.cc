/* The counting mode: with GEARBOX_CUDA_EMU_COUNT=FILE, every kernel launch appends one JSON
 * line to FILE with what Nsight Compute would count for it (README.md, "Counting what each
 * kernel costs", defines every field and the rules below), and every library call, copy
 * and event record one line of its own.
 *
 * A warp-level request is the accesses of one warp's lanes at one code site, the k-th time
 * each lane reaches it: each lane keeps a count per site, and (warp, site, k) keys the
 * request. A block's requests are reduced when the block ends, since only then is every
 * lane's k-th access known: global ones to distinct 32-byte sectors, shared ones to
 * wavefronts (32 banks of 4 bytes, served in phases of 32, 16 or 8 lanes by access size).
 * The blocks' sums meet in the launch's totals, scaled to the whole grid when
 * GEARBOX_CUDA_EMU_COUNT_SAMPLE ran only some of its blocks.
 */
#include "counters.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "emu.h"
#include "resources.h"

namespace gb_emu {

namespace {

/* ---- settings ---------------------------------------------------------------------- */

const char *count_path()
{
    const char *path = getenv("GEARBOX_CUDA_EMU_COUNT");
    return path && *path ? path : nullptr;
}

/* GEARBOX_CUDA_EMU_COUNT_SAMPLE: 0 (every block), else the blocks a large grid runs. */
uint64_t sample_setting()
{
    static const uint64_t k = [] {
        const char *s = getenv("GEARBOX_CUDA_EMU_COUNT_SAMPLE");
        if (!s || !*s)
            return (uint64_t)0;
        char *end = nullptr;
        const unsigned long long v = strtoull(s, &end, 10);
        if (*end || v < 2) {
            fprintf(stderr, "gearbox cuda emulator: GEARBOX_CUDA_EMU_COUNT_SAMPLE=%s is not a "
                    "number of blocks of at least 2 (the first and the last)\n", s);
            exit(2);
        }
        if (!count_path()) {
            fprintf(stderr, "gearbox cuda emulator: GEARBOX_CUDA_EMU_COUNT_SAMPLE=%s without "
                    "GEARBOX_CUDA_EMU_COUNT: sampling leaves outputs incomplete and serves "
                    "only to count; name the counts' file too\n", s);
            exit(2);
        }
        return (uint64_t)v;
    }();
    return k;
}

/* The counts' file, opened for appending at the first line. */
int count_fd()
{
    static const int fd = [] {
        const char *path = count_path();
        const int f = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (f < 0)
            violation("GEARBOX_CUDA_EMU_COUNT=%s: cannot open it for appending: %m (name a "
                      "file in a folder that exists)", path);
        return f;
    }();
    return fd;
}

/* One line, in one write(), so lines of several processes do not interleave. */
void append_line(const std::string &line)
{
    const std::string out = line + "\n";
    if (write(count_fd(), out.data(), out.size()) != (ssize_t)out.size())
        violation("GEARBOX_CUDA_EMU_COUNT: cannot append a line: %m");
}

std::atomic<uint64_t> next_seq{0};
thread_local unsigned counted_stream = 0;

/* ---- the counters ------------------------------------------------------------------- */

enum counter {
    GLD_REQUESTS, GLD_BYTES, GLD_SECTORS, GST_REQUESTS, GST_BYTES, GST_SECTORS,
    CP_ASYNC_REQUESTS, CP_ASYNC_BYTES, SHLD_REQUESTS, SHLD_WAVEFRONTS, SHST_REQUESTS,
    SHST_WAVEFRONTS, WGMMA_REQUESTS, WGMMA_ISSUES, BARRIERS, SHUFFLES, N_COUNTERS
};
const char *const counter_names[N_COUNTERS] = {
    "gld_requests", "gld_bytes", "gld_sectors", "gst_requests", "gst_bytes", "gst_sectors",
    "cp_async_requests", "cp_async_bytes", "shld_requests", "shld_wavefronts",
    "shst_requests", "shst_wavefronts", "wgmma_requests", "wgmma_issues", "barriers",
    "shuffles"};

/* An access site as one kind of access sees it (a cp.async's site makes a global read and
 * a shared write). */
struct site_key {
    uintptr_t site;
    int code;
    bool operator==(const site_key &o) const { return site == o.site && code == o.code; }
};

uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return x ^ (x >> 33);
}

struct site_hash {
    size_t operator()(const site_key &k) const { return mix(k.site * 8 + (uint64_t)k.code); }
};

struct sums {
    uint64_t n[N_COUNTERS] = {};
    std::unordered_map<site_key, uint64_t, site_hash> sites;   /* warp-level requests per site */
    std::map<std::string, uint64_t> mma;   /* "m16n16k16.bf16.f32" -> operations */
    uint64_t load_phases = 0;  /* per warp, the barrier-delimited phases with a global load */
    uint64_t atomics = 0;      /* lanes' atomic operations on global memory */

    void add(const sums &o)
    {
        for (int i = 0; i < N_COUNTERS; i++)
            n[i] += o.n[i];
        for (const auto &kv : o.mma)
            mma[kv.first] += kv.second;
        for (const auto &kv : o.sites)
            sites[kv.first] += kv.second;
        load_phases += o.load_phases;
        atomics += o.atomics;
    }
};

/* ---- requests ------------------------------------------------------------------------ */

struct lane_access {
    uintptr_t addr;
    uint32_t bytes;
    int lane;   /* in its warp */
};

struct request {
    space where;
    bool write;
    access_kind kind;
    std::vector<lane_access> lanes;
};

struct request_key {
    site_key at;
    int warp;
    uint32_t occurrence;
    bool operator==(const request_key &o) const
    {
        return at == o.at && warp == o.warp && occurrence == o.occurrence;
    }
};

struct request_hash {
    size_t operator()(const request_key &k) const
    {
        return mix(site_hash()(k.at) ^ mix((uint64_t)k.warp << 32 | k.occurrence));
    }
};

/* The distinct 32-byte sectors any lane of a global request touches, in order. */
std::vector<uintptr_t> sectors_of(const request &r)
{
    std::vector<uintptr_t> sectors;
    for (const lane_access &a : r.lanes)
        for (uintptr_t s = a.addr / 32; s <= (a.addr + a.bytes - 1) / 32; s++)
            sectors.push_back(s);
    std::sort(sectors.begin(), sectors.end());
    sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
    return sectors;
}

/* The sectors the running block's global loads [0] and stores [1] touched, for the
 * launch's distinct sectors (the L2 rule of docs/gpu.md); one per host thread. */
thread_local std::vector<uintptr_t> block_sectors[2];

/* Wavefronts of one phase: the most distinct 32-bit words any bank holds among `words`. */
uint64_t phase_wavefronts(std::vector<uintptr_t> &words)
{
    if (words.empty())
        return 0;
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    unsigned per_bank[32] = {};
    unsigned most = 0;
    for (uintptr_t w : words)
        most = std::max(most, ++per_bank[w % 32]);
    return most;
}

/* A shared request's wavefronts: lanes in phases of 32 (accesses up to 4 bytes), 16 (8
 * bytes) or 8 (16 bytes and more), each phase as many wavefronts as its worst bank. */
uint64_t wavefronts_of(const request &r)
{
    uint32_t widest = 0;
    for (const lane_access &a : r.lanes)
        widest = std::max(widest, a.bytes);
    const int lanes_per_phase = widest <= 4 ? 32 : widest <= 8 ? 16 : 8;
    std::vector<uintptr_t> words[32];
    for (const lane_access &a : r.lanes)
        for (uintptr_t w = a.addr / 4; w <= (a.addr + a.bytes - 1) / 4; w++)
            words[a.lane / lanes_per_phase].push_back(w);
    uint64_t total = 0;
    for (std::vector<uintptr_t> &phase : words)
        total += phase_wavefronts(phase);
    return total;
}

uint64_t bytes_of(const request &r)
{
    uint64_t bytes = 0;
    for (const lane_access &a : r.lanes)
        bytes += a.bytes;
    return bytes;
}

void reduce(const request &r, sums &s)
{
    const uint64_t bytes = bytes_of(r);
    if (r.where == space::global) {
        const int base = r.write ? GST_REQUESTS : GLD_REQUESTS;
        s.n[base]++;
        s.n[base + 1] += bytes;
        const std::vector<uintptr_t> sectors = sectors_of(r);
        s.n[base + 2] += sectors.size();
        std::vector<uintptr_t> &seen = block_sectors[r.write];
        seen.insert(seen.end(), sectors.begin(), sectors.end());
        if (r.kind == access_kind::cp_async) {
            s.n[CP_ASYNC_REQUESTS]++;
            s.n[CP_ASYNC_BYTES] += bytes;
        }
    } else {
        const int base = r.write ? SHST_REQUESTS : SHLD_REQUESTS;
        s.n[base]++;
        s.n[base + 1] += wavefronts_of(r);
    }
}

/* ---- the running block's tally (one per host thread) --------------------------------- */

struct tally {
    std::vector<std::unordered_map<site_key, uint32_t, site_hash>> reached;   /* per lane */
    std::unordered_map<request_key, size_t, request_hash> index;
    std::vector<request> requests;
    sums done;   /* what needs no grouping: barriers, shuffles, mma, modelled requests */
    uint64_t barriers_passed = 0;
    std::vector<uint64_t> load_phase;   /* per warp: 1 + barriers_passed at its last load */

    void clear()
    {
        for (auto &m : reached)
            m.clear();
        index.clear();
        requests.clear();
        done = sums{};
        barriers_passed = 0;
        load_phase.clear();
    }
};

thread_local tally block_tally;

/* ---- the launch's totals ------------------------------------------------------------- */

std::mutex totals_lock;
sums totals;
size_t totals_static_bytes = 0;
std::unordered_set<uintptr_t> totals_sectors[2];   /* the launch's distinct sectors */

/* The sectors of the device allocations that hold any of `seen`: the most distinct
 * sectors a sampled grid's unsampled blocks can add to them. Called by the launching
 * thread once the blocks are done (find_allocation takes the lock it may hold). */
uint64_t allocation_sectors(const std::unordered_set<uintptr_t> &seen)
{
    std::vector<uintptr_t> sectors(seen.begin(), seen.end());
    std::sort(sectors.begin(), sectors.end());
    uint64_t held = 0;
    const allocation *last = nullptr;
    for (uintptr_t sector : sectors) {
        const char *at = (const char *)(sector * 32);
        if (last && at >= last->base && at < last->base + last->bytes)
            continue;
        last = find_allocation(at, 1);
        if (last)
            held += (last->bytes + 31) / 32;   /* its base is 256-byte aligned */
    }
    return held;
}

/* The running block's sectors join the launch's (under totals_lock). */
void merge_block_sectors()
{
    for (int write = 0; write < 2; write++) {
        totals_sectors[write].insert(block_sectors[write].begin(), block_sectors[write].end());
        block_sectors[write].clear();
    }
}

/* A warp's global load starts a new phase of its loads when none came since the block's
 * last barrier: the phases a warp must wait out one after another (docs/gpu.md, "latency"). */
void note_global_load(tally &t, int warp)
{
    if ((size_t)warp >= t.load_phase.size())
        t.load_phase.resize((size_t)warp + 1);
    if (t.load_phase[(size_t)warp] != t.barriers_passed + 1) {
        t.load_phase[(size_t)warp] = t.barriers_passed + 1;
        t.done.load_phases++;
    }
}

/* A demangled function name less its parameter list (the last parenthesised group at depth
 * 0) and, for a template instance, its return type (before the last space at depth 0). */
std::string bare_name(std::string name)
{
    int depth = 0;
    for (size_t i = name.size(); i-- > 0;) {
        depth += name[i] == ')' ? 1 : name[i] == '(' ? -1 : 0;
        if (name[i] == '(' && depth == 0) {
            name.resize(i);
            break;
        }
    }
    size_t start = 0;
    depth = 0;
    for (size_t i = 0; i < name.size(); i++) {
        depth += name[i] == '<' || name[i] == '(' ? 1 : name[i] == '>' || name[i] == ')' ? -1 : 0;
        if (name[i] == ' ' && depth == 0)
            start = i + 1;
    }
    return name.substr(start);
}

/* The kernel's demangled name with its template arguments, from the object's symbols
 * (resources.h: function_name); `fallback` (the name at the launch) when there are none. */
std::string kernel_name(const void *kernel, const char *fallback)
{
    static std::mutex lock;
    static std::map<const void *, std::string> known;
    std::lock_guard<std::mutex> hold(lock);
    auto it = known.find(kernel);
    if (it != known.end())
        return it->second;
    const std::string found = bare_name(function_name(kernel));
    return known[kernel] = found.empty() ? fallback : found;
}

/* The path of a launch's .cu file relative to the source tree. */
const char *source_relative(const char *file)
{
    const size_t root = strlen(GB_EMU_SOURCE_ROOT);
    return strncmp(file, GB_EMU_SOURCE_ROOT, root) == 0 && file[root] == '/' ? file + root + 1
                                                                              : file;
}

/* A string as a JSON string's contents (names hold no control characters). */
std::string json_text(const std::string &s)
{
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\')
            out += '\\';
        out += c;
    }
    return out;
}

uint64_t scaled(uint64_t n, uint64_t total, uint64_t run)
{
    return run == total ? n : (uint64_t)std::llround((double)n * (double)total / (double)run);
}

/* The real build's registers for the kernel and its sm_90 occupancy at this launch's block
 * and dynamic shared memory (resources.h); null where no table has the kernel. */
std::string resource_fields(const kernel_run &run, const void *kernel)
{
    const KernelResources *r = kernel_resources(kernel);
    if (!r)
        return ",\"registers\":null,\"occupancy\":null";
    const int threads = (int)(run.block.x * run.block.y * run.block.z);
    const Occupancy o = sm90_occupancy(*r, threads, run.dynamic_bytes);
    char text[256];
    snprintf(text, sizeof text, ",\"registers\":%d,\"occupancy\":{\"blocks_per_sm\":%d,"
             "\"warps_per_sm\":%d,\"fraction\":%.4f,\"limiter\":\"%s\"}", r->registers,
             o.blocks_per_sm, o.warps_per_sm, o.fraction, o.limiter);
    return text;
}

/* The launch's distinct sectors of loads (0) or stores (1): exact when every block ran;
 * sampled, scaled to the grid but no more than the allocations they lie in hold (blocks
 * that share data, such as attention's K and V, would otherwise count it once each). */
uint64_t unique_sectors(int write, uint64_t total, uint64_t emulated)
{
    const uint64_t seen = scaled(totals_sectors[write].size(), total, emulated);
    if (total == emulated)
        return seen;
    return std::min(seen, allocation_sectors(totals_sectors[write]));
}

/* The source line of each code site (the call before its return address), found once per
 * site with one addr2line per launch for the sites it adds (resources.h: source_lines).
 * Under totals_lock. */
std::unordered_map<uintptr_t, SourceLine> site_lines;

void locate_sites(const sums &s)
{
    std::vector<uintptr_t> sites;
    std::vector<const void *> code;
    for (const auto &kv : s.sites)
        if (kv.first.code >> 2 == (int)access_kind::plain && !site_lines.count(kv.first.site) &&
            std::find(sites.begin(), sites.end(), kv.first.site) == sites.end()) {
            sites.push_back(kv.first.site);
            code.push_back((const char *)kv.first.site - 1);
        }
    const std::vector<SourceLine> lines = source_lines(code);
    for (size_t i = 0; i < sites.size(); i++)
        site_lines[sites[i]] = lines[i];
}

SourceLine line_of(const site_key &k)
{
    if (k.code >> 2 == (int)access_kind::cp_async)
        return SourceLine{copy_site_file(k.site), copy_site_line(k.site)};
    return site_lines.at(k.site);
}

/* The requests whose source line the real build's lines table has, and their weights
 * summed: each request charged its line's instructions of each class per access. */
struct line_charge {
    uint64_t requests = 0;
    double instructions = 0, fp32 = 0, sfu = 0;
};

line_charge charge_lines(const void *kernel, const sums &s)
{
    locate_sites(s);
    line_charge c;
    for (const auto &kv : s.sites) {
        const bool store = kv.first.code & 1, shared = kv.first.code >> 1 & 1;
        if (kv.first.code >> 2 == (int)access_kind::cp_async && store)
            continue;   /* a cp.async's shared store: the same instruction as its global load */
        const LineWeight *w = line_weight(kernel, line_of(kv.first), shared, store);
        if (!w)
            continue;
        c.requests += kv.second;
        c.instructions += (double)kv.second * w->instructions;
        c.fp32 += (double)kv.second * w->fp32;
        c.sfu += (double)kv.second * w->sfu;
    }
    return c;
}

/* The kernel's CUDA-core, SFU and issued warp instructions, estimated from its PTX: each
 * warp-level memory instruction executed at a source line of the lines table charged that
 * line's weight (the instructions of its loop per access), every other one the kernel's
 * average (its PTX's static counts over its memory instructions); and the global loads a
 * warp has in flight, its loading loops' loads per iteration (docs/gpu.md, "The time of a
 * kernel"). Unknown without the real build's table. */
struct ptx_estimate {
    bool known = false;
    uint64_t fp32_ops = 0, sfu_ops = 0;   /* lane operations */
    uint64_t instructions = 0;            /* warp-level */
    double matched = -1;   /* the memory instructions charged their line's weight; -1: none ran */
    double loads_in_flight = 0;   /* global loads per iteration of its loading loops; 0: none */
};

ptx_estimate estimate_from_ptx(const void *kernel, const sums &s)
{
    ptx_estimate e;
    const KernelResources *r = kernel_resources(kernel);
    if (!r || r->ptx_memory == 0)
        return e;
    /* a cp.async is one instruction, counted as a global load and a shared store; a wgmma
     * is one a warp (its issue), whose operand reads are the tensor cores' */
    const double memory = (double)(s.n[GLD_REQUESTS] + s.n[GST_REQUESTS] + s.n[SHLD_REQUESTS] +
                                   s.n[SHST_REQUESTS] - s.n[CP_ASYNC_REQUESTS] -
                                   s.n[WGMMA_REQUESTS] + s.n[WGMMA_ISSUES]);
    const line_charge lines = charge_lines(kernel, s);
    const double per_memory = std::max(0.0, memory - (double)lines.requests) / r->ptx_memory;
    e.known = true;
    e.fp32_ops = (uint64_t)std::llround(32.0 * (lines.fp32 + per_memory * r->ptx_fp32));
    e.sfu_ops = (uint64_t)std::llround(32.0 * (lines.sfu + per_memory * r->ptx_sfu));
    e.instructions = (uint64_t)std::llround(lines.instructions +
                                            per_memory * r->ptx_instructions);
    if (memory > 0)
        e.matched = (double)lines.requests / memory;
    if (r->ptx_loops > 0)
        e.loads_in_flight = (double)r->ptx_loop_loads / r->ptx_loops;
    return e;
}

/* ,"NAME":V, or ,"NAME":null when the figure is not known. */
void optional_number(std::string &out, const char *name, bool known, uint64_t v)
{
    out += ",\"" + std::string(name) + "\":" + (known ? std::to_string(v) : "null");
}

std::string kernel_fields(const kernel_run &run, const void *kernel, const sums &s,
                          size_t static_bytes, uint64_t total, uint64_t emulated)
{
    char head[1024];
    snprintf(head, sizeof head, "\"kernel\":\"%s\",\"file\":\"%s\",\"grid\":[%u,%u,%u],"
             "\"block\":[%u,%u,%u],\"dyn_smem\":%zu,\"static_smem\":%zu,\"blocks_total\":%llu,"
             "\"blocks_emulated\":%llu",
             json_text(kernel_name(kernel, run.site.kernel)).c_str(),
             json_text(source_relative(run.site.file)).c_str(), run.grid.x, run.grid.y,
             run.grid.z, run.block.x, run.block.y, run.block.z, run.dynamic_bytes, static_bytes,
             (unsigned long long)total, (unsigned long long)emulated);
    std::string out = head;
    auto number = [&](const char *name, uint64_t v) {
        out += ",\"" + std::string(name) + "\":" + std::to_string(scaled(v, total, emulated));
    };
    for (int i = 0; i < BARRIERS; i++)
        number(counter_names[i], s.n[i]);
    out += ",\"mma\":{";
    for (const auto &kv : s.mma)
        out += (out.back() == '{' ? "\"" : ",\"") + kv.first + "\":" +
               std::to_string(scaled(kv.second, total, emulated));
    const ptx_estimate ptx = estimate_from_ptx(kernel, s);
    out += "}";
    optional_number(out, "fp32_ops", ptx.known, scaled(ptx.fp32_ops, total, emulated));
    optional_number(out, "sfu_ops", ptx.known, scaled(ptx.sfu_ops, total, emulated));
    number("barriers", s.n[BARRIERS]);
    number("atomics", s.atomics);
    number("shuffles", s.n[SHUFFLES]);
    out += resource_fields(run, kernel);
    out += ",\"unique_sectors\":{\"loads\":" + std::to_string(unique_sectors(0, total, emulated)) +
           ",\"stores\":" + std::to_string(unique_sectors(1, total, emulated)) + "}";
    number("gld_phases", s.load_phases);
    optional_number(out, "instructions", ptx.known, scaled(ptx.instructions, total, emulated));
    char matched[48] = "null";
    if (ptx.matched >= 0)
        snprintf(matched, sizeof matched, "%.2f", ptx.matched);
    out += ",\"instructions_matched\":" + std::string(matched);
    char in_flight[48] = "null";
    if (ptx.loads_in_flight > 0)
        snprintf(in_flight, sizeof in_flight, "%.2f", ptx.loads_in_flight);
    out += ",\"loads_in_flight\":" + std::string(in_flight);
    return out;
}

}  // namespace

const bool counting = count_path() != nullptr;

/* ---- sampling ------------------------------------------------------------------------ */

bool sampling()
{
    return counting && sample_setting() != 0;
}

uint64_t blocks_to_run(uint64_t total)
{
    const uint64_t k = counting ? sample_setting() : 0;
    return k && total > k ? k : total;
}

uint64_t sampled_block(uint64_t i, uint64_t run, uint64_t total)
{
    if (run == total)
        return i;
    return (uint64_t)((unsigned __int128)i * (total - 1) / (run - 1));
}

/* ---- what the executor hands over ------------------------------------------------------ */

void count_access(int lane, space where, access_kind kind, const void *p, size_t bytes,
                  bool write, uintptr_t site)
{
    if (bytes == 0)
        return;
    tally &t = block_tally;
    if ((size_t)lane >= t.reached.size())
        t.reached.resize((size_t)lane + 1);
    const site_key at{site, (int)kind << 2 | (int)where << 1 | (int)write};
    const request_key key{at, lane / 32, t.reached[(size_t)lane][at]++};
    if (where == space::global && !write)
        note_global_load(t, lane / 32);
    auto found = t.index.emplace(key, t.requests.size());
    if (found.second)
        t.requests.push_back(request{where, write, kind, {}});
    t.requests[found.first->second].lanes.push_back(
        lane_access{(uintptr_t)p, (uint32_t)bytes, lane % 32});
}

void count_request(space where, bool write, const uintptr_t addr[32], size_t bytes, int lanes)
{
    request r{where, write, access_kind::plain, {}};
    for (int i = 0; i < lanes; i++)
        r.lanes.push_back(lane_access{addr[i], (uint32_t)bytes, i});
    reduce(r, block_tally.done);
}

void count_barrier()
{
    block_tally.done.n[BARRIERS]++;
    block_tally.barriers_passed++;
}

void count_shuffle()
{
    block_tally.done.n[SHUFFLES]++;
}

void count_block_done(size_t static_bytes)
{
    tally &t = block_tally;
    sums block = t.done;
    for (const request &r : t.requests)
        reduce(r, block);
    for (const auto &kv : t.index)
        block.sites[kv.first.at]++;
    t.clear();
    std::lock_guard<std::mutex> hold(totals_lock);
    totals.add(block);
    totals_static_bytes = std::max(totals_static_bytes, static_bytes);
    merge_block_sectors();
}

void run_counted_kernel(const kernel_run &run, const void *kernel)
{
    const uint64_t seq = next_seq++;
    {
        std::lock_guard<std::mutex> hold(totals_lock);
        totals = sums{};
        totals_static_bytes = 0;
        totals_sectors[0].clear();
        totals_sectors[1].clear();
    }
    run_kernel(run);
    const uint64_t total = (uint64_t)run.grid.x * run.grid.y * run.grid.z;
    char head[96];
    snprintf(head, sizeof head, "{\"type\":\"kernel\",\"seq\":%llu,\"stream\":%u,",
             (unsigned long long)seq, counted_stream);
    std::lock_guard<std::mutex> hold(totals_lock);
    append_line(head + kernel_fields(run, kernel, totals, totals_static_bytes, total,
                                     blocks_to_run(total)) + "}");
}

void set_counted_stream(unsigned id)
{
    counted_stream = id;
}

void count_record(const char *type, const std::string &fields)
{
    char head[128];
    snprintf(head, sizeof head, "{\"type\":\"%s\",\"seq\":%llu,\"stream\":%u", type,
             (unsigned long long)next_seq++, counted_stream);
    append_line(head + (fields.empty() ? "" : "," + fields) + "}");
}

/* ---- WMMA (gb_emu/kernel.h) ----------------------------------------------------------- */

bool counting_on()
{
    return counting;
}

void count_fragment(const void *p, unsigned ldm, int col_major, size_t element_bytes,
                    bool accumulator, bool write)
{
    const space where = device_arena_holds(p) ? space::global : space::shared;
    const uintptr_t base = (uintptr_t)p;
    uintptr_t addr[32];
    if (!accumulator) {
        /* ldmatrix.x4: lane l, matrix l / 8: lines 8 (m % 2) .. +7, 16-byte half m / 2 */
        for (int l = 0; l < 32; l++) {
            const int m = l / 8, line = l % 8 + 8 * (m % 2);
            addr[l] = base + ((size_t)line * ldm + (size_t)(m / 2) * 8) * element_bytes;
        }
        count_request(where, write, addr, 16);
        return;
    }
    /* the m16n8k16 accumulator layout: lane l holds rows l / 4 (+ 8), columns
     * 2 (l % 4) (+ 1) (+ 8) */
    for (int half_row = 0; half_row < 2; half_row++)
        for (int half_col = 0; half_col < 2; half_col++)
            for (int pair = 0; pair < (col_major ? 2 : 1); pair++) {
                for (int l = 0; l < 32; l++) {
                    const size_t row = (size_t)(l / 4 + 8 * half_row);
                    const size_t col = (size_t)(2 * (l % 4) + 8 * half_col + pair);
                    addr[l] = base + (col_major ? col * ldm + row : row * ldm + col) *
                                         element_bytes;
                }
                count_request(where, write, addr, col_major ? element_bytes : 2 * element_bytes);
            }
}

void count_ldmatrix(const uintptr_t rows[32], int lanes)
{
    count_request(space::shared, false, rows, 16, lanes);
}

void count_wgmma_operand(const uintptr_t rows[32])
{
    count_request(space::shared, false, rows, 16, 32);
    block_tally.done.n[WGMMA_REQUESTS]++;
}

void count_wgmma_issue()
{
    block_tally.done.n[WGMMA_ISSUES]++;
}

void count_mma(const char *shape)
{
    block_tally.done.mma[shape]++;
}

void count_atomic()
{
    block_tally.done.atomics++;
}

}  // namespace gb_emu
