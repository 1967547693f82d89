"""Reference cases: softmax, log_softmax, cross_entropy (ignore_index, label smoothing,
leading dims), cosine_similarity and mse, forward and backward, f32. Loss cases carry a `cfg` tensor (f64:
normaliser, ignore_index, label_smoothing) that the C test reads to call the op the same
way. The `_big` cases take the kernels' OpenMP paths."""
import torch
from oracle import fwd_bwd  # noqa: E402

F = torch.nn.functional


_fwd_bwd = fwd_bwd


def cases():
    g = torch.Generator().manual_seed(20)

    def rn(*shape, scale=1.0):
        return torch.randn(shape, generator=g) * scale

    for op, fn in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
        sm = lambda x, fn=fn: fn(x, -1)
        yield f"{op}", _fwd_bwd(sm, dict(x=rn(6, 17, scale=3)), 200)
        yield f"{op}_3d", _fwd_bwd(sm, dict(x=rn(2, 3, 10)), 201)
        yield f"{op}_big", _fwd_bwd(sm, dict(x=rn(64, 600, scale=2)), 202)
        # Large logits: only the max-subtracted form stays finite.
        yield f"{op}_large", _fwd_bwd(sm, dict(x=rn(5, 40, scale=60) + 500), 203)
        yield f"{op}_one", _fwd_bwd(sm, dict(x=rn(4, 1)), 204)
    masked = rn(4, 9)
    masked[:, 5:] = float("-inf")
    masked[1, 1:5] = float("-inf")  # row 1 keeps one finite logit
    yield "softmax_masked", _fwd_bwd(lambda x: torch.softmax(x, -1), dict(x=masked), 205)

    def ce(name, logits, targets, norm, ignore=-100, smooth=0.0, seed=0):
        fn = lambda x, t: F.cross_entropy(x.reshape(-1, x.shape[-1]), t.reshape(-1).long(),
                                          ignore_index=ignore, label_smoothing=smooth,
                                          reduction="sum") / norm
        res = _fwd_bwd(fn, dict(x=logits, t=targets.to(torch.int32)), seed)
        res["cfg"] = torch.tensor([norm, ignore, smooth], dtype=torch.float64)
        return name, res

    def tg(n, c):
        return torch.randint(0, c, (n,), generator=g)

    yield ce("ce_basic", rn(16, 10, scale=2), tg(16, 10), 16, seed=210)
    t = tg(16, 10)
    t[[1, 4, 5, 11]] = -100
    yield ce("ce_ignore", rn(16, 10, scale=2), t, 16, seed=211)
    t = tg(16, 10)
    yield ce("ce_ignore_class", rn(16, 10, scale=2), t, 9, ignore=int(t[3]), seed=212)
    yield ce("ce_smooth", rn(16, 10, scale=2), tg(16, 10), 16, smooth=0.1, seed=213)
    t = tg(16, 10)
    t[[0, 7, 8]] = -1
    yield ce("ce_smooth_ignore", rn(16, 10, scale=2), t, 32, ignore=-1, smooth=0.25, seed=214)
    yield ce("ce_smooth_full", rn(8, 6), tg(8, 6), 8, smooth=1.0, seed=215)
    yield ce("ce_3d", rn(2, 5, 11, scale=2), tg(10, 11).reshape(2, 5), 10, seed=216)
    yield ce("ce_large", rn(12, 30, scale=40) + 300, tg(12, 30), 12, smooth=0.05, seed=217)
    yield ce("ce_big", rn(64, 1000, scale=3), tg(64, 1000), 64, seed=218)
    t = tg(64, 1000)
    t[::3] = -100
    yield ce("ce_big_smooth", rn(64, 1000, scale=3), t, 128, smooth=0.1, seed=219)

    def mse(name, pred, target, norm, seed):
        # The target is data: no gradient (the C op gives it none).
        fn = lambda p, t: F.mse_loss(p, t.detach(), reduction="sum") / norm
        res = _fwd_bwd(fn, dict(p=pred, t=target), seed)
        res["cfg"] = torch.tensor([norm, 0, 0], dtype=torch.float64)
        return name, res

    cos = lambda a, b: F.cosine_similarity(a, b, dim=-1)
    yield "cosine", _fwd_bwd(cos, dict(a=rn(7, 16), b=rn(7, 16)), 240)
    yield "cosine_3d", _fwd_bwd(cos, dict(a=rn(2, 3, 9), b=rn(2, 3, 9, scale=5)), 241)
    yield "cosine_big", _fwd_bwd(cos, dict(a=rn(512, 128), b=rn(512, 128)), 242)
    yield mse("mse", rn(5, 8), rn(5, 8), 40, 230)
    yield mse("mse_norm", rn(3, 4, 5), rn(3, 4, 5), 3, 231)
    yield mse("mse_big", rn(200, 200), rn(200, 200), 200, 232)
