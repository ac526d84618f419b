/* The counting mode (GEARBOX_CUDA_EMU_COUNT) on kernels whose counts are known by hand:
 * Nsight Compute's requests, sectors and wavefronts for a coalesced float4 copy, a
 * stride-32 float read, 32-way and 2-way shared bank conflicts, a transpose through a
 * padded tile (none) and an unpadded one (32-way), a cp.async tile load, WMMA bf16 loads
 * (global, and shared through ldmatrix's pattern, padded and not), an mma and an f32
 * accumulator store; the distinct sectors of a kernel that reads its data twice, its
 * phases of loads, and its CUDA-core and SFU operations and instructions as the PTX's
 * figures scale (from the test's table), and a light loop's accesses charged their line's
 * weight beside a heavy epilogue's; 32 lanes' atomicAdd; then a sampled launch scaled to its grid, and the lines of copies and
 * event records. The expected figures are worked out beside each kernel.
 *
 * The counting mode is read when the emulator loads, so the test runs itself twice as a
 * child ("count" and "sample") with the variables set, and checks the files they wrote.
 *
 * Written as CUDA (it is compiled through cu2cc.py like the plugins' .cu files).
 */
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "emu_test.h"

namespace wmma = nvcuda::wmma;

/* ---- kernels (one warp each unless said) ------------------------------------------------ */

/* 32 lanes x 16 bytes, consecutive: one load request of 512 bytes = 16 sectors, one store
 * the same. */
static __global__ void copy_float4(const float4 *in, float4 *out)
{
    out[threadIdx.x] = in[threadIdx.x];
}

/* Lane i reads float 32 i: 32 sectors for one request; the store is coalesced: 4. */
static __global__ void read_stride32(const float *in, float *out)
{
    out[threadIdx.x] = in[threadIdx.x * 32];
}

/* Word 32 i in bank 0 for every lane: a store and a load of 32 wavefronts each. Word
 * 2 i + 1: lanes i and i + 16 share a bank: 2 each. (The __syncwarp calls keep the compiler
 * from forwarding the stored values to the loads.) */
static __global__ void bank_conflicts(float *out)
{
    __shared__ float s[32 * 32];
    s[threadIdx.x * 32] = (float)threadIdx.x;
    __syncwarp();
    const float a = s[threadIdx.x * 32];
    s[threadIdx.x * 2 + 1] = a;
    __syncwarp();
    out[threadIdx.x] = s[threadIdx.x * 2 + 1];
}

/* A 32x32 block transposes a 32x32 tile: per warp (one row y) a coalesced load (4
 * sectors), a shared store of one row (1 wavefront), a barrier, a shared load of one column
 * (padded: words 33 x + y, all banks apart, 1 wavefront; unpadded: 32 x + y, all in one
 * bank, 32) and a coalesced store. */
template <int PAD> static __global__ void transpose(const float *in, float *out)
{
    __shared__ float tile[32][32 + PAD];
    const unsigned x = threadIdx.x, y = threadIdx.y;
    tile[y][x] = in[y * 32 + x];
    __syncthreads();
    out[y * 32 + x] = tile[x][y];
}

/* Each lane copies 16 consecutive bytes into shared memory with cp.async: one global load
 * request (16 sectors, 512 bytes; also a cp.async request) and one shared store of 16-byte
 * accesses (4 phases of 8 lanes, 128 bytes each: 4 wavefronts); then each lane reads its
 * own 16 bytes back (4 wavefronts) and stores them (16 sectors). */
static __global__ void cp_async_tile(const float4 *in, float4 *out)
{
    __shared__ float4 tile[32];
    __pipeline_memcpy_async(&tile[threadIdx.x], &in[threadIdx.x], 16);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    out[threadIdx.x] = tile[threadIdx.x];
}

/* A x B for one 16x16x16 tile: bf16 fragments loaded at leading dimensions lda and ldb,
 * one mma, the f32 accumulator stored to c row-major (ldm 16). */
static __device__ void tile_product(const __nv_bfloat16 *a, unsigned lda,
                                    const __nv_bfloat16 *b, unsigned ldb, float *c)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(fa, a, lda);
    wmma::load_matrix_sync(fb, b, ldb);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

/* A and B fragments loaded from global memory (16x16 bf16, ldm 16: 512 contiguous bytes,
 * 16 sectors each), one mma, and the f32 accumulator stored to global memory row-major
 * (ldm 16): 4 requests of 8 bytes per lane, each 8 rows of 32 bytes, 8 sectors. */
static __global__ void wmma_global(const __nv_bfloat16 *a, const __nv_bfloat16 *b, float *c)
{
    tile_product(a, 16, b, 16, c);
}

/* ldmatrix's pattern on shared tiles. The tiles are filled a 32-bit word per lane: A (16
 * lines of 24 bf16, 192 words) in 6 requests, B (16 lines of 16, 128 words) in 4, each 1
 * wavefront. A phase of ldmatrix.x4 reads 8 lines' 16-byte halves: at ldm 24 (48 bytes a
 * line) the 8 lines start in banks 0, 12, 24, 4, 16, 28, 8, 20 and take 4 each, all apart:
 * 1 wavefront a phase, 4 the load; at ldm 16 (32 bytes) lines r and r + 4 share banks: 2 a
 * phase, 8 the load. Then an mma and the accumulator stored to global memory (as above). */
static __global__ void wmma_shared(float *c)
{
    __shared__ __align__(32) __nv_bfloat16 sa[16 * 24];
    __shared__ __align__(32) __nv_bfloat16 sb[16 * 16];
    uint32_t *wa = reinterpret_cast<uint32_t *>(sa), *wb = reinterpret_cast<uint32_t *>(sb);
    for (unsigned i = threadIdx.x; i < 192; i += 32)
        wa[i] = 0x3f803f80u;   // bf16 1.0 twice
    for (unsigned i = threadIdx.x; i < 128; i += 32)
        wb[i] = 0x3f803f80u;
    __syncwarp();
    tile_product(sa, 24, sb, 16, c);
}

/* A warp sum over 5 shuffles: 5 warp-level shuffle instructions per warp. */
/* The same 128 bytes read at two sites (two requests of 4 sectors: 8 sectors, 4 distinct),
 * 128 bytes stored (4 distinct); one phase of loads for the warp. Its row of the test's
 * table (counters.resources.tsv) says 12 PTX instructions, 3 of memory, 2 fp32, 1 SFU:
 * 3 warp-level memory instructions ran, so 12 instructions, 2 x 32 fp32 and 32 SFU lane
 * operations; and 2 loading loops with 5 global loads: 2.50 loads in flight. */
static __global__ void read_twice(const float *in, float *out)
{
    out[threadIdx.x] = in[threadIdx.x] * in[31 - threadIdx.x];
}

/* 32 lanes add 1 to one float: 32 atomic operations, and the float ends at 32. */
static __global__ void atomic_count(float *sum)
{
    atomicAdd(sum, 1.0f);
}

/* A light loop and a heavy epilogue: its rows of the lines table the test writes beside the
 * program (write_lines_table; made-up PTX figures) charge each of the loop's 8 loads 4
 * instructions and 1 fp32 (a generic load there: matched by the emulator's global one) and
 * the first store, whose straight-line code runs once, 40 instructions, 10 fp32 and 2 SFU;
 * the second store's line has no row, so it is charged the kernel's average (its row of
 * counters.resources.tsv: 30 instructions, 3 memory, 6 fp32, 3 SFU: 10, 2 and 1 per memory
 * instruction). 8 x 4 + 40 + 10 = 82 instructions, 32 x (8 + 10 + 2) = 640 fp32 and
 * 32 x (2 + 1) = 96 SFU lane operations, 9 of the 10 memory instructions matched (the
 * average alone would give 100 instructions). */
static const int loop_line = __LINE__ + 5, epilogue_line = __LINE__ + 6;
static __global__ void loop_epilogue(const float *in, float *out)
{
    float s = 0.0f;
    for (int i = 0; i < 8; i++)
        s += in[i * 32 + threadIdx.x];
    out[threadIdx.x] = s;
    out[32 + threadIdx.x] = s * 2.0f;
}

/* One helper inlined at two call sites, in a loop and after it: the lines table's rows
 * for the helper's line (write_lines_table) give the loop's chain 4 instructions an access,
 * the line as a whole 11, and the site after the loop two chains (20 and 50) that agree
 * with it equally far, so neither is taken. The 8 loads of the loop are charged by their
 * chain, the 1 after it by the line, and the store the kernel's average (its row: 30
 * instructions, 3 memory: 10): 8 x 4 + 11 + 10 = 53 (by the line alone, 9 x 11 + 10 = 109;
 * the first of the tied chains would give 62). */
static const int helper_line = __LINE__ + 3;
static __device__ __forceinline__ float element(const float *p, int i)
{
    return p[i];
}
static const int loop_site_line = __LINE__ + 6, tail_site_line = __LINE__ + 7;
static __global__ void two_sites(const float *in, float *out)
{
    float s = 0.0f;
#pragma unroll 1
    for (int i = 0; i < 8; i++)
        s += element(in, i * 32 + threadIdx.x);
    out[threadIdx.x] = s + element(in, threadIdx.x);
}

static __global__ void warp_sum(const float *in, float *out)
{
    float v = in[threadIdx.x];
    for (int d = 16; d > 0; d /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, d);
    if (threadIdx.x == 0)
        out[0] = v;
}

/* ---- the two children ------------------------------------------------------------------- */

template <class T> static T *device_array(size_t n, int fill_byte)
{
    T *p = nullptr;
    cudaMalloc(&p, n * sizeof(T));
    cudaMemset(p, fill_byte, n * sizeof(T));
    return p;
}

/* Launches each kernel once; whether atomic_count's sum came to 32. */
static bool launch_known_patterns()
{
    float *in = device_array<float>(32 * 32, 0), *out = device_array<float>(32 * 32, 0);
    __nv_bfloat16 *a = device_array<__nv_bfloat16>(256, 0x3f);
    __nv_bfloat16 *b = device_array<__nv_bfloat16>(256, 0x3f);
    cudaEvent_t mark;
    cudaEventCreate(&mark);
    cudaEventRecord(mark, nullptr);
    copy_float4<<<1, 32>>>(reinterpret_cast<const float4 *>(in), reinterpret_cast<float4 *>(out));
    read_stride32<<<1, 32>>>(in, out);
    bank_conflicts<<<1, 32>>>(out);
    transpose<1><<<1, dim3(32, 32)>>>(in, out);
    transpose<0><<<1, dim3(32, 32)>>>(in, out);
    cp_async_tile<<<1, 32>>>(reinterpret_cast<const float4 *>(in), reinterpret_cast<float4 *>(out));
    wmma_global<<<1, 32>>>(a, b, out);
    wmma_shared<<<1, 32>>>(out);
    warp_sum<<<1, 32>>>(in, out);
    read_twice<<<1, 32>>>(in, out);
    loop_epilogue<<<1, 32>>>(in, out);
    two_sites<<<1, 32>>>(in, out);
    float *sum = device_array<float>(1, 0), host_sum = 0;
    atomic_count<<<1, 32>>>(sum);
    cudaEventRecord(mark, nullptr);
    cudaDeviceSynchronize();
    cudaMemcpy(&host_sum, sum, sizeof host_sum, cudaMemcpyDeviceToHost);
    emu_free(in, out, a, b, sum);
    return host_sum == 32.0f;
}

/* 1000 blocks of one warp, each a coalesced float load and store; then 1000 blocks that
 * all read the same 128 bytes; sampled, 4 of each run. */
static void launch_sampled()
{
    float *in = device_array<float>(32 * 1000, 0), *out = device_array<float>(32 * 1000, 0);
    copy_float4<<<1000, 8>>>(reinterpret_cast<const float4 *>(in), reinterpret_cast<float4 *>(out));
    float *small_in = device_array<float>(32, 0), *small_out = device_array<float>(32, 0);
    read_twice<<<1000, 32>>>(small_in, small_out);
    cudaDeviceSynchronize();
    emu_free(in, out, small_in, small_out);
}

/* loop_epilogue's rows of the lines table, beside the program (`self`) where the emulator
 * looks for it, at the lines the kernel's loop and first store are on; and two_sites'
 * rows for its helper's line: the line's, and one per chain of call sites (two of them
 * tied). */
static void write_lines_table(const char *self)
{
    FILE *f = fopen((std::string(self) + ".lines.tsv").c_str(), "w");
    emu_check(f != nullptr, "the lines table can be written beside the program");
    const char *two = "_Z9two_sitesPKfPf\t/elsewhere/test_counters.cu";
    fprintf(f, "symbol\tfile\tline\tspace\tdirection\tinstructions\tfp32\tsfu\tcallers\n"
            "_Z13loop_epiloguePKfPf\t/elsewhere/test_counters.cu\t%d\tgeneric\tload\t4\t1\t0\t\n"
            "_Z13loop_epiloguePKfPf\t/elsewhere/test_counters.cu\t%d\tglobal\tstore\t40\t10\t2\t\n"
            "%s\t%d\tglobal\tload\t11\t0\t0\t\n"
            "%s\t%d\tglobal\tload\t4\t0\t0\t/elsewhere/test_counters.cu:%d\n"
            "%s\t%d\tglobal\tload\t20\t0\t0\t/elsewhere/test_counters.cu:%d;/k.cu:1\n"
            "%s\t%d\tglobal\tload\t50\t0\t0\t/elsewhere/test_counters.cu:%d;/j.cu:2\n",
            loop_line, epilogue_line, two, helper_line, two, helper_line, loop_site_line, two,
            helper_line, tail_site_line, two, helper_line, tail_site_line);
    fclose(f);
}

/* Runs this program as `role` with the counts going to `path` (and a sample of `sample`
 * blocks unless null); whether it exited 0. */
static bool run_child(const char *self, const char *role, const std::string &path,
                      const char *sample)
{
    unlink(path.c_str());
    const pid_t pid = fork();
    if (pid == 0) {
        setenv("GEARBOX_CUDA_EMU_COUNT", path.c_str(), 1);
        if (sample)
            setenv("GEARBOX_CUDA_EMU_COUNT_SAMPLE", sample, 1);
        execl(self, self, role, (char *)nullptr);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- reading the lines ----------------------------------------------------------------- */

static std::vector<std::string> lines_of(const std::string &path)
{
    std::vector<std::string> lines;
    std::ifstream in(path);
    for (std::string l; std::getline(in, l);)
        lines.push_back(l);
    return lines;
}

/* The line whose kernel name starts with `kernel` (its template arguments included). */
static std::string kernel_line(const std::vector<std::string> &lines, const std::string &kernel)
{
    for (const std::string &l : lines)
        if (l.find("\"kernel\":\"" + kernel) != std::string::npos)
            return l;
    return "";
}

/* The text after "field": up to the next comma or closing brace. */
static std::string field(const std::string &line, const std::string &name)
{
    const std::string key = "\"" + name + "\":";
    size_t at = line.find(key);
    if (at == std::string::npos)
        return "(absent)";
    at += key.size();
    size_t end = line[at] == '{' || line[at] == '[' ? line.find_first_of("}]", at) + 1
                                                    : line.find_first_of(",}", at);
    return line.substr(at, end - at);
}

struct expected {
    const char *field;
    const char *value;
};

static void check_kernel(const std::vector<std::string> &lines, const char *kernel,
                         std::initializer_list<expected> fields)
{
    const std::string line = kernel_line(lines, kernel);
    emu_check(!line.empty(), (std::string("a line for kernel ") + kernel).c_str());
    for (const expected &e : fields) {
        const std::string got = field(line, e.field);
        char what[512];
        snprintf(what, sizeof what, "%s: %s is %s (expected %s)", kernel, e.field, got.c_str(),
                 e.value);
        emu_check(got == e.value, what);
    }
}

static void check_known_patterns(const std::vector<std::string> &lines)
{
    check_kernel(lines, "copy_float4", {{"gld_requests", "1"}, {"gld_bytes", "512"},
        {"gld_sectors", "16"}, {"gst_requests", "1"}, {"gst_bytes", "512"}, {"gst_sectors", "16"},
        {"grid", "[1,1,1]"}, {"block", "[32,1,1]"}, {"blocks_emulated", "1"}});
    check_kernel(lines, "read_stride32", {{"gld_requests", "1"}, {"gld_bytes", "128"},
        {"gld_sectors", "32"}, {"gst_requests", "1"}, {"gst_sectors", "4"}});
    check_kernel(lines, "bank_conflicts", {{"shst_requests", "2"}, {"shst_wavefronts", "34"},
        {"shld_requests", "2"}, {"shld_wavefronts", "34"}, {"static_smem", "4096"}});
    check_kernel(lines, "transpose<1>", {{"gld_requests", "32"}, {"gld_sectors", "128"},
        {"shst_requests", "32"}, {"shst_wavefronts", "32"}, {"shld_requests", "32"},
        {"shld_wavefronts", "32"}, {"gst_requests", "32"}, {"gst_sectors", "128"},
        {"barriers", "1"}, {"gld_phases", "32"},
        {"unique_sectors", "{\"loads\":128,\"stores\":128}"}});
    check_kernel(lines, "transpose<0>", {{"shst_wavefronts", "32"}, {"shld_requests", "32"},
        {"shld_wavefronts", "1024"}});
    check_kernel(lines, "cp_async_tile", {{"cp_async_requests", "1"}, {"cp_async_bytes", "512"},
        {"gld_requests", "1"}, {"gld_sectors", "16"}, {"shst_requests", "1"},
        {"shst_wavefronts", "4"}, {"shld_requests", "1"}, {"shld_wavefronts", "4"},
        {"gst_requests", "1"}, {"gst_sectors", "16"}});
    check_kernel(lines, "wmma_global", {{"gld_requests", "2"}, {"gld_bytes", "1024"},
        {"gld_sectors", "32"}, {"mma", "{\"m16n16k16.bf16.f32\":1}"}, {"gst_requests", "4"},
        {"gst_bytes", "1024"}, {"gst_sectors", "32"}, {"shld_requests", "0"}});
    check_kernel(lines, "wmma_shared", {{"shst_requests", "10"}, {"shst_wavefronts", "10"},
        {"shld_requests", "2"}, {"shld_wavefronts", "12"}, {"gld_requests", "0"},
        {"gst_requests", "4"}, {"gst_sectors", "32"}});
    check_kernel(lines, "warp_sum", {{"shuffles", "5"}, {"gld_requests", "1"},
        {"gld_sectors", "4"}});
    check_kernel(lines, "read_twice", {{"gld_requests", "2"}, {"gld_sectors", "8"},
        {"unique_sectors", "{\"loads\":4,\"stores\":4}"}, {"gld_phases", "1"},
        {"instructions", "12"}, {"fp32_ops", "64"}, {"sfu_ops", "32"}, {"atomics", "0"},
        {"loads_in_flight", "2.50"}});
    check_kernel(lines, "warp_sum", {{"loads_in_flight", "null"}});
    check_kernel(lines, "loop_epilogue", {{"gld_requests", "8"}, {"gst_requests", "2"},
        {"instructions", "82"}, {"fp32_ops", "640"}, {"sfu_ops", "96"},
        {"instructions_matched", "0.90"}});
    check_kernel(lines, "two_sites", {{"gld_requests", "9"}, {"gst_requests", "1"},
        {"instructions", "53"}, {"instructions_matched", "0.90"}});
    check_kernel(lines, "read_twice", {{"instructions_matched", "0.00"}});
    check_kernel(lines, "atomic_count", {{"atomics", "32"}, {"gld_requests", "0"},
        {"gst_requests", "0"}});
    int events = 0, memsets = 0;
    for (const std::string &l : lines) {
        events += l.find("\"type\":\"event\"") != std::string::npos;
        memsets += l.find("\"type\":\"memcpy\"") != std::string::npos &&
                   field(l, "kind") == "\"memset\"";
    }
    emu_check(events == 2, "the two event records have a line each");
    emu_check(memsets == 5, "the five memsets have a line each");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "count") == 0) {
        return launch_known_patterns() ? 0 : 1;
    }
    if (argc > 1 && strcmp(argv[1], "sample") == 0) {
        launch_sampled();
        return 0;
    }
    char dir[] = "/tmp/gearbox-emu-counters-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    const std::string counted = std::string(dir) + "/count.jsonl";
    const std::string sampled = std::string(dir) + "/sample.jsonl";
    write_lines_table(argv[0]);
    emu_check(run_child(argv[0], "count", counted, nullptr),
              "the counting child ran, and its atomicAdd of 32 lanes summed to 32");
    check_known_patterns(lines_of(counted));
    emu_check(run_child(argv[0], "sample", sampled, "4"), "the sampling child ran");
    /* 1000 blocks of 8 lanes x 16 bytes: 128 bytes, 4 sectors a block, scaled from 4 */
    check_kernel(lines_of(sampled), "copy_float4", {{"blocks_total", "1000"},
        {"blocks_emulated", "4"}, {"gld_requests", "1000"}, {"gld_sectors", "4000"},
        {"gst_bytes", "128000"}, {"unique_sectors", "{\"loads\":1000,\"stores\":1000}"}});
    /* (every block of copy_float4 reads the same 4 sectors: their 4 distinct, scaled by 250,
     * are 1000, all within the allocations' 4000: the bound of a sampled grid.) read_twice
     * the same, but its loads and stores lie in allocations of 128 bytes, 4 sectors each */
    check_kernel(lines_of(sampled), "read_twice", {{"gld_sectors", "8000"},
        {"unique_sectors", "{\"loads\":4,\"stores\":4}"}});
    unlink(counted.c_str());
    unlink(sampled.c_str());
    rmdir(dir);
    return emu_finish("test_counters");
}
