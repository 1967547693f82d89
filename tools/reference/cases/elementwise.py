"""Reference cases: add, mul, bias_add, scale, gelu, tanh, sigmoid and the reductions (sum,
mean, sum_dim, mean_dim), forward and backward, f32. The `_big` cases are large enough to
take the kernels' OpenMP paths."""
import torch
from oracle import fwd_bwd  # noqa: E402


_fwd_bwd = fwd_bwd


def cases():
    g = torch.Generator().manual_seed(10)

    def rn(*shape, scale=1.0):
        return torch.randn(shape, generator=g) * scale

    seed = 100
    for op, fn in (("add", torch.add), ("mul", torch.mul)):
        for tag, ashape, bshape in (("same", (4, 5, 6), (4, 5, 6)), ("bcast", (4, 5, 6), (5, 6)),
                                    ("bcast1", (7, 33), (33,)), ("scalar", (3, 5), ()),
                                    ("big", (64, 640), (640,)),
                                    ("big_same", (200, 200), (200, 200))):
            seed += 1
            yield f"{op}_{tag}", _fwd_bwd(lambda a, b, fn=fn: fn(a, b),
                                           dict(a=rn(*ashape), b=rn(*bshape)), seed)
    yield "bias_add", _fwd_bwd(lambda x, b: x + b, dict(x=rn(3, 4, 10), b=rn(10)), 120)
    yield "bias_add_big", _fwd_bwd(lambda x, b: x + b, dict(x=rn(64, 700), b=rn(700)), 121)
    yield "scale", _fwd_bwd(lambda x: x * -1.7, dict(x=rn(5, 7)), 122)
    yield "scale_big", _fwd_bwd(lambda x: x * 0.3, dict(x=rn(40000)), 123)
    F = torch.nn.functional
    for tag, shape in (("", (8, 50)), ("_big", (8, 600))):
        yield f"gelu_exact{tag}", _fwd_bwd(lambda x: F.gelu(x), dict(x=rn(*shape, scale=3)), 130)
        yield f"gelu_tanh{tag}", _fwd_bwd(lambda x: F.gelu(x, approximate="tanh"),
                                          dict(x=rn(*shape, scale=3)), 131)
        yield f"tanh{tag}", _fwd_bwd(torch.tanh, dict(x=rn(*shape, scale=2)), 132)
        yield f"sigmoid{tag}", _fwd_bwd(torch.sigmoid, dict(x=rn(*shape, scale=6)), 133)
    # Saturated regions: large |x| must neither overflow nor lose the gradient's sign.
    sat = torch.linspace(-40, 40, 161)
    yield "sigmoid_wide", _fwd_bwd(torch.sigmoid, dict(x=sat), 134)
    yield "tanh_wide", _fwd_bwd(torch.tanh, dict(x=sat), 135)
    yield "gelu_exact_wide", _fwd_bwd(lambda x: F.gelu(x), dict(x=sat), 136)
    yield "gelu_tanh_wide", _fwd_bwd(lambda x: F.gelu(x, approximate="tanh"), dict(x=sat), 137)

    x = rn(5, 6, 7)
    yield "sum", _fwd_bwd(lambda x: x.sum(), dict(x=x), 140)
    yield "mean", _fwd_bwd(lambda x: x.mean(), dict(x=x), 141)
    yield "sum_big", _fwd_bwd(lambda x: x.sum(), dict(x=rn(300, 140) + 0.5), 142)
    yield "mean_big", _fwd_bwd(lambda x: x.mean(), dict(x=rn(300, 140) + 0.5), 143)
    for d in (0, 1, 2, -1, -2):
        tag = f"m{-d}" if d < 0 else str(d)
        yield f"sum_dim{tag}", _fwd_bwd(lambda x, d=d: x.sum(d), dict(x=x), 150 + d)
        yield f"mean_dim{tag}", _fwd_bwd(lambda x, d=d: x.mean(d), dict(x=x), 160 + d)
    yield "sum_dim_1d", _fwd_bwd(lambda x: x.sum(0), dict(x=rn(9)), 170)
    # I = 300 > one 256-wide block, and over the parallel threshold.
    xb = rn(3, 40, 300)
    yield "sum_dim_big1", _fwd_bwd(lambda x: x.sum(1), dict(x=xb), 171)
    yield "mean_dim_big0", _fwd_bwd(lambda x: x.mean(0), dict(x=xb), 172)
    yield "sum_dim_bigm1", _fwd_bwd(lambda x: x.sum(-1), dict(x=xb), 173)
