#!/usr/bin/env bash
# Ctrl-C and SIGTERM during `trainer run`: the run stops at the next step, saves a checkpoint
# there, says so and that rerunning resumes, and exits 130 (SIGINT) or 143 (SIGTERM);
# rerunning finishes with the same weights as a run never stopped. A second signal stops at
# once. With two ranks `trainer run` launched itself, a Ctrl-C to the whole process group (as a
# terminal sends it): every rank stops at the same step, the job exits 130 and resumes exactly.
# usage: interrupt.sh TRAINER_BIN PYTHON   (PYTHON with numpy, for compare_runs.py)
set -u
bin="$1"; py="$2"
t="$(mktemp -d /tmp/trainer-interrupt-XXXXXX)"
pids=""
trap 'for p in $pids; do kill -KILL -- -$p $p 2>/dev/null; done; rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
cat >"$t/c.yaml" <<YAML
run: {name: irq, seed: 3, output_dir: $t/runs}
model: {name: mlp, params: {layers: [64, 64]}}
data: {name: synthetic, params: {samples: 4096, val_samples: 256, features: 16, classes: 4}, batch_size: 16}
trainer: {max_epochs: 30, log_every: 1, progress: lines, threads: 1}
checkpoint: {every_n_epochs: 0}
YAML
# started NAME CMD...: CMD in the background in a process group of its own, its output in
# $t/NAME.out; waits until its metrics show step 20. Sets pid.
started() {
    local name="$1"; shift
    setsid "$@" >"$t/$name.out" 2>&1 & pid=$!; pids="$pids $pid"
    for _ in $(seq 600); do grep -q '"step": 20,' "$t/runs/$name/0/metrics.jsonl" 2>/dev/null && return 0; sleep 0.05; done
    return 1
}
step_of() { sed -n 's/.*stopped by .* at step \([0-9]*\) of.*/\1/p' "$1" | head -1; }
total_of() { sed -n 's/.*stopped by .* at step [0-9]* of \([0-9]*\):.*/\1/p' "$1" | head -1; }

# 1. SIGINT, one process.
"$bin" run "$t/c.yaml" run.name=full >"$t/full.out" 2>&1 || bad "uninterrupted run" "$(tail -3 "$t/full.out")"
if started irq "$bin" run "$t/c.yaml"; then kill -INT "$pid"; fi
wait "$pid"; rc=$?
s="$(step_of "$t/irq.out")"; n="$(total_of "$t/irq.out")"
if [ "$rc" = 130 ] && [ -n "$s" ] && [ "$s" -lt "$n" ] && grep -q "saved $t/runs/irq/0/checkpoints/step-0*$s; run the same command again to resume" "$t/irq.out" &&
   [ -f "$t/runs/irq/0/checkpoints/step-$(printf %08d "$s")/state.json" ]; then
    ok "SIGINT: exit 130 at step $s of $n, checkpoint step-$(printf %08d "$s") saved: $(grep -o 'stopped by.*' "$t/irq.out")"
else bad "SIGINT (exit $rc, step '$s')" "$(tail -3 "$t/irq.out")"; fi
"$bin" run "$t/c.yaml" >"$t/resume.out" 2>&1; rc=$?
if [ "$rc" = 0 ] && grep -q "resuming from .*step-0*$s " "$t/resume.out" && d="$(cmp_runs "$t/runs/full/0" "$t/runs/irq/0" --weights-only --tol 0 2>&1)"; then
    ok "rerun resumes from step $s and ends with the uninterrupted run's weights ($d)"
else bad "resume after SIGINT (exit $rc)" "$(grep resuming "$t/resume.out")" "${d:-}"; fi

# 2. SIGTERM (schedulers): 143. Then SIGINT and SIGTERM delivered together: the second one
# handled (which is which is the kernel's choice) stops the process at once, by that signal,
# before any step boundary and with no checkpoint message.
if started term "$bin" run "$t/c.yaml" run.name=term; then kill -TERM "$pid"; fi
wait "$pid"; rc=$?
if [ "$rc" = 143 ] && grep -q "stopped by SIGTERM at step" "$t/term.out"; then ok "SIGTERM: exit 143: $(grep -o 'stopped by.*' "$t/term.out" | cut -c1-60)..."
else bad "SIGTERM (exit $rc)" "$(tail -3 "$t/term.out")"; fi
if started twice "$bin" run "$t/c.yaml" run.name=twice; then kill -STOP "$pid"; kill -INT "$pid"; kill -TERM "$pid"; kill -CONT "$pid"; fi
wait "$pid"; rc=$?
if { [ "$rc" = 130 ] || [ "$rc" = 143 ]; } && ! grep -q "stopped by" "$t/twice.out" && grep -q "Ctrl-C again to stop at once" "$t/twice.out"; then
    ok "a second signal stops at once (exit $rc, killed by the signal, no step finished after it)"
else bad "second signal (exit $rc)" "$(tail -3 "$t/twice.out")"; fi

# 3. Two ranks launched by trainer run, Ctrl-C to the process group: they agree on the step.
"$bin" run "$t/c.yaml" run.name=dfull trainer.devices=2 >"$t/dfull.out" 2>&1 || bad "uninterrupted ddp run" "$(tail -3 "$t/dfull.out")"
if started ddp "$bin" run "$t/c.yaml" run.name=ddp trainer.devices=2; then kill -INT -- -"$pid"; fi
wait "$pid"; rc=$?
s0="$(grep '^\[rank 0\]' "$t/ddp.out" | grep -o 'stopped by .* at step [0-9]*' | grep -o '[0-9]*$')"
s1="$(grep '^\[rank 1\]' "$t/ddp.out" | grep -o 'stopped by .* at step [0-9]*' | grep -o '[0-9]*$')"
if [ "$rc" = 130 ] && [ -n "$s0" ] && [ "$s0" = "$s1" ] && grep -q "every rank stopped by itself" "$t/ddp.out" &&
   [ -f "$t/runs/ddp/0/checkpoints/step-$(printf %08d "$s0")/state.json" ]; then
    ok "ddp, 2 ranks: exit 130, both stopped at step $s0, checkpoint saved: $(tail -1 "$t/ddp.out")"
else bad "ddp Ctrl-C (exit $rc, steps '$s0' '$s1')" "$(tail -4 "$t/ddp.out")"; fi
"$bin" run "$t/c.yaml" run.name=ddp trainer.devices=2 >"$t/dres.out" 2>&1; rc=$?
if [ "$rc" = 0 ] && grep -q "resuming from .*step-0*$s0 " "$t/dres.out" && d="$(cmp_runs "$t/runs/dfull/0" "$t/runs/ddp/0" --weights-only --tol 0 2>&1)"; then
    ok "ddp rerun resumes from step $s0 and ends with the uninterrupted run's weights ($d)"
else bad "ddp resume (exit $rc)" "$(tail -3 "$t/dres.out")" "${d:-}"; fi
# 4. A Ctrl-C that reaches the run's last step: the run finishes there (exit 0, its final
# validation done) instead of stopping with a checkpoint at its end that a rerun would take
# for a finished run, starting a new version and never completing this one. One step of a
# wide model takes long enough for the signal, sent once the run has said what it trains, to
# arrive before that step ends.
cat >"$t/last.yaml" <<YAML
run: {name: last, seed: 3, output_dir: $t/runs}
model: {name: mlp, params: {layers: [2048, 2048]}}
data: {name: synthetic, params: {samples: 512, val_samples: 64, features: 512, classes: 4}, batch_size: 256}
trainer: {max_steps: 1, log_every: 1, progress: lines, threads: 1}
checkpoint: {every_n_epochs: 0}
YAML
setsid "$bin" run "$t/last.yaml" >"$t/last.out" 2>&1 & pid=$!; pids="$pids $pid"
for _ in $(seq 600); do grep -q 'global batch' "$t/last.out" && break; sleep 0.01; done
kill -INT "$pid"; wait "$pid"; rc=$?
if [ "$rc" = 0 ] && ! grep -q "stopped by" "$t/last.out" && grep -q "^done: 1 steps" "$t/last.out" &&
   grep -q '"train_loss"' "$t/runs/last/0/metrics.jsonl" && [ ! -e "$t/runs/last/1" ]; then
    ok "Ctrl-C during the run's last step: the run finishes (exit 0, epoch record written)"
else bad "Ctrl-C at the last step (exit $rc)" "$(tail -3 "$t/last.out")"; fi
finish
