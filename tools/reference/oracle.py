"""Shared helpers for the reference case modules: run an op in PyTorch, forward and backward."""
import torch


def fwd_bwd_leaves(fn, inputs, seed, no_grad=()):
    """Runs fn on leaf copies of inputs and back-propagates a random upstream gradient `dout`.
    Returns (dict with the inputs, "out", "dout" and each input's grad as "<name>.grad",
    the leaves). Float inputs require a gradient unless named in no_grad (buffers)."""
    g = torch.Generator().manual_seed(seed)
    leaves = {k: v.clone().requires_grad_(v.is_floating_point() and k not in no_grad)
              for k, v in inputs.items()}
    out = fn(**leaves)
    dout = torch.randn(out.shape, generator=g, dtype=out.dtype)
    out.backward(dout)
    res = dict(inputs)
    res["out"] = out.detach()
    res["dout"] = dout
    for k, v in leaves.items():
        if v.requires_grad and v.grad is not None:
            res[k + ".grad"] = v.grad
    return res, leaves


def fwd_bwd(fn, inputs, seed):
    """fwd_bwd_leaves without the leaves."""
    return fwd_bwd_leaves(fn, inputs, seed)[0]
