#!/usr/bin/env python3
"""`trainer tokenize` against Hugging Face `tokenizers` (the oracle), line for line.

  tokenizer_oracle.py TRAINER [--random N] [--seed S] [--only NAME,...] [--shard K/N] [--sets SET,...] [--keep DIR]

For each test tokenizer (tools/oracle/build_tokenizers.py: the real all-MiniLM-L6-v2, a cased
BERT WordPiece, two WordPiece pipelines of generic components, four BPE files (GPT-2, RoBERTa,
Llama-3-like Split + ByteLevel, prefix/suffix BPE), a Unigram with Metaspace and an XLM-R-style
SentencePiece file converted by transformers) and each input set (every line of ../shared/data's Tiny
Shakespeare, tests/data/tokenizer_stress.txt, N seeded random Unicode strings), it runs
`TRAINER tokenize` (ids, --no-special, --tokens, --decode of the oracle's ids, --pair on
consecutive lines; --mask, --type-ids and --max-length/--truncation where --help names them)
and compares each output line with the oracle's encode_batch / decode_batch (the file's own
truncation and padding apply, as in `tokenizers`), printing counts and the first mismatches.
The oracle's answers are cached by content: the first run takes minutes, later ones ~40 s.
Exit 0: every tokenizer the C side supports matched exactly; 1: a mismatch, or a tokenizer
expected to be supported was refused; 77 (skip): no PyPI, no ../shared/data, or no `tokenize`.
"""
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
import oracle_venv  # noqa: E402

SKIP = 77
STRESS = os.path.join(ROOT, "tests", "data", "tokenizer_stress.txt")
SHAKESPEARE = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")
SHOW = 3  # mismatches printed per check


def parse_args(argv):
    a = {"trainer": None, "random": 100000, "seed": 45, "only": None, "shard": None, "sets": None, "keep": None}
    i = 0
    while i < len(argv):
        k = argv[i]
        if k in ("--random", "--seed", "--only", "--shard", "--sets", "--keep") and i + 1 < len(argv):
            v = argv[i + 1]
            a[k[2:]] = int(v) if k in ("--random", "--seed") else v
            i += 2
        elif k.startswith("--") or a["trainer"] is not None:
            sys.exit(f"usage: {__doc__.splitlines()[2].strip()}")
        else:
            a["trainer"] = k
            i += 1
    if a["trainer"] is None:
        sys.exit(f"usage: {__doc__.splitlines()[2].strip()}")
    return a


def skip(msg):
    print(f"SKIPPED: {msg}")
    sys.exit(SKIP)


# --- outside the venv: the checks that skip, then the venv -----------------------------------

def outer(argv, args):
    if not os.path.exists(SHAKESPEARE):
        skip(f"{os.path.normpath(SHAKESPEARE)} is absent (../shared/data)")
    p = subprocess.run([args["trainer"], "tokenize", "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace")
    if "unknown command" in p.stdout:
        skip(f"{args['trainer']} has no 'tokenize' command yet")
    try:
        py = oracle_venv.ensure_venv(sys.executable)
    except oracle_venv.Unreachable as e:
        skip(str(e))
    env = oracle_venv.env()
    env["TRAINER_ORACLE_INNER"] = "1"
    env["PATH"] = os.path.dirname(py) + os.pathsep + env.get("PATH", "")  # python3: the venv's
    sys.stdout.flush()
    os.execve(py, [py, os.path.abspath(__file__), *argv], env)


# --- inside the venv ---------------------------------------------------------------------------

def build_tokenizers(py_inputs):
    """The test tokenizer files, made once per content of their inputs (cached)."""
    h = hashlib.sha256()
    for f in py_inputs:
        with open(f, "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    import tokenizers
    h.update(tokenizers.__version__.encode())
    out = os.path.join(oracle_venv.cache_root(), "tokenizers-" + h.hexdigest()[:12])
    manifest = os.path.join(out, "manifest.json")
    oracle_venv.minilm_tokenizer()  # downloaded first: the build below only copies it
    with oracle_venv.locked(oracle_venv.cache_root(), os.path.basename(out)):
        if not os.path.exists(manifest):
            print(f"oracle: building the test tokenizers into {out}", flush=True)
            p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "oracle", "build_tokenizers.py"),
                                out, SHAKESPEARE, STRESS])
            if p.returncode != 0:
                raise oracle_venv.Failed("oracle: build_tokenizers.py failed")
    with open(manifest) as f:
        return json.load(f)


# Blocks the random strings draw from: (weight, first, last). Letters with and without case,
# marks, CJK (incl. the ranges BertNormalizer pads), scripts without spaces, emoji and their
# joiners and selectors, whitespace and control characters, format characters, private use,
# unassigned and noncharacters; never surrogates, '\n' or '\r'.
BLOCKS = [
    (30, 0x61, 0x7A), (10, 0x41, 0x5A), (6, 0x30, 0x39), (8, 0x21, 0x2F), (4, 0x3A, 0x40), (4, 0x5B, 0x60),
    (3, 0x7B, 0x7E), (25, 0x20, 0x20), (3, 0x09, 0x09), (2, 0x00, 0x08), (2, 0x0B, 0x0C), (2, 0x0E, 0x1F),
    (1, 0x7F, 0x9F), (8, 0xA0, 0xFF), (6, 0x100, 0x24F), (2, 0x250, 0x2FF), (8, 0x300, 0x36F),
    (4, 0x370, 0x3FF), (4, 0x400, 0x4FF), (3, 0x590, 0x5FF), (3, 0x600, 0x6FF), (3, 0x900, 0x97F),
    (3, 0xE00, 0xE7F), (2, 0x1100, 0x11FF), (2, 0x1E00, 0x1EFF), (1, 0x1F00, 0x1FFF),
    (6, 0x2000, 0x206F), (2, 0x2070, 0x209F), (2, 0x20A0, 0x20CF), (2, 0x20D0, 0x20FF), (2, 0x2100, 0x218F),
    (2, 0x2190, 0x23FF), (2, 0x2460, 0x24FF), (2, 0x2500, 0x27BF), (2, 0x2E80, 0x2FDF), (2, 0x3000, 0x303F),
    (3, 0x3040, 0x30FF), (1, 0x3100, 0x33FF), (2, 0x3400, 0x4DBF), (8, 0x4E00, 0x9FFF), (1, 0xA000, 0xA4CF),
    (1, 0xA4D0, 0xABFF), (4, 0xAC00, 0xD7A3), (1, 0xD7B0, 0xD7FF), (2, 0xE000, 0xF8FF), (2, 0xF900, 0xFAFF),
    (2, 0xFB00, 0xFB4F), (1, 0xFB50, 0xFDFF), (2, 0xFE00, 0xFE0F), (1, 0xFE10, 0xFE6F), (1, 0xFE70, 0xFEFF),
    (3, 0xFF00, 0xFFEF), (1, 0xFFF0, 0xFFFF), (1, 0x10000, 0x1018F), (1, 0x10400, 0x104FF),
    (1, 0x1D400, 0x1D7FF), (1, 0x1F100, 0x1F1FF), (6, 0x1F300, 0x1FAFF), (1, 0x1FB00, 0x1FFFF),
    (2, 0x20000, 0x2A6DF), (1, 0x2A700, 0x2EBEF), (1, 0x2F800, 0x2FA1F), (1, 0x30000, 0x3134F),
    (1, 0x3FFF0, 0x3FFFF), (1, 0xE0000, 0xE01EF), (1, 0xF0000, 0xFFFFF), (1, 0x10FFF0, 0x10FFFF),
]
SPECIAL = ["\u200d", "\u200b", "\u200c", "\ufe0f", "\u00a0", "\u3000", "\u0301", "\ufeff", "\u00ad", "  ", "\t\t",
           "\u2028", "\u0085", "\u202e", "##", "[UNK]", "[CLS]", "<s>", "\u2581", "Ġ"]


def random_lines(n, seed):
    rng = random.Random(seed)
    weights = [w for w, _, _ in BLOCKS]
    cum, t = [], 0
    for w in weights:
        t += w
        cum.append(t)
    out = []
    for _ in range(n):
        r = rng.random()
        length = rng.randint(0, 12) if r < 0.3 else rng.randint(0, 40) if r < 0.9 else rng.randint(40, 250)
        chars = []
        while len(chars) < length:
            if rng.random() < 0.04:
                chars.append(rng.choice(SPECIAL))
                continue
            _, lo, hi = BLOCKS[bisect(cum, rng.random() * t)]
            cp = rng.randint(lo, hi)
            if 0xD800 <= cp <= 0xDFFF or cp in (0x0A, 0x0D):
                continue
            chars.append(chr(cp))
        out.append("".join(chars))
    return out


def cached_random_lines(n, seed):
    """random_lines, kept in the cache by (n, seed, this script)."""
    src = hashlib.sha256(open(os.path.abspath(__file__), "rb").read()).hexdigest()[:12]
    path = os.path.join(oracle_venv.cache_root(), "random", f"{n}-{seed}-{src}.txt")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"  # the shards may write it at once: each its own file
        with open(tmp, "wb") as f:
            f.write(b"".join(ln.encode("utf-8") + b"\n" for ln in random_lines(n, seed)))
        os.replace(tmp, path)
    return read_lines(path)


def bisect(cum, x):
    lo, hi = 0, len(cum) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def read_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [ln.decode("utf-8") for ln in lines]


class Cli:
    def __init__(self, trainer, tmp):
        self.trainer, self.tmp, self.n = trainer, tmp, 0
        p = subprocess.run([trainer, "tokenize", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace")
        self.help = p.stdout
        self.max_length = "--max-length" in self.help
        self.truncation = "--truncation" in self.help
        self.type_ids = "--type-ids" in self.help
        self.mask = "--mask" in self.help

    def run(self, tok, opts, lines):
        """Runs `trainer tokenize OPTS TOK FILE` on lines; returns (rc, stdout lines, stderr)."""
        self.n += 1
        path = os.path.join(self.tmp, f"in{self.n}.txt")
        with open(path, "wb") as f:
            f.write(b"".join(ln.encode("utf-8", "surrogatepass") + b"\n" for ln in lines))
        p = subprocess.run([self.trainer, "tokenize", *opts, tok, path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        out = p.stdout.split(b"\n")
        if out and out[-1] == b"":
            out.pop()
        return p.returncode, out, p.stderr.decode("utf-8", "replace")


class Report:
    def __init__(self):
        self.checked = self.mismatched = 0
        self.rows = []

    def compare(self, name, inputs, expected, rc, got, err, detail):
        """expected: list of str (one per input line); got: list of bytes."""
        bad = []
        if rc != 0:
            print(f"    {name}: FAILED: trainer exited {rc}: {err.strip()[:500]}")
            self.checked += len(inputs)
            self.mismatched += len(inputs)
            self.rows.append((name, len(inputs), len(inputs)))
            return
        if len(got) != len(expected):
            print(f"    {name}: {len(got)} output lines for {len(expected)} input lines")
        for i, e in enumerate(expected):
            g = got[i] if i < len(got) else None
            if g is None or g != e.encode("utf-8", "surrogatepass"):
                bad.append(i)
        self.checked += len(expected)
        self.mismatched += len(bad)
        self.rows.append((name, len(expected), len(bad)))
        status = "ok" if not bad else "MISMATCH"
        print(f"    {name}: {len(expected)} lines, {len(bad)} mismatches {status}", flush=True)
        for i in bad[:SHOW]:
            g = got[i].decode("utf-8", "replace") if i < len(got) else "<missing>"
            print(f"      line {i + 1}: input {inputs[i]!r}"[:400])
            print(f"        oracle: {expected[i]}"[:600])
            print(f"        trainer: {g}"[:600])
            ew, gw = expected[i].split(" "), g.split(" ")
            k = next((j for j, (x, y) in enumerate(zip(ew, gw)) if x != y), min(len(ew), len(gw)))
            print(f"        first difference at item {k}; {len(ew)} items from the oracle, {len(gw)} from trainer")
            d = detail(i) if detail else None
            if d:
                print(f"        oracle tokens: {d}"[:600])


def ids_line(e):
    return " ".join(map(str, e.ids))


def encode_all(tok, batch, **kw):
    """encode_batch, or per item when the batch fails (only_first/only_second truncation refuses
    some pairs): returns a list of Encoding or an exception per item."""
    try:
        return tok.encode_batch(batch, **kw)
    except Exception:
        out = []
        for b in batch:
            try:
                out.append(tok.encode(*b, **kw) if isinstance(b, tuple) else tok.encode(b, **kw))
            except Exception as ex:  # noqa: BLE001 - the oracle's refusal is data here
                out.append(ex)
        return out


PAIRS_MAX = 20000  # pairs per set for --pair (consecutive lines)
TRUNC_MAX = 5000   # pairs per set for each truncation strategy
TRUNC_LEN = 12
STRATEGIES = ["longest_first", "only_first", "only_second"]


def script_key():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:8]


def prune_expectations():
    """Answers cached by another version of this script are stale: removed (they are large)."""
    d = os.path.join(oracle_venv.cache_root(), "expect")
    for name in os.listdir(d) if os.path.isdir(d) else []:
        if not name.startswith(script_key() + "-"):
            try:
                os.remove(os.path.join(d, name))
            except OSError:
                pass


def expectations(tok, path, set_name, lines):
    """The oracle's output lines for every check on one set, cached on disk by the content of
    the tokenizer, the lines, this script and the tokenizers version (the oracle is slower than
    the C side: computing them once keeps a rerun well under a minute)."""
    import pickle
    import tokenizers
    from tokenizers import Tokenizer
    h = hashlib.sha256()
    for part in (open(path, "rb").read(), tokenizers.__version__.encode(),
                 "\n".join(lines).encode("utf-8", "surrogatepass")):
        h.update(hashlib.sha256(part).digest())
    cache = os.path.join(oracle_venv.cache_root(), "expect", f"{script_key()}-{h.hexdigest()[:20]}.pickle")
    if os.path.exists(cache):
        with open(cache, "rb") as f:
            return pickle.load(f)
    ex = {}
    enc = tok.encode_batch(lines)
    ex["ids"] = [ids_line(e) for e in enc]
    ex["tokens"] = [" ".join(e.tokens) for e in enc]
    ex["mask"] = [" ".join(map(str, e.attention_mask)) for e in enc]
    ex["decode"] = tok.decode_batch([e.ids for e in enc], skip_special_tokens=True)
    del enc
    ex["no-special"] = [ids_line(e) for e in tok.encode_batch(lines, add_special_tokens=False)]
    flat = [ln.replace("\t", " ") for ln in lines[:PAIRS_MAX + 1]]  # a tab would end the text
    pairs = list(zip(flat[:-1], flat[1:]))
    ex["pair_lines"] = [x + "\t" + y for x, y in pairs]
    pe = tok.encode_batch(pairs)
    ex["pair"] = [ids_line(e) for e in pe]
    ex["type-ids"] = [" ".join(map(str, e.type_ids)) for e in pe]
    del pe
    for strat in STRATEGIES:
        t2 = Tokenizer.from_str(tok.to_str())
        t2.enable_truncation(TRUNC_LEN, strategy=strat)
        te = encode_all(t2, pairs[:TRUNC_MAX])
        keep = [i for i, e in enumerate(te) if not isinstance(e, Exception)]
        ex["trunc-" + strat] = (keep, [ids_line(te[i]) for i in keep])
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    tmp = f"{cache}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(ex, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, cache)
    return ex


def check_tokenizer(cli, entry, sets):
    from tokenizers import Tokenizer
    name, path = entry["name"], entry["path"]
    print(f"== {name}: {entry['what']}", flush=True)
    rc, _, err = cli.run(path, [], ["hello"])
    if rc != 0:
        first = err.strip().splitlines()[0] if err.strip() else f"exit {rc}"
        if "is not supported" in err:
            if entry["expect"] == "supported":
                print(f"  FAILED: expected supported, refused: {first}")
                return "failed", 0, 0
            print(f"  SKIPPED (not supported yet, as expected): {first}")
            return "skipped", 0, 0
        print(f"  FAILED: trainer cannot load it: {first}")
        return "failed", 0, 0
    tok = Tokenizer.from_file(path)
    rep = Report()

    def toks(text, pair=None, add=True):  # the oracle's tokens of one mismatching line
        return " ".join(tok.encode(text, pair, add_special_tokens=add).tokens)

    for set_name, lines in sets:
        t0 = time.time()
        ex = expectations(tok, path, set_name, lines)
        t1 = time.time()
        for opt, key in (([], "ids"), (["--tokens"], "tokens"), (["--no-special"], "no-special")):
            rc, got, err = cli.run(path, opt, lines)
            rep.compare(f"{set_name} {' '.join(opt) or 'ids'}", lines, ex[key], rc, got, err,
                        lambda i, add=(key != "no-special"): toks(lines[i], add=add))
        if cli.mask:
            rc, got, err = cli.run(path, ["--mask"], lines)
            rep.compare(f"{set_name} --mask", lines, ex["mask"], rc, got, err, lambda i: toks(lines[i]))
        rc, got, err = cli.run(path, ["--decode"], ex["ids"])
        rep.compare(f"{set_name} --decode", lines, ex["decode"], rc, got, err, lambda i: toks(lines[i]))
        pl = ex["pair_lines"]
        pair_toks = lambda i, pl=pl: toks(*pl[i].split("\t", 1))  # noqa: E731
        rc, got, err = cli.run(path, ["--pair"], pl)
        rep.compare(f"{set_name} --pair", pl, ex["pair"], rc, got, err, pair_toks)
        if cli.type_ids:
            rc, got, err = cli.run(path, ["--pair", "--type-ids"], pl)
            rep.compare(f"{set_name} --pair --type-ids", pl, ex["type-ids"], rc, got, err, pair_toks)
        if cli.max_length:
            for strat in (STRATEGIES if cli.truncation else STRATEGIES[:1]):
                keep, want = ex["trunc-" + strat]
                inputs = [pl[i] for i in keep]
                opts = ["--pair", f"--max-length={TRUNC_LEN}"] + ([f"--truncation={strat}"] if cli.truncation else [])
                rc, got, err = cli.run(path, opts, inputs)
                rep.compare(f"{set_name} {' '.join(opts)} ({min(len(pl), TRUNC_MAX) - len(keep)} pairs refused "
                            f"by the oracle)", inputs, want, rc, got, err, None)
        print(f"    ({t1 - t0:.1f} s oracle, {time.time() - t1:.1f} s trainer and comparison)", flush=True)
    status = "passed" if rep.mismatched == 0 else "failed"
    print(f"  {status.upper()}: {rep.checked} lines checked, {rep.mismatched} mismatches")
    return status, rep.checked, rep.mismatched


def inner(args):
    t_start = time.time()
    try:
        manifest = build_tokenizers([os.path.join(ROOT, "tools", "oracle", "build_tokenizers.py"),
                                     oracle_venv.REQUIREMENTS, oracle_venv.ASSETS, STRESS, SHAKESPEARE])
    except oracle_venv.Unreachable as e:
        skip(str(e))
    if args["only"]:
        names = args["only"].split(",")
        unknown = [n for n in names if n not in {m["name"] for m in manifest}]
        if unknown:
            raise oracle_venv.Failed(f"--only: no test tokenizer named {', '.join(unknown)}")
        manifest = [m for m in manifest if m["name"] in names]
    if args["shard"]:  # K/N: the tokenizers whose position in the manifest is K-1 modulo N
        k, n = (int(x) for x in args["shard"].split("/"))
        manifest = [m for i, m in enumerate(manifest) if i % n == k - 1]
    prune_expectations()
    import tokenizers
    print(f"oracle: tokenizers {tokenizers.__version__}; random set: {args['random']} strings, seed {args['seed']}")
    want = (args["sets"] or "shakespeare,stress,random").split(",")
    sets = [(n, f()) for n, f in (("shakespeare", lambda: read_lines(SHAKESPEARE)), ("stress", lambda: read_lines(STRESS)),
                                  ("random", lambda: cached_random_lines(args["random"], args["seed"]))) if n in want]
    tmp_ctx = tempfile.TemporaryDirectory(prefix="tokoracle-") if not args["keep"] else None
    tmp = args["keep"] or tmp_ctx.name
    os.makedirs(tmp, exist_ok=True)
    cli = Cli(args["trainer"], tmp)
    seen = {"--max-length": cli.max_length, "--truncation": cli.truncation, "--type-ids": cli.type_ids,
            "--mask": cli.mask}
    print("trainer tokenize options seen in --help: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in seen.items()))
    results = [(m, *check_tokenizer(cli, m, sets)) for m in manifest]
    print("\n== summary")
    for m, status, checked, bad in results:
        print(f"  {m['name']:<18} {status.upper():<8} {checked:>8} lines checked, {bad} mismatches")
    print(f"  ({time.time() - t_start:.1f} s)")
    if tmp_ctx:
        tmp_ctx.cleanup()
    if any(s == "failed" for _, s, _, _ in results):
        return 1
    if not any(s == "passed" for _, s, _, _ in results):
        skip("no tokenizer was supported by the C side")
    return 0


def main(argv):
    args = parse_args(argv)
    try:
        if os.environ.get("TRAINER_ORACLE_INNER") != "1":
            outer(argv, args)
        return inner(args)
    except oracle_venv.Failed as e:
        print(e)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
