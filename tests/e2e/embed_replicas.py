#!/usr/bin/env python3
"""`trainer embed` split over replicas gives the same embeddings, in input order: on a tiny
BERT folder (tests/e2e/hf_encoder_load.py makes it; Python's standard library only), 37 texts
of 1 to 30 words in batches of 8 (the last one 5 texts) under cpu, and dataparallel with 1, 2
and 3 replicas (batches split unevenly, some replicas given a single text): every embedding
within 1e-6 of cpu's (the bytes are compared first), and text<TAB>pair lines likewise, with
their scores, under a task pairs config; the lines reversed give the rows reversed. ddp and
sharded (stage 3) x2 run as 2 dataparallel replicas in the one process (and say so), with
the same embeddings; under a launcher's 2 ranks embed is refused, writing nothing.

  embed_replicas.py TRAINER
"""
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_encoder_load as tiny  # noqa: E402

TOL = 1e-6


def compare(name, ref, got):
    """Checks got against ref: same shape, values within TOL (bitwise when the bytes agree)."""
    (rs, rv), (gs, gv) = tiny.npy_floats(ref), tiny.npy_floats(got)
    same = open(ref, "rb").read() == open(got, "rb").read()
    err = max((abs(a - b) for a, b in zip(rv, gv)), default=0.0) if rs == gs else float("inf")
    tiny.check(rs == gs and err <= TOL, f"{name}: shape {gs}, {'bitwise equal' if same else f'max abs {err:.3g}'} "
               f"to cpu's (tol {TOL:g})")


def compare_scores(kind, name, ref, got):
    """got's embeddings against ref's and, for pairs, its scores."""
    if not (ref and got):
        return
    compare(f"{kind}, {name}", ref, got)
    if kind == "pairs":
        a = open(ref[:-4] + ".csv").read().split()
        b = open(got[:-4] + ".csv").read().split()
        worst = max(abs(float(x.split(",")[1]) - float(y.split(",")[1])) for x, y in zip(a[1:], b[1:]))
        tiny.check(a[0] == b[0] == "index,score" and len(a) == len(b) == 20 and
                   [x.split(",")[0] for x in a] == [y.split(",")[0] for y in b] and worst <= TOL,
                   f"pairs, {name}: 19 scores in order, max abs {worst:.3g} to cpu's")


LOGS = []


def main(trainer):
    base = tempfile.mkdtemp(prefix="embed_replicas.")
    model = tiny.folder(base, "tiny", tiny.tensors(random.Random(7)))
    rng = random.Random(46)
    words = "the movie was great terrible plot and bad acting I liked it fine a long story of music".split()
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))) for _ in range(37)]
    texts = os.path.join(base, "texts.txt")
    with open(texts, "w") as f:
        f.write("".join(t + "\n" for t in lines))
    pairs = os.path.join(base, "pairs.txt")
    with open(pairs, "w") as f:
        f.write("".join(f"{lines[i]}\t{lines[-1 - i]}\n" for i in range(19)))
    cfg = tiny.embed_cfg(base, model)
    with open(cfg) as f:
        yaml = f.read().replace("batch_size: 4", "batch_size: 8")
    with open(cfg, "w") as f:
        f.write(yaml)
    pairs_cfg = os.path.join(base, "pairs.yaml")
    with open(pairs_cfg, "w") as f:
        f.write(yaml.replace("    pretrained:", "    task: pairs\n    pooling: mean\n    normalize: \"true\"\n    pretrained:"))

    def embed(config, inp, name, *strategy):
        out = os.path.join(base, name + ".npy")
        rc, log = tiny.run(trainer, "embed", config, "--input", inp, "--output", out, *strategy)
        LOGS.append(log)
        tiny.check(rc == 0, f"{name}: trainer embed {' '.join(strategy)} (rc {rc}) {log.strip()[-300:] if rc else ''}")
        return out if rc == 0 else None

    for kind, config, inp in (("texts", cfg, texts), ("pairs", pairs_cfg, pairs)):
        ref = embed(config, inp, f"{kind}_cpu", "trainer.strategy=cpu")
        for n in (1, 2, 3):
            got = embed(config, inp, f"{kind}_dp{n}", "trainer.strategy=dataparallel", f"trainer.devices={n}")
            compare_scores(kind, f"dataparallel x{n}", ref, got)
        # ddp and sharded run their ranks as dataparallel replicas in the one process
        for s, extra in (("ddp", []), ("sharded", ["strategy.stage=3"])):
            got = embed(config, inp, f"{kind}_{s}2", f"trainer.strategy={s}", "trainer.devices=2", *extra)
            tiny.check(got and f"{s}'s 2 ranks run as 2 dataparallel replicas" in LOGS[-1],
                       f"{kind}, {s} x2: says it runs as 2 dataparallel replicas")
            compare_scores(kind, f"{s} x2", ref, got)
    # several ranks started by a launcher would each embed every text: refused
    env = dict(os.environ, RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2", TRAINER_JOB_ID="embed_replicas")
    p = subprocess.run([trainer, "embed", cfg, "--input", texts, "--output", os.path.join(base, "launched.npy"),
                        "trainer.strategy=ddp", "trainer.devices=2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env)
    rc, log = p.returncode, p.stdout
    tiny.check(rc == 1 and "a launcher started 2 ranks: run trainer embed without the launcher" in log and
               not os.path.exists(os.path.join(base, "launched.npy")),
               f"under a launcher's 2 ranks: refused (rc {rc}) {log.strip()[-300:]}")

    # input order: the lines reversed give the rows reversed
    rev = os.path.join(base, "reversed.txt")
    with open(rev, "w") as f:
        f.write("".join(t + "\n" for t in reversed(lines)))
    fwd, back = os.path.join(base, "texts_dp3.npy"), embed(cfg, rev, "reversed_dp3", "trainer.strategy=dataparallel",
                                                             "trainer.devices=3")
    if back and os.path.exists(fwd):
        (fs, fv), (bs, bv) = tiny.npy_floats(fwd), tiny.npy_floats(back)
        E = fs[1]
        rows = lambda v, i: v[i * E:(i + 1) * E]  # noqa: E731
        err = max(max(abs(a - b) for a, b in zip(rows(fv, i), rows(bv, fs[0] - 1 - i))) for i in range(fs[0]))
        tiny.check(fs == bs and err <= TOL, f"input order: the 37 lines reversed give the rows reversed (max abs {err:.3g})")
    return tiny.finish(base)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[-1].strip())
    sys.exit(main(os.path.abspath(sys.argv[1])))
