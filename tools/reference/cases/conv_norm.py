"""Reference cases: conv2d, max/avg pooling, batch_norm and layer_norm (forward and backward).

Each case stores its options in a f64 `cfg` tensor that the C test reads:
conv2d [stride, padding], pools [kernel, stride, padding], batch_norm [momentum, eps,
training], layer_norm [eps]. batch_norm cases also store the running statistics after the
forward (`running_mean.after`, `running_var.after`): training mode updates them in place."""
import torch
import torch.nn.functional as F
from oracle import fwd_bwd_leaves  # noqa: E402


_fwd_bwd = fwd_bwd_leaves


def _cfg(*v):
    return torch.tensor(v, dtype=torch.float64)


def _conv(name, g, n, c, h, w, oc, kh, kw, stride, padding, bias, seed):
    x = torch.randn(n, c, h, w, generator=g)
    wt = torch.randn(oc, c, kh, kw, generator=g) / (c * kh * kw) ** 0.5
    inputs = dict(x=x, w=wt)
    if bias:
        inputs["b"] = torch.randn(oc, generator=g)
        fn = lambda x, w, b: F.conv2d(x, w, b, stride=stride, padding=padding)  # noqa: E731
    else:
        fn = lambda x, w: F.conv2d(x, w, None, stride=stride, padding=padding)  # noqa: E731
    res, _ = _fwd_bwd(fn, inputs, seed)
    res["cfg"] = _cfg(stride, padding)
    return name, res


def _pool(name, g, kind, shape, kernel, stride, padding, seed):
    x = torch.randn(*shape, generator=g)
    if kind == "max":
        fn = lambda x: F.max_pool2d(x, kernel, stride, padding)  # noqa: E731
    else:
        fn = lambda x: F.avg_pool2d(x, kernel, stride, padding,  # noqa: E731
                                    count_include_pad=True)
    res, _ = _fwd_bwd(fn, dict(x=x), seed)
    res["cfg"] = _cfg(kernel, stride, padding)
    return name, res


def _bn(name, g, shape, training, momentum, eps, seed):
    c = shape[1]
    x = torch.randn(*shape, generator=g) * 2 + 0.5
    inputs = dict(x=x, gamma=torch.randn(c, generator=g), beta=torch.randn(c, generator=g),
                  running_mean=torch.randn(c, generator=g),
                  running_var=torch.rand(c, generator=g) + 0.5)

    def fn(x, gamma, beta, running_mean, running_var):
        return F.batch_norm(x, running_mean, running_var, gamma, beta, training=training,
                            momentum=momentum, eps=eps)

    res, leaves = _fwd_bwd(fn, inputs, seed, no_grad=("running_mean", "running_var"))
    res["running_mean.after"] = leaves["running_mean"].detach()
    res["running_var.after"] = leaves["running_var"].detach()
    res["cfg"] = _cfg(momentum, eps, 1.0 if training else 0.0)
    return name, res


def cases():
    g = torch.Generator().manual_seed(0)
    # conv2d: strides 1 and 2, padding 0 and 1, no bias, non-square input and kernel, C > 1
    yield _conv("conv2d_s1_p1", g, 2, 3, 7, 9, 4, 3, 3, 1, 1, True, 1)
    yield _conv("conv2d_s2_p0", g, 3, 2, 9, 8, 5, 3, 3, 2, 0, True, 2)
    yield _conv("conv2d_s2_p1_nobias", g, 2, 3, 8, 11, 6, 3, 2, 2, 1, False, 3)
    yield _conv("conv2d_s1_p0_5x5", g, 2, 4, 10, 7, 3, 5, 5, 1, 0, True, 4)
    yield _conv("conv2d_1x1", g, 3, 8, 5, 6, 7, 1, 1, 1, 0, True, 5)
    # FashionCNN's shapes (smaller batch): many images, so every thread takes some
    yield _conv("conv2d_fashion1", g, 16, 1, 28, 28, 32, 3, 3, 1, 1, True, 6)
    yield _conv("conv2d_fashion2", g, 16, 32, 14, 14, 64, 3, 3, 1, 1, True, 7)
    # pools: stride != kernel, padding
    yield _pool("max_pool2d_k3_s2_p1", g, "max", (2, 3, 9, 10), 3, 2, 1, 10)
    yield _pool("max_pool2d_k2_s2_p0", g, "max", (2, 3, 8, 7), 2, 2, 0, 11)
    yield _pool("max_pool2d_k3_s1_p1", g, "max", (1, 2, 6, 5), 3, 1, 1, 12)
    yield _pool("avg_pool2d_k3_s2_p1", g, "avg", (2, 3, 9, 10), 3, 2, 1, 13)
    yield _pool("avg_pool2d_k2_s2_p0", g, "avg", (2, 3, 8, 7), 2, 2, 0, 14)
    yield _pool("avg_pool2d_k4_s3_p2", g, "avg", (1, 2, 11, 9), 4, 3, 2, 15)
    # batch_norm: 2-D and 4-D, train and eval; running stats compared after the forward
    yield _bn("batch_norm_2d_train", g, (8, 5), True, 0.1, 1e-5, 20)
    yield _bn("batch_norm_4d_train", g, (4, 3, 5, 6), True, 0.3, 1e-3, 21)
    yield _bn("batch_norm_2d_eval", g, (8, 5), False, 0.1, 1e-5, 22)
    yield _bn("batch_norm_4d_eval", g, (4, 3, 5, 6), False, 0.1, 1e-5, 23)
    # layer_norm over the last dim of 3-D input
    x = torch.randn(3, 4, 10, generator=g) * 3 + 1
    gamma, beta = torch.randn(10, generator=g), torch.randn(10, generator=g)
    res, _ = _fwd_bwd(lambda x, gamma, beta: F.layer_norm(x, (10,), gamma, beta, 1e-5),
                      dict(x=x, gamma=gamma, beta=beta), 30)
    res["cfg"] = _cfg(1e-5)
    yield "layer_norm_3d", res
    x = torch.randn(5, 2, 37, generator=g)
    res, _ = _fwd_bwd(lambda x: F.layer_norm(x, (37,), None, None, 1e-6), dict(x=x), 31)
    res["cfg"] = _cfg(1e-6)
    yield "layer_norm_noaffine", res
