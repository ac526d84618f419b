#!/usr/bin/env python3
"""One page from scripts/gpu-check.sh's benchmarks: the step against PyTorch, attention beside SDPA, the profile.

Reads what the bench stage leaves in its log folder and writes a Markdown page a person can
read in a minute, each figure beside the goal it answers (docs/gpu.md):
  compare-gpu.json     bench/compare_gpu.py --json: GPT-2 124M, gearbox and PyTorch, alone
                       and beside a neighbour; goals: MFU >= 40%, >= 1.25x PyTorch's tokens/s,
                       GPU memory no more than PyTorch's
  bench-attn-cuda.txt  `gearbox bench attn --device cuda` (its table); bench-sdpa.json
                       (bench/sdpa_attn.py --json): fwd+bwd at the largest T both timed;
                       goals: flash >= 0.5x SDPA's flash, flash never slower than math
  bench-profile.txt    `gearbox bench step --profile`: where a step goes, the phases by time,
                       and the matmul phases' TFLOP/s against the goal of 550
  bench-matmul.txt     `gearbox bench matmul G --device cuda --dtype bf16 --epilogues`: each
                       of GPT-2's products alone, and those under 550 TFLOP/s
A file that is missing is named as not run. Prints the page, and writes it to --out.

usage: bench/gpu_summary.py --logs DIR [--out FILE]
"""
import argparse
import json
import os
import re
import sys

MFU_GOAL, SPEED_GOAL, FLASH_GOAL, MATMUL_GOAL_TFLOPS = 40.0, 1.25, 0.5, 550.0


def verdict(ok):
    return 'met' if ok else 'MISSED'


def read(folder, name):
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f) if name.endswith('.json') else f.read()


def step_section(fig):
    if fig is None:
        return ['not run (no compare-gpu.json)']
    lines = ['| beside | program | ms/step | tokens/s | MFU | GPU memory | GPU busy |',
             '|---|---|---|---|---|---|---|']
    for cond, progs in fig['figures'].items():
        for name, s in progs.items():
            mem = '-' if s['process_peak'] is None else f'{s["process_peak"] / 2**20:.0f} MiB'
            busy = '-' if s['gpu_busy'] is None else f'{s["gpu_busy"]:.0f}%'
            lines.append(f'| {cond} | {name} | {s["ms"]:.1f} | {s["tok_s"]:,.0f} | {s["mfu"]:.1f}% | '
                         f'{mem} | {busy} |')
    alone = fig['figures'].get('none') or next(iter(fig['figures'].values()))
    g, t = alone['gearbox'], alone['pytorch']
    speed = g['tok_s'] / t['tok_s']
    lines += ['', f'- MFU {g["mfu"]:.1f}% (goal >= {MFU_GOAL:.0f}%): {verdict(g["mfu"] >= MFU_GOAL)}',
              f'- gearbox/PyTorch tokens/s {speed:.2f}x (goal >= {SPEED_GOAL}x): {verdict(speed >= SPEED_GOAL)}']
    if g['process_peak'] and t['process_peak']:
        lines.append(f'- GPU memory {g["process_peak"] / t["process_peak"]:.2f}x of PyTorch\'s (goal <= 1): '
                     f'{verdict(g["process_peak"] <= t["process_peak"])}')
    for cond, progs in fig['figures'].items():
        if cond != 'none' and 'none' in fig['figures']:
            slow = {n: progs[n]['ms'] / fig['figures']['none'][n]['ms'] for n in progs}
            lines.append(f'- beside the {cond} neighbour, ms/step against alone: ' +
                         ', '.join(f'{n} {r:.2f}x' for n, r in slow.items()))
    return lines


def gearbox_attn(text):
    """{T: {plugin: (fwd+bwd ms, TFLOP/s)}} from `gearbox bench attn`'s tables."""
    table, T = {}, None
    for line in text.splitlines():
        m = re.match(r'T = (\d+):', line)
        if m:
            T = int(m.group(1))
        m = re.match(r'  ([a-z_]+) +[0-9.]+ +[0-9.]+ +([0-9.]+) +([0-9.e+-]+) ', line)
        if T is not None and m:
            table.setdefault(T, {})[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return table


def attn_section(text, sdpa):
    if text is None:
        return ['not run (no bench-attn-cuda.txt)']
    ours = gearbox_attn(text)
    theirs = {}
    for c in (sdpa or {}).get('cells', []):
        if 'total_ms' in c:
            theirs.setdefault(c['T'], {})[c['backend']] = (c['total_ms'], c['tflops'])
    both = sorted(set(ours) & set(theirs)) or sorted(ours)
    if not both:
        return ['gearbox bench attn printed no table']
    T = both[-1]
    lines = [f'T = {T}, forward+backward:', '', '| who | plugin/backend | ms | TFLOP/s |', '|---|---|---|---|']
    lines += [f'| gearbox | {p} | {ms:.2f} | {tf:.3g} |' for p, (ms, tf) in ours[T].items()]
    lines += [f'| PyTorch SDPA | {b} | {ms:.2f} | {tf:.3g} |' for b, (ms, tf) in theirs.get(T, {}).items()]
    flash, math = ours[T].get('flash'), ours[T].get('math')
    sdpa_flash = theirs.get(T, {}).get('flash')
    lines.append('')
    if flash and sdpa_flash:
        r = sdpa_flash[0] / flash[0]
        lines.append(f'- our flash at {r:.2f}x SDPA flash\'s speed (goal >= {FLASH_GOAL}x): {verdict(r >= FLASH_GOAL)}')
    if flash and math:
        lines.append(f'- our flash {math[0] / flash[0]:.2f}x our math (goal: never slower): '
                     f'{verdict(flash[0] <= math[0])}')
    return lines


def matching_lines(text, pattern):
    """The match of `pattern` at the start of each line of `text` it matches, in order."""
    return [m for m in (re.match(pattern, line) for line in text.splitlines()) if m]


def profile_section(text):
    if text is None:
        return ['not run (no bench-profile.txt)']
    rows = [(m.group(1), float(m.group(2)), float(m.group(3)), m.group(5)) for m in
            matching_lines(text, r'  (\S.*?) {2,}([0-9.]+) +([0-9.]+)% +([0-9.]+)(?: +([0-9.]+))?$')]
    if not rows:
        return ['bench step --profile printed no profile']
    head = next((l for l in text.splitlines() if l.startswith('profile:')), '')
    lines = [head, '', '| phase | ms/step | share | TFLOP/s |', '|---|---|---|---|']
    for name, ms, share, gflops in sorted(rows, key=lambda r: -r[1])[:10]:
        tf = '' if gflops is None else f'{float(gflops) / 1e3:.3g}'
        lines.append(f'| {name} | {ms:.2f} | {share:.1f}% | {tf} |')
    slow = [f'{n} {float(g) / 1e3:.3g}' for n, _, _, g in rows if 'matmul' in n and g and
            float(g) / 1e3 < MATMUL_GOAL_TFLOPS]
    lines += ['', f'- matmul phases under {MATMUL_GOAL_TFLOPS:.0f} TFLOP/s: ' + (', '.join(slow) or 'none')]
    return lines


def matmul_section(text):
    if text is None:
        return ['not run (no bench-matmul.txt)']
    rows = [(m.group(1), float(m.group(2)), float(m.group(3)) / 1e3) for m in
            matching_lines(text, r'  ([a-z_.]+ (?:forward|d input|d weight)) .*? ([0-9.]+) +([0-9.]+) +[0-9]+%$')]
    if not rows:
        return ['bench matmul printed no table']
    slow = [f'{n} {tf:.0f}' for n, _, tf in rows if tf < MATMUL_GOAL_TFLOPS]
    return [f'- {len(rows)} products, {len(rows) - len(slow)} at >= {MATMUL_GOAL_TFLOPS:.0f} TFLOP/s '
            f'(goal: all): {verdict(not slow)}',
            '- under it (TFLOP/s): ' + (', '.join(slow) or 'none')]


def page(folder):
    out = ['# gpu-check: benchmarks', '',
           '## GPT-2 124M, batch 16, bf16: gearbox against PyTorch 2 (torch.compile)', '']
    out += step_section(read(folder, 'compare-gpu.json'))
    out += ['', '## Attention against PyTorch SDPA', '']
    out += attn_section(read(folder, 'bench-attn-cuda.txt'), read(folder, 'bench-sdpa.json'))
    out += ['', '## Where a gearbox step goes (bench step --profile, the ten largest phases)', '']
    out += profile_section(read(folder, 'bench-profile.txt'))
    out += ['', '## GPT-2\'s products alone, bf16, with their epilogues (bench matmul G)', '']
    out += matmul_section(read(folder, 'bench-matmul.txt'))
    return '\n'.join(out) + '\n'


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--logs', required=True, metavar='DIR', help="the bench stage's log folder")
    p.add_argument('--out', metavar='FILE', help='also write the page here')
    args = p.parse_args(argv)
    if not os.path.isdir(args.logs):
        p.error(f'--logs {args.logs}: no such folder')
    text = page(args.logs)
    print(text, end='')
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
