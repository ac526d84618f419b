#!/usr/bin/env python3
"""Writes the seeds of the `data` fuzz target (fuzz_data.c) for the layouts without a
vocab.txt: nanoGPT's bare train.bin/val.bin and llm.c's shards, valid and malformed.

Run once from the repository root; the files it writes are committed:
    python3 tests/fuzz/make_data_seeds.py
"""
import os
import random
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "data")
LEAVE_OUT_VOCAB, SHARDS, TWO_TRAIN_SHARDS = 1, 8, 16
MAGIC, VERSION = 20240520, 1


def ids(n, below, seed):
    rng = random.Random(seed)
    return struct.pack("<%dH" % n, *(rng.randrange(below) for _ in range(n)))


def shard(tokens, magic=MAGIC, version=VERSION, count=None):
    n = len(tokens) // 2 if count is None else count
    return struct.pack("<256i", magic, version, n, *([0] * 253)) + tokens


def seed(name, block_size, vocab_size, flags, train, val):
    # u8 block_size, u8 vocab_size, u8 flags, u16 length + vocab.txt (none here),
    # u16 length + the first token file, then the second
    data = bytes([block_size, vocab_size, flags]) + struct.pack("<H", 0)
    data += struct.pack("<H", len(train)) + train + val
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    train, val = ids(300, 200, 1), ids(60, 200, 2)
    seed("nanogpt-valid", 8, 200, LEAVE_OUT_VOCAB, train, val)
    seed("nanogpt-no-vocab-size", 8, 0, LEAVE_OUT_VOCAB, train, val)
    seed("llmc-valid", 8, 200, LEAVE_OUT_VOCAB | SHARDS, shard(train), shard(val))
    seed("llmc-two-train-shards", 30, 200, LEAVE_OUT_VOCAB | SHARDS | TWO_TRAIN_SHARDS,
         shard(train), shard(val))
    seed("llmc-bad-magic", 8, 200, LEAVE_OUT_VOCAB | SHARDS, shard(train, magic=12345),
         shard(val))
    seed("llmc-version-2", 8, 200, LEAVE_OUT_VOCAB | SHARDS, shard(train, version=2),
         shard(val))
    seed("llmc-count-too-big", 8, 200, LEAVE_OUT_VOCAB | SHARDS, shard(train, count=301),
         shard(val))
    seed("llmc-count-negative", 8, 200, LEAVE_OUT_VOCAB | SHARDS, shard(train, count=-1),
         shard(val))
    seed("llmc-truncated-header", 8, 200, LEAVE_OUT_VOCAB | SHARDS, shard(train)[:500],
         shard(val))
    seed("llmc-big-ids", 8, 100, LEAVE_OUT_VOCAB | SHARDS, shard(train), shard(val))


if __name__ == "__main__":
    main()
