"""Writer for gbt reference tensor files, the format tests/common/gbt.c reads.

Layout: magic b"GBTENSR1"; uint32 count; then per tensor: uint32 name_len, the UTF-8
name (no NUL), uint32 dtype (0 = f32, 3 = i32), uint32 ndim, int64 shape[ndim], and
the data, little-endian and row-major. Only what the tests need: writing f32 and i32.
"""
import struct

import numpy as np
import torch

MAGIC = b"GBTENSR1"
DTYPES = {torch.float32: (0, "<f4"), torch.int32: (3, "<i4")}


def write_gbt(path, tensors):
    """Writes `tensors`, a sequence of (name, torch.Tensor) pairs, to `path` in order."""
    names = [name for name, _ in tensors]
    if len(set(names)) != len(names):
        raise ValueError("duplicate tensor names")
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<I", len(tensors)))
        for name, t in tensors:
            if t.dtype not in DTYPES:
                raise TypeError(f"{name}: dtype {t.dtype} is neither float32 nor int32")
            code, np_dtype = DTYPES[t.dtype]
            encoded = name.encode("utf-8")
            f.write(struct.pack("<I", len(encoded)))
            f.write(encoded)
            f.write(struct.pack("<II", code, t.dim()))
            f.write(struct.pack(f"<{t.dim()}q", *t.shape))
            f.write(np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np_dtype).tobytes())
