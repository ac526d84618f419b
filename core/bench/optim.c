/* `gearbox bench optim`: placeholder until the optim benchmark lands. */
#include <stdio.h>

#include "bench.h"

int gb_bench_optim(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "gearbox bench optim: not available in this build\n");
    return 1;
}
