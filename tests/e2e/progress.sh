#!/usr/bin/env bash
# Progress display: a redrawn bar (carriage return + erase line, step/total, loss, samples/s,
# ETA) with trainer.progress=bar; plain periodic lines when stdout is not a terminal (auto).
# usage: progress.sh TRAINER_BIN CONFIG
set -u
bin="$1"; cfg="$2"
t="$(mktemp -d /tmp/trainer-progress-XXXXXX)"
trap 'rm -rf "$t"' EXIT
fails=0
"$bin" run "$cfg" "run.output_dir=$t" trainer.max_epochs=1 trainer.progress=bar >"$t/bar.txt" 2>&1 ||
    { echo "FAIL: run with the bar"; exit 1; }
if grep -q $'\r\033\\[Kepoch 1/1 \\[#*-*\\] [0-9]*/128  loss [0-9.]*  [0-9]* samples/s  [0-9:]* elapsed  ETA [0-9:]*' "$t/bar.txt" &&
   grep -q $'\\[########################\\] 128/128' "$t/bar.txt" && ! grep -q '^epoch 1  step 50/128' "$t/bar.txt"; then
    echo "ok   bar: redrawn in place up to 128/128, no periodic lines on stdout"
else
    echo "FAIL: bar output:"; tr '\r' '\n' <"$t/bar.txt" | tail -5; fails=1
fi
grep -q '^epoch 1  step 50/128' "$t"/quickstart/0/log.txt && echo "ok   log.txt keeps the lines" ||
    { echo "FAIL: log.txt lacks the periodic lines"; fails=1; }
"$bin" run "$cfg" "run.output_dir=$t/2" trainer.max_epochs=1 >"$t/auto.txt" 2>&1 || { echo "FAIL: run"; exit 1; }
if grep -q '^epoch 1  step 50/128  loss' "$t/auto.txt" && ! grep -q $'\r' "$t/auto.txt"; then
    echo "ok   auto, not a terminal: plain lines"
else
    echo "FAIL: auto output:"; head -5 "$t/auto.txt"; fails=1
fi
[ "$fails" = 0 ] && echo "3 passed, 0 failed"
exit "$fails"
