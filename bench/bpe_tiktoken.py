#!/usr/bin/env python3
"""`gearbox encode` against tiktoken on the same texts, side by side (not a test).

usage: bpe_tiktoken.py GEARBOX GPT2_TIKTOKEN FILE... [--gpt2-folder DIR]

GPT2_TIKTOKEN is GPT-2's ranks file (gpt2.tiktoken; gearbox downloads nothing: the
openai-whisper package on PyPI ships one in whisper/assets/). With --gpt2-folder DIR the
script also writes GPT-2's encoder.json and vocab.bpe into DIR, made from the ranks (each
token's merge is the split BPE makes of it with the ranks below its own), and times
gearbox on them too. For each FILE: tiktoken's encode in this process (one thread, best
of 3) and `gearbox encode ... --output --stats` (best of 3 of the encoding time it
reports, loading the vocabulary apart), runs of the two taking turns, the ids of both
compared. Prints MB/s and gearbox's speed as a multiple of tiktoken's.
Needs the tiktoken and regex packages.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

import tiktoken

PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def load_ranks(path):
    ranks = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def split_of(ranks, token):
    """The two parts BPE merges last to make `token`, with the ranks below its own."""
    parts = [bytes([b]) for b in token]
    limit = ranks[token]
    while len(parts) > 2:
        best = min((ranks.get(a + b, limit), i) for i, (a, b) in enumerate(zip(parts, parts[1:])))
        if best[0] >= limit:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts


def write_gpt2_folder(ranks, folder):
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    spell, extra = {}, 0
    for b in range(256):
        spell[b] = chr(b) if b in printable else chr(256 + (extra := extra + 1) - 1)
    show = lambda bs: "".join(spell[b] for b in bs)
    os.makedirs(folder, exist_ok=True)
    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    encoder = {show(tok): rank for tok, rank in by_rank}
    encoder["<|endoftext|>"] = len(by_rank)
    with open(os.path.join(folder, "encoder.json"), "w") as f:
        json.dump(encoder, f)
    with open(os.path.join(folder, "vocab.bpe"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for tok, rank in by_rank[256:]:
            a, b = split_of(ranks, tok)
            f.write(f"{show(a)} {show(b)}\n")


def best_of(n, fn):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    args = sys.argv[1:]
    folder = None
    if "--gpt2-folder" in args:
        i = args.index("--gpt2-folder")
        folder = args[i + 1]
        del args[i:i + 2]
    gearbox, ranks_path, files = args[0], args[1], args[2:]
    ranks = load_ranks(ranks_path)
    enc = tiktoken.Encoding("gpt2", pat_str=PATTERN, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": len(ranks)})
    vocabs = [ranks_path]
    if folder:
        write_gpt2_folder(ranks, folder)
        vocabs.append(folder)
    out = os.path.join(tempfile.mkdtemp(), "ids.bin")

    def gearbox_seconds(vocab, path):
        run = subprocess.run([gearbox, "encode", "--vocab", vocab, "--input", path, "--output",
                              out, "--dtype", "uint32", "--stats"], check=True,
                             capture_output=True, text=True)
        return float(run.stderr.split(" in ")[1].split(" s")[0])

    for path in files:
        data = open(path, "rb").read()
        text = data.decode("utf-8")
        want = enc.encode(text, allowed_special="all")
        t_tik, t_gb = [], {v: [] for v in vocabs}
        for _ in range(3):   # taking turns, so that the machine's load hits both
            start = time.perf_counter()
            enc.encode(text, allowed_special="all")
            t_tik.append(time.perf_counter() - start)
            for vocab in vocabs:
                t_gb[vocab].append(gearbox_seconds(vocab, path))
        mb = len(data) / 1e6
        line = (f"{os.path.basename(path)}: {len(data)} bytes, {len(want)} ids | tiktoken "
                f"{mb / min(t_tik):.2f} MB/s")
        for vocab in vocabs:
            gearbox_seconds(vocab, path)
            got = list(memoryview(open(out, "rb").read()).cast("I"))
            same = "same ids" if got == want else "DIFFERENT IDS"
            kind = "folder" if os.path.isdir(vocab) else "tiktoken file"
            best = min(t_gb[vocab])
            line += (f" | gearbox ({kind}) {mb / best:.2f} MB/s, {best:.4f} s, "
                     f"{min(t_tik) / best:.2f}x tiktoken's speed, {same}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
