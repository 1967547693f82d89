"""Reference cases: linear and relu (forward and backward)."""
import torch
from oracle import fwd_bwd  # noqa: E402


_fwd_bwd = fwd_bwd


def cases():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 5, 7, generator=g)
    w = torch.randn(9, 7, generator=g)
    b = torch.randn(9, generator=g)
    yield "linear", _fwd_bwd(lambda x, w, b: torch.nn.functional.linear(x, w, b), dict(x=x, w=w, b=b), 1)
    yield "linear_nobias", _fwd_bwd(lambda x, w: torch.nn.functional.linear(x, w), dict(x=x, w=w), 2)
    r = torch.randn(4, 33, generator=g)
    yield "relu", _fwd_bwd(lambda x: torch.relu(x), dict(x=r), 3)
