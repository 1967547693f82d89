"""Writes docs/reliability.md from the rows the reliability run collected (tools/reliability/run).

    report.py --rows ROWS.tsv --fuzz FUZZ.tsv --valgrind VALGRIND.log --tests N --command CMD

ROWS.tsv: KIND<TAB>NAME<TAB>OUTCOME<TAB>SECONDS<TAB>MESSAGE per line, appended by the e2e
scripts' `record` (tests/e2e/lib.sh) with KIND bad_input, fault or nan. FUZZ.tsv:
TARGET<TAB>SECONDS<TAB>EXECUTIONS<TAB>RESULT per line (tools/fuzz with FUZZ_SUMMARY).
VALGRIND.log: valgrind's output for the quickstart. Output: markdown on stdout."""
import argparse
import re
import sys

KINDS = {
    "bad_input": ("Bad inputs", "Each is fed to `trainer run`, `eval`, `predict` or `plugins` "
                  "(tests/e2e/bad_inputs.sh): a non-zero exit that is not a signal, no sanitizer report, "
                  "and this message naming the thing and where it came from.", ["case", "exit", "message"]),
    "fault": ("Faults injected", "Processes killed, disks filled, directories made unwritable "
              "(tests/e2e/faults.sh and ddp_faults.sh): what the user sees and what is left.",
              ["scenario", "outcome", "seconds", "message"]),
    "nan": ("Non-finite values", "`trainer.on_nan` (tests/e2e/on_nan.sh): a NaN injected into one rank's "
            "batch (TRAINER_FAULT_NAN_AT_STEP) or a diverging model.", ["scenario", "outcome", "seconds", "message"]),
}


def cell(text, limit=400):
    text = re.sub(r"/tmp/trainer-[a-z]+-[A-Za-z0-9]{6}", "$TMP", text)  # the tests' temp folders
    text = text.replace("|", "\\|").strip()
    return text if len(text) <= limit else text[:limit - 3] + "..."


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def read_tsv(path, width):
    rows = []
    for line in open(path, encoding="utf-8", errors="replace"):
        parts = line.rstrip("\n").split("\t")
        if parts[0] == "target":  # a header
            continue
        if len(parts) >= width:
            rows.append(parts[:width - 1] + ["\t".join(parts[width - 1:])])
    return rows


def valgrind_summary(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    errors = re.search(r"ERROR SUMMARY: (\d+) errors", text)
    lost = re.search(r"definitely lost: ([\d,]+) bytes", text)
    return (int(errors.group(1)) if errors else None,
            int(lost.group(1).replace(",", "")) if lost else 0 if "All heap blocks were freed" in text
            or "definitely lost" not in text else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", required=True)
    ap.add_argument("--fuzz", required=True)
    ap.add_argument("--valgrind", required=True)
    ap.add_argument("--tests", required=True, help="tests in the suite (ctest -N)")
    ap.add_argument("--command", required=True)
    a = ap.parse_args()
    rows = read_tsv(a.rows, 5)
    fuzz = read_tsv(a.fuzz, 4)
    verr, vlost = valgrind_summary(a.valgrind)
    p = print
    p("# Reliability")
    p()
    p("What is tested so that bad input gets a clear error and loses nothing, and a fault never")
    p("leaves a hung job or a broken checkpoint. Every table below is regenerated from real runs by")
    p()
    p("```")
    p(a.command)
    p("```")
    p()
    p("(the figures here are from that run; CI runs the same tests, `.ci/run`). Nothing in this file")
    p("is written by hand except this introduction and the notes under each table.")
    p()
    p("## Inputs fuzzed")
    p()
    p("libFuzzer with ASan and UBSan (`tools/fuzz`, docs/fuzzing.md), each target for a fixed time on")
    p("a copy of its seed corpus in `tests/fuzz/`; a crash, leak, timeout or sanitizer report fails.")
    p("The seed corpora and every input that ever crashed replay in the normal test suite.")
    p()
    p(table(["target", "seconds", "executions", "result"], fuzz))
    p()
    for kind, (title, note, header) in KINDS.items():
        got = [r for r in rows if r[0] == kind]
        p(f"## {title}")
        p()
        p(note)
        p()
        if kind == "bad_input":
            p(table(header, [[r[1], r[2], r[4]] for r in got]))
        else:
            p(table(header, [[r[1], r[2], r[3], r[4]] for r in got]))
        p()
    p("## Sanitizers and memory")
    p()
    p(f"- The whole suite ({a.tests} tests: unit, gradient checks, PyTorch references, end to end and")
    p("  distributed, the fault and on_nan tests above included) runs a second time built with")
    p("  AddressSanitizer, UndefinedBehaviorSanitizer (no recovery) and LeakSanitizer (`tools/dev asan`,")
    p("  the second step of `.ci/run`).")
    p(f"- valgrind (memcheck, full leak check) of the quickstart: {verr if verr is not None else '?'} errors,")
    p(f"  {vlost if vlost is not None else '?'} bytes definitely lost (ctest `valgrind_quickstart`).")
    p("- Shared memory and temporary files: the fault tests check /dev/shm and TMPDIR after every exit")
    p("  path, and every e2e test ends by checking that no `trainer-*` segment is left.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
