#!/usr/bin/env python3
"""What hf_encoder reads when a command starts from a checkpoint, and what it says (Python's
standard library only: no torch, no PyPI).

  hf_encoder_checkpoint.py TRAINER [--keep DIR]

A tiny BERT folder in the legacy form (hf_encoder_load.py's: cls.* and position_ids, which
are not used) is fine-tuned for 4 steps of task classify on tests/data/tokdata/reviews.csv
(its head newly initialised).

- What the model says when it is built is said once: the newly initialised head and the
  tensors not used, once in a run under cpu, dataparallel x2 and ddp x2 (not once per
  replica or rank), and never by eval, predict, embed --checkpoint or export, which build the
  model for the checkpoint: nothing is newly initialised there.
- `trainer eval`, `predict`, `embed --checkpoint` and `export` take the model from the
  checkpoint (its config.json) and never read the pretrained folder's weights: with the
  folder's model.safetensors gone, and then with the whole folder gone, each gives what it
  gave with the folder there, byte for byte (eval: the same metrics; export: the same
  model.safetensors and tokenizer, and with the folder gone a config.json from the
  checkpoint's copy, without the run's own key, that differs at most by the sep_token_id the
  folder's tokenizer gave). A weights file (`trainer checkpoint consolidate`'s) keeps no
  config.json: predict builds the model from the folder then, and says nothing of it either.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_encoder_load as tiny  # noqa: E402  (the tiny folders)

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)
    return cond


def run(trainer, *args, env=None):
    p = subprocess.run([trainer, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                       env=env)
    return p.returncode, p.stdout


def write_pairs_config(base, model):
    """Task pairs on scored pairs of words (tiny.scored_pairs): embed --checkpoint
    embeds single texts with it."""
    tsv = tiny.scored_pairs(os.path.join(base, "scored.tsv"), 40)
    p = os.path.join(base, "pairs.yaml")
    with open(p, "w") as f:
        f.write(f"""run: {{name: pairs, seed: 5, output_dir: {os.path.join(base, 'runs')}}}
model: {{name: hf_encoder, params: {{pretrained: {model}, task: pairs}}}}
data: {{name: text, params: {{path: {tsv}, mode: pairs, tokenizer: {tiny.TOKENIZER}, max_length: 16}},
       batch_size: 10, val_fraction: 0.2}}
optimizer: {{name: adamw, lr: 0.003, eps: 1.0e-6}}
trainer: {{max_steps: 4, log_every: 1, progress: lines, threads: 1}}
""")
    return p


def write_config(base, model):
    p = os.path.join(base, "ft.yaml")
    with open(p, "w") as f:
        f.write(f"""run: {{name: ft, seed: 5, output_dir: {os.path.join(base, 'runs')}}}
model:
  name: hf_encoder
  params: {{pretrained: {model}, task: classify}}
data:
  name: csv
  params: {{path: {tiny.REVIEWS}, tokenizer: {tiny.TOKENIZER}, text_column: text, label_column: label,
           max_length: 32, padding: longest}}
  batch_size: 11
  val_fraction: 0.2
optimizer: {{name: adamw, lr: 0.003, eps: 1.0e-6}}
trainer: {{max_steps: 4, log_every: 1, progress: lines, threads: 1}}
checkpoint: {{every_n_steps: 4}}
""")
    return p


def said_once(log):
    """How often the model's build messages appear in a log."""
    return log.count("newly initialised"), log.count("not used")


def eval_record(run_dir):
    """The last eval record of a run's metrics.jsonl."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        recs = [json.loads(ln)["eval"] for ln in f if ln.startswith('{"eval"')]
    return recs[-1] if recs else None


def from_checkpoint(trainer, base, cfgs, ckpts, texts, tag):
    """eval, predict and export of the classify run's checkpoint, embed --checkpoint of the
    pairs run's: {command: output}."""
    cfg, ckpt = cfgs["classify"], ckpts["classify"]
    out = os.path.join(base, tag)
    os.makedirs(out)
    got, logs = {}, {}
    rc, log = run(trainer, "eval", cfg, "--checkpoint", ckpt)
    logs["eval"] = log
    got["eval"] = eval_record(ckpt) if rc == 0 else None
    check(rc == 0 and got["eval"] and got["eval"]["samples"] > 0,
          f"{tag}: trainer eval --checkpoint (rc {rc}) {log.strip()[-600:] if rc else ''}")
    pred = os.path.join(out, "pred.csv")
    rc, log = run(trainer, "predict", cfg, "--checkpoint", ckpt, "--output", pred)
    logs["predict"] = log
    got["predict"] = open(pred, "rb").read() if rc == 0 else None
    check(rc == 0, f"{tag}: trainer predict --checkpoint (rc {rc}) {log.strip()[-600:] if rc else ''}")
    emb = os.path.join(out, "emb.npy")
    rc, log = run(trainer, "embed", cfgs["pairs"], "--checkpoint", ckpts["pairs"], "--input", texts, "--output", emb)
    logs["embed"] = log
    got["embed"] = open(emb, "rb").read() if rc == 0 else None
    check(rc == 0, f"{tag}: trainer embed --checkpoint (rc {rc}) {log.strip()[-600:] if rc else ''}")
    exp = os.path.join(out, "export")
    rc, log = run(trainer, "export", ckpt, exp)
    logs["export"] = log
    check(rc == 0, f"{tag}: trainer export (rc {rc}) {log.strip()[-600:] if rc else ''}")
    if rc == 0:
        for f in os.listdir(exp):
            got["export/" + f] = open(os.path.join(exp, f), "rb").read()
    for cmd, log in logs.items():
        n_new, n_unused = said_once(log)
        check(n_new == 0 and n_unused == 0,
              f"{tag}: {cmd} from a checkpoint says nothing is newly initialised or not used "
              f"({n_new} and {n_unused} times)")
    return got


def main(argv):
    trainer = os.path.abspath(argv[0])
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    base = keep or tempfile.mkdtemp(prefix="hf_encoder_checkpoint.")
    os.makedirs(base, exist_ok=True)
    os.environ.setdefault("TRAINER_COMM_TIMEOUT", "120")
    w = tiny.tensors(random.Random(7))
    w["cls.predictions.bias"] = ([tiny.V], [0.0] * tiny.V)  # a pretraining head: not used
    w["embeddings.position_ids"] = ([1, tiny.S], list(range(tiny.S)))
    model = tiny.folder(base, "bert", w)
    cfg = write_config(base, model)
    texts = os.path.join(base, "texts.txt")
    with open(texts, "w") as f:
        f.write("a fine movie\nthe plot was terrible and the acting bad\n\nI liked it\n")

    # the model's build messages: once per run, whatever the replicas and ranks
    for s, opts in (("cpu", ["trainer.strategy=cpu"]),
                    ("dataparallel2", ["trainer.strategy=dataparallel", "trainer.devices=2"]),
                    ("ddp2", ["trainer.strategy=ddp", "trainer.devices=2"])):
        rc, log = run(trainer, "run", cfg, f"run.name=ft_{s}", *opts)
        n_new, n_unused = said_once(log)
        check(rc == 0 and n_new == 1 and n_unused == 1,
              f"run under {s}: the newly initialised head and the tensors not used said once ({n_new} and "
              f"{n_unused} times; rc {rc}) {log.strip()[-600:] if rc else ''}")
    pairs = write_pairs_config(base, model)
    rc, log = run(trainer, "run", pairs)
    check(rc == 0, f"task pairs run (rc {rc}) {log.strip()[-600:] if rc else ''}")
    cfgs = {"classify": cfg, "pairs": pairs}
    ckpts = {"classify": os.path.join(base, "runs", "ft_cpu", "0"), "pairs": os.path.join(base, "runs", "pairs", "0")}

    present = from_checkpoint(trainer, base, cfgs, ckpts, texts, "folder there")
    # a weights file keeps no config.json: the model is built from the folder, quietly
    wf = os.path.join(base, "weights.safetensors")
    rc, log = run(trainer, "checkpoint", "consolidate", ckpts["classify"], wf)
    pred = os.path.join(base, "pred_wf.csv")
    if check(rc == 0, f"checkpoint consolidate (rc {rc}) {log.strip()[-300:] if rc else ''}"):
        rc, log = run(trainer, "predict", cfg, "--checkpoint", wf, "--output", pred)
        check(rc == 0 and open(pred, "rb").read() == present["predict"] and said_once(log) == (0, 0),
              f"predict --checkpoint of a weights file: the same predictions, nothing said newly initialised "
              f"or not used {said_once(log)} (rc {rc}) {log.strip()[-300:] if rc else ''}")
    os.rename(os.path.join(model, "model.safetensors"), os.path.join(base, "model.safetensors.gone"))
    no_weights = from_checkpoint(trainer, base, cfgs, ckpts, texts, "model.safetensors gone")
    check(set(present) == set(no_weights) and all(present[k] == no_weights[k] for k in present),
          f"model.safetensors gone: eval, predict, embed and export give the same as with it "
          f"({sorted(k for k in present if present.get(k) != no_weights.get(k))} differ)")
    os.rename(model, model + ".moved")
    gone = from_checkpoint(trainer, base, cfgs, ckpts, texts, "folder gone")
    differ = sorted(k for k in set(present) | set(gone) if present.get(k) != gone.get(k))
    check(differ == ["export/config.json"] or not differ,
          f"folder gone: eval, predict, embed and export's weights and tokenizer as with it ({differ} differ)")
    if "export/config.json" in gone and "export/config.json" in present:
        a, b = json.loads(present["export/config.json"]), json.loads(gone["export/config.json"])
        extra = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
        check(extra <= {"sep_token_id"} and "trainer_hf_encoder" not in b,
              f"folder gone: export's config.json is the checkpoint's copy without the run's key ({extra} differ)")

    if not FAILS and not keep:
        shutil.rmtree(base)
    print("PASS" if not FAILS else f"FAIL: {len(FAILS)} checks (files in {base})")
    return 1 if FAILS else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__.splitlines()[2].strip())
    sys.exit(main(sys.argv[1:]))
