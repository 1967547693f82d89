"""Reference cases: optimizers (torch.optim.SGD / Adam / AdamW), learning-rate schedules
(StepLR, CosineAnnealingLR, LinearLR warm-up through SequentialLR) and gradient clipping
(torch.nn.utils.clip_grad_norm_).

Optimizer case tensors: "hp" (f64: kind, lr, weight_decay, momentum, dampening, nesterov,
beta1, beta2, eps; kind numbered as tr_optim_kind), "lr" (f64, the lr of each step: it varies
so that the per-step lr is exercised), "p0", "grads" (steps, n), "params" (steps, n: after
each step) and "state.<name>" (torch's state after the last step).
Schedule case tensors: "cfg" (f64: kind, warmup_steps, step_size, gamma, total_steps, min_lr,
base_lr; kind numbered as tr_sched_kind) and "lrs" (f64, the lr used by each of the steps).
Clip case tensors: "grads" (the flattened concatenation of several tensors' gradients),
"sizes" (i64, each tensor's numel), "max_norm" (f64), "norm" (f32, torch's total norm) and
"clipped" (the gradients after clip_grad_norm_, flattened)."""
import math
import warnings

import torch

SGD, ADAM, ADAMW = 0, 1, 2
CONSTANT, STEP, COSINE = 0, 1, 2
N = 257
STEPS = 5
SCHED_STEPS = 20


def _optim_case(kind, lr, weight_decay=0.0, momentum=0.0, dampening=0.0, nesterov=False,
                betas=(0.9, 0.999), eps=1e-8, seed=0):
    g = torch.Generator().manual_seed(seed)
    # Small weights so that max|p| is of the order of the updates: the 1e-6 relative check
    # then measures the update itself, not the rounding of large weights.
    p0 = torch.randn(N, generator=g) * 0.05
    # Per-element magnitudes over five decades, so eps and the moments' scale both matter.
    scale = torch.exp(torch.empty(STEPS, N).uniform_(-6.0, 2.0, generator=g))
    grads = torch.randn(STEPS, N, generator=g) * scale
    lrs = [lr * f for f in (1.0, 0.5, 1.5, 0.8, 1.2)]
    p = torch.nn.Parameter(p0.clone())
    if kind == SGD:
        opt = torch.optim.SGD([p], lr=lr, momentum=momentum, dampening=dampening,
                              weight_decay=weight_decay, nesterov=nesterov, foreach=False)
    elif kind == ADAM:
        opt = torch.optim.Adam([p], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                               foreach=False)
    else:
        opt = torch.optim.AdamW([p], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                foreach=False)
    params = torch.empty(STEPS, N)
    for k in range(STEPS):
        opt.param_groups[0]["lr"] = lrs[k]
        p.grad = grads[k].clone()
        opt.step()
        params[k] = p.detach()
    hp = [kind, lr, weight_decay, momentum, dampening, float(nesterov), betas[0], betas[1], eps]
    res = {
        "hp": torch.tensor(hp, dtype=torch.float64),
        "lr": torch.tensor(lrs, dtype=torch.float64),
        "p0": p0,
        "grads": grads,
        "params": params,
    }
    for name, t in opt.state[p].items():
        if name != "step" and t is not None:  # SGD without momentum keeps buffer None
            res["state." + name] = t.detach().clone()
    return res


def _sched_lrs(warmup, make, base_lr, steps=SCHED_STEPS):
    """The lr each of `steps` optimizer steps uses: warm-up by LinearLR from base_lr/warmup to
    base_lr over `warmup` steps, then the scheduler `make(opt)`, joined by SequentialLR."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=base_lr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if warmup > 0:
            warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / warmup,
                                                     end_factor=1.0, total_iters=warmup - 1)
            sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, make(opt)],
                                                          milestones=[warmup])
        else:
            sched = make(opt)
        lrs = []
        for _ in range(steps):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
    return lrs


def _sched_case(kind, base_lr, warmup=0, step_size=0, gamma=0.0, total=0, min_lr=0.0):
    if kind == CONSTANT:
        make = lambda o: torch.optim.lr_scheduler.ConstantLR(o, factor=1.0, total_iters=0)
    elif kind == STEP:
        make = lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=step_size, gamma=gamma)
    else:
        make = lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=total,
                                                                    eta_min=min_lr)
    lrs = _sched_lrs(warmup, make, base_lr)
    if kind == COSINE:
        # trainer holds min_lr once the decay is over; torch's cosine is periodic and would
        # climb back, so steps past the end take min_lr, everything before is torch's.
        lrs = [lr if k - warmup <= total else min_lr for k, lr in enumerate(lrs)]
    cfg = [kind, warmup, step_size, gamma, total, min_lr, base_lr]
    return {"cfg": torch.tensor(cfg, dtype=torch.float64),
            "lrs": torch.tensor(lrs, dtype=torch.float64)}


def _clip_case(max_norm, seed):
    g = torch.Generator().manual_seed(seed)
    shapes = [(7, 5), (5,), (3, 4, 6), (1,), (33,)]
    params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    for i, p in enumerate(params):
        p.grad = torch.randn(p.shape, generator=g) * (0.1 * (i + 1))
    grads = torch.cat([p.grad.flatten() for p in params]).clone()
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return {
        "grads": grads,
        "sizes": torch.tensor([p.numel() for p in params], dtype=torch.int64),
        "max_norm": torch.tensor([max_norm], dtype=torch.float64),
        "norm": norm.reshape(1).float(),
        "clipped": torch.cat([p.grad.flatten() for p in params]),
    }


def cases():
    yield "optim_sgd", _optim_case(SGD, 0.1, seed=1)
    yield "optim_sgd_momentum", _optim_case(SGD, 0.1, momentum=0.9, seed=2)
    yield "optim_sgd_nesterov", _optim_case(SGD, 0.1, momentum=0.9, nesterov=True,
                                            weight_decay=0.01, seed=3)
    yield "optim_sgd_wd", _optim_case(SGD, 0.1, weight_decay=0.05, seed=4)
    yield "optim_sgd_dampening", _optim_case(SGD, 0.1, momentum=0.8, dampening=0.3,
                                             weight_decay=0.02, seed=5)
    yield "optim_adam", _optim_case(ADAM, 1e-2, seed=6)
    yield "optim_adam_wd", _optim_case(ADAM, 1e-2, weight_decay=0.1, betas=(0.8, 0.99),
                                       eps=1e-6, seed=7)
    yield "optim_adamw", _optim_case(ADAMW, 1e-2, weight_decay=0.1, betas=(0.9, 0.95),
                                     seed=8)
    yield "optim_adamw_default_wd", _optim_case(ADAMW, 3e-3, weight_decay=0.01, seed=9)

    yield "sched_constant_warmup", _sched_case(CONSTANT, 0.1, warmup=5)
    yield "sched_step", _sched_case(STEP, 0.1, step_size=4, gamma=0.5)
    yield "sched_step_warmup", _sched_case(STEP, 0.1, warmup=3, step_size=5, gamma=0.3)
    yield "sched_cosine", _sched_case(COSINE, 0.1, total=20, min_lr=1e-4)
    yield "sched_cosine_warmup", _sched_case(COSINE, 3e-4, warmup=4, total=16, min_lr=3e-5)
    yield "sched_cosine_end", _sched_case(COSINE, 0.05, warmup=2, total=10, min_lr=1e-3)

    yield "clip_active", _clip_case(1.0, seed=10)      # norm ~ 4: scaled down
    yield "clip_inactive", _clip_case(100.0, seed=11)  # norm below max: unchanged
