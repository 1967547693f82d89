#!/usr/bin/env python3
"""SELF-TEST ONLY: a stand-in for `trainer tokenize` made of the oracle itself.

  selftest_shim.py tokenize [--no-special|--pair|--tokens|--decode|--type-ids|--mask|--max-length=N|
                             --truncation=S] TOKENIZER [FILE]

It lets tests/reference/tokenizer_oracle.py be tested without the C tokenizer: against this
shim the harness must pass, and with SHIM_MUTATE=K (add 1 to the first id of input line K in
id output) it must fail and show that line. SHIM_REFUSE (default "Unigram") lists the
model types it refuses with "is not supported", as the C side does for later slices. It is
never the thing under test: the real test runs `build/bin/trainer`.
"""
import json
import os
import sys


HELP = """usage: trainer tokenize [options] TOKENIZER [FILE]
  --no-special  --pair  --tokens  --decode  --type-ids  --mask  --max-length=N
  --truncation=longest_first|only_first|only_second
"""


def main(argv):
    if not argv or argv[0] != "tokenize":
        print(f"trainer: unknown command '{argv[0] if argv else ''}'", file=sys.stderr)
        return 2
    opts = {a.split("=")[0]: (a.split("=", 1)[1] if "=" in a else True) for a in argv[1:] if a.startswith("--")}
    pos = [a for a in argv[1:] if not a.startswith("--")]
    if "--help" in opts:
        print(HELP)
        return 0
    try:
        from tokenizers import Tokenizer
    except ImportError:  # run again with the oracle venv's python
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import oracle_venv
        py = oracle_venv.ensure_venv()
        os.execv(py, [py, os.path.abspath(__file__), *argv])
    path = pos[0]
    kind = json.load(open(path))["model"]["type"]
    if kind in os.environ.get("SHIM_REFUSE", "Unigram").split(","):
        print(f"trainer: {path}: model '{kind}' is not supported (supported: WordPiece, BPE)", file=sys.stderr)
        return 1
    tok = Tokenizer.from_file(path)
    if "--max-length" in opts:
        tok.enable_truncation(int(opts["--max-length"]), strategy=opts.get("--truncation", "longest_first"))
    data = open(pos[1], "rb").read() if len(pos) > 1 else sys.stdin.buffer.read()
    lines = [ln.decode("utf-8") for ln in data.split(b"\n")]
    if lines and lines[-1] == "":
        lines.pop()
    mutate = int(os.environ.get("SHIM_MUTATE", "0"))
    out = []
    if "--decode" in opts:
        out = tok.decode_batch([[int(x) for x in ln.split()] for ln in lines], skip_special_tokens=True)
    else:
        batch = [tuple(ln.split("\t", 1)) if "--pair" in opts else ln for ln in lines]
        for i, e in enumerate(tok.encode_batch(batch, add_special_tokens="--no-special" not in opts)):
            if "--tokens" in opts:
                out.append(" ".join(e.tokens))
            elif "--mask" in opts:
                out.append(" ".join(map(str, e.attention_mask)))
            elif "--type-ids" in opts:
                out.append(" ".join(map(str, e.type_ids)))
            else:
                ids = list(e.ids)
                if i + 1 == mutate and ids:
                    ids[0] += 1
                out.append(" ".join(map(str, ids)))
    sys.stdout.buffer.write(b"".join(s.encode("utf-8", "surrogatepass") + b"\n" for s in out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
