#!/usr/bin/env python3
"""Issue 51's scale benchmark: byte-level GPT LMs by size (sequence 256, global batch 8, AdamW,
synthetic tokens) trained a few steps under cpu, ddp and sharded stages 1-3 on CPU ranks, with
and without activation checkpointing (where this trainer knows trainer.activation_checkpointing,
else "n/a"); beside PyTorch DDP and FSDP2 over gloo (fsdp_peer.py, in peer_venv.py's venv).
Per rank: peak resident memory (VmHWM of the rank's process, sampled from /proc while it runs),
the peak during start-up (VmHWM when rank 0 logs its set-up line, before step 1), the median
step time after the warm-up steps, and rank 0's memory record (the strategy's breakdown).
Fits peak = a + b * parameters per strategy (least squares over the sizes run) and extrapolates
the largest model whose ranks fit --budget-gib per machine. Writes a markdown table to stdout,
scale.json and scale.svg (peak MiB per rank against parameters, a line per strategy) to --out.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MiB = 1048576.0
# name: (n_layer, d_model, n_head); parameters ~ 12 L d^2 (byte vocabulary, tied embeddings)
SIZES = {"1M": (2, 192, 4), "10M": (6, 384, 6), "25M": (8, 512, 8), "85M": (12, 768, 12), "150M": (12, 1024, 16),
         "350M": (18, 1280, 20)}
# larger rungs of the same family, for the model-based estimate only (never run here)
LADDER = dict({k: v for k, v in SIZES.items() if k != "1M"}, **{"760M": (24, 1536, 24), "1.3B": (24, 2048, 32), "2.7B": (32, 2560, 40),
                        "6.7B": (32, 4096, 64)})
# strategy name: trainer overrides (ranks added by --ranks); peer modes of fsdp_peer.py
STRATEGIES = {"cpu": ["trainer.strategy=cpu"], "ddp": ["trainer.strategy=ddp"],
              "s1": ["trainer.strategy=sharded", "strategy.stage=1"],
              "s2": ["trainer.strategy=sharded", "strategy.stage=2"],
              "s3": ["trainer.strategy=sharded", "strategy.stage=3"]}
PEER_MODES = ("ddp", "grad_op", "full")
CONFIG = """run: {{name: scale, seed: 1}}
model: {{name: transformer, params: {{mode: lm, d_model: {C}, n_head: {H}, n_layer: {L}, dropout: 0.0}}}}
data: {{name: synthetic, params: {{task: lm, samples: {n}, val_samples: 8, materialize: true, seq_len: {T}, vocab: 256}}, batch_size: {B}}}
optimizer: {{name: adamw, lr: 1.0e-4}}
trainer: {{max_steps: {steps}, log_every: 1, progress: lines}}
checkpoint: {{every_n_epochs: 0, resume: never}}
"""


def params(L, C, T, V=256):
    """The GPT's parameter count: per block 12 C^2 + 13 C, tied embeddings, position table, ln_f."""
    return L * (12 * C * C + 13 * C) + V * C + T * C + 2 * C


def status(pid):
    """VmHWM and VmRSS of a process in bytes, and whether it is a launched rank (RANK=r), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            s = f.read()
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    kb = {k: int(v) for k, v in re.findall(r"^(VmHWM|VmRSS):\s+(\d+) kB", s, re.M)}
    rank = next((int(e[5:]) for e in env if e.startswith(b"RANK=") and e[5:].isdigit()), None)
    return kb.get("VmHWM", 0) * 1024, kb.get("VmRSS", 0) * 1024, rank


def descendants(root):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


class Sampler:
    """Samples the VmHWM of a run's rank processes (the launched ranks, else the run itself)."""

    def __init__(self, root):
        self.root, self.peak, self.startup, self.done = root, {}, None, False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def sample(self):
        seen = {}
        for p in descendants(self.root):
            st = status(p)
            if st and st[2] is not None:
                seen[st[2]] = st[0]
        if not seen:
            st = status(self.root)
            if st:
                seen[0] = st[0]
        with self.lock:
            for r, hwm in seen.items():
                self.peak[r] = max(self.peak.get(r, 0), hwm)
        return seen

    def loop(self):
        while not self.done:
            self.sample()
            time.sleep(0.05)

    def mark_startup(self):
        if self.startup is None:
            self.startup = self.sample()

    def stop(self):
        self.done = True
        self.thread.join()


def run_trainer(a, size, strat, ranks, ac, tmp):
    L, C, H = SIZES[size]
    cfg = os.path.join(tmp, f"gpt_{size}.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(C=C, H=H, L=L, T=a.seq, B=a.batch, n=a.batch * (a.steps + 2), steps=a.steps))
    out = os.path.join(tmp, f"{size}_{strat}_{ranks}_{int(ac)}")
    cmd = [a.trainer, "run", cfg, f"run.output_dir={out}", "data.workers=0", f"trainer.devices={ranks}"]
    cmd += STRATEGIES[strat] + (["trainer.activation_checkpointing=true"] if ac else [])
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    s = Sampler(p.pid)
    log, n = [], None
    for line in p.stdout:
        log.append(line)
        m = re.search(r"\((\d+) parameters\)", line)
        if m:
            s.mark_startup()
            n = int(m.group(1))
    rc = p.wait()
    s.stop()
    row = {"size": size, "strategy": strat, "ranks": ranks, "ac": ac, "params": n or params(L, C, a.seq),
           "wall_s": round(time.time() - t0, 1)}
    if rc != 0:
        row["error"] = "".join(log[-5:]).strip()
        return row
    recs = []
    for d in sorted(os.listdir(out)):
        mf = os.path.join(out, d, "0", "metrics.jsonl")
        if os.path.exists(mf):
            with open(mf) as f:
                recs = [json.loads(x) for x in f if x.strip()]
    # tokens/s: samples/s is logged with one decimal, too coarse for steps of seconds
    tps = [r["tokens_per_sec"] for r in recs if "tokens_per_sec" in r and "step" in r]
    mem = next((r["memory"] for r in recs if "memory" in r), {})
    row.update(peak=[s.peak[r] for r in sorted(s.peak)], startup=[v for _, v in sorted((s.startup or {}).items())],
               step_s=statistics.median(a.batch * a.seq / x for x in tps[a.warmup:]) if len(tps) > a.warmup else None,
               record=mem)
    return row


def run_peer(a, size, mode, ranks, ac):
    L, C, H = SIZES[size]
    cmd = [a.peer_python, os.path.join(HERE, "fsdp_peer.py"), "--layers", str(L), "--d-model", str(C),
           "--heads", str(H), "--seq", str(a.seq), "--batch", str(a.batch), "--ranks", str(ranks),
           "--mode", mode, "--steps", str(a.steps), "--warmup", str(a.warmup)] + (["--ac"] if ac else [])
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    row = json.loads(lines[-1]) if lines else {"error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    row.update(size=size, strategy="torch-" + mode, ranks=ranks, ac=ac, wall_s=round(time.time() - t0, 1))
    row.setdefault("params", params(L, C, a.seq))
    return row


def knows_ac(a, tmp):
    """Whether this trainer accepts trainer.activation_checkpointing (trainer plan refuses unknown keys)."""
    cfg = os.path.join(tmp, "probe.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(C=64, H=4, L=1, T=16, B=8, n=16, steps=1))
    plan = lambda *o: subprocess.run([a.trainer, "plan", cfg, *o], capture_output=True, text=True)
    base = plan()
    if base.returncode != 0:
        sys.exit(f"scale.py: {a.trainer} plan failed on the probe config: {base.stdout}{base.stderr}".strip())
    return plan("trainer.activation_checkpointing=true").returncode == 0


def label(r):
    s = r["strategy"]
    return s if s == "cpu" or s.startswith("torch-") and r["ranks"] == 2 else f"{s} x{r['ranks']}"


def fit(rows, key="peak"):
    """Least squares MiB per rank = a + b * params(M) over rows without errors; None if < 2 sizes."""
    pts = sorted({(r["params"] / 1e6, max(r[key]) / MiB) for r in rows if r.get(key)})
    if len({x for x, _ in pts}) < 2:
        return None
    mx, my = statistics.mean(x for x, _ in pts), statistics.mean(y for _, y in pts)
    b = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return my - b * mx, b


def svg(groups, fits, path):
    """Peak MiB per rank against parameters (M), a line per strategy (torch's dashed), fits dotted."""
    W, Hh, l, t, r, bm = 800, 500, 70, 30, 200, 50
    xs = [p["params"] / 1e6 for g in groups.values() for p in g]
    ys = [max(p["peak"]) / MiB for g in groups.values() for p in g]
    if not xs:
        return
    def tick(v):  # a 1-2-5 x 10^k step giving about 5 ticks up to v, and the axis end
        st = next(m * 10 ** k for k in range(-3, 12) for m in (1, 2, 5) if m * 10 ** k * 5 >= v)
        return st, st * math.ceil(v / st)
    (xs1, x1), (ys1, y1) = tick(max(xs) * 1.05), tick(max(ys) * 1.05)
    X = lambda v: l + (W - l - r) * v / x1
    Y = lambda v: Hh - bm - (Hh - t - bm) * v / y1
    col = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{Hh}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{Hh}" fill="white"/>',
         f'<text x="{W / 2}" y="18" text-anchor="middle">peak resident memory per rank (VmHWM) vs parameters</text>',
         f'<line x1="{l}" y1="{Y(0)}" x2="{X(x1)}" y2="{Y(0)}" stroke="black"/>',
         f'<line x1="{l}" y1="{Y(0)}" x2="{l}" y2="{Y(y1)}" stroke="black"/>',
         f'<text x="{(l + X(x1)) / 2}" y="{Hh - 12}" text-anchor="middle">parameters (M)</text>',
         f'<text x="16" y="{(t + Y(0)) / 2}" transform="rotate(-90 16 {(t + Y(0)) / 2})" text-anchor="middle">MiB per rank</text>']
    for k in range(round(x1 / xs1) + 1):
        o.append(f'<text x="{X(k * xs1):.1f}" y="{Y(0) + 16}" text-anchor="middle">{k * xs1:g}</text>')
    for k in range(round(y1 / ys1) + 1):
        o.append(f'<text x="{l - 6}" y="{Y(k * ys1) + 4:.1f}" text-anchor="end">{k * ys1:g}</text>')
    for i, (name, g) in enumerate(sorted(groups.items())):
        c = col[i % len(col)]
        pts = sorted((p["params"] / 1e6, max(p["peak"]) / MiB) for p in g)
        o.append(f'<g class="curve" data-strategy="{name}">')
        dash = ' stroke-dasharray="8 3"' if name.startswith("torch") else ""
        o.append(f'<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="'
                 + " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in pts) + '"/>')
        o += [f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{c}"/>' for x, y in pts]
        if fits.get(name):
            a0, b0 = fits[name]
            xe = min(x1, (y1 - a0) / b0) if b0 > 0 else x1
            o.append(f'<line x1="{X(0)}" y1="{Y(a0):.1f}" x2="{X(xe):.1f}" y2="{Y(a0 + b0 * xe):.1f}" '
                     f'stroke="{c}" stroke-dasharray="1 3"/>')
        o.append(f'<text x="{W - r + 30}" y="{t + 20 + 18 * i}" fill="{c}">{name}</text></g>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def model_estimate(a, groups):
    """Per rank: peak = base + state x P + act x L x C x tokens, or the start-up line if higher.
    state: the record's model state per parameter; act: its activations per layer, channel and
    token of the rank (constant at head width 64); base: the rest of the largest run's VmHWM."""
    print(f"\nModel-based: peak per rank = base + state x params + act x layers x d_model x tokens per rank "
          f"(from the memory record), on the ladder {', '.join(LADDER)}; MiB per rank, * where the ranks "
          f"exceed {a.budget_gib:g} GiB:\n")
    print("| strategy | state B/param | act B/(layer x channel x token) | base MiB | " + " | ".join(LADDER) + " | largest that fits |")
    print("|---|---|---|---|" + "---|" * len(LADDER) + "---|")
    for k, g in sorted(groups.items()):
        g = [r for r in g if r.get("record") and r["size"] in SIZES]
        if not g:
            continue
        n = g[0]["ranks"]
        tok = a.batch * a.seq / n
        r = max(g, key=lambda r: r["params"])
        L, C, _ = SIZES[r["size"]]
        rec = r["record"]
        state = sum(rec[x] for x in ("params", "grads", "optimizer")) / r["params"]
        act = statistics.mean(q["record"]["activations"] / (SIZES[q["size"]][0] * SIZES[q["size"]][1] * tok) for q in g)
        base = max(r["peak"]) - state * r["params"] - act * L * C * tok
        su = fit(g, "startup")
        if not su:  # one size: the start-up as a line through 0 (its base counted per parameter)
            su = (0.0, max(r["startup"]) / MiB / (r["params"] / 1e6))
        cells, best = [], "none"
        for name, (L, C, _) in LADDER.items():
            P = params(L, C, a.seq)
            v = (base + state * P + act * L * C * tok) / MiB
            if su:
                v = max(v, su[0] + su[1] * P / 1e6)
            fits_ = v * n <= a.budget_gib * 1024
            best = name if fits_ else best
            cells.append(f"{v:,.0f}" + ("" if fits_ else "*"))
        print(f"| {k} | {state:.2f} | {act:.0f} | {base / MiB:,.0f} | " + " | ".join(cells) + f" | {best} |")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="build folder (its bin/trainer)")
    p.add_argument("--sizes", default="10M,25M", help="comma list of " + ", ".join(SIZES))
    p.add_argument("--strategies", default="cpu,ddp,s1,s2,s3", help="comma list of " + ", ".join(STRATEGIES))
    p.add_argument("--ranks", default="2", help="comma list of rank counts for ddp and sharded (cpu: 1)")
    p.add_argument("--activation-checkpointing", default="off", choices=("off", "on", "both"))
    p.add_argument("--peer", default="ddp,grad_op,full", help="comma list of fsdp_peer.py modes, or none")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2, help="steps left out of the step time")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8, help="global batch")
    p.add_argument("--budget-gib", type=float, default=24.0, help="memory per machine for the largest-model estimate")
    p.add_argument("--out", default="scale-out", help="folder for scale.json and scale.svg")
    p.add_argument("--from", dest="merge", nargs="+", metavar="JSON",
                   help="run nothing: report the rows of earlier runs' scale.json files together")
    a = p.parse_args(argv)
    if a.merge:
        rows, known = [], False
        for fn in a.merge:
            try:
                with open(fn) as f:
                    d = json.load(f)
                rows += d["rows"]
                known |= d["activation_checkpointing_known"]
            except (OSError, ValueError, KeyError) as e:
                p.error(f"--from: {fn}: not a scale.json of this script ({e})")
        os.makedirs(a.out, exist_ok=True)
        return report(a, rows, known)
    bad = lambda m: p.error(m)
    sizes = [s for s in a.sizes.split(",") if s]
    strats = [s for s in a.strategies.split(",") if s]
    peer = [] if a.peer == "none" else [m for m in a.peer.split(",") if m]
    try:
        ranks = [int(r) for r in a.ranks.split(",")]
    except ValueError:
        bad(f"--ranks: expected comma-separated integers, got {a.ranks!r}")
    for s in sizes:
        s in SIZES or bad(f"--sizes: unknown size {s!r} (known: {', '.join(SIZES)})")
    for s in strats:
        s in STRATEGIES or bad(f"--strategies: unknown strategy {s!r} (known: {', '.join(STRATEGIES)})")
    for m in peer:
        m in PEER_MODES or bad(f"--peer: unknown mode {m!r} (known: {', '.join(PEER_MODES)}, or none)")
    if any(r < 2 or a.batch % r for r in ranks):
        bad(f"--ranks: each must be at least 2 and divide the global batch {a.batch}")
    if a.steps <= a.warmup or a.warmup < 0:
        bad("--steps must exceed --warmup, which must be at least 0")
    a.trainer = os.path.join(a.build, "bin", "trainer")
    if not os.access(a.trainer, os.X_OK):
        bad(f"--build: {a.trainer} not found: build first (tools/dev build) or name the build folder")
    if peer:
        r = subprocess.run([sys.executable, os.path.join(HERE, "peer_venv.py"), "python"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"scale.py: the PyTorch peer venv is not available ({r.stderr.strip()}); run with --peer none")
        a.peer_python = r.stdout.strip()
    os.makedirs(a.out, exist_ok=True)
    acs = {"off": [False], "on": [True], "both": [False, True]}[a.activation_checkpointing]
    rows = []
    with tempfile.TemporaryDirectory(prefix="trainer-scale-") as tmp:
        ac_known = knows_ac(a, tmp)
        for size in sizes:
            for ac in acs:
                for st in strats:
                    for n in ([1] if st == "cpu" else ranks):
                        if ac and not ac_known:
                            rows.append({"size": size, "strategy": st, "ranks": n, "ac": ac, "na": True,
                                         "params": params(*SIZES[size][:2], a.seq)})
                            continue
                        rows.append(run_trainer(a, size, st, n, ac, tmp))
                        print(f"# {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
                for m in peer:
                    rows.append(run_peer(a, size, m, 2, ac))
                    print(f"# {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
    report(a, rows, ac_known)


def report(a, rows, ac_known):
    mib = lambda v: f"{v / MiB:,.0f}"
    print("| model | params | strategy | act. ckpt | peak MiB/rank (VmHWM) | start-up MiB/rank | step s |"
          " record MiB: params, grads, optimizer, activations, other |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        lead = f"| {r['size']} | {r['params'] / 1e6:.1f} M | {label(r)} | {'on' if r['ac'] else 'off'} |"
        if r.get("na"):
            print(lead + " n/a | n/a | n/a | trainer.activation_checkpointing unknown to this trainer |")
        elif "error" in r:
            print(lead + f" failed | | | {(r['error'].splitlines() or ['no output'])[-1][:160]} |")
        else:
            rec = r.get("record") or {}
            br = ", ".join(mib(rec[k]) for k in ("params", "grads", "optimizer", "activations", "other")) if rec else "-"
            print(lead + f" {' / '.join(mib(v) for v in r['peak'])} | {' / '.join(mib(v) for v in r['startup'])} |"
                  f" {r['step_s']:.2f} | {br} |")
    groups = {}
    for r in rows:
        if r.get("peak"):
            groups.setdefault(label(r) + (" +ckpt" if r["ac"] else ""), []).append(r)
    fits = {k: fit(g) for k, g in groups.items()}
    print(f"\nLargest model within {a.budget_gib:g} GiB per machine, from peak = a + b x params per rank "
          "(least squares over the sizes run, extrapolated):\n")
    print("| strategy | ranks | a (MiB) | b (bytes/param) | largest model (M params) | start-up b (bytes/param) |"
          " model state bytes/param/rank (record) | bound with no activations (M params) |")
    print("|---|---|---|---|---|---|---|---|")
    for k, f in sorted(fits.items()):
        if not f:
            continue
        n = groups[k][0]["ranks"]
        big = (a.budget_gib * 1024 / n - f[0]) / f[1] if f[1] > 0 else float("inf")
        # the record's model state per parameter (rank 0's), of the largest size run
        r = max(groups[k], key=lambda r: r["params"])
        rec = r.get("record") or {}
        bpp = sum(rec.get(x, 0) for x in ("params", "grads", "optimizer")) / r["params"] if rec else None
        su = fit(groups[k], "startup")
        sub = su[1] * MiB / 1e6 if su else 0
        # without activations a rank needs the larger of its start-up and its model state
        bound = f"{a.budget_gib * 2 ** 30 / n / max(bpp, sub) / 1e6:,.0f}" if bpp else "-"
        print(f"| {k} | {n} | {f[0]:,.0f} | {f[1] * MiB / 1e6:.1f} | {big:,.0f} | {sub:.1f} |"
              f" {f'{bpp:.2f}' if bpp else '-'} | {bound} |")
    model_estimate(a, groups)
    with open(os.path.join(a.out, "scale.json"), "w") as fo:
        json.dump({"rows": rows, "fits": fits, "activation_checkpointing_known": ac_known}, fo, indent=1)
    svg(groups, fits, os.path.join(a.out, "scale.svg"))
    print(f"\n(wrote {a.out}/scale.json and {a.out}/scale.svg)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
