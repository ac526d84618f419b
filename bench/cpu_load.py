#!/usr/bin/env python3
"""gearbox and the PyTorch peer on a CPU that other processes share, in one command.

For each neighbourhood (alone; beside one or two CPU-bound processes, each at the normal
priority and at nice 19) and each config (S, the default run; M, 6 layers 384 wide, T 256,
batch 8) it runs, in turn and for several rounds, `gearbox train` at 1 thread, as the default run
is configured (`[run] threads = auto`), on every thread fixed (`threads = 0`) and (M) in
bf16, and bench/torch_gpt.py at 1 and 2 threads, changing which goes first each round. It prints the median ms/step of
each (min and max beside it) and the ratios taken pair by pair, round by round, so a drift
of the machine's speed during the call moves both sides of a ratio alike:

  gearbox vs PyTorch     PyTorch's best of 1 and 2 threads in the round / gearbox's step
                         (gearbox as configured, and on every thread)
  vs its 1 thread        gearbox at 1 thread / gearbox as configured (or every thread)
  bf16 vs fp32           gearbox fp32 / gearbox bf16, both as configured (M)

Every line carries the load average (/proc/loadavg, 1 minute) read before each run of the
cell, and the output opens with the CPU as `lscpu` names it. A neighbour is
`python3 -c 'while True: pass'`, started before the cell and killed after it.

Each run times --steps-S (or -M) steps after its untimed ones: gearbox's first 27 (the
first trial of threads = auto, 16 steps or 26 with its long block, and one more:
compare_torch.GEARBOX_AUTO_TRIAL), PyTorch's first 3.

usage: bench/cpu_load.py --python V/bin/python [--configs S,M] [--neighbours LIST]
                         [--rounds 3] [--steps-S 50] [--steps-M 8]
"""
import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import types

from compare_torch import CONFIGS, GEARBOX_AUTO_TRIAL, ROOT, gearbox_ms, prepare, torch_ms

# name: (CPU-bound neighbours, their nice value)
NEIGHBOURS = {
    'alone': (0, 0),
    'busy1': (1, 0),
    'nice1': (1, 19),
    'busy2': (2, 0),
    'nice2': (2, 19),
}
NEIGHBOUR_WORDS = {
    'alone': 'alone', 'busy1': 'beside 1 busy process', 'nice1': 'beside 1 busy process at nice 19',
    'busy2': 'beside 2 busy processes', 'nice2': 'beside 2 busy processes at nice 19',
}
TORCH_WARMUP = 3


def cpu_line():
    """'AMD EPYC (family 26, model 2; avx512f avx512_bf16)': lscpu's name, family, model."""
    out = subprocess.run(['lscpu'], capture_output=True, text=True, check=True).stdout
    f = {k.strip(): v.strip() for k, _, v in (l.partition(':') for l in out.splitlines())}
    flags = [x for x in ('avx2', 'avx512f', 'avx512_bf16', 'amx_bf16') if x in f.get('Flags', '').split()]
    return (f"{f.get('Model name', '?')} (family {f.get('CPU family', '?')}, model "
            f"{f.get('Model', '?')}; {f.get('CPU(s)', '?')} CPUs; {' '.join(flags) or 'no AVX2'})")


def load_average():
    with open('/proc/loadavg') as f:
        return float(f.read().split()[0])


def variants(config):
    """name -> what runs it: ('gearbox', extra settings) or ('torch', threads)."""
    v = {
        'gearbox 1 thread': ('gearbox', ['run.threads=1']),
        'gearbox default': ('gearbox', []),
        'gearbox all threads': ('gearbox', ['run.threads=0']),
        'PyTorch 1 thread': ('torch', 1),
        'PyTorch 2 threads': ('torch', 2),
    }
    if config == 'M':
        v['gearbox bf16'] = ('gearbox', ['precision.plugin=bf16'])
    return v


def start_neighbours(name):
    count, niceness = NEIGHBOURS[name]
    return [subprocess.Popen(['nice', '-n', str(niceness), sys.executable, '-c', 'while True: pass'])
            for _ in range(count)]


def run_cell(args, data, tmp, config, neighbourhood):
    """{variant: [ms per round]}, [load averages]: the rounds of one config beside one
    neighbourhood."""
    cfg, steps = CONFIGS[config], getattr(args, f'steps_{config}')
    torch_args = types.SimpleNamespace(python=args.python, warmup=TORCH_WARMUP, fused=1)
    names = list(variants(config))
    ms = {n: [] for n in names}
    loads = []
    hogs = start_neighbours(neighbourhood)
    try:
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                loads.append(load_average())
                kind, what = variants(config)[n]
                if kind == 'gearbox':
                    ms[n].append(gearbox_ms(args.gearbox, data, cfg, steps + GEARBOX_AUTO_TRIAL,
                                            GEARBOX_AUTO_TRIAL,
                                            os.path.join(tmp, f'{config}-{n}'.replace(' ', '-')),
                                            what))
                else:
                    ms[n].append(torch_ms(torch_args, data, cfg, steps + TORCH_WARMUP, what))
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    return ms, loads


def spread(values, fmt):
    return (f'{fmt % statistics.median(values)} [{fmt % min(values)}-{fmt % max(values)}]'
            if values else '-')


def ratios(ms):
    """Named lists of ratios, one per round."""
    torch_best = [min(a, b) for a, b in zip(ms['PyTorch 1 thread'], ms['PyTorch 2 threads'])]
    out = {
        'gearbox default vs PyTorch best': [t / g for t, g in zip(torch_best, ms['gearbox default'])],
        'gearbox all threads vs PyTorch best': [t / g for t, g in zip(torch_best,
                                                                     ms['gearbox all threads'])],
        'gearbox default vs its 1 thread': [a / b for a, b in zip(ms['gearbox 1 thread'],
                                                                    ms['gearbox default'])],
        'gearbox all threads vs its 1 thread': [a / b for a, b in zip(ms['gearbox 1 thread'],
                                                                        ms['gearbox all threads'])],
    }
    if 'gearbox bf16' in ms:
        out['bf16 vs fp32'] = [a / b for a, b in zip(ms['gearbox default'], ms['gearbox bf16'])]
    return out


def report(config, neighbourhood, ms, loads):
    where = NEIGHBOUR_WORDS[neighbourhood]
    load = spread(loads, '%.2f')
    print(f'\n{config}, {where} (load average {load}), ms/step median [min-max] of '
          f'{len(next(iter(ms.values())))} rounds:')
    for n, v in ms.items():
        print(f'  {n:<20} {spread(v, "%.1f")}')
    for n, v in ratios(ms).items():
        print(f'  {n:<34} {spread(v, "%.2fx")}')
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--gearbox', default=os.path.join(ROOT, 'build', 'tools', 'gearbox'))
    p.add_argument('--python', required=True,
                   help='the interpreter with PyTorch 2.x (a venv: pip install torch numpy)')
    p.add_argument('--configs', default='S,M')
    p.add_argument('--neighbours', default=','.join(NEIGHBOURS),
                   help=f'which of {", ".join(NEIGHBOURS)} (default: all)')
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--steps-S', type=int, default=50, help='timed steps per run of S')
    p.add_argument('--steps-M', type=int, default=8, help='timed steps per run of M')
    args = p.parse_args()
    for n in args.neighbours.split(','):
        if n not in NEIGHBOURS:
            p.error(f'--neighbours: unknown {n!r}; one of {", ".join(NEIGHBOURS)}')
    for c in args.configs.split(','):
        if c not in CONFIGS:
            p.error(f'--configs: unknown {c!r}; one of {", ".join(CONFIGS)}')
    print(f'cpu: {cpu_line()}')
    print(f'load average at the start: {load_average():.2f}; {args.rounds} rounds, gearbox '
          f'{GEARBOX_AUTO_TRIAL} and PyTorch {TORCH_WARMUP} warm-up steps untimed')
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, 'data')
        prepare(args.gearbox, data)
        for config, neighbourhood in itertools.product(args.configs.split(','),
                                                       args.neighbours.split(',')):
            ms, loads = run_cell(args, data, tmp, config, neighbourhood)
            report(config, neighbourhood, ms, loads)


if __name__ == '__main__':
    main()
