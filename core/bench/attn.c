/* `gearbox bench attn`: placeholder until the attn benchmark lands. */
#include <stdio.h>

#include "bench.h"

int gb_bench_attn(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "gearbox bench attn: not available in this build\n");
    return 1;
}
