#!/usr/bin/env python3
"""gearbox against PyTorch on the same model, data and machine, one right after the other.

Runs `gearbox train` and bench/torch_gpt.py (a nanoGPT-equivalent GPT in PyTorch) on
config S (nanoGPT's CPU recipe) and config M (nanoGPT's shakespeare_char model, batch 8),
alternating the two programs for several repetitions, and prints the median ms/step and
tokens/s of each and their ratio. Steady-state steps only: the first --warmup steps of
every run are excluded (gearbox's first GEARBOX_AUTO_TRIAL too: the first trial of its
default `[run] threads = auto`, some of whose steps run on fewer threads), and evaluation
time is not counted by either program.

PyTorch is run at its fastest setting found on the machine: every --torch-threads value is
tried (with OMP_WAIT_POLICY=PASSIVE, which keeps its OpenMP pool from spinning against
OpenBLAS's) and the best is reported. --python names the interpreter: Debian's
python3-torch (1.13, /usr/bin/python3, the default) or a venv with PyTorch 2.x from PyPI,
the peer that matters, where --fused 1 gives it AdamW(fused=True).

--busy runs one single-threaded CPU-bound process (a Python busy loop) beside both
programs for the whole comparison: how each copes with a machine it does not have to
itself. Compare its figures with a run without it.

usage: bench/compare_torch.py [--configs S,M] [--repeats 3] [--steps-S 60] [--steps-M 12]
                              [--python PY] [--fused 0|1] [--busy]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Steps of gearbox's first `threads = auto` trial (blocks on every thread and on fewer in
# turn, 16 steps, and 10 more on every thread where fewer looked faster:
# engine/threads_auto.h) and one more: left untimed, so that a run's steps are its
# steady ones on the count the trial chose.
GEARBOX_AUTO_TRIAL = 27
CONFIGS = {
    'S': dict(n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=12),
    'M': dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=8),
}


def gearbox_ms(gearbox, data, cfg, steps, warmup, out, extra=()):
    """Median ms of the steps after `warmup`; `extra`: more section.key=value settings."""
    sets = [f'model.{k}={cfg[k]}' for k in ('n_layer', 'n_head', 'n_embd', 'block_size')]
    sets += [f'data.batch_size={cfg["batch_size"]}', f'data.dir={data}', f'run.steps={steps}',
             'run.log_every=1', 'run.eval_every=0', 'run.eval_iters=1', f'run.out_dir={out}',
             'run.checkpoint_every=0', *extra]
    cmd = [gearbox, 'train', os.path.join(ROOT, 'examples', 'shakespeare_char.ini')]
    for s in sets:
        cmd += ['--set', s]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    ms = []
    with open(os.path.join(out, 'metrics.jsonl')) as f:
        for line in f:
            rec = json.loads(line)
            if 'ms' in rec and rec['step'] > warmup:
                ms.append(rec['ms'])
    return statistics.median(ms)


def torch_ms(args, data, cfg, steps, threads):
    """torch_gpt.py's median ms/step; args: python, warmup, fused."""
    env = dict(os.environ, OMP_WAIT_POLICY='PASSIVE')
    cmd = [args.python, os.path.join(ROOT, 'bench', 'torch_gpt.py'), '--data_dir', data,
           '--threads', str(threads), '--steps', str(steps), '--warmup_steps', str(args.warmup),
           '--eval_iters', '1', '--print_every', '0']
    if args.fused:
        cmd += ['--fused', '1']
    for k in ('n_layer', 'n_head', 'n_embd', 'block_size', 'batch_size'):
        cmd += [f'--{k}', str(cfg[k])]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return float(re.search(r'median_ms=([0-9.]+)', out).group(1))


def prepare(gearbox, data):
    """Tiny Shakespeare's character-level token files in `data`."""
    subprocess.run([gearbox, 'prepare',
                    os.path.join(ROOT, 'examples', 'data', 'tinyshakespeare.txt'), data],
                   check=True, stdout=subprocess.DEVNULL)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--gearbox', default=os.path.join(ROOT, 'build', 'tools', 'gearbox'))
    p.add_argument('--python', default='/usr/bin/python3',
                   help='the interpreter with PyTorch (a venv with PyTorch 2.x from PyPI)')
    p.add_argument('--fused', type=int, default=0, help='1: AdamW(fused=True), PyTorch 2.x')
    p.add_argument('--busy', action='store_true',
                   help='run a single-threaded busy loop beside both programs')
    p.add_argument('--configs', default='S,M')
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--steps-S', type=int, default=60)
    p.add_argument('--steps-M', type=int, default=12)
    p.add_argument('--warmup', type=int, default=3)
    p.add_argument('--torch-threads', default='1,2')
    args = p.parse_args()
    hog = subprocess.Popen([sys.executable, '-c', 'while True: pass']) if args.busy else None
    try:
        compare(args)
    finally:
        if hog:
            hog.kill()


def compare(args):
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, 'data')
        prepare(args.gearbox, data)
        for name in args.configs.split(','):
            cfg, steps = CONFIGS[name], getattr(args, f'steps_{name}')
            tokens = cfg['batch_size'] * cfg['block_size']
            g, t = [], {th: [] for th in args.torch_threads.split(',')}
            for r in range(args.repeats):
                untimed = args.warmup + GEARBOX_AUTO_TRIAL
                g.append(gearbox_ms(args.gearbox, data, cfg, steps + untimed, untimed,
                                    os.path.join(tmp, f'{name}{r}')))
                for th in t:
                    t[th].append(torch_ms(args, data, cfg, steps, th))
            gm = statistics.median(g)
            best_th = min(t, key=lambda th: statistics.median(t[th]))
            tm = statistics.median(t[best_th])
            for th in t:
                print(f'config {name}: torch {th} thread(s): median {statistics.median(t[th]):.1f} '
                      f'ms/step over repeats {["%.1f" % x for x in t[th]]}')
            print(f'config {name}: gearbox: median {gm:.1f} ms/step over repeats '
                  f'{["%.1f" % x for x in g]}')
            busy = ' beside a busy process' if args.busy else ''
            print(f'config {name}{busy}: gearbox {tokens / gm * 1e3:,.0f} tok/s ({gm:.1f} ms/step) vs '
                  f'PyTorch {tokens / tm * 1e3:,.0f} tok/s ({tm:.1f} ms/step, {best_th} thread(s)): '
                  f'gearbox {tm / gm:.2f}x')
            sys.stdout.flush()


if __name__ == '__main__':
    main()
