/* The real build's kernel resources and sm_90's launch and occupancy rules (resources.h).
 *
 * A table (cuda_emu/resources.py writes it: a header line, then "symbol registers
 * static_smem local_bytes max_threads_bound min_blocks_bound" per kernel, tab-separated) is
 * read once per loaded object, the first time one of its kernels launches. The launched
 * kernel's own name comes from addr2line on the object (the emulated build keeps its
 * symbols and a -g1 line table), and both names are demangled before they are compared:
 * g++ mangles a `static` kernel with an L (_ZL12decay_kernelPflf) where nvcc does not.
 * The object's lines table (X.lines.tsv, resources.py) is read with it, for the counting
 * mode's weights per source line, which it finds for an access with addr2line too.
 */
#include "resources.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "emu.h"

namespace gb_emu {

namespace {

/* sm_90's figures (CUDA's occupancy calculator, cuda_occupancy.h, for compute 9.0). */
constexpr int WARP = 32;
constexpr int REGS_PER_SM = 65536;
constexpr int REGS_PER_BLOCK = 65536;
constexpr int REG_UNIT = 256;              /* registers are allocated per warp in these */
constexpr int SUB_PARTITIONS = 4;
constexpr int WARPS_PER_SM = 2048 / WARP;
constexpr int BLOCKS_PER_SM = 32;
constexpr size_t SMEM_PER_SM = 228u << 10;
constexpr size_t SMEM_RESERVED = 1u << 10;  /* per block, by the driver (sm_80 and later) */
constexpr size_t SMEM_UNIT = 128;
constexpr size_t SMEM_DEFAULT = 48u << 10;  /* per block without cudaFuncSetAttribute */
constexpr size_t SMEM_OPTIN = 227u << 10;   /* per block with it */

int round_up(int n, int unit)
{
    return (n + unit - 1) / unit * unit;
}

std::string demangled(const std::string &symbol)
{
    int status = 0;
    char *d = abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status);
    std::string out = status == 0 && d ? d : symbol;
    free(d);
    return out;
}

/* A lines table's key: the file's last component, the line, the space ("global",
 * "shared", "generic") and the direction ("load", "store", "atomic"). */
using line_key = std::tuple<std::string, int, std::string, std::string>;

/* A line's weights: of all its accesses, and of those inlined through each chain of call
 * sites (files by their last component, innermost first) where nvcc inlined it through
 * several. */
struct line_weights {
    LineWeight all = {};
    std::vector<std::pair<std::vector<SourcePlace>, LineWeight>> chains;
};

struct table {
    std::string path;
    bool present = false;
    std::map<std::string, KernelResources> rows;   /* by demangled name */
    std::map<std::string, std::map<line_key, line_weights>> lines;   /* the same */
};

std::string last_component(const std::string &path)
{
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

/* The tab-separated fields of a line, less its newline. */
std::vector<std::string> tab_fields(const char *line)
{
    std::vector<std::string> fields(1);
    for (const char *c = line; *c && *c != '\n'; c++) {
        if (*c == '\t')
            fields.emplace_back();
        else
            fields.back() += *c;
    }
    return fields;
}

/* The call sites of a lines table's row, "FILE:LINE;FILE:LINE..." (files by their last
 * component); a malformed one comes back shorter than its colons say. */
std::vector<SourcePlace> call_sites(const std::string &text)
{
    std::vector<SourcePlace> out;
    for (size_t from = 0; from < text.size();) {
        const size_t end = std::min(text.find(';', from), text.size());
        const size_t colon = text.rfind(':', end);
        char *stop = nullptr;
        const long line = colon == std::string::npos || colon < from
                              ? 0 : strtol(text.c_str() + colon + 1, &stop, 10);
        if (line <= 0 || stop != text.c_str() + end)
            break;
        out.push_back(SourcePlace{last_component(text.substr(from, colon - from)), (int)line});
        from = end + 1;
    }
    return out;
}

/* Reads the lines table `path` into t (absent: none; the counting mode then falls back to
 * the kernels' averages); a malformed line stops the process naming the file and line. */
void read_lines(const std::string &path, table &t)
{
    FILE *f = fopen(path.c_str(), "r");
    if (!f)
        return;
    char line[4096];
    for (int n = 1; fgets(line, sizeof line, f); n++) {
        if (n == 1)
            continue;   /* the header */
        const std::vector<std::string> v = tab_fields(line);
        char *end[4] = {};
        LineWeight w = {};
        std::vector<SourcePlace> callers;
        const bool fields = v.size() == 9;
        const int at = fields ? (int)strtol(v[2].c_str(), &end[0], 10) : 0;
        if (fields) {
            w.instructions = strtod(v[5].c_str(), &end[1]);
            w.fp32 = strtod(v[6].c_str(), &end[2]);
            w.sfu = strtod(v[7].c_str(), &end[3]);
            callers = call_sites(v[8]);
        }
        if (!fields || *end[0] || *end[1] || *end[2] || *end[3] ||
            callers.size() != (size_t)std::count(v[8].begin(), v[8].end(), ':'))
            violation("%s:%d: not a row of a lines table (symbol, file, line, space, direction, "
                      "three weights and the call sites, as cuda_emu/resources.py writes them): "
                      "rebuild it (ninja)", path.c_str(), n);
        line_weights &row =
            t.lines[demangled(v[0])][line_key{last_component(v[1]), at, v[3], v[4]}];
        if (callers.empty())
            row.all = w;
        else
            row.chains.emplace_back(callers, w);
    }
    fclose(f);
}

/* Reads `path` (absent: an empty table, present = false); a malformed line stops the
 * process naming the file and line. */
std::unique_ptr<table> read_table(const std::string &path)
{
    auto t = std::make_unique<table>();
    t->path = path;
    FILE *f = fopen(path.c_str(), "r");
    if (!f)
        return t;
    t->present = true;
    char line[4096];
    for (int n = 1; fgets(line, sizeof line, f); n++) {
        if (n == 1)
            continue;   /* the header */
        char symbol[2048];
        KernelResources r = {};
        const int fields = sscanf(line, "%2047s %d %d %d %d %d %d %d %d %d %d %d", symbol,
                                  &r.registers, &r.static_smem, &r.local_bytes,
                                  &r.max_threads_bound, &r.min_blocks_bound, &r.ptx_instructions,
                                  &r.ptx_memory, &r.ptx_fp32, &r.ptx_sfu, &r.ptx_loops,
                                  &r.ptx_loop_loads);
        if (fields != 6 && fields != 12)
            violation("%s:%d: not a row of a resource table (symbol and five numbers, or eleven "
                      "with the PTX's instruction classes and loops, as cuda_emu/resources.py "
                      "writes them): rebuild it (ninja)", path.c_str(), n);
        t->rows[demangled(symbol)] = r;
    }
    fclose(f);
    return t;
}

/* An object's table named `suffix`: X.resources.tsv for X.so, P.resources.tsv for a
 * program P; the same for .lines.tsv. */
std::string table_path(const std::string &object, const char *suffix)
{
    const size_t n = object.size();
    const bool so = n > 3 && object.compare(n - 3, 3, ".so") == 0;
    return (so ? object.substr(0, n - 3) : object) + suffix;
}

/* A frame of addr2line's output, "PATH:LINE" or "PATH:LINE (discriminator N)"; "??:0"
 * where the line table says nothing. */
SourceLine frame_line(std::string text)
{
    text.resize(std::min(text.size(), text.find(" (discriminator")));
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || text[0] == '?')
        return SourceLine{"", 0};
    return SourceLine{text.substr(0, colon), atoi(text.c_str() + colon + 1)};
}

/* What `addr2line FLAGS -e OBJECT OFFSETS...` prints, a line each (none where it cannot
 * run): one process for any number of offsets. */
std::vector<std::string> addr2line(const std::string &object, const char *flags,
                                   const std::vector<size_t> &offsets)
{
    std::string command = "addr2line " + std::string(flags) + " -e '" + object + "'";
    for (size_t offset : offsets) {
        char address[32];
        snprintf(address, sizeof address, " 0x%zx", offset);
        command += address;
    }
    std::vector<std::string> out;
    FILE *p = popen((command + " 2>/dev/null").c_str(), "r");
    if (!p)
        return out;
    char text[4096];
    while (fgets(text, sizeof text, p)) {
        text[strcspn(text, "\n")] = '\0';
        out.push_back(text);
    }
    pclose(p);
    return out;
}

/* The frames of each of `wanted` (its index in `out`, its offset in `object`): `addr2line
 * -a -i` prints each address ("0x...") before its frames, innermost first; the first is
 * the line, the others the call sites it was inlined through. */
void lines_in(const std::string &object, const std::vector<std::pair<size_t, size_t>> &wanted,
              std::vector<SourceLine> &out)
{
    std::vector<size_t> offsets;
    for (const auto &w : wanted)
        offsets.push_back(w.second);
    size_t address = 0;
    int frames = 0;
    for (const std::string &text : addr2line(object, "-a -i", offsets)) {
        if (text.compare(0, 2, "0x") == 0) {
            frames = address++ < wanted.size() ? 0 : -1;
        } else if (frames >= 0) {
            SourceLine &at = out[wanted[address - 1].first];
            const SourceLine frame = frame_line(text);
            if (frames++ == 0)
                at = frame;
            else
                at.callers.push_back(frame);
        }
    }
}

/* The object holding `code` and the code's offset in it; false where dladdr cannot say. */
bool locate(const void *code, std::string *object, size_t *offset)
{
    Dl_info info;
    if (!code || !dladdr(code, &info) || !info.dli_fname)
        return false;
    *object = info.dli_fname;
    *offset = (size_t)((const char *)code - (const char *)info.dli_fbase);
    return true;
}

/* The mangled name of the function at `offset` in `object` (addr2line), or "". */
std::string symbol_at(const std::string &object, size_t offset)
{
    const std::vector<std::string> out = addr2line(object, "-f", {offset});
    return !out.empty() && out[0][0] != '?' ? out[0] : "";
}

struct kernel_entry {
    std::string name;            /* demangled; "" when unknown */
    const table *from = nullptr;
    const KernelResources *row = nullptr;
};

std::mutex lock;
std::map<std::string, std::unique_ptr<table>> tables;   /* by object path */
std::map<const void *, kernel_entry> kernels;

const table &table_of(const std::string &object)
{
    auto &t = tables[object];
    if (!t) {
        t = read_table(table_path(object, ".resources.tsv"));
        read_lines(table_path(object, ".lines.tsv"), *t);
    }
    return *t;
}

/* What the tables say of `kernel` (under the lock). */
const kernel_entry &entry_of(const void *kernel)
{
    auto found = kernels.find(kernel);
    if (found != kernels.end())
        return found->second;
    kernel_entry &e = kernels[kernel];
    Dl_info info;
    if (!dladdr(kernel, &info) || !info.dli_fname)
        return e;
    e.from = &table_of(info.dli_fname);
    if (!e.from->present)
        return e;   /* no row to find: spare the addr2line */
    e.name = function_name(kernel);
    if (e.name.empty())
        return e;
    auto row = e.from->rows.find(e.name);
    if (row != e.from->rows.end())
        e.row = &row->second;
    return e;
}

bool report_wanted()
{
    static const bool wanted = [] {
        const char *s = getenv("GEARBOX_CUDA_EMU_RESOURCES");
        if (s && *s && strcmp(s, "report") != 0)
            violation("GEARBOX_CUDA_EMU_RESOURCES=%s: the only value is `report` (each "
                      "kernel's registers and occupancy at its first launch)", s);
        return s && *s;
    }();
    return wanted;
}

/* GEARBOX_CUDA_EMU_RESOURCES=report: one line per kernel and configuration. */
void report_launch(const launch_site &site, const kernel_entry &e, unsigned threads,
                   size_t dynamic_smem)
{
    static std::set<std::tuple<const KernelResources *, unsigned, size_t>> said;
    if (!said.insert({e.row, threads, dynamic_smem}).second)
        return;
    const KernelResources &r = *e.row;
    const Occupancy o = sm90_occupancy(r, (int)threads, dynamic_smem);
    say("resources: %s (%s:%d): %d registers, %d bytes static shared memory, %d bytes local "
        "per thread; a block of %u threads with %zu bytes dynamic shared memory: %d blocks "
        "(%d warps) per SM, occupancy %.0f%%, limited by %s", site.kernel, site.file,
        site.line, r.registers, r.static_smem, r.local_bytes, threads, dynamic_smem,
        o.blocks_per_sm, o.warps_per_sm, 100.0 * o.fraction, o.limiter);
}

/* Why the block's registers do not fit (""): the hardware's check, which counts a block's
 * warps rounded up to the sub-partitions, as cuda_occupancy.h says it does. */
std::string register_refusal(const kernel_entry &e, unsigned threads)
{
    const int warps = (int)(threads + WARP - 1) / WARP;
    const int per_warp = round_up(e.row->registers * WARP, REG_UNIT);
    const long counted = (long)per_warp * round_up(warps, SUB_PARTITIONS);
    if (counted <= REGS_PER_BLOCK)
        return "";
    char why[1024];
    snprintf(why, sizeof why, "%d registers per thread (nvcc's figure for sm_90, %s) in a block "
             "of %u threads: %d warps of %d registers (allocated per warp in units of %d), "
             "counted as %ld with the warps rounded up to the SM's %d sub-partitions, above "
             "the %d registers of a block", e.row->registers, e.from->path.c_str(), threads,
             warps, per_warp, REG_UNIT, counted, SUB_PARTITIONS, REGS_PER_BLOCK);
    return why;
}

/* Why static plus dynamic shared memory does not fit a block (""). */
std::string shared_refusal(const kernel_entry &e, size_t dynamic_smem, bool opted_in)
{
    const size_t limit = opted_in ? SMEM_OPTIN : SMEM_DEFAULT;
    const size_t total = (size_t)e.row->static_smem + dynamic_smem;
    if (total <= limit)
        return "";
    char why[1024];
    snprintf(why, sizeof why, "%d bytes of static shared memory (nvcc's figure for sm_90, %s) "
             "and %zu dynamic: %zu bytes, above the %zu a block may have%s", e.row->static_smem,
             e.from->path.c_str(), dynamic_smem, total, limit,
             opted_in ? "" : " without cudaFuncSetAttribute(kernel, "
                             "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)");
    return why;
}

/* How many call sites, innermost first, the chains a and b share. */
size_t shared_sites(const std::vector<SourcePlace> &a, const std::vector<SourcePlace> &b)
{
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n].line == b[n].line &&
           last_component(a[n].file) == last_component(b[n].file))
        n++;
    return n;
}

/* line_weight's choice among a line's rows for an access inlined through `callers`. */
const LineWeight *best_chain(const line_weights &w, const std::vector<SourcePlace> &callers)
{
    const LineWeight *best = &w.all;
    size_t most = 0;
    for (const auto &chain : w.chains) {
        const size_t n = shared_sites(chain.first, callers);
        if (n > most) {
            most = n;
            best = &chain.second;
        } else if (n == most && n > 0) {
            best = &w.all;   /* two chains agree as far: neither is the access's */
        }
    }
    return best;
}

}  // namespace

std::string function_name(const void *code)
{
    std::string object;
    size_t offset = 0;
    if (!locate(code, &object, &offset))
        return "";
    const std::string symbol = symbol_at(object, offset);
    return symbol.empty() ? "" : demangled(symbol);
}

std::vector<SourceLine> source_lines(const std::vector<const void *> &code)
{
    std::vector<SourceLine> out(code.size(), SourceLine{"", 0});
    std::map<std::string, std::vector<std::pair<size_t, size_t>>> by_object;
    for (size_t i = 0; i < code.size(); i++) {
        std::string object;
        size_t offset = 0;
        if (locate(code[i], &object, &offset))
            by_object[object].push_back({i, offset});
    }
    for (const auto &o : by_object)
        lines_in(o.first, o.second, out);
    return out;
}

const LineWeight *line_weight(const void *kernel, const SourceLine &at, bool shared, bool store)
{
    std::lock_guard<std::mutex> hold(lock);
    const kernel_entry &e = entry_of(kernel);
    if (!e.from || e.name.empty())
        return nullptr;
    const auto rows = e.from->lines.find(e.name);
    if (rows == e.from->lines.end())
        return nullptr;
    const std::string file = last_component(at.file);
    const char *direction = store ? "store" : "load";
    for (const char *space : {shared ? "shared" : "global", "generic"}) {
        const auto w = rows->second.find(line_key{file, at.line, space, direction});
        if (w != rows->second.end())
            return best_chain(w->second, at.callers);
    }
    return nullptr;
}

const KernelResources *kernel_resources(const void *kernel_entry)
{
    std::lock_guard<std::mutex> hold(lock);
    return entry_of(kernel_entry).row;
}

const KernelResources *kernel_resources(const char *symbol)
{
    std::lock_guard<std::mutex> hold(lock);
    const std::string name = demangled(symbol);
    for (const auto &t : tables) {
        auto row = t.second->rows.find(name);
        if (row != t.second->rows.end())
            return &row->second;
    }
    return nullptr;
}

Occupancy sm90_occupancy(const KernelResources &r, int threads_per_block, size_t dynamic_smem)
{
    const int warps = (threads_per_block + WARP - 1) / WARP;
    const int per_warp = round_up(r.registers * WARP, REG_UNIT);
    int by_registers = INT_MAX;
    if (per_warp * round_up(warps, SUB_PARTITIONS) > REGS_PER_BLOCK)
        by_registers = 0;
    else if (per_warp > 0)
        by_registers = (REGS_PER_SM / SUB_PARTITIONS / per_warp) * SUB_PARTITIONS / warps;
    const size_t smem = (size_t)round_up((int)(r.static_smem + SMEM_RESERVED + dynamic_smem),
                                         (int)SMEM_UNIT);
    const int by_shared = smem > SMEM_OPTIN + SMEM_RESERVED ? 0 : (int)(SMEM_PER_SM / smem);
    const int by_threads = threads_per_block > 1024 ? 0 : WARPS_PER_SM / warps;
    const int blocks = std::min({by_registers, by_shared, by_threads, BLOCKS_PER_SM});
    Occupancy o;
    o.blocks_per_sm = blocks;
    o.warps_per_sm = blocks * warps;
    o.fraction = (double)o.warps_per_sm / WARPS_PER_SM;
    /* A tie names the limit no kernel change lifts first: full warps, then the block cap. */
    o.limiter = blocks == by_threads     ? "threads"
                : blocks == BLOCKS_PER_SM ? "blocks"
                : blocks == by_registers  ? "registers"
                                          : "shared memory";
    return o;
}

std::string launch_resources_refusal(const launch_site &site, const void *kernel,
                                     unsigned threads, size_t dynamic_smem, bool opted_in)
{
    std::lock_guard<std::mutex> hold(lock);
    const kernel_entry &e = entry_of(kernel);
    if (!e.from || !e.from->present) {
        static bool said = false;
        if (!said)
            say("%s: no table of the real kernels' resources (%s; the build writes one "
                "beside each emulated plugin where nvcc is found): launches are not checked "
                "against sm_90's registers and the kernels' static shared memory", site.kernel,
                e.from ? e.from->path.c_str() : "no loaded object holds the kernel");
        said = true;
        return "";
    }
    if (!e.row)
        violation("%s:%d: launch of %s: %s has no row for the kernel %s: the table is older "
                  "than the plugin (rebuild with ninja), or nvcc names the kernel otherwise",
                  site.file, site.line, site.kernel, e.from->path.c_str(),
                  e.name.empty() ? "(addr2line found no name)" : e.name.c_str());
    if (report_wanted())
        report_launch(site, e, threads, dynamic_smem);
    std::string why = register_refusal(e, threads);
    return why.empty() ? shared_refusal(e, dynamic_smem, opted_in) : why;
}

}  // namespace gb_emu
