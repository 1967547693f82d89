#!/usr/bin/env python3
"""The benchmark peer's virtual environment: the current PyTorch from PyPI, pinned in
tools/bench/peer_requirements.txt, for the side-by-side benchmarks (hf_encoder_vs_torch.py).

  peer_venv.py python       create the venv once (cached), print its python

Made by tools/oracle/oracle_venv.py's machinery (same cache root, lock, stamp and PyPI error
handling; HF_HUB_OFFLINE=1 in its env()), but without the system's site packages, so Debian's
python3-torch is not seen: `import torch` is the pinned wheel. Exit 77 when PyPI cannot be
reached, 1 on any other failure.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "oracle"))
import oracle_venv  # noqa: E402

REQUIREMENTS = os.path.join(HERE, "peer_requirements.txt")


def ensure(base_python=None):
    """The peer venv's python, made first when needed (raises oracle_venv.Unreachable or Failed)."""
    return oracle_venv.ensure_venv(base_python, REQUIREMENTS, prefix="peer-venv-", system_site_packages=False)


def main(argv):
    if argv != ["python"]:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        print(ensure())
    except oracle_venv.Unreachable as e:
        print(e, file=sys.stderr)
        return oracle_venv.SKIP
    except oracle_venv.Failed as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
