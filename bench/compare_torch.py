#!/usr/bin/env python3
"""gearbox against PyTorch on the same model, data and machine, one right after the other.

Runs `gearbox train` and bench/torch_gpt.py (a nanoGPT-equivalent GPT in PyTorch) on
config S (nanoGPT's CPU recipe) and config M (nanoGPT's shakespeare_char model, batch 8),
alternating the two programs for several repetitions, and prints the median ms/step and
tokens/s of each and their ratio. Steady-state steps only: the first --warmup steps of
every run are excluded, and evaluation time is not counted by either program.

PyTorch is run at its fastest setting found on the machine: every --torch-threads value is
tried (with OMP_WAIT_POLICY=PASSIVE, which keeps its OpenMP pool from spinning against
OpenBLAS's) and the best is reported. Needs Debian's python3-torch (/usr/bin/python3).

usage: bench/compare_torch.py [--configs S,M] [--repeats 3] [--steps-S 60] [--steps-M 12]
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
CONFIGS = {
    'S': dict(n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=12),
    'M': dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=8),
}


def gearbox_ms(gearbox, data, cfg, steps, warmup, out):
    sets = [f'model.{k}={cfg[k]}' for k in ('n_layer', 'n_head', 'n_embd', 'block_size')]
    sets += [f'data.batch_size={cfg["batch_size"]}', f'data.dir={data}', f'run.steps={steps}',
             'run.log_every=1', 'run.eval_every=0', 'run.eval_iters=1', f'run.out_dir={out}',
             'run.checkpoint_every=0']
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


def torch_ms(data, cfg, steps, warmup, threads):
    env = dict(os.environ, OMP_WAIT_POLICY='PASSIVE')
    cmd = ['/usr/bin/python3', os.path.join(ROOT, 'bench', 'torch_gpt.py'), '--data_dir', data,
           '--threads', str(threads), '--steps', str(steps), '--warmup_steps', str(warmup),
           '--eval_iters', '1', '--print_every', '0']
    for k in ('n_layer', 'n_head', 'n_embd', 'block_size', 'batch_size'):
        cmd += [f'--{k}', str(cfg[k])]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return float(re.search(r'median_ms=([0-9.]+)', out).group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--gearbox', default=os.path.join(ROOT, 'build', 'core', 'gearbox'))
    p.add_argument('--configs', default='S,M')
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--steps-S', type=int, default=60)
    p.add_argument('--steps-M', type=int, default=12)
    p.add_argument('--warmup', type=int, default=3)
    p.add_argument('--torch-threads', default='1,2')
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, 'data')
        subprocess.run([args.gearbox, 'prepare',
                        os.path.join(ROOT, 'examples', 'data', 'tinyshakespeare.txt'), data],
                       check=True, stdout=subprocess.DEVNULL)
        for name in args.configs.split(','):
            cfg, steps = CONFIGS[name], getattr(args, f'steps_{name}')
            tokens = cfg['batch_size'] * cfg['block_size']
            g, t = [], {th: [] for th in args.torch_threads.split(',')}
            for r in range(args.repeats):
                g.append(gearbox_ms(args.gearbox, data, cfg, steps, args.warmup,
                                    os.path.join(tmp, f'{name}{r}')))
                for th in t:
                    t[th].append(torch_ms(data, cfg, steps, args.warmup, th))
            gm = statistics.median(g)
            best_th = min(t, key=lambda th: statistics.median(t[th]))
            tm = statistics.median(t[best_th])
            for th in t:
                print(f'config {name}: torch {th} thread(s): median {statistics.median(t[th]):.1f} '
                      f'ms/step over repeats {["%.1f" % x for x in t[th]]}')
            print(f'config {name}: gearbox: median {gm:.1f} ms/step over repeats '
                  f'{["%.1f" % x for x in g]}')
            print(f'config {name}: gearbox {tokens / gm * 1e3:,.0f} tok/s ({gm:.1f} ms/step) vs '
                  f'PyTorch {tokens / tm * 1e3:,.0f} tok/s ({tm:.1f} ms/step, {best_th} thread(s)): '
                  f'gearbox {tm / gm:.2f}x')
            sys.stdout.flush()


if __name__ == '__main__':
    main()
