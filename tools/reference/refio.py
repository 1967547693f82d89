"""Writes reference tensors in the format tests/common/refio.h reads."""
import struct

import torch

DTYPES = {torch.float32: 0, torch.float64: 1, torch.int32: 4, torch.int64: 5, torch.uint8: 6}


def write_refs(path, tensors):
    """tensors: dict name -> torch tensor (f32, f64, i32, i64, u8); written contiguous."""
    with open(path, "wb") as f:
        f.write(b"TRREF1\n")
        f.write(struct.pack("<I", len(tensors)))
        for name, t in tensors.items():
            t = t.detach().contiguous().cpu()
            if t.dtype not in DTYPES:
                raise TypeError(f"{name}: unsupported dtype {t.dtype}")
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)))
            f.write(nb)
            f.write(struct.pack("<II", DTYPES[t.dtype], t.dim()))
            for d in t.shape:
                f.write(struct.pack("<q", d))
            f.write(t.numpy().tobytes())
