#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention, causal forward+backward, by T and SDPA backend.

The peer of `gearbox bench attn --device cuda`: the same problem (B, H, T, head_dim, causal
self-attention, q, k and v as views of one packed (B, T, 3, H, D) projection, as a GPT's
c_attn gives them), the same table layout and the same FLOP count, so the two outputs can
be read side by side.

Each backend is forced with torch.nn.attention.sdpa_kernel (FLASH_ATTENTION,
CUDNN_ATTENTION, EFFICIENT_ATTENTION, MATH). A backend that refuses the shape or dtype is
printed as "not eligible: <PyTorch's reasons>" and the next one goes on; one that runs out
of memory is printed as "not timed: out of memory".

A cell is --warmup untimed forward+backward runs, then --repeats timed ones; the medians
are printed. On the GPU every run is timed with CUDA events recorded before the forward,
between forward and backward, and after the backward (torch.autograd.grad with a random
dout, so no .grad accumulation is timed); on the CPU with the host clock.

TFLOP/s counts what gearbox counts (engine/model_profile.c, `gearbox bench attn`): one
(T, T) x (T, D) product per head over the causal triangle, diagonal included, is
2 B H D T (T + 1) / 2 FLOPs; forward is two products (Q K^T, P V) and backward four
(dV, dP, dQ, dK), so forward+backward is 6 B H D T (T + 1) FLOPs, with nothing counted for
recomputing P. FlashAttention's own benchmarks count backward as 2.5 forwards, so their
figures read 7/6 of these for the same time.

Extra memory is the peak of torch.cuda.max_memory_allocated during one forward+backward
(after the warm-up, the peak statistics reset) minus what was allocated before it and
minus out, dq, dk and dv: what the backend keeps or uses beyond the eight tensors every
backend needs (q, k, v, out, dout, dq, dk, dv, printed once per T as in `gearbox bench
attn`). It does not see cuDNN's or cuBLAS's memory allocated outside PyTorch's allocator.

Without a CUDA GPU it exits with status 77 (a skip); --device cpu runs the same code on
the CPU for a smoke test (keep T small there: the math backend is O(T^2) in memory).

usage: bench/sdpa_attn.py [--T 512,1024,2048,4096,8192,16384] [--batch 1] [--heads 12]
                          [--head-dim 64] [--dtype bf16|f16|f32]
                          [--backends flash,cudnn,efficient,math] [--repeats 5]
                          [--warmup 2] [--device cuda|cpu] [--json FILE]
"""
import argparse
import json
import re
import statistics
import sys
import time
import warnings

from bench_args import at_least

SKIP = 77
BACKENDS = ('flash', 'cudnn', 'efficient', 'math')
SDP_NAMES = {'flash': 'FLASH_ATTENTION', 'cudnn': 'CUDNN_ATTENTION',
             'efficient': 'EFFICIENT_ATTENTION', 'math': 'MATH'}
BASELINE = 'math'


def fail(msg, status=2):
    print(f'sdpa_attn.py: {msg}', file=sys.stderr)
    sys.exit(status)


def int_list(text):
    try:
        vals = [int(x) for x in text.split(',')]
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r}: expected comma-separated integers such as 512,1024')
    if not vals or any(v < 1 or v > (1 << 20) for v in vals):
        raise argparse.ArgumentTypeError(f'{text!r}: every value must be in [1, {1 << 20}]')
    return vals


def name_list(text):
    names = text.split(',')
    bad = [n for n in names if n not in BACKENDS]
    if bad or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f'{text!r}: expected distinct names among {",".join(BACKENDS)}')
    return names


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--T', type=int_list, default=None,
                   help='sequence lengths (default 512,1024,2048,4096,8192,16384; 64,128 on the CPU)')
    p.add_argument('--batch', type=at_least(1), default=1, help='batch size (default 1)')
    p.add_argument('--heads', type=at_least(1), default=12, help='attention heads (default 12)')
    p.add_argument('--head-dim', type=at_least(1), default=64, help='head_dim (default 64)')
    p.add_argument('--dtype', choices=('bf16', 'f16', 'f32'), default='bf16',
                   help='element type of q, k, v and the gradients (default bf16)')
    p.add_argument('--backends', type=name_list, default=list(BACKENDS),
                   help='SDPA backends to time, in order (default flash,cudnn,efficient,math)')
    p.add_argument('--repeats', type=at_least(1), default=5, help='timed runs per cell (default 5)')
    p.add_argument('--warmup', type=at_least(0), default=2, help='untimed runs first, at least one (default 2)')
    p.add_argument('--device', choices=('cuda', 'cpu'), default='cuda',
                   help='cuda (default), or cpu for a smoke test')
    p.add_argument('--json', metavar='FILE', help='also write every cell as JSON to FILE')
    args = p.parse_args(argv)
    if args.T is None:
        args.T = [512, 1024, 2048, 4096, 8192, 16384] if args.device == 'cuda' else [64, 128]
    return args


def bytes_text(n):
    units = ('B', 'KiB', 'MiB', 'GiB', 'TiB')
    u = 0
    while n >= 1024 and u < len(units) - 1:
        n /= 1024.0
        u += 1
    return f'{n:.1f} {units[u]}' if u else f'{n:.0f} B'


def reason(message):
    """PyTorch's refusal as one line, without its "(Triggered internally at FILE)" tail."""
    line = re.sub(r'\s*\(Triggered internally at [^)]*\)', '', message.split('\n')[0]).strip()
    return line[:300]


def fwd_bwd_flops(B, H, D, T):
    return 6.0 * B * H * D * T * (T + 1.0)


class Bench:
    def __init__(self, torch, F, args):
        self.torch, self.F, self.args = torch, F, args
        self.dev = torch.device(args.device)
        self.dtype = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}[args.dtype]
        self.cuda = args.device == 'cuda'

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def inputs(self, T):
        """q, k, v: (B, H, T, D) views of a packed (B, T, 3, H, D) tensor; dout: (B, H, T, D)."""
        torch, a = self.torch, self.args
        g = torch.Generator(device='cpu').manual_seed(1337)
        qkv = (torch.rand(a.batch, T, 3, a.heads, a.head_dim, generator=g) * 2 - 1)
        qkv = qkv.to(device=self.dev, dtype=self.dtype)
        q, k, v = (qkv[:, :, i].transpose(1, 2).requires_grad_() for i in range(3))
        dout = (torch.rand(a.batch, T, a.heads, a.head_dim, generator=g) * 2 - 1)
        dout = dout.to(device=self.dev, dtype=self.dtype).transpose(1, 2)
        return q, k, v, dout

    def run_once(self, q, k, v, dout):
        """One forward + backward; returns (fwd_ms, bwd_ms, out, grads)."""
        torch = self.torch
        if self.cuda:
            e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            e[0].record()
            out = self.F.scaled_dot_product_attention(q, k, v, is_causal=True)
            e[1].record()
            grads = torch.autograd.grad(out, (q, k, v), dout)
            e[2].record()
            e[2].synchronize()
            return e[0].elapsed_time(e[1]), e[1].elapsed_time(e[2]), out, grads
        t0 = time.perf_counter()
        out = self.F.scaled_dot_product_attention(q, k, v, is_causal=True)
        t1 = time.perf_counter()
        grads = torch.autograd.grad(out, (q, k, v), dout)
        t2 = time.perf_counter()
        return (t1 - t0) * 1e3, (t2 - t1) * 1e3, out, grads

    def cell(self, backend, T):
        """Times one backend at one T; a dict with either times or a note."""
        torch = self.torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        c = {'T': T, 'backend': backend}
        sdp = getattr(SDPBackend, SDP_NAMES[backend], None)
        if sdp is None:
            c['note'] = f'not eligible: SDPBackend.{SDP_NAMES[backend]} is not in torch {torch.__version__}'
            return c
        q = k = v = dout = out = grads = None
        try:
            q, k, v, dout = self.inputs(T)
            with sdpa_kernel([sdp]), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter('always')
                try:
                    out, grads = self.run_once(q, k, v, dout)[2:]
                except RuntimeError as err:
                    if self.cuda and isinstance(err, torch.cuda.OutOfMemoryError):
                        raise
                    why = [reason(str(w.message)) for w in caught]
                    why = [w for w in why if w] or [reason(str(err))]
                    c['note'] = 'not eligible: ' + '; '.join(dict.fromkeys(why))
                    return c
                for _ in range(self.args.warmup - 1):
                    out, grads = self.run_once(q, k, v, dout)[2:]
                out = grads = None
                if self.cuda:
                    self.sync()
                    torch.cuda.reset_peak_memory_stats()
                    before = torch.cuda.memory_allocated()
                fwd, bwd = [], []
                for r in range(self.args.repeats):
                    f, b, out, grads = self.run_once(q, k, v, dout)
                    if r == 0 and self.cuda:
                        kept = out.numel() * out.element_size() * 4  # out, dq, dk, dv
                        c['extra_bytes'] = max(0, torch.cuda.max_memory_allocated() - before - kept)
                    out = grads = None
                    fwd.append(f)
                    bwd.append(b)
        except RuntimeError as err:
            if self.cuda and isinstance(err, torch.cuda.OutOfMemoryError):
                c['note'] = 'not timed: out of memory (' + str(err).split('\n')[0][:160] + ')'
            else:  # it ran once and then failed: say so and go on with the next cell
                c['note'] = 'failed: ' + reason(str(err))
            return c
        finally:
            q = k = v = dout = out = grads = None
            if self.cuda:
                torch.cuda.empty_cache()
        tot = [f + b for f, b in zip(fwd, bwd)]
        c.update(fwd_ms=statistics.median(fwd), bwd_ms=statistics.median(bwd),
                 total_ms=statistics.median(tot), runs=len(tot))
        a = self.args
        c['tflops'] = fwd_bwd_flops(a.batch, a.heads, a.head_dim, T) / (c['total_ms'] * 1e9)
        return c


def print_header(torch, args):
    print(f'sdpa_attn: PyTorch scaled_dot_product_attention, causal {args.dtype} self-attention '
          f'forward+backward, B {args.batch}, H {args.heads}, head_dim {args.head_dim}')
    if args.device == 'cuda':
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        print(f'device: {torch.cuda.get_device_name()}; torch {torch.__version__}, '
              f'CUDA {torch.version.cuda}, cuDNN {cudnn}')
    else:
        print(f'device: cpu ({torch.get_num_threads()} thread(s)); torch {torch.__version__} '
              '(a smoke test: these times say nothing about a GPU)')
    timer = 'CUDA events' if args.device == 'cuda' else 'host clock'
    print(f'each cell: median of {args.repeats} runs after {args.warmup} warm-up(s), {timer}; '
          'extra = peak allocated - inputs and gradients;\nTFLOP/s of fwd+bwd = 6 B H D T (T + 1) '
          'FLOPs (the causal triangle) / time')


def print_table(args, T, cells, el_size):
    inputs = 8.0 * args.batch * T * args.heads * args.head_dim * el_size
    print(f'\nT = {T}: inputs and gradients (q, k, v, out, dout, dq, dk, dv), not counted as '
          f'extra: {bytes_text(inputs)}')
    print(f'  {"backend":<14} {"fwd ms":>10} {"bwd ms":>10} {"fwd+bwd ms":>12} {"TFLOP/s":>9} '
          f'{"vs " + BASELINE:>9} {"extra":>12}')
    base = next((c for c in cells if c['backend'] == BASELINE and 'total_ms' in c), None)
    for c in cells:
        if 'total_ms' not in c:
            print(f'  {c["backend"]:<14} {c["note"]}')
            continue
        speed = f'{base["total_ms"] / c["total_ms"]:.2f}x' if base else '-'
        extra = bytes_text(c['extra_bytes']) if 'extra_bytes' in c else '-'
        print(f'  {c["backend"]:<14} {c["fwd_ms"]:10.2f} {c["bwd_ms"]:10.2f} {c["total_ms"]:12.2f} '
              f'{c["tflops"]:9.3g} {speed:>9} {extra:>12}')
    sys.stdout.flush()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as err:
        fail(f'needs PyTorch 2.x ({err})', SKIP)
    try:
        import torch.nn.attention  # noqa: F401 (sdpa_kernel: PyTorch 2.3 and later)
    except ImportError:
        fail(f'needs torch.nn.attention.sdpa_kernel (PyTorch 2.3 or later); this is {torch.__version__}')
    if args.device == 'cuda' and not torch.cuda.is_available():
        fail('needs a CUDA GPU; this machine has none (--device cpu runs a smoke test)', SKIP)
    bench = Bench(torch, F, args)
    el_size = torch.tensor([], dtype=bench.dtype).element_size()
    print_header(torch, args)
    records = []
    for T in args.T:
        cells = [bench.cell(b, T) for b in args.backends]
        print_table(args, T, cells, el_size)
        records += cells
    if args.json:
        meta = dict(torch=torch.__version__, device=args.device, dtype=args.dtype, batch=args.batch,
                    heads=args.heads, head_dim=args.head_dim, repeats=args.repeats,
                    warmup=args.warmup, flops='6 B H D T (T + 1) per forward+backward')
        if args.device == 'cuda':
            meta['gpu'] = torch.cuda.get_device_name()
        with open(args.json, 'w') as f:
            json.dump({'meta': meta, 'cells': records}, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
