#!/usr/bin/env python3
"""tools/layers.py on tiny trees it must judge: a clean one (exit 0), one with an upward
include and a cycle between folders (exit 1, each named with file:line), one whose public
header includes a higher layer's (exit 1), one with a file the
map does not place (exit 1) and a bad map (exit 2), so the layering check cannot pass
silently. Usage: layers_check.py TOOLS_LAYERS_PY"""
import os
import subprocess
import sys
import tempfile

MAP = """# bottom first
base: base/ trainer/status.h
kernels: kernels/
compute: ops/ autograd/ trainer/ops.h=ops/
run: run/
"""

CLEAN = {
    "core/include/trainer/status.h": "",
    "core/include/trainer/ops.h": '#include "trainer/status.h"\n',
    "core/src/base/status.c": '#include "trainer/status.h"\n',
    "core/src/kernels/gemm.h": "#include <stdint.h>\n",
    "core/src/kernels/gemm.c": '#include "kernels/gemm.h"\n#include "trainer/status.h"\n',
    "core/src/autograd/node.h": '#include "trainer/status.h"\n',
    "core/src/ops/add.c": '#include "autograd/node.h"\n#include "trainer/ops.h"\n',
    "core/src/run/job.c": '#include "trainer/ops.h"\n#include <stdio.h>\n',
}

# kernels/ includes ops' public header (upward), and autograd/ includes ops/'s header while
# ops/ includes autograd/'s: a cycle inside one layer.
BROKEN = dict(CLEAN)
BROKEN["core/src/kernels/gemm.c"] = '#include "kernels/gemm.h"\n\n#include "trainer/ops.h"\n'
BROKEN["core/src/autograd/graph.c"] = '#include "autograd/node.h"\n#include "ops/add.h"\n'
BROKEN["core/src/ops/add.h"] = "#include <stddef.h>\n"

# A public header including one of a higher layer (status.h, base, includes ops.h, compute).
HEADER_UP = dict(CLEAN)
HEADER_UP["core/include/trainer/status.h"] = '#include <stddef.h>\n#include "trainer/ops.h"\n'

UNPLACED = dict(CLEAN)
UNPLACED["core/src/stray/x.c"] = '#include "trainer/status.h"\n'


def run(tool, files, map_text=MAP):
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        with open(os.path.join(root, "layers.map"), "w", encoding="utf-8") as f:
            f.write(map_text)
        p = subprocess.run([sys.executable, tool, "--root", root, "--map", os.path.join(root, "layers.map")],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


def expect(cond, what, out):
    if not cond:
        print(f"FAIL: {what}\n--- output ---\n{out}")
        sys.exit(1)
    print(f"ok: {what}")


def main():
    tool = sys.argv[1]
    rc, out = run(tool, CLEAN)
    expect(rc == 0 and "layers: ok" in out, "a clean tree passes", out)

    rc, out = run(tool, BROKEN)
    expect(rc == 1, "an upward include and a cycle fail (exit 1)", out)
    expect("core/src/kernels/gemm.c:3: includes trainer/ops.h (compute) from layer kernels: upward" in out,
           "the upward include is named with file:line and both layers", out)
    expect("cycle between autograd/, ops/: autograd/ -> ops/ (core/src/autograd/graph.c:2); "
           "ops/ -> autograd/ (core/src/ops/add.c:1)" in out, "the cycle is named with each link's file:line", out)
    expect("2 violation(s)" in out, "exactly those two violations", out)

    rc, out = run(tool, HEADER_UP)
    expect(rc == 1 and "core/include/trainer/status.h:2: includes trainer/ops.h (compute) from layer base: upward" in out,
           "a public header including a higher layer's fails, named with file:line", out)

    rc, out = run(tool, UNPLACED)
    expect(rc == 1 and "core/src/stray/x.c: not placed in layers.map" in out, "a file the map does not place fails", out)

    rc, out = run(tool, CLEAN, MAP + "bad line without a colon\n")
    expect(rc == 2 and "layers.map:6: expected `layer: path...`" in out, "a bad map is exit 2, naming its line", out)


if __name__ == "__main__":
    main()
