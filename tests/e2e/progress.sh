#!/usr/bin/env bash
# Progress display: a redrawn bar (carriage return + erase line, step/total, loss, samples/s,
# ETA) with trainer.progress=bar; plain periodic lines when stdout is not a terminal (auto).
# Under a pseudo-terminal (util-linux `script`) 40 and 60 columns wide: every bar frame fits
# the width; under mpirun's environment no frames at all; with two ranks `trainer run`
# launches itself, rank 0's bar only.
# usage: progress.sh TRAINER_BIN CONFIG
set -u
unset COLUMNS
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
n=3
# frames FILE: the bar frames of a terminal's output (what follows "\r\033[K" up to the next
# "\r" with no newline on the way or right after it: the terminal writes "\r\n" for a line's
# end; a line may wrap), one per line, then "max WIDTH".
frames() {
    /usr/bin/python3 - "$1" <<'PY'
import sys
data = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
pieces = data.split("\r") + [""]
frames = [p[3:] for p, nxt in zip(pieces, pieces[1:])
          if p.startswith("\x1b[K") and "\n" not in p and not nxt.startswith("\n") and len(p) > 3]
for f in frames: print(f)
print("max", max((len(f) for f in frames), default=0))
PY
}
if ! command -v script >/dev/null; then
    echo "skip terminal checks: no util-linux script"
else
    script -qec "stty cols 40; '$bin' run '$cfg' 'run.output_dir=$t/3' trainer.max_steps=64" /dev/null >"$t/tty40.txt" 2>&1
    frames "$t/tty40.txt" >"$t/f40.txt"
    w="$(sed -n 's/^max //p' "$t/f40.txt")"
    if [ "$w" -gt 0 ] && [ "$w" -le 39 ] && grep -q '64/64' "$t/f40.txt"; then
        echo "ok   40 columns: $(grep -c . "$t/f40.txt") frames, the widest $w: $(grep 64/64 "$t/f40.txt" | tail -1)"
    else echo "FAIL: 40 columns: frames up to $w wide"; tail -3 "$t/f40.txt"; fails=1; fi
    n=$((n + 1))
    script -qec "stty cols 60; OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0 '$bin' run '$cfg' 'run.output_dir=$t/4' trainer.max_steps=64" \
        /dev/null >"$t/mpi.txt" 2>&1
    if ! grep -q $'\r\033' "$t/mpi.txt" && grep -q '^epoch 1  step 50/64  loss' "$t/mpi.txt"; then
        echo "ok   under mpirun's environment on a terminal: plain lines, no redrawn frames"
    else echo "FAIL: under mpirun's environment:"; head -5 "$t/mpi.txt"; fails=1; fi
    n=$((n + 1))
    script -qec "stty cols 60; '$bin' run '$cfg' 'run.output_dir=$t/5' trainer.max_steps=64 trainer.devices=2" /dev/null >"$t/ddp.txt" 2>&1
    frames "$t/ddp.txt" >"$t/fddp.txt"
    w="$(sed -n 's/^max //p' "$t/fddp.txt")"
    if [ "$w" -gt 0 ] && [ "$w" -le 59 ] && grep -q '^\[rank 0\] epoch 1/1 .*64/64' "$t/fddp.txt" &&
       [ "$(grep -vc '^\[rank 0\] \|^max ' "$t/fddp.txt")" = 0 ]; then
        echo "ok   trainer.devices=2 on 60 columns: rank 0's bar only ($(grep -c '^\[rank 0' "$t/fddp.txt") frames, the widest $w)"
    else echo "FAIL: trainer.devices=2 on a terminal: frames up to $w wide:"; grep -v '^\[rank 0\] ' "$t/fddp.txt" | head -3; tail -3 "$t/fddp.txt"; fails=1; fi
    n=$((n + 1))
fi
[ "$fails" = 0 ] && echo "$n passed, 0 failed"
exit "$fails"
