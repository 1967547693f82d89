#!/usr/bin/env python3
"""Generates the PyTorch reference data for tests/reference.

Each module in tools/reference/cases/ defines `cases()`, yielding (name, {tensor name: tensor})
pairs; each becomes <out>/<name>.bin. Runs on CPU, deterministic (fixed seeds, one thread).
PyTorch is the test oracle only: nothing at run time depends on it.
"""
import argparse
import importlib.util
import os
import pathlib
import sys

try:
    import torch
except ImportError:
    sys.exit("make_refs.py: PyTorch is missing: install Debian's python3-torch "
             "(tools/dev deps does it) and run with /usr/bin/python3")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from refio import write_refs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", help="comma-separated case module names")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    count = 0
    for path in sorted((HERE / "cases").glob("*.py")):
        if only and path.stem not in only:
            continue
        spec = importlib.util.spec_from_file_location(f"cases_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name, tensors in mod.cases():
            write_refs(os.path.join(args.out, name + ".bin"), tensors)
            count += 1
    print(f"make_refs.py: wrote {count} reference files to {args.out}")


if __name__ == "__main__":
    main()
