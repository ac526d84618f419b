#!/usr/bin/env python3
"""Writes the tokenizer test's fixture: a small byte-level BPE trained on the bundled
text, in both file formats gearbox reads (GPT-2's encoder.json + vocab.bpe, and a
tiktoken ranks file), plus test texts and the token ids tiktoken gives for them.

Run once, offline, from the repository root; the files it writes are committed:
    python3 tests/tokenizer/make_fixture.py
Needs the `regex` and `tiktoken` packages (PyPI). Nothing is downloaded.

    python3 tests/tokenizer/make_fixture.py --long
writes only long.txt: for long inputs the test makes itself (a run of 100,000 spaces, a
word of 100,002 letters, a 1 MiB base64 line, the bundled Tiny Shakespeare), the count of tiktoken's ids and the
SHA-256 of the ids as little-endian int32, with the fixture's vocabulary.
"""
import array
import base64
import collections
import hashlib
import json
import os
import sys

import regex
import tiktoken

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixture")
CORPUS = os.path.join(HERE, "..", "..", "examples", "data", "tinyshakespeare.txt")
MERGES = 300
# GPT-2's pre-tokenising pattern, as tiktoken's r50k/gpt2 encoding has it
PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
TEXTS = [
    "First Citizen:\nBefore we proceed any further, hear me speak.",
    "I'm sure you'll say they've done it; we'd know she's right. DON'T",
    "tabs\tand   runs   of    spaces\n\n\n  end  ",
    "caf\u00e9 na\u00efve \u00fcber \u65e5\u672c\u8a9e \u0645\u0631\u062d\u0628\u0627 \U0001F600 \u00bd \u2167 \u0661\u0662",
    "numbers 12345 and 3.14159<|endoftext|>after the end<|endoftext|>",
    "<|endoftext|>",
    "",
]


def byte_order():
    """GPT-2's bytes_to_unicode order: the printable bytes, then the rest."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    return printable + [b for b in range(256) if b not in printable]


def byte_to_char():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def train(text):
    """Plain BPE over pre-tokenised pieces: merge the most frequent pair, MERGES times."""
    words = collections.Counter(regex.findall(PATTERN, text))
    pieces = {w: [bytes([b]) for b in w.encode()] for w in words}
    merges = []
    for _ in range(MERGES):
        pairs = collections.Counter()
        for w, n in words.items():
            p = pieces[w]
            for a, b in zip(p, p[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        for w in words:
            p, out, i = pieces[w], [], 0
            while i < len(p):
                if i + 1 < len(p) and (p[i], p[i + 1]) == best:
                    out.append(p[i] + p[i + 1])
                    i += 2
                else:
                    out.append(p[i])
                    i += 1
            pieces[w] = out
    return merges


def lcg_bytes(n, seed):
    """n pseudo-random bytes: the top byte of a 64-bit LCG (Knuth's MMIX constants), as
    test_bpe.c makes them."""
    out, x = bytearray(n), seed
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        out[i] = x >> 56
    return bytes(out)


LONG_TEXTS = {
    "spaces": lambda: b" " * 100000,
    "spaces-word": lambda: b" " * 100000 + b"word",
    "one-word": lambda: b"the" * 33334,   # one piece of 100,002 letters, merged throughout
    "base64": lambda: base64.b64encode(lcg_bytes(786432, 1)),   # 1 MiB, one line
    "shakespeare": lambda: open(CORPUS, "rb").read(),
}


def load_fixture_encoding():
    ranks = {}
    with open(os.path.join(OUT, "tiny.tiktoken")) as f:
        for line in f:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return tiktoken.Encoding("tiny", pat_str=PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": len(ranks)})


def write_long():
    """long.txt: NAME BYTES IDS SHA256-OF-IDS per line."""
    enc = load_fixture_encoding()
    with open(os.path.join(OUT, "long.txt"), "w") as f:
        for name, make in LONG_TEXTS.items():
            text = make()
            ids = enc.encode(text.decode(), allowed_special="all")
            digest = hashlib.sha256(array.array("i", ids).tobytes()).hexdigest()
            f.write(f"{name} {len(text)} {len(ids)} {digest}\n")
            print(name, len(text), len(ids))


def main():
    with open(CORPUS, encoding="utf-8") as f:
        corpus = f.read()[:200000]
    merges = train(corpus)
    ranks = {bytes([b]): i for i, b in enumerate(byte_order())}
    for a, b in merges:
        ranks[a + b] = len(ranks)
    eot = len(ranks)
    os.makedirs(OUT, exist_ok=True)
    to_char = byte_to_char()
    def show(bs):
        return "".join(to_char[b] for b in bs)
    encoder = {show(tok): rank for tok, rank in ranks.items()}
    encoder["<|endoftext|>"] = eot
    with open(os.path.join(OUT, "encoder.json"), "w", encoding="utf-8") as f:
        json.dump(encoder, f, ensure_ascii=True)
    with open(os.path.join(OUT, "vocab.bpe"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{show(a)} {show(b)}\n")
    with open(os.path.join(OUT, "tiny.tiktoken"), "w") as f:
        for tok, rank in ranks.items():
            f.write(f"{base64.b64encode(tok).decode()} {rank}\n")
    enc = tiktoken.Encoding("tiny", pat_str=PATTERN, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": eot})
    # texts.hex: each text's UTF-8 bytes in hex, a line each; expected.txt: its ids
    with open(os.path.join(OUT, "texts.hex"), "w") as f:
        for t in TEXTS:
            f.write(t.encode().hex() + "\n")
    with open(os.path.join(OUT, "expected.txt"), "w") as f:
        for t in TEXTS:
            f.write(" ".join(str(i) for i in enc.encode(t, allowed_special="all")) + "\n")
    print(f"{len(merges)} merges, vocabulary {eot + 1} with <|endoftext|> = {eot}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--long"]:
        write_long()
    else:
        main()
