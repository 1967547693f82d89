#!/usr/bin/env python3
"""`trainer embed`'s progress display, on a tiny BERT folder (tests/e2e/hf_encoder_load.py
makes it; Python's standard library only):

- trainer.progress=bar: a bar redrawn in place ("\\r\\033[K", "embed [###---] 4/40  N texts/s
  ... ETA ...") up to 40/40, with no periodic lines;
- auto when stdout is not a terminal: no bar, no progress lines (the summary line only);
- trainer.progress=lines: a line every trainer.log_every batches and one at the end;
- auto on a pseudo-terminal 40 columns wide: the bar, every frame within 39 columns.

  embed_progress.py TRAINER
"""
import fcntl
import os
import pty
import random
import re
import struct
import subprocess
import sys
import tempfile
import termios

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_encoder_load as tiny  # noqa: E402

N, BATCH = 40, 4


def frames(out):
    """The bar's frames in out: what follows "\r\033[K" up to the next "\r", with no line
    break on the way or right after it (a terminal ends a line with "\r\n")."""
    pieces = out.split("\r") + [""]
    return [p[3:] for p, nxt in zip(pieces, pieces[1:])
            if p.startswith("\x1b[K") and "\n" not in p and not nxt.startswith("\n") and len(p) > 3]


def run(cmd):
    """cmd's stdout and stderr through a pipe, as bytes decoded (no newline translation)."""
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def on_terminal(cmd, cols):
    """cmd's stdout and stderr on a pseudo-terminal `cols` wide: what it wrote, and its exit code."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=60), out.decode("utf-8", "replace")


def main(trainer):
    base = tempfile.mkdtemp(prefix="embed_progress.")
    model = tiny.folder(base, "tiny", tiny.tensors(random.Random(7)))
    cfg = tiny.embed_cfg(base, model)
    texts = os.path.join(base, "texts.txt")
    with open(texts, "w") as f:
        f.write("".join(f"review {i}: the movie was {'great' if i % 2 else 'bad'}\n" for i in range(N)))
    out_npy = os.path.join(base, "e.npy")
    embed = [trainer, "embed", cfg, "--input", texts, "--output", out_npy]
    os.environ.pop("COLUMNS", None)

    rc, out = run(embed + ["trainer.progress=bar"])
    fr = frames(out)
    bar = re.compile(r"embed \[#*-*\] \d+/%d  \d+ texts/s  [0-9:]+ elapsed  ETA [0-9:]+$" % N)
    tiny.check(rc == 0 and fr and all(bar.match(f) for f in fr) and fr[-1].startswith(f"embed [{'#' * 24}] {N}/{N}")
               and "embed: 4/" not in out, f"progress=bar: {len(fr)} frames redrawn in place, the last '{fr[-1] if fr else ''}'")

    rc, out = run(embed)
    tiny.check(rc == 0 and "\r" not in out and "\x1b" not in out and f"/{N} texts" not in out and
               f"embed: {N} texts ->" in out, "auto, stdout not a terminal: no bar, no progress lines")

    rc, out = run(embed + ["trainer.progress=lines", "trainer.log_every=3"])
    lines = re.findall(r"^embed: (\d+)/%d texts  \d+ texts/s$" % N, out, re.M)
    tiny.check(rc == 0 and lines == ["12", "24", "36", "40"] and "\r" not in out,
               f"progress=lines, log_every 3 batches of {BATCH}: lines at {', '.join(lines)} of {N} texts")

    rc, out = on_terminal(embed, 40)
    fr = frames(out)
    widest = max((len(f) for f in fr), default=0)
    tiny.check(rc == 0 and fr and 0 < widest <= 39 and f"{N}/{N}" in fr[-1],
               f"auto on a terminal 40 columns wide: {len(fr)} frames, the widest {widest}: '{fr[-1] if fr else ''}'")
    return tiny.finish(base)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[-1].strip())
    sys.exit(main(os.path.abspath(sys.argv[1])))
