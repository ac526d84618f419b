/* `gearbox bench`: dispatches to the microbenchmarks in tools/bench/. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

const gb_cli_spec gb_cli_bench_spec = {
    .verb = "bench",
    .usage = "gearbox bench KIND [OPTIONS]",
    .about =
        "Microbenchmarks that print measured figures next to this machine's limits:\n"
        "  attn    forward+backward time and extra memory of each attention plugin, by T\n"
        "  optim   optimizer step time, bytes moved and GB/s, against a STREAM-style triad\n"
        "  matmul  sgemm GFLOP/s at the model's shapes (configs S and M), against the peak\n"
        "  step    ms per training step, tokens/s and MFU for a config\n",
    .notes = "`gearbox bench KIND --help` lists each one's options.\n",
    .stop_at_operand = 1,
};

int gb_cmd_bench(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } kinds[] = {{"attn", gb_bench_attn}, {"optim", gb_bench_optim},
                 {"matmul", gb_bench_matmul}, {"step", gb_bench_step}};
    gb_cli_parser p;
    gb_cli_begin(&p, &gb_cli_bench_spec, argc, argv);
    if (gb_cli_next(&p) == GB_CLI_EXIT)
        return p.status;
    if (p.next == argc)
        return gb_cli_usage_error("bench", "missing KIND (attn, optim, matmul or step)");
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (strcmp(argv[p.next], kinds[k].name) == 0)
            return kinds[k].run(argc - p.next, argv + p.next);
    return gb_cli_usage_error("bench", "unknown benchmark '%s' (attn, optim, matmul, step)",
                              argv[p.next]);
}
