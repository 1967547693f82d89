#!/usr/bin/env python3
"""Tokenizer encode throughput: trainer's C tokenizer against Hugging Face `tokenizers`, side by side.

  tools/bench/tokenizer_vs_hf.py [--build DIR] [--reps N] [--cpu K] [--only NAME,...]

For each test tokenizer the oracle test builds (tools/oracle/build_tokenizers.py: the real
all-MiniLM-L6-v2 and the files trained in-process; those the C side refuses are listed as such)
and each corpus (Tiny Shakespeare from ../shared/data, tests/data/tokenizer_stress.txt), it
times, one after the other on the same single core (CPU K, default the last one this process
may use), `bench_tokenizer` (tools/bench/bench_tokenizer.c: tr_tokenizer_encode_batch) and the
pinned `tokenizers`' Tokenizer.encode_batch with TOKENIZERS_PARALLELISM=false and
RAYON_NUM_THREADS=1, both over the file's lines in batches of 1,000 with padding and truncation
off, the median of N repetitions after one warm-up. Prints MB/s (10^6 input bytes per second)
and the ratio trainer / tokenizers, a markdown table for docs/benchmarks.md. The token counts of
the two sides must agree or the row says so. Exit 77 when PyPI cannot be reached.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import oracle_venv  # noqa: E402

SHAKESPEARE = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")
STRESS = os.path.join(ROOT, "tests", "data", "tokenizer_stress.txt")
BATCH = 1000


def parse(argv):
    a = {"build": os.path.join(ROOT, "build"), "reps": 5, "cpu": None, "only": None}
    i = 0
    while i < len(argv):
        k = argv[i]
        if k in ("--build", "--reps", "--cpu", "--only") and i + 1 < len(argv):
            v = argv[i + 1]
            a[k[2:]] = int(v) if k in ("--reps", "--cpu") else v
            i += 2
        else:
            sys.exit(__doc__.splitlines()[2].strip())
    return a


def hf_rate(path, corpus, reps):
    """encode_batch's median seconds and token count (runs inside the venv)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    tok.no_padding()
    tok.no_truncation()
    with open(corpus, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    nbytes = sum(len(x.encode("utf-8")) for x in lines)
    chunks = [lines[i:i + BATCH] for i in range(0, len(lines), BATCH)]
    times, tokens = [], 0
    for r in range(reps + 1):
        t0 = time.perf_counter()
        made = 0
        for c in chunks:
            for e in tok.encode_batch(c):
                made += len(e.ids)
        if r:
            times.append(time.perf_counter() - t0)
        tokens = made
    return {"bytes": nbytes, "tokens": tokens, "seconds": times, "mb_s": nbytes / statistics.median(times) / 1e6}


def c_rate(binary, path, corpus, reps):
    p = subprocess.run([binary, path, corpus, "--reps", str(reps + 1), "--batch", str(BATCH)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr.strip() or f"exit {p.returncode}").splitlines()[-1]}
    r = json.loads(p.stdout)
    times = r["seconds"][1:]  # the first is the warm-up
    r["mb_s"] = r["bytes"] / statistics.median(times) / 1e6
    return r


def inner(args):
    import tokenizers
    import tokenizer_oracle
    # The oracle test's own files (the same inputs, so the same cache entry).
    manifest = tokenizer_oracle.build_tokenizers([os.path.join(ROOT, "tools", "oracle", "build_tokenizers.py"),
                                                  oracle_venv.REQUIREMENTS, oracle_venv.ASSETS, STRESS, SHAKESPEARE])
    cpu = args["cpu"] if args["cpu"] is not None else max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})  # both sides, one after the other, on this core
    binary = os.path.join(args["build"], "bin", "bench_tokenizer")
    only = set(args["only"].split(",")) if args["only"] else None
    rows = []
    print(f"tokenizers {tokenizers.__version__} vs trainer ({binary}), CPU {cpu}, {args['reps']} reps, "
          f"batches of {BATCH} lines, padding and truncation off", flush=True)
    for entry in manifest:
        if only and entry["name"] not in only:
            continue
        for cname, corpus in (("Tiny Shakespeare", SHAKESPEARE), ("stress set", STRESS)):
            c = c_rate(binary, entry["path"], corpus, args["reps"])
            h = hf_rate(entry["path"], corpus, args["reps"])
            if "error" in c:
                rows.append((entry["name"], cname, "refused", f"{h['mb_s']:.2f}", "-", c["error"][:80]))
            else:
                note = "" if c["tokens"] == h["tokens"] else f"token counts differ: {c['tokens']} vs {h['tokens']}"
                rows.append((entry["name"], cname, f"{c['mb_s']:.2f}", f"{h['mb_s']:.2f}",
                             f"{c['mb_s'] / h['mb_s']:.2f}x", note))
            print("  " + " | ".join(rows[-1]), flush=True)
    print()
    print("| tokenizer | corpus | trainer MB/s | tokenizers MB/s | ratio | |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


def main():
    args = parse(sys.argv[1:])
    if os.environ.get("TRAINER_ORACLE_INNER") == "1":
        inner(args)
        return
    if not os.path.exists(SHAKESPEARE):
        sys.exit(f"{SHAKESPEARE} is absent (../shared/data)")
    try:
        py = oracle_venv.ensure_venv(sys.executable)
    except oracle_venv.Unreachable as e:
        print(f"SKIPPED: {e}")
        sys.exit(77)
    env = oracle_venv.env()
    env["TRAINER_ORACLE_INNER"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["RAYON_NUM_THREADS"] = "1"
    os.execve(py, [py, os.path.abspath(__file__), *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
