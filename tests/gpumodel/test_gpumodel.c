/* Tests of the GPU time model (tools/gpumodel/gpumodel.c) on the hand-written records of
 * records.jsonl, whose answers are worked out by hand below from the H100's and H200's
 * figures: a coalesced float4 copy is DRAM-bound, a kernel of mma tiles compute-bound, one
 * block of one warp waiting on 1000 loads latency-bound; a stride-32 read coalesces to
 * 1/8, 32-way and 2-way bank conflicts read 32 and 2 (wavefronts over requests) less the
 * stores' none; a cuBLASLt matmul of whole 16-byte units takes the rate measured for
 * such products, an odd one its pass's rate for the odd LM head; a memset writes
 * through DRAM and a host copy crosses PCIe; a reduction's independent loads wait as many
 * at a time as its loops issue, a re-read whose distinct sectors fit in L2 a wave at a
 * time pays DRAM once, a kernel of one block
 * of 4 warps per SM is issue-bound; an event is skipped
 * and a record without a field, or not JSON, is refused naming what is wrong.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "gpumodel/gpumodel.h"

#define RECORDS 15

static int read_records(const char *path, gb_record *out, char (*why)[256], int *rc)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "test_gpumodel.c: cannot open %s\n", path);
        return -1;
    }
    char line[4096];
    int n = 0;
    while (n < RECORDS && fgets(line, sizeof line, f)) {
        rc[n] = gb_record_parse(line, &out[n], why[n], sizeof why[n]);
        n++;
    }
    fclose(f);
    return n;
}

static void check_table(void)
{
    const gb_gpu_spec *h100 = gb_gpu_find("h100"), *h200 = gb_gpu_find("H200");
    CHECK(h100 && h200 && !gb_gpu_find("A100"));
    CHECK(h100->sms == 132 && h200->sms == 132);
    CHECK_NEAR(h100->hbm_bytes_s, 3.35e12, 0);
    CHECK_NEAR(h200->hbm_bytes_s, 4.8e12, 0);
    CHECK_NEAR(gb_gpu_peak_flops(h100, "bf16"), 989.4e12, 0);
    CHECK_NEAR(gb_gpu_peak_flops(h100, "f32"), 66.9e12, 0);
}

/* 2 x 64 MiB over 3.0 TB/s (the measured share of 3.35) = 44.74 us, + 2.5 us of launch;
 * on the H200 over 4.8 x 3.0 / 3.35 TB/s = 31.22 us. L2 (24.4 us) and latency (16 waves
 * of 8 resident blocks x 132 SMs, one load per warp: 8.8 us) lose. */
static void check_copy(const gb_record *r)
{
    gb_gpu_estimate e = gb_gpu_predict_kernel(gb_gpu_find("H100"), &r->kernel);
    CHECK(e.bound == GB_BOUND_DRAM);
    CHECK_NEAR(e.bound_s[GB_BOUND_DRAM], 134217728.0 / 3.0e12, 1e-12);
    CHECK_NEAR(e.seconds, 134217728.0 / 3.0e12 + 2.5e-6, 1e-12);
    CHECK_NEAR(e.bound_s[GB_BOUND_LATENCY], 16 * 0.55e-6, 1e-12);
    CHECK_NEAR(e.bytes_requested / e.sector_bytes, 1.0, 0);
    CHECK_NEAR(e.occupancy, 1.0, 0);   /* 8 blocks of 8 warps fill 64 warps */
    CHECK(e.occupancy_estimated);
    gb_gpu_estimate h200 = gb_gpu_predict_kernel(gb_gpu_find("H200"), &r->kernel);
    CHECK_NEAR(h200.bound_s[GB_BOUND_DRAM], 134217728.0 / (4.8e12 * 3.0 / 3.35), 1e-12);
}

/* 1.2e8 m16n16k16 operations (WMMA's shape, 8192 FLOPs each) and 6e7 m16n8k16 ones
 * (mma.sync's, 4096 each) = 9.8304e11 + 2.4576e11 = 1.2288e12 FLOPs over 989.4 TFLOP/s =
 * 1241.96 us on 528 blocks (4 per SM, no idle SM); the roofline is the same compute time. */
static void check_mma(const gb_record *r)
{
    gb_gpu_estimate e = gb_gpu_predict_kernel(gb_gpu_find("H100"), &r->kernel);
    CHECK(e.bound == GB_BOUND_COMPUTE);
    CHECK_NEAR(e.bound_s[GB_BOUND_COMPUTE], 1.2288e12 / 989.4e12, 1e-12);
    CHECK_NEAR(e.seconds, 1.2288e12 / 989.4e12 + 2.5e-6, 1e-12);
    CHECK_NEAR(e.roofline_s, 1.2288e12 / 989.4e12, 1e-12);
    CHECK_NEAR(e.flops, 1.2288e12, 1);
}

/* The same kernel with its shared loads wgmma's operand reads: the latency bound keeps
 * only the global loads' part (the warps do not wait on the tensor cores' reads one by
 * one); the shared wavefronts, and so the shared bound, stay. */
static void check_wgmma_reads(const gb_record *r)
{
    const gb_gpu_spec *gpu = gb_gpu_find("H100");
    gb_kernel_counts k = r->kernel, none = r->kernel;
    k.wgmma_requests = k.shld_requests;
    none.shld_requests = 0;
    gb_gpu_estimate e = gb_gpu_predict_kernel(gpu, &k);
    gb_gpu_estimate base = gb_gpu_predict_kernel(gpu, &r->kernel);
    gb_gpu_estimate global_only = gb_gpu_predict_kernel(gpu, &none);
    CHECK_NEAR(e.bound_s[GB_BOUND_LATENCY], global_only.bound_s[GB_BOUND_LATENCY], 1e-15);
    CHECK(e.bound_s[GB_BOUND_LATENCY] < base.bound_s[GB_BOUND_LATENCY]);
    CHECK_NEAR(e.bound_s[GB_BOUND_SHARED], base.bound_s[GB_BOUND_SHARED], 1e-15);
}

/* One warp, 1000 loads one after another: 1000 x 0.55 us = 550 us, while its 32000 lane
 * operations on one SM of 128 lanes take 0.13 us and its 32 kB of sectors next to
 * nothing. A 4-byte load per request fills 1/8 of its sector. */
static void check_one_block(const gb_record *r)
{
    gb_gpu_estimate e = gb_gpu_predict_kernel(gb_gpu_find("H100"), &r->kernel);
    CHECK(e.bound == GB_BOUND_LATENCY);
    CHECK_NEAR(e.bound_s[GB_BOUND_LATENCY], 1000 * 0.55e-6, 1e-12);
    CHECK_NEAR(e.bound_s[GB_BOUND_COMPUTE], 32000.0 / (66.9e12 / 2) * 132, 1e-12);
    CHECK_NEAR(e.seconds, 550e-6 + 2.5e-6, 1e-12);
    CHECK_NEAR(e.bytes_requested / e.sector_bytes, 4004.0 / 32032.0, 1e-12);
}

static void check_counters(const gb_record *stride, const gb_record *conflict32,
                           const gb_record *conflict2)
{
    const gb_gpu_spec *gpu = gb_gpu_find("H100");
    gb_gpu_estimate s = gb_gpu_predict_kernel(gpu, &stride->kernel);
    CHECK_NEAR(s.bytes_requested / s.sector_bytes, 0.125, 0);
    CHECK_NEAR(s.occupancy, 0.25, 0);   /* the record's own, limited by registers */
    CHECK(!s.occupancy_estimated);
    gb_gpu_estimate c32 = gb_gpu_predict_kernel(gpu, &conflict32->kernel);
    gb_gpu_estimate c2 = gb_gpu_predict_kernel(gpu, &conflict2->kernel);
    /* loads 32 (or 2) wavefronts each, stores 1: (32 + 1) / 2 and (2 + 1) / 2 */
    CHECK_NEAR(c32.smem_wavefronts / c32.smem_requests, 16.5, 0);
    CHECK_NEAR(c2.smem_wavefronts / c2.smem_requests, 1.5, 0);
    CHECK(c32.bound_s[GB_BOUND_SHARED] > 10 * c2.bound_s[GB_BOUND_SHARED]);
}

/* The profile's cost per timed call: (80.61 - 73.87 ms) / 326 calls = 20.675 us. The
 * weight-gradient pass, 4.0475e12 FLOPs (49 products) in 7.691 ms less 49 calls' cost:
 * 606.16 TFLOP/s, the rate of a product of whole 16-byte units in every pass. The forward
 * pass's LM head (2 x 16384 x 768 x 50257 = 1.2648e12 FLOPs) takes what is left of 18.751 ms
 * less 49 calls' cost and the layers' 2.7827e12 FLOPs at 606.16: 96.205 TFLOP/s. cuDNN's
 * backward, 133.468 TFLOP/s over 4.638 ms, net of 12 calls: 141.011. Each plus a launch. */
static void check_matmul(const gb_record *r)
{
    const gb_gpu_spec *gpu = gb_gpu_find("H100");
    CHECK(r->type == GB_RECORD_MATMUL && strcmp(r->matmul.compute, "bf16") == 0);
    double flops = 2.0 * 16384 * 2304 * 768;
    gb_gpu_estimate fwd = gb_gpu_predict_matmul(gpu, &r->matmul, GB_PASS_FORWARD);
    gb_gpu_estimate dw = gb_gpu_predict_matmul(gpu, &r->matmul, GB_PASS_DW);
    CHECK(fwd.bound == GB_BOUND_FITTED);
    CHECK_NEAR(fwd.seconds, flops / 606.16e12 + 2.5e-6, 1e-9);
    CHECK_NEAR(dw.seconds, fwd.seconds, 0);
    gb_matmul_shape head = r->matmul;
    head.m = 50257;   /* the odd LM head of the forward pass */
    double head_flops = 2.0 * 50257 * 2304 * 768;
    gb_gpu_estimate odd_fwd = gb_gpu_predict_matmul(gpu, &head, GB_PASS_FORWARD);
    gb_gpu_estimate odd_dw = gb_gpu_predict_matmul(gpu, &head, GB_PASS_DW);
    CHECK_NEAR(odd_fwd.seconds, head_flops / 96.205e12 + 2.5e-6, 1e-8);
    CHECK_NEAR(odd_dw.seconds, head_flops / 606.16e12 + 2.5e-6, 1e-9);
    gb_gpu_estimate attn = gb_gpu_predict_cudnn_attn(gpu, 1e12, 1);
    CHECK_NEAR(attn.seconds, 1e12 / 141.011e12 + 2.5e-6, 1e-8);
}

/* 1 GB set at 3.0 TB/s: 333 us; 50 MB from the host at PCIe's 50 GB/s: 1 ms; each + 2.5 us. */
static void check_copies(const gb_record *memset, const gb_record *upload)
{
    const gb_gpu_spec *gpu = gb_gpu_find("H100");
    CHECK(memset->type == GB_RECORD_COPY && upload->type == GB_RECORD_COPY);
    gb_gpu_estimate m = gb_gpu_predict_copy(gpu, &memset->copy);
    gb_gpu_estimate u = gb_gpu_predict_copy(gpu, &upload->copy);
    CHECK(m.bound == GB_BOUND_DRAM && u.bound == GB_BOUND_PCIE);
    CHECK_NEAR(m.seconds, 1e9 / 3.0e12 + 2.5e-6, 1e-12);
    CHECK_NEAR(u.seconds, 50e6 / 50e9 + 2.5e-6, 1e-12);
}

/* 3 blocks of 8 warps, 1000 loads per warp in one phase: 2.5 in flight (its loops' loads
 * per iteration), 400 latencies of 0.55 us = 220 us; without the record's figure the
 * table's 4, 250 latencies (the old rule, one at a time, said 550). */
static void check_reduction(const gb_record *r)
{
    gb_gpu_estimate e = gb_gpu_predict_kernel(gb_gpu_find("H100"), &r->kernel);
    CHECK(e.bound == GB_BOUND_LATENCY);
    CHECK_NEAR(e.bound_s[GB_BOUND_LATENCY], 400 * 0.55e-6, 1e-12);
    gb_kernel_counts unsaid = r->kernel;
    unsaid.loads_in_flight = -1;
    CHECK_NEAR(gb_gpu_predict_kernel(gb_gpu_find("H100"), &unsaid).bound_s[GB_BOUND_LATENCY],
               250 * 0.55e-6, 1e-12);
}

/* 10.5e6 sectors pass through L2 (336 MB / 5.5 TB/s = 61.1 us) but only the 1e6 distinct
 * ones come from DRAM (32 MB / 3.0 TB/s = 10.7 us): L2-bound. */
static void check_l2_rule(const gb_record *r)
{
    gb_gpu_estimate e = gb_gpu_predict_kernel(gb_gpu_find("H100"), &r->kernel);
    CHECK_NEAR(e.bound_s[GB_BOUND_DRAM], 32e6 / 3.0e12, 1e-12);
    CHECK_NEAR(e.bound_s[GB_BOUND_L2], 336e6 / 5.5e12, 1e-12);
    CHECK(e.bound == GB_BOUND_L2);
    /* 64 MB distinct, more than L2's 50, over the grid's 16 waves (16384 blocks, 8 of
     * 256 threads resident per SM): 4 MB a wave, so still each distinct sector once */
    gb_kernel_counts too_big = r->kernel;
    too_big.unique_sectors = 2e6;
    CHECK_NEAR(gb_gpu_predict_kernel(gb_gpu_find("H100"), &too_big).bound_s[GB_BOUND_DRAM],
               64e6 / 3.0e12, 1e-12);
    /* the same 64 MB in one wave (132 x 8 blocks): every sector requested from DRAM */
    too_big.blocks_total = 132 * 8;
    CHECK_NEAR(gb_gpu_predict_kernel(gb_gpu_find("H100"), &too_big).bound_s[GB_BOUND_DRAM],
               336e6 / 3.0e12, 1e-12);
}

/* One block of 4 warps on each SM: one warp per scheduler, which issues every 4th clock,
 * so 132 x 4 x 1/4 x 1.98e9 instructions a second: 1e8 take 382.6 us. */
static void check_issue(const gb_record *r)
{
    gb_gpu_estimate e = gb_gpu_predict_kernel(gb_gpu_find("H100"), &r->kernel);
    CHECK(e.bound == GB_BOUND_ISSUE);
    CHECK_NEAR(e.bound_s[GB_BOUND_ISSUE], 1e8 / (132 * 1.98e9), 1e-12);
    CHECK(strcmp(gb_gpu_bound_name(e.bound), "issue") == 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test-gpumodel RECORDS.jsonl\n");
        return 2;
    }
    gb_record r[RECORDS];
    char why[RECORDS][256];
    int rc[RECORDS];
    check_table();
    if (!CHECK(read_records(argv[1], r, why, rc) == RECORDS))
        return check_exit("gpumodel");
    for (int i = 0; i < 13; i++)
        check_that(rc[i] == 0, "record %d: %s", i + 1, why[i]);
    check_copy(&r[0]);
    check_mma(&r[1]);
    check_wgmma_reads(&r[1]);
    check_one_block(&r[2]);
    check_counters(&r[3], &r[4], &r[5]);
    check_matmul(&r[6]);
    CHECK(r[7].type == GB_RECORD_OTHER);
    check_copies(&r[8], &r[9]);
    check_reduction(&r[10]);
    check_l2_rule(&r[11]);
    check_issue(&r[12]);
    CHECK(rc[13] == -1 && strstr(why[13], "\"gld_sectors\""));
    CHECK(rc[14] == -1 && strstr(why[14], "not a JSON object"));
    return check_exit("gpumodel");
}
