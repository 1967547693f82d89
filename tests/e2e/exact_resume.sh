#!/usr/bin/env bash
# Exact resume: a run of 3 epochs straight, and the same run killed with SIGKILL right after
# a mid-epoch checkpoint and then resumed (checkpoint.resume: auto), end with byte-identical
# weights and optimizer state. Dropout is on, so the RNG position must resume exactly too.
# usage: exact_resume.sh TRAINER_BIN CONFIG
set -u
bin="$1"; cfg="$2"
out="$(mktemp -d /tmp/trainer-resume-XXXXXX)"
trap 'rm -rf "$out"' EXIT
args=(trainer.max_epochs=3 model.params.dropout=0.1 checkpoint.every_n_steps=50 checkpoint.keep_last=2 trainer.log_every=1000)
fails=0
"$bin" run "$cfg" "run.output_dir=$out/a" "${args[@]}" >"$out/a.log" 2>&1 || { echo "FAIL: straight run"; cat "$out/a.log"; exit 1; }
TRAINER_FAULT_KILL_AT_STEP=150 "$bin" run "$cfg" "run.output_dir=$out/b" "${args[@]}" >"$out/b1.log" 2>&1
rc=$?
[ "$rc" = 137 ] || { echo "FAIL: the run was to be killed at step 150 (SIGKILL, 137), exit $rc"; fails=1; }
"$bin" run "$cfg" "run.output_dir=$out/b" "${args[@]}" >"$out/b2.log" 2>&1 || { echo "FAIL: resumed run"; cat "$out/b2.log"; exit 1; }
grep -q "resuming from .*step-00000150" "$out/b2.log" || { echo "FAIL: did not resume from step 150"; cat "$out/b2.log"; fails=1; }
a="$(ls -d "$out"/a/*/0/checkpoints/step-* | tail -1)"
b="$(ls -d "$out"/b/*/0/checkpoints/step-* | tail -1)"
[ "$(basename "$a")" = "$(basename "$b")" ] || { echo "FAIL: final checkpoints differ: $a $b"; fails=1; }
for f in model.safetensors optimizer.safetensors; do
    if cmp -s "$a/$f" "$b/$f"; then echo "$f: identical after kill + resume"; else echo "FAIL: $f differs"; fails=1; fi
done
[ "$(ls -d "$out"/b/*/0/checkpoints/step-* | wc -l)" = 2 ] || { echo "FAIL: keep_last=2 not honoured"; fails=1; }
[ "$fails" = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit "$fails"
