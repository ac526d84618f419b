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
The two programs alternate for --repeats rounds; each run times --steps steps after
--warmup untimed ones (torch.compile compiles during PyTorch's warm-up), and the medians
over the rounds of each run's median ms/step are compared.

Peak GPU memory is measured the same way for both, from outside: this script polls the
device's free memory (torch.cuda.mem_get_info, every 50 ms) while a run goes on and
reports the largest drop from just before the run started. Each program's own figures are
printed beside it (PyTorch: its mem_get_info drop and max_memory_allocated; gearbox: its
memory plan).

MFU is nanoGPT's estimate for both, (6N + 12 L C T) FLOPs per token with N the
parameters without the position embedding, computed here from the shape and divided by
--peak-tflops (989: H100 SXM, bf16 dense); each program's own MFU is shown too.

Without a CUDA GPU it exits with status 77. --dry-run makes the data and prints the two
commands without running them; --smoke-cpu runs the whole comparison on the CPU at a tiny
shape (fp32, no compile), to check this script, not to measure anything.

usage: bench/compare_gpu.py [--gearbox PATH] [--python PY] [--data DIR] [--attn NAME]
                            [--batch 16] [--steps 20] [--warmup 5] [--repeats 3]
                            [--peak-tflops 989] [--logs DIR] [--timeout S]
                            [--dry-run] [--smoke-cpu]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from bench_args import at_least, program

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = 77
GPT2 = dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, padded_vocab=50304)
SMOKE = dict(n_layer=1, n_head=2, n_embd=64, block_size=32, padded_vocab=50304)
GPT2_TOKENS = 50257


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
    p.add_argument('--dry-run', action='store_true', help='make the data, print the commands, run nothing')
    p.add_argument('--smoke-cpu', action='store_true',
                   help='a tiny model on the CPU (fp32, no compile): checks this script only')
    args = p.parse_args(argv)
    if not args.peak_tflops > 0:
        p.error('--peak-tflops must be positive')
    if not re.fullmatch(r'[a-z0-9_]+', args.attn):
        p.error(f'--attn {args.attn!r}: expected a plugin name such as cudnn or flash')
    return args


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


class MemoryWatch:
    """Polls the device's free memory in a thread; drop() is the largest fall below the start."""

    def __init__(self, torch):
        self.torch, self.stop_flag, self.least = torch, threading.Event(), None

    def __enter__(self):
        if self.torch is not None:
            self.start = self.least = self.torch.cuda.mem_get_info()[0]
            self.thread = threading.Thread(target=self.poll, daemon=True)
            self.thread.start()
        return self

    def poll(self):
        while not self.stop_flag.wait(0.05):
            self.least = min(self.least, self.torch.cuda.mem_get_info()[0])

    def __exit__(self, *exc):
        if self.torch is not None:
            self.stop_flag.set()
            self.thread.join()
        return False

    def drop(self):
        return None if self.least is None else self.start - self.least


def run(cmd, args, name, log_dir, torch):
    """Runs one program; returns its stdout and the device memory drop in bytes (or None)."""
    t0 = time.time()
    with MemoryWatch(torch) as watch:
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            fail(f'{name} ran past --timeout {args.timeout} s: {" ".join(cmd)}', 1)
    with open(os.path.join(log_dir, f'{name}.log'), 'w') as f:
        f.write(f'$ {" ".join(cmd)}\n{res.stdout}{res.stderr}exit status {res.returncode}, '
                f'{time.time() - t0:.1f} s\n')
    if res.returncode != 0:
        tail = '\n'.join((res.stdout + res.stderr).strip().split('\n')[-8:])
        fail(f'{name} failed (exit status {res.returncode}); its last lines:\n{tail}', 1)
    return res.stdout, watch.drop()


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
    m = re.search(r'^GPU mfu=([0-9.]+)% .*mem_drop_mib=([0-9]+) max_allocated_mib=([0-9]+)', out, re.M)
    r['own_mfu'] = float(m.group(1)) if m else None
    r['own_mem'] = f'mem_get_info drop {m.group(2)} MiB, max_memory_allocated {m.group(3)} MiB' if m else None
    return r


def mib(b):
    return '-' if b is None else f'{b / 1048576:.0f} MiB'


def report(args, shape, runs):
    tokens = args.batch * shape['block_size']
    fpt = flops_per_token(shape)
    summary = {}
    print(f'\nmodel L {shape["n_layer"]}, H {shape["n_head"]}, C {shape["n_embd"]}, '
          f'T {shape["block_size"]}, B {args.batch}: {tokens} tokens per step, '
          f'{fpt * tokens / 1e9:.1f} GFLOP per step (nanoGPT), MFU against {args.peak_tflops:g} TFLOP/s')
    for name in ('gearbox', 'pytorch'):
        rs = runs[name]
        ms = statistics.median(r['ms'] for r in rs)
        drops = [r['drop'] for r in rs if r['drop'] is not None]
        mem = max(drops) if drops else None
        mfu = 100.0 * fpt * tokens / (ms / 1e3) / (args.peak_tflops * 1e12)
        summary[name] = dict(ms=ms, tok=tokens / (ms / 1e3), mfu=mfu, mem=mem)
        own = rs[-1]
        print(f'{name:<8} {tokens / (ms / 1e3):>10,.0f} tok/s {ms:9.2f} ms/step  MFU {mfu:5.1f}%  '
              f'peak GPU memory {mib(mem)}  (rounds: {", ".join("%.2f" % r["ms"] for r in rs)} ms)')
        own_mfu = '-' if own['own_mfu'] is None else f'{own["own_mfu"]:.1f}%'
        print(f'{"":<8} its own report (last round): MFU {own_mfu}; memory {own["own_mem"] or "-"}')
    g, t = summary['gearbox'], summary['pytorch']
    mem_ratio = f'{g["mem"] / t["mem"]:.2f}x' if g['mem'] and t['mem'] else '-'
    print(f'gearbox/PyTorch: tokens/s {g["tok"] / t["tok"]:.2f}x, ms/step {g["ms"] / t["ms"]:.2f}x, '
          f'peak GPU memory {mem_ratio}')
    print(f'SUMMARY gearbox_tok_s={g["tok"]:.0f} torch_tok_s={t["tok"]:.0f} '
          f'speed_ratio={g["tok"] / t["tok"]:.3f} gearbox_mfu={g["mfu"]:.1f} torch_mfu={t["mfu"]:.1f} '
          f'gearbox_mem_mib={mib(g["mem"]).split()[0]} torch_mem_mib={mib(t["mem"]).split()[0]}')


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    shape = SMOKE if args.smoke_cpu else GPT2
    torch = None
    if not args.dry_run and not args.smoke_cpu:
        try:
            import torch
        except ImportError as err:
            fail(f'needs PyTorch in this interpreter to watch GPU memory ({err})', SKIP)
        if not torch.cuda.is_available():
            fail('needs a CUDA GPU; this machine has none (--dry-run and --smoke-cpu work without one)', SKIP)
    if not args.dry_run:
        if not os.access(args.gearbox, os.X_OK):
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
        runs = {'gearbox': [], 'pytorch': []}
        for r in range(args.repeats):
            for name, parse in (('gearbox', parse_gearbox), ('pytorch', parse_torch)):
                out, drop = run(cmds[name], args, f'{name}-{r}', log_dir, torch)
                res = parse(out)
                res['drop'] = drop
                runs[name].append(res)
                print(f'round {r}: {name} {res["ms"]:.2f} ms/step, GPU memory drop {mib(drop)}', flush=True)
        report(args, shape, runs)
    return 0


if __name__ == '__main__':
    sys.exit(main())
