#!/usr/bin/env python3
"""gearbox against PyTorch 2 with everything on, GPT-2 124M on one GPU, one right after the other.

gearbox: `gearbox bench step examples/gpt2_124m.ini` (12 layers, 12 heads, 768 wide, T 1024,
vocab 50257 padded to 50304, biases, tanh GELU) with [device] plugin = cuda, [precision]
plugin = bf16, [optim] plugin = adamw_fused, [attn] plugin = --attn, one micro-batch of
--batch sequences per step (tokens_per_step 0, no gradient accumulation).
PyTorch: bench/torch_gpt.py --preset gpt2 (the same model) with --compile 1, --fused 1
(fused AdamW), --dtype bf16 (autocast), --tf32 1 and --sdpa flash, at the same batch.

Both read the same tokens: --data DIR (train.bin and val.bin of uint16 GPT-2 token ids,
as nanoGPT or `gearbox prepare` write them), else random ids below 50257 made with numpy.
The two programs alternate for --repeats rounds, the first of each round changing sides so
that neither always runs on a GPU fresh from idle; each run times --steps steps after
--warmup untimed ones, and the medians over the rounds of each run's median ms/step are
compared. torch.compile compiles during PyTorch's warm-up, cold the first time (a minute
or more on a fresh machine), so the warm-up's seconds are reported apart, never timed.
--budget S bounds all the runs together, as a GPU lent for minutes needs: each run gets
what is left (at most --timeout), and a round with no time left is not started (the
report says so); only when no round finished does the script fail.

Each program runs alone on the GPU: this script holds no CUDA context and imports no torch.
It watches from outside through NVML (bench/gpu_watch.py): the peak GPU memory of the
program's own processes (NVML's per-process figure, the same measure for both), the
device's used memory above its level at the start, GPU utilisation, and the host CPU the
program and everything else used. Each program's own figures are printed beside them
(PyTorch: its mem_get_info drop and max_memory_allocated; gearbox: its memory plan).

--neighbors none,cuda,nvml runs every round under each condition: alone, beside a process
that holds a CUDA context and polls cudaMemGetInfo every 50 ms (what a harness importing
torch does), and beside an NVML monitor; the ratio of each program's ms/step beside a
neighbour to its ms/step alone says whether it is fragile next to other GPU users.

MFU is nanoGPT's estimate for both, (6N + 12 L C T) FLOPs per token with N the
parameters without the position embedding, computed here from the shape and divided by
--peak-tflops (989: H100 SXM, bf16 dense); each program's own MFU is shown too.

Without an NVIDIA GPU (NVML finds none) it exits with status 77. --dry-run makes the data
and prints the two commands without running them; --smoke-cpu runs the whole comparison
on the CPU at a tiny shape (fp32, no compile), to check this script, not to measure anything.

usage: bench/compare_gpu.py [--gearbox PATH] [--python PY] [--data DIR] [--attn NAME]
                            [--batch 16] [--steps 20] [--warmup 5] [--repeats 3]
                            [--peak-tflops 989] [--neighbors none,cuda,nvml]
                            [--logs DIR] [--json FILE] [--timeout S] [--budget S]
                            [--dry-run] [--smoke-cpu]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from bench_args import at_least, program
from gpu_watch import GpuWatch, HostWatch, Nvml, NvmlError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = 77
GPT2 = dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, padded_vocab=50304)
SMOKE = dict(n_layer=1, n_head=2, n_embd=64, block_size=32, padded_vocab=50304)
GPT2_TOKENS = 50257
PROGRAMS = ('gearbox', 'pytorch')
NEIGHBOURS = ('none', 'cuda', 'nvml')


def fail(msg, status=2):
    print(f'compare_gpu.py: {msg}', file=sys.stderr)
    sys.exit(status)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--gearbox', default=os.path.join(ROOT, 'build', 'tools', 'gearbox'),
                   help='the gearbox binary (default build/tools/gearbox)')
    p.add_argument('--python', type=program, default=sys.executable,
                   help='the interpreter with PyTorch 2.x for torch_gpt.py: a path, or a name '
                        'looked up on PATH such as python3 (default: this one)')
    p.add_argument('--data', metavar='DIR',
                   help='folder with uint16 train.bin and val.bin (default: random tokens)')
    p.add_argument('--tokens', type=at_least(1 << 16), default=4 << 20,
                   help='random tokens in train.bin when there is no --data (default 4194304)')
    p.add_argument('--attn', default='cudnn',
                   help="gearbox's attention plugin: cudnn (default), flash, math or auto (mem_efficient refuses cuda)")
    p.add_argument('--batch', type=at_least(1), default=16, help='sequences per step (default 16)')
    p.add_argument('--steps', type=at_least(1), default=20, help='timed steps per run (default 20)')
    p.add_argument('--warmup', type=at_least(1), default=5,
                   help='untimed steps first; torch.compile compiles here (default 5)')
    p.add_argument('--repeats', type=at_least(1), default=3, help='rounds of both programs (default 3)')
    p.add_argument('--peak-tflops', type=float, default=989.0,
                   help='what MFU divides by (default 989: H100 SXM bf16 dense)')
    p.add_argument('--logs', metavar='DIR', help="keep every run's output here")
    p.add_argument('--timeout', type=at_least(1), default=600, help='seconds one run may take (default 600)')
    p.add_argument('--budget', type=at_least(1),
                   help='seconds all the runs together may take; a round with no time left is '
                        'not started (default: no bound but --timeout per run)')
    p.add_argument('--neighbors', type=neighbour_list, default=['none'],
                   help='conditions each round runs both programs in, comma-separated: none (alone '
                        'on the GPU), cuda (beside a process holding a CUDA context and polling '
                        'cudaMemGetInfo every 50 ms), nvml (beside an NVML monitor polling every 50 ms); '
                        'default none')
    p.add_argument('--json', metavar='FILE', help='also write the figures to FILE')
    p.add_argument('--dry-run', action='store_true', help='make the data, print the commands, run nothing')
    p.add_argument('--smoke-cpu', action='store_true',
                   help='a tiny model on the CPU (fp32, no compile): checks this script only')
    args = p.parse_args(argv)
    if not args.peak_tflops > 0:
        p.error('--peak-tflops must be positive')
    if not re.fullmatch(r'[a-z0-9_]+', args.attn):
        p.error(f'--attn {args.attn!r}: expected a plugin name such as cudnn or flash')
    return args


def neighbour_list(text):
    """An argparse type: a comma-separated list of NEIGHBOURS, without repeats."""
    names = text.split(',')
    for n in names:
        if n not in NEIGHBOURS:
            raise argparse.ArgumentTypeError(f'{n!r}: expected {", ".join(NEIGHBOURS)}')
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f'{text!r} names a condition twice')
    return names


def make_tokens(folder, n_train, seed=1337):
    """Random GPT-2 ids (uint16, below 50257) as train.bin and val.bin in folder."""
    import numpy as np
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, n in (('train', n_train), ('val', max(n_train // 10, 1 << 15))):
        rng.integers(0, GPT2_TOKENS, size=n, dtype=np.uint16).tofile(os.path.join(folder, f'{split}.bin'))


def check_data(folder, block_size):
    for split in ('train', 'val'):
        path = os.path.join(folder, f'{split}.bin')
        if not os.path.isfile(path):
            fail(f'no {path}: --data needs uint16 train.bin and val.bin')
        if os.path.getsize(path) // 2 <= block_size + 1:
            fail(f'{path} holds fewer than {block_size + 2} tokens')


def flops_per_token(shape):
    """nanoGPT's estimate_mfu per token: 6N + 12 L C T, N without the position embedding."""
    L, C, T, V = shape['n_layer'], shape['n_embd'], shape['block_size'], shape['padded_vocab']
    n = V * C + L * (12 * C * C + 13 * C) + 2 * C  # tied embedding, biases, LayerNorms
    return 6 * n + 12 * L * C * T


def gearbox_cmd(args, shape, data, out_dir):
    s = {'data.dir': data, 'data.tokens_per_step': 0, 'data.gradient_accumulation_steps': 1,
         'data.batch_size': args.batch, 'attn.plugin': args.attn, 'device.plugin': 'cuda',
         'precision.plugin': 'bf16', 'optim.plugin': 'adamw_fused', 'run.out_dir': out_dir}
    if args.smoke_cpu:
        s.update({'model.' + k: shape[k] for k in ('n_layer', 'n_head', 'n_embd', 'block_size')})
        s.update({'device.plugin': 'cpu', 'precision.plugin': 'fp32', 'optim.plugin': 'adamw',
                  'attn.plugin': 'math', 'run.threads': 2})
    cmd = [args.gearbox, 'bench', 'step', os.path.join(ROOT, 'examples', 'gpt2_124m.ini'),
           '--steps', str(args.steps), '--warmup', str(args.warmup)]
    for k, v in s.items():
        cmd += ['--set', f'{k}={v}']
    return cmd


def torch_cmd(args, shape, data):
    cmd = [args.python, os.path.join(ROOT, 'bench', 'torch_gpt.py'), '--preset', 'gpt2',
           '--data_dir', data, '--batch_size', str(args.batch),
           '--steps', str(args.steps + args.warmup), '--warmup_steps', str(args.warmup),
           '--eval_iters', '0', '--print_every', '0', '--lr', '6e-4', '--beta2', '0.95']
    if args.smoke_cpu:
        cmd += ['--n_layer', str(shape['n_layer']), '--n_head', str(shape['n_head']),
                '--n_embd', str(shape['n_embd']), '--block_size', str(shape['block_size'])]
    else:
        cmd += ['--device', 'cuda', '--dtype', 'bf16', '--tf32', '1', '--compile', '1', '--fused', '1',
                '--sdpa', 'flash', '--peak_tflops', f'{args.peak_tflops:g}']
    return cmd


def start_neighbour(kind, log_dir, name):
    """Starts bench/gpu_watch.py --neighbor KIND; None for 'none'. Fails if it cannot run."""
    if kind == 'none':
        return None
    log = open(os.path.join(log_dir, f'{name}.neighbour.log'), 'w')
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, 'bench', 'gpu_watch.py'),
                             '--neighbor', kind], stdout=log, stderr=subprocess.STDOUT)
    time.sleep(2)   # its CUDA context or NVML session is up before the program starts
    if proc.poll() is not None:
        log.close()
        with open(log.name) as f:
            fail(f'the {kind} neighbour ended at once: {f.read().strip()}', 1)
    return proc


def stop_neighbour(proc):
    if proc is not None:
        proc.terminate()
        proc.wait()


class OutOfTime(Exception):
    """A run stopped at its time limit."""


def run(cmd, args, name, log_dir, nvml, neighbour='none', timeout=None):
    """Runs one program, watched from outside, for at most timeout seconds (default
    --timeout); returns its stdout and what the watches saw."""
    timeout = args.timeout if timeout is None else timeout
    beside = start_neighbour(neighbour, log_dir, name)
    watch = GpuWatch(nvml) if nvml else None
    try:
        with HostWatch() as host:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if watch:
                watch.start(proc.pid)
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise OutOfTime(f'{name} ran past its {timeout:.0f} s (--timeout {args.timeout}, '
                                f'--budget {args.budget}): {" ".join(cmd)}')
            finally:
                if watch:
                    watch.stop()
    finally:
        stop_neighbour(beside)
    with open(os.path.join(log_dir, f'{name}.log'), 'w') as f:
        f.write(f'$ {" ".join(cmd)}\n{out}{err}exit status {proc.returncode}; {host.words()}\n')
    if proc.returncode != 0:
        tail = '\n'.join((out + err).strip().split('\n')[-8:])
        fail(f'{name} failed (exit status {proc.returncode}); its last lines:\n{tail}', 1)
    seen = {'host': host, 'process_peak': watch and watch.process_peak,
            'device_rise': watch and watch.device_rise, 'gpu_busy': watch and watch.busy}
    return out, seen


def grab(pattern, text, what):
    m = re.search(pattern, text, re.M)
    if not m:
        fail(f'cannot find {what} in the output (pattern {pattern!r})', 1)
    return float(m.group(1))


def parse_gearbox(out):
    r = {'ms': grab(r'^step: median ([0-9.]+) ms', out, "gearbox's median ms/step")}
    m = re.search(r'MFU ([0-9.]+)%', out)
    r['own_mfu'] = float(m.group(1)) if m else None
    m = re.search(r'^memory plan: (.*)$', out, re.M)
    r['own_mem'] = m.group(1) if m else None
    return r


def parse_torch(out):
    r = {'ms': grab(r'median_ms=([0-9.]+)', out, "PyTorch's median_ms")}
    m = re.search(r'warmup_steps=([0-9]+) warmup_s=([0-9.]+)', out)
    r['warmup'] = f'{m.group(2)} s over {m.group(1)} untimed steps' if m else None
    m = re.search(r'^GPU mfu=([0-9.]+)% .*mem_drop_mib=([0-9]+) max_allocated_mib=([0-9]+)', out, re.M)
    r['own_mfu'] = float(m.group(1)) if m else None
    r['own_mem'] = f'mem_get_info drop {m.group(2)} MiB, max_memory_allocated {m.group(3)} MiB' if m else None
    return r


def mib(b):
    return '-' if b is None else f'{b / 1048576:.0f} MiB'


def summarise(args, shape, rs):
    """One program's figures under one condition, from its rounds."""
    tokens = args.batch * shape['block_size']
    ms = statistics.median(r['ms'] for r in rs)
    peaks = [r['process_peak'] for r in rs if r['process_peak'] is not None]
    rises = [r['device_rise'] for r in rs if r['device_rise'] is not None]
    busy = [r['gpu_busy'] for r in rs if r['gpu_busy'] is not None]
    return dict(ms=ms, tok_s=tokens / (ms / 1e3),
                mfu=100.0 * flops_per_token(shape) * tokens / (ms / 1e3) / (args.peak_tflops * 1e12),
                process_peak=max(peaks) if peaks else None, device_rise=max(rises) if rises else None,
                gpu_busy=statistics.mean(busy) if busy else None, rounds=[r['ms'] for r in rs])


def print_warmups(runs):
    """PyTorch's warm-up of each run (where torch.compile compiles), apart from the timing."""
    seen = [f'{cond} round {i}: {r["warmup"]}' for cond, by in runs.items()
            for i, r in enumerate(by['pytorch']) if r.get('warmup')]
    if seen:
        print(f'PyTorch warm-up, torch.compile included (not timed): {"; ".join(seen)}')


def print_program(name, s, own):
    busy = '-' if s['gpu_busy'] is None else f'{s["gpu_busy"]:.0f}%'
    print(f'  {name:<8} {s["tok_s"]:>10,.0f} tok/s {s["ms"]:9.2f} ms/step  MFU {s["mfu"]:5.1f}%  '
          f'GPU memory {mib(s["process_peak"])} (its processes, NVML; device rise '
          f'{mib(s["device_rise"])})  GPU busy {busy}  (rounds: '
          f'{", ".join("%.2f" % m for m in s["rounds"])} ms)')
    own_mfu = '-' if own['own_mfu'] is None else f'{own["own_mfu"]:.1f}%'
    print(f'  {"":<8} its own report (last round): MFU {own_mfu}; memory {own["own_mem"] or "-"}; '
          f'{own["host"].words()}')


def ratio(a, b):
    return f'{a / b:.2f}x' if a and b else '-'


def report(args, shape, runs):
    """Prints each condition's table and ratios; returns the figures for --json."""
    tokens = args.batch * shape['block_size']
    print(f'\nmodel L {shape["n_layer"]}, H {shape["n_head"]}, C {shape["n_embd"]}, '
          f'T {shape["block_size"]}, B {args.batch}: {tokens} tokens per step, '
          f'{flops_per_token(shape) * tokens / 1e9:.1f} GFLOP per step (nanoGPT), '
          f'MFU against {args.peak_tflops:g} TFLOP/s')
    print_warmups(runs)
    figures = {}
    for cond in runs:
        print(f'beside {"nothing" if cond == "none" else "a " + cond + " neighbour (bench/gpu_watch.py)"}:')
        f = figures[cond] = {n: summarise(args, shape, runs[cond][n]) for n in PROGRAMS}
        for n in PROGRAMS:
            print_program(n, f[n], runs[cond][n][-1])
        g, t = f['gearbox'], f['pytorch']
        print(f'  gearbox/PyTorch: tokens/s {ratio(g["tok_s"], t["tok_s"])}, ms/step '
              f'{ratio(g["ms"], t["ms"])}, GPU memory {ratio(g["process_peak"], t["process_peak"])}')
        if cond != 'none' and 'none' in figures:
            print(f'  ms/step beside it against alone: gearbox '
                  f'{ratio(g["ms"], figures["none"]["gearbox"]["ms"])}, PyTorch '
                  f'{ratio(t["ms"], figures["none"]["pytorch"]["ms"])}')
    first = figures[next(iter(figures))]
    g, t = first['gearbox'], first['pytorch']
    print(f'SUMMARY gearbox_tok_s={g["tok_s"]:.0f} torch_tok_s={t["tok_s"]:.0f} '
          f'speed_ratio={g["tok_s"] / t["tok_s"]:.3f} gearbox_mfu={g["mfu"]:.1f} torch_mfu={t["mfu"]:.1f} '
          f'gearbox_mem_mib={mib(g["process_peak"]).split()[0]} '
          f'torch_mem_mib={mib(t["process_peak"]).split()[0]}')
    return figures


def run_rounds(args, cmds, parsers, log_dir, nvml):
    """Every round under every condition, within --budget; the conditions whose first
    round both programs finished, each with its rounds."""
    end = time.monotonic() + args.budget if args.budget else None
    runs = {c: {n: [] for n in PROGRAMS} for c in args.neighbors}
    for r in range(args.repeats):
        order = PROGRAMS if r % 2 == 0 else PROGRAMS[::-1]   # neither always goes first
        for cond in args.neighbors:
            left = end - time.monotonic() if end else args.timeout
            if left < 10:
                print(f'round {r}, beside {cond}: not run: {max(left, 0):.0f} s of --budget '
                      f'{args.budget} left', flush=True)
                continue
            done = {}
            try:
                for name in order:
                    left = end - time.monotonic() if end else args.timeout
                    out, seen = run(cmds[name], args, f'{name}-{cond}-{r}', log_dir, nvml, cond,
                                    timeout=min(args.timeout, max(left, 1)))
                    done[name] = dict(parsers[name](out), **seen)
                    print(f'round {r}, beside {cond}: {name} {done[name]["ms"]:.2f} ms/step, GPU '
                          f'memory {mib(done[name]["process_peak"])}', flush=True)
            except OutOfTime as err:
                if not any(by['gearbox'] for by in runs.values()):
                    fail(f'{err}; no round finished', 1)
                print(f'round {r}, beside {cond}: not finished: {err}', flush=True)
                continue
            for name in PROGRAMS:
                runs[cond][name].append(done[name])
    return {c: by for c, by in runs.items() if by['gearbox']}


def open_nvml(args):
    """NVML for the watch; exits 77 without a GPU. --smoke-cpu watches where NVML loads (the
    emulator's NVML double, in the tests) and goes on without it; --dry-run never does."""
    if args.dry_run:
        return None
    try:
        return Nvml()
    except NvmlError as err:
        if args.smoke_cpu:
            return None
        fail(f'needs an NVIDIA GPU: {err} (--dry-run and --smoke-cpu work without one)', SKIP)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    shape = SMOKE if args.smoke_cpu else GPT2
    nvml = open_nvml(args)
    if not args.dry_run and not os.access(args.gearbox, os.X_OK):
        fail(f'no gearbox binary at {args.gearbox} (build it, or name it with --gearbox)')
    with tempfile.TemporaryDirectory(prefix='compare_gpu.') as tmp:
        data = args.data
        if data:
            check_data(data, shape['block_size'])
        else:
            data = os.path.join(tmp, 'data')
            make_tokens(data, args.tokens)
        log_dir = args.logs or tmp
        os.makedirs(log_dir, exist_ok=True)
        cmds = {'gearbox': gearbox_cmd(args, shape, data, os.path.join(tmp, 'gearbox-out')),
                'pytorch': torch_cmd(args, shape, data)}
        print(f'data: {data}{"" if args.data else " (random GPT-2 ids)"}')
        for name, cmd in cmds.items():
            print(f'{name}: {" ".join(cmd)}')
        sys.stdout.flush()
        if args.dry_run:
            return 0
        parsers = {'gearbox': parse_gearbox, 'pytorch': parse_torch}
        runs = run_rounds(args, cmds, parsers, log_dir, nvml)
        figures = report(args, shape, runs)
        if args.json:
            with open(args.json, 'w') as f:
                json.dump({'shape': shape, 'batch': args.batch, 'peak_tflops': args.peak_tflops,
                           'commands': cmds, 'figures': figures}, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
