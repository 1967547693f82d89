"""Reference cases: linear and relu (forward and backward)."""
import torch


def _fwd_bwd(fn, inputs, seed):
    """Runs fn on leaf copies of inputs, back-propagates a random upstream gradient `dout`,
    returns a dict with inputs, out, dout and each input's grad as `<name>.grad`."""
    g = torch.Generator().manual_seed(seed)
    leaves = {k: v.clone().requires_grad_(v.is_floating_point()) for k, v in inputs.items()}
    out = fn(**leaves)
    dout = torch.randn(out.shape, generator=g, dtype=out.dtype)
    out.backward(dout)
    res = dict(inputs)
    res["out"] = out.detach()
    res["dout"] = dout
    for k, v in leaves.items():
        if v.requires_grad and v.grad is not None:
            res[k + ".grad"] = v.grad
    return res


def cases():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 5, 7, generator=g)
    w = torch.randn(9, 7, generator=g)
    b = torch.randn(9, generator=g)
    yield "linear", _fwd_bwd(lambda x, w, b: torch.nn.functional.linear(x, w, b), dict(x=x, w=w, b=b), 1)
    yield "linear_nobias", _fwd_bwd(lambda x, w: torch.nn.functional.linear(x, w), dict(x=x, w=w), 2)
    r = torch.randn(4, 33, generator=g)
    yield "relu", _fwd_bwd(lambda x: torch.relu(x), dict(x=r), 3)
