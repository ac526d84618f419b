/* Microbenchmarks behind `gearbox bench KIND`: measured figures printed next to this
 * machine's limits, for docs/BENCHMARKS.md. Benchmarks are not tests: they assert
 * nothing about time. Each takes the verb's remaining arguments (argv[0] is the KIND). */
#ifndef GB_BENCH_H
#define GB_BENCH_H

int gb_bench_attn(int argc, char **argv);
int gb_bench_optim(int argc, char **argv);
int gb_bench_matmul(int argc, char **argv);
int gb_bench_step(int argc, char **argv);

#endif
