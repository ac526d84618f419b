#!/usr/bin/env python3
"""resources: what each kernel of a CUDA plugin uses on an sm_90 GPU, from nvcc itself.

Usage: resources.py OUTPUT.tsv DEPFILE NVCC [NVCC ARGS...] -- FILE.cu...

Compiles each .cu for sm_90 only (`-cubin`: device code, no host object) with the plugin's
own nvcc flags (any -gencode among them is dropped for sm_90's), with ptxas's resource
report (`--resource-usage`), and keeps the PTX (`--keep`, with `-lineinfo`'s line
directives, which leave the code as it is) for the launch bounds, which ptxas does not
report, and the instruction counts. Writes one row per kernel (an `.entry` of the PTX), tab-separated,
after a header line:

  symbol  registers  static_smem  local_bytes  max_threads_bound  min_blocks_bound
  ptx_instructions  ptx_memory  ptx_fp32  ptx_sfu  ptx_loops  ptx_loop_loads

symbol is the kernel's mangled name as nvcc writes it; registers, the static shared memory
and the local memory (the stack frame, spills included) per thread are ptxas's figures;
the bounds are the PTX's .maxntid (product of its dimensions) and .minnctapersm (0: none).
The next four count the static instructions of the kernel's PTX body (ptx_classes): all of
them that ptxas issues (not the moves it folds away, FOLDED_MOVE), the global and shared
memory ones, the CUDA-core floating-point ones and the SFU ones; the counting mode scales
them by the memory instructions it sees executed. The last two are its innermost loops
that load from global memory and their global loads, summed (ptx_loop_loads): loads per
iteration, as nvcc unrolled them, are the loads a warp has in flight at once (docs/gpu.md,
"The time of a kernel").

Beside it, X.lines.tsv for X.resources.tsv (ptx_lines), after a header line, one row per
kernel, source line and kind of access, and per chain of call sites where it has several:

  symbol  file  line  space  direction  instructions  fp32  sfu  callers

file and line are where the PTX's .loc puts an access (the innermost inlined function's
line; file the normalised path of its .file directive), space global, shared or generic
(a load or store through a generic address), direction load, store or atomic (a cp.async
is a global load); the next three are its weight: the instructions, CUDA-core and SFU
instructions of the innermost loop holding the access (for one outside every loop, of the
kernel's code outside loops) per access of that loop, averaged over the accesses of the
key in its deepest-nested loops (an unrolled loop's remainder, which nvcc places in the
loop around it, runs a few times where the loop runs many). callers is empty on the row
of every access at that line; where the line was inlined through more than one chain of
call sites (a helper called from two loops), a row per chain follows, its callers the
call sites `FILE:LINE;FILE:LINE...`, innermost first. The counting mode charges each
access it sees run at that line the weight of the chain that matches its own call sites
best (addr2line -i on the emulated build), else of the line, and the first table's
average (ptx_instructions / ptx_memory, ...) where no row matches.
The emulator (src/resources.cc) reads the tables next to the emulated plugin and matches
each emulated kernel to its rows by the demangled name. DEPFILE lists every header the
.cu files include, so editing one rebuilds the table.
"""
import os
import re
import subprocess
import sys
import tempfile

ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)' for 'sm_90a'")
FRAME = re.compile(r"(\d+) bytes stack frame")
USED = re.compile(r"ptxas info\s*: Used (\d+) registers(.*)")
SMEM = re.compile(r"(\d+) bytes smem")
LMEM = re.compile(r"(\d+) bytes lmem")
PTX_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z0-9_$]+)\s*\(", re.M)
MAXNTID = re.compile(r"^\s*\.maxntid\s+([\d,\s]+)$", re.M)
MINCTA = re.compile(r"^\s*\.minnctapersm\s+(\d+)", re.M)
# An instruction of a PTX body: an optional guard predicate, then the opcode with its
# modifiers ("fma.rn.f32"); directives (".reg"), labels and braces are not instructions.
INSTRUCTION = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)[^;\n]*;", re.M)
# A move ptxas leaves no instruction for: unguarded, from a constant, a symbol's address or
# another register (a bit reinterpretation, a copy), which it folds into the instruction
# reading it or coalesces; a move from a special register (S2R) or one packing registers
# ("{...}") is issued, as is a guarded one (a select).
FOLDED_MOVE = re.compile(r"^\s*mov(?:\.\w+)+\s+%\w+\s*,\s*(?!%(?:tid|ntid|ctaid|nctaid|laneid|"
                         r"warpid|nwarpid|smid|nsmid|gridid|lanemask_\w+|clock\w*|globaltimer\w*|"
                         r"pm\d+|envreg\d+|\w*smem_size)\b)[^{};\s][^{};]*;")
# Loads and stores of global and shared memory, cp.async copies, atomics, WMMA/ldmatrix
# fragments and wgmma products (a warp's instruction reading shared memory): what the
# emulator sees as accesses (param, local and constant space it does not).
MEMORY = re.compile(r"^(?:(?:ld|st)(?:\.\w+)*\.(?:global|shared)|cp\.async\.(?:ca|cg)|atom\.|red\.|"
                    r"wmma\.(?:load|store)|ldmatrix|stmatrix|wgmma\.mma_async)")
# Loads and stores through a generic address (no state space: nvcc could not tell which),
# which the emulator sees as global or shared by where they land; local ones it does not see.
GENERIC = re.compile(r"^(?:ld|st)(?!(?:\.[\w:]+)*\.(?:param|local|const|global|shared|tex)\b)"
                     r"(?:\.[\w:]+)+$")
# The multi-function unit (16 per SM per clock on sm_90): approximate transcendentals, and the
# IEEE division, reciprocal and square root, each of which begins with one MUFU operation.
SFU = re.compile(r"^(?:(?:ex2|lg2|rsqrt|rcp|sqrt|sin|cos|tanh)\.approx|(?:div|rcp|sqrt)\.rn)")
# Line info (nvcc -lineinfo): `.loc FILE LINE COLUMN[, inlined_at ...]` says where the
# instructions after it come from, the innermost inlined function's line first; `.file N
# "PATH"` names file N.
LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:.*\binlined_at\s+(\d+)\s+(\d+)\s+(\d+))?")
PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', re.M)
LABEL = re.compile(r"^(\$\w+):", re.M)
BACK_BRANCH = re.compile(r"^\s*(?:@!?%\w+\s+)?bra(?:\.uni)?\s+(\$\w+)\s*;", re.M)
GLOBAL_LOAD = re.compile(r"^\s*(?:@!?%\w+\s+)?ld(?:\.\w+)*\.global", re.M)
# The CUDA cores' floating-point pipes: single precision and packed half precision.
FP32 = re.compile(r"^(?:add|sub|mul|fma|mad|min|max|neg|abs|setp|div|rcp|sqrt)\.(?:[\w.]*\.)?"
                  r"(?:f32|f16x2|bf16x2|f16|bf16)$")


def sm90_args(args):
    """The plugin's nvcc flags with its -gencode pairs replaced by sm_90's."""
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a == '-gencode':
            skip = True
        elif not a.startswith('-gencode='):
            out.append(a)
    return out + ['-gencode', 'arch=compute_90a,code=sm_90a']


def ptxas_rows(report):
    """{symbol: [registers, static_smem, local_bytes]} from ptxas's --resource-usage text."""
    rows = {}
    symbol = None
    for line in report.splitlines():
        m = ENTRY.search(line)
        if m:
            symbol = m.group(1)
            rows[symbol] = [0, 0, 0]
            continue
        if symbol is None:
            continue
        m = FRAME.search(line)
        if m:
            rows[symbol][2] = max(rows[symbol][2], int(m.group(1)))
        m = USED.search(line)
        if m:
            rows[symbol][0] = int(m.group(1))
            smem = SMEM.search(m.group(2))
            lmem = LMEM.search(m.group(2))
            rows[symbol][1] = int(smem.group(1)) if smem else 0
            if lmem:
                rows[symbol][2] = max(rows[symbol][2], int(lmem.group(1)))
    return rows


def ptx_bounds(ptx):
    """{symbol: (max_threads, min_blocks)}: each .entry's directives, up to its body's '{'."""
    bounds = {}
    for m in PTX_ENTRY.finditer(ptx):
        body = ptx.find('{', m.end())
        head = ptx[m.end():body if body >= 0 else len(ptx)]
        threads = 0
        t = MAXNTID.search(head)
        if t:
            threads = 1
            for d in t.group(1).replace(',', ' ').split():
                threads *= int(d)
        c = MINCTA.search(head)
        bounds[m.group(1)] = (threads, int(c.group(1)) if c else 0)
    return bounds


def loop_spans(body):
    """The loops of a PTX body: (start, end) from a label to a branch back to it below."""
    labels = {m.group(1): m.start() for m in LABEL.finditer(body)}
    return [(labels[m.group(1)], m.end()) for m in BACK_BRANCH.finditer(body)
            if labels.get(m.group(1), len(body)) < m.start()]


def ptx_loop_loads(body):
    """(loops, loads): the innermost loops of a PTX body (a branch back to a label above it,
    with no such loop inside) that load from global memory, and their global loads."""
    spans = loop_spans(body)
    loops = loads = 0
    for a, b in spans:
        if any((c, d) != (a, b) and a <= c and d <= b for c, d in spans):
            continue
        n = len(GLOBAL_LOAD.findall(body, a, b))
        loops += n > 0
        loads += n
    return loops, loads


def entry_bodies(ptx):
    """(symbol, body) of each .entry of a PTX text: what lies between its body's braces."""
    for m in PTX_ENTRY.finditer(ptx):
        start = ptx.find('{', m.end())
        depth, end = 0, start
        for end in range(start, len(ptx)):
            depth += {'{': 1, '}': -1}.get(ptx[end], 0)
            if depth == 0:
                break
        yield m.group(1), ptx[start + 1:end]


def ptx_classes(ptx):
    """{symbol: (instructions, memory, fp32, sfu, loops, loop_loads)}: each .entry body's
    static instructions and its loading loops (ptx_loop_loads)."""
    counts = {}
    for symbol, body in entry_bodies(ptx):
        found = list(INSTRUCTION.finditer(body))
        ops = [i.group(1) for i in found]
        issued = sum(1 for i in found if not FOLDED_MOVE.match(i.group(0)))
        counts[symbol] = (issued, sum(1 for o in ops if MEMORY.match(o)),
                          sum(1 for o in ops if FP32.match(o)),
                          sum(1 for o in ops if SFU.match(o))) + ptx_loop_loads(body)
    return counts


def located_instructions(body):
    """(offset, opcode, file number, line, callers) of each instruction of a PTX body: the
    last .loc before it says where in the source it comes from (file '' and line 0:
    nowhere), and callers are the call sites it was inlined through, innermost first, as
    (file number, line): each .loc `inlined_at` a place names its caller, whose own caller
    is the one its latest .loc named. nvcc interleaves the .loc of inlined helpers (a
    conversion's inline asm between a store's two lines), so the caller is often not the
    place just before; the chain is then rebuilt from those latest callers."""
    out = []
    offset, frames = 0, []   # frames: (file, line, column), outermost first
    caller_of = {}           # place -> the caller its latest .loc named
    for text in body.splitlines(keepends=True):
        loc = LOC.match(text)
        if loc:
            here = loc.group(1, 2, 3)
            caller = loc.group(4, 5, 6) if loc.group(4) else None
            caller_of[here] = caller
            if caller is None:
                frames = [here]
            elif caller in frames:
                frames = frames[:len(frames) - frames[::-1].index(caller)] + [here]
            else:
                chain = [caller]
                while caller_of.get(chain[0]) and caller_of[chain[0]] not in chain:
                    chain.insert(0, caller_of[chain[0]])
                frames = chain + [here]
        else:
            op = INSTRUCTION.match(text)
            if op and not FOLDED_MOVE.match(text):
                file, line = (frames[-1][0], int(frames[-1][1])) if frames else ('', 0)
                callers = tuple((f, int(l)) for f, l, _ in reversed(frames[:-1]))
                out.append((offset, op.group(1), file, line, callers))
        offset += len(text)
    return out


def accesses(op):
    """Whether the emulator sees an instruction as an access: a MEMORY one, or a generic
    load or store (most land in global or shared memory)."""
    return bool(MEMORY.match(op) or GENERIC.match(op))


def region_weights(body, instructions):
    """Each instruction's region (the innermost loop holding it, None outside every loop) and
    {region: (instructions, fp32, sfu) per access of the region (`accesses`)}. A loop with
    no access of its own is counted in the region around it, once: how often it runs per
    access there is not in the PTX."""
    spans = sorted(set(loop_spans(body)), key=lambda s: s[1] - s[0])
    parent = {s: next((p for p in spans if p != s and p[0] <= s[0] and s[1] <= p[1]), None)
              for s in spans}
    where = [next((s for s in spans if s[0] <= i[0] < s[1]), None) for i in instructions]
    counts = {s: [0, 0, 0, 0] for s in spans + [None]}   # instructions, memory, fp32, sfu
    for s, (_, op, _, _, _) in zip(where, instructions):
        for i, hit in enumerate((True, accesses(op), FP32.match(op), SFU.match(op))):
            counts[s][i] += bool(hit)
    for s in spans:   # inner loops first
        if counts[s][1] == 0:
            counts[parent[s]] = [a + b for a, b in zip(counts[parent[s]], counts[s])]
    weights = {s: (c[0] / c[1], c[2] / c[1], c[3] / c[1]) for s, c in counts.items() if c[1]}
    return where, weights


def access_kind(op):
    """(space, direction) of a memory instruction: global, shared or generic; load, store or
    atomic (a cp.async is the global load the emulator keys it by)."""
    if '.shared' in op or op.startswith('wgmma.'):
        space = 'shared'
    elif '.global' in op or op.startswith('cp.async'):
        space = 'global'
    else:
        space = 'generic'
    if op.startswith(('atom.', 'red.')):
        return space, 'atomic'
    return space, 'store' if op.startswith(('st', 'wmma.store')) else 'load'


def ptx_lines(ptx):
    """{symbol: {(file, line, space, direction, callers): (instructions, fp32, sfu)}}: for
    each .entry, the weight of its accesses (region_weights: their loop's instructions of
    each class per access), averaged over the deepest-nested of those of one source line
    and kind of access (callers ''; deepest_mean), and where that line was inlined through
    more than one chain of call sites, over those of each chain too (callers
    'FILE:LINE;...', innermost first): a helper's line reached from two loops gets each
    loop's weight. The files are the .file directives' paths, normalised; instructions at
    line 0 have none."""
    files = {n: os.path.normpath(path) for n, path in PTX_FILE.findall(ptx)}
    lines = {}
    for symbol, body in entry_bodies(ptx):
        instructions = located_instructions(body)
        where, weights = region_weights(body, instructions)
        spans = loop_spans(body)
        keyed, chains = {}, {}
        for s, (_, op, file, line, callers) in zip(where, instructions):
            if accesses(op) and line > 0 and file in files:
                key = (files[file], line) + access_kind(op)
                chain = ';'.join('%s:%d' % (files.get(f, '?'), l) for f, l in callers)
                at = (loop_depth(s, spans), weights[s])
                keyed.setdefault(key + ('',), []).append(at)
                chains.setdefault(key, {}).setdefault(chain, []).append(at)
        for key, by_chain in chains.items():
            if len(by_chain) > 1:
                keyed.update({key + (chain,): w for chain, w in by_chain.items()})
        lines[symbol] = {k: deepest_mean(w) for k, w in keyed.items()}
    return lines


def loop_depth(region, spans):
    """How many loops hold a region (region_weights': a loop span, or None outside all)."""
    return 0 if region is None else sum(1 for a, b in spans if a <= region[0] and region[1] <= b)


def deepest_mean(weighted):
    """The mean weight of the deepest-nested of (depth, weight) accesses: where nvcc put
    copies of one access in nested loops (an unrolled loop's remainder in the loop around
    it), the inner copy runs all but a few of the times."""
    deepest = max(d for d, _ in weighted)
    w = [x for d, x in weighted if d == deepest]
    return tuple(sum(c) / len(w) for c in zip(*w))


def compile_one(nvcc, args, cu, work):
    """ptxas's rows, the PTX's bounds, instruction classes and per-line weights of one .cu,
    and the headers it includes. -lineinfo only adds line directives and debug sections: the
    code, and so ptxas's figures, are those of a compile without it."""
    keep = os.path.join(work, 'keep')
    os.makedirs(keep, exist_ok=True)
    dep = os.path.join(work, 'dep')
    cmd = [nvcc] + sm90_args(args) + ['-cubin', '--resource-usage', '-lineinfo',
                                      '--keep',
                                      '--keep-dir', keep, '-MD', '-MF', dep,
                                      '-o', os.path.join(work, 'out.cubin'), cu]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout)
        sys.exit('resources.py: nvcc failed on %s (the command: %s)' % (cu, ' '.join(cmd)))
    rows = ptxas_rows(done.stdout)
    bounds, classes, lines = {}, {}, {}
    for name in os.listdir(keep):
        if name.endswith('.ptx'):
            with open(os.path.join(keep, name)) as f:
                ptx = f.read()
            bounds.update(ptx_bounds(ptx))
            classes.update(ptx_classes(ptx))
            lines.update(ptx_lines(ptx))
    with open(dep) as f:
        headers = f.read().split(':', 1)[1].replace('\\\n', ' ').split()
    return rows, bounds, classes, lines, headers


def line_rows(symbol, lines):
    """The lines table's rows of one kernel, in the order of its keys."""
    return ['%s\t%s\t%d\t%s\t%s\t%.3f\t%.3f\t%.3f\t%s' % ((symbol,) + key[:4] + lines[key] +
                                                          key[4:])
            for key in sorted(lines)]


def lines_path(out):
    """The lines table beside OUTPUT: X.lines.tsv for X.resources.tsv."""
    stem = out[:-len('.resources.tsv')] if out.endswith('.resources.tsv') else out
    return stem + '.lines.tsv'


def main(argv):
    if len(argv) < 5 or '--' not in argv:
        sys.exit('usage: resources.py OUTPUT.tsv DEPFILE NVCC [ARGS...] -- FILE.cu...')
    out, depfile, nvcc = argv[1], argv[2], argv[3]
    split = argv.index('--')
    args, sources = argv[4:split], argv[split + 1:]
    lines = ['symbol\tregisters\tstatic_smem\tlocal_bytes\tmax_threads_bound\tmin_blocks_bound'
             '\tptx_instructions\tptx_memory\tptx_fp32\tptx_sfu\tptx_loops\tptx_loop_loads']
    weights = ['symbol\tfile\tline\tspace\tdirection\tinstructions\tfp32\tsfu\tcallers']
    deps = []
    for cu in sources:
        with tempfile.TemporaryDirectory() as work:
            rows, bounds, classes, lines_of, headers = compile_one(nvcc, args, cu, work)
        for symbol, (regs, smem, local) in sorted(rows.items()):
            threads, blocks = bounds.get(symbol, (0, 0))
            ptx = classes.get(symbol, (0,) * 6)
            lines.append(('%s' + '\t%d' * 11) % ((symbol, regs, smem, local, threads, blocks) + ptx))
            weights += line_rows(symbol, lines_of.get(symbol, {}))
        deps += headers
    with open(out, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    with open(lines_path(out), 'w') as f:
        f.write('\n'.join(weights) + '\n')
    with open(depfile, 'w') as f:
        f.write('%s: %s\n' % (out, ' \\\n  '.join(sorted(set(deps)))))


if __name__ == '__main__':
    main(sys.argv)
