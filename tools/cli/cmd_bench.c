/* `gearbox bench`: dispatches to the microbenchmarks in tools/bench/. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static const char usage[] =
    "usage: gearbox bench KIND [OPTIONS]\n"
    "\n"
    "Microbenchmarks that print measured figures next to this machine's limits:\n"
    "  attn    forward+backward time and extra memory of each attention plugin, by T\n"
    "  optim   optimizer step time, bytes moved and GB/s, against a STREAM-style triad\n"
    "  matmul  sgemm GFLOP/s at the model's shapes (configs S and M), against the peak\n"
    "  step    ms per training step, tokens/s and MFU for a config\n"
    "\n"
    "`gearbox bench KIND --help` lists each one's options.\n";

int gb_cmd_bench(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "attn") == 0)
        return gb_bench_attn(argc - 1, argv + 1);
    if (strcmp(argv[1], "optim") == 0)
        return gb_bench_optim(argc - 1, argv + 1);
    if (strcmp(argv[1], "matmul") == 0)
        return gb_bench_matmul(argc - 1, argv + 1);
    if (strcmp(argv[1], "step") == 0)
        return gb_bench_step(argc - 1, argv + 1);
    return gb_cli_usage_error("bench", "unknown benchmark '%s' (attn, optim, matmul, step)",
                              argv[1]);
}
