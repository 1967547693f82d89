#!/usr/bin/env bash
# trainer.on_nan: a NaN injected into one rank's batch (TRAINER_FAULT_NAN_AT_STEP) or a
# diverging model. stop (the default) ends the job non-zero naming the step and the first
# non-finite tensor, the newest checkpoint intact and loadable; skip leaves the step out on
# every rank alike (cpu, ddp, dataparallel, sharded 2 and 3 end with the same weights, which
# differ from the uninjected run's and are finite); a diverged model or broken batch-norm
# statistics stop even under skip.
# usage: on_nan.sh TRAINER_BIN PYTHON
set -u
bin="$1"; py="$2"
t="$(mktemp -d /tmp/trainer-nan-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
shm0="$(ls /dev/shm | grep '^trainer-')"
export TRAINER_COMM_TIMEOUT=120
cat >"$t/c.yaml" <<YAML
run: {name: n, seed: 3}
model: {name: mlp, params: {layers: [32]}}
data: {name: synthetic, params: {samples: 640, val_samples: 64, features: 8, classes: 4}, batch_size: 32}
optimizer: {name: adamw, lr: 0.01}
trainer: {max_steps: 20, log_every: 1, progress: lines, threads: 1}
checkpoint: {every_n_steps: 4}
YAML
run() { # run NAME [overrides...]: output in $t/NAME.log, exit code in rc
    local name="$1"; shift
    local s0=$SECONDS
    timeout 300 "$bin" run "$t/c.yaml" "run.output_dir=$t/$name" "$@" >"$t/$name.log" 2>&1; rc=$?
    dur=$((SECONDS - s0))
}
last_msg() { grep -m1 "${2:-not finite}" "$t/$1.log" | sed 's/^\[rank [0-9]*\] //; s/^trainer run: //'; }

# stop (default), one process: exit 1 naming step 6 and the input, step 4's checkpoint loads.
TRAINER_FAULT_NAN_AT_STEP=6 run stop
msg="$(grep -m1 'not finite' "$t/stop.log")"
if [ "$rc" = 1 ] && grep -q "step 6: not finite: the gradient norm (nan); first non-finite tensor: the batch's input (sample 0)" <<<"$msg" &&
   grep -q "the newest checkpoint is step-00000004" <<<"$msg"; then ok "stop: exit 1: ${msg#trainer run: }"
    record nan "NaN in the batch at step 6, on_nan stop (cpu)" "exit $rc, step-00000004 intact" "$dur" "$(last_msg stop)"
else bad "stop (exit $rc)" "$(tail -2 "$t/stop.log")"; fi
cks="$(ls "$t/stop/n/0/checkpoints")"
if [ "$cks" = "step-00000004" ] && "$bin" eval "$t/c.yaml" --checkpoint "$t/stop/n/0/checkpoints/step-00000004" >"$t/eval.log" 2>&1 &&
   grep -q "accuracy" "$t/eval.log"; then ok "stop: only step-00000004 saved, and it loads (trainer eval)"
else bad "stop: checkpoints" "$cks" "$(tail -2 "$t/eval.log")"; fi

# stop under ddp x2 with the NaN on rank 1 only: both ranks stop at step 6, naming rank 1.
start=$(date +%s)
TRAINER_FAULT_NAN_AT_STEP=6 TRAINER_FAULT_NAN_RANK=1 run stop2 trainer.devices=2
secs=$(( $(date +%s) - start ))
if [ "$rc" = 1 ] && [ "$(grep -c "step 6: not finite: the gradient norm (nan); first non-finite tensor: the batch's input (sample 0 of rank 1's share)" "$t/stop2.log")" -ge 2 ] &&
   [ "$secs" -lt 60 ]; then ok "stop, ddp x2, NaN on rank 1: both ranks name it, exit 1 in ${secs}s"
    record nan "NaN in rank 1's batch at step 6, on_nan stop (ddp x2)" "exit $rc, both ranks stop" "$secs" "$(last_msg stop2)"
else bad "stop under ddp (exit $rc, ${secs}s)" "$(tail -3 "$t/stop2.log")"; fi

# skip: the same step left out by every strategy.
run ref
TRAINER_FAULT_NAN_AT_STEP=6 run skip_cpu trainer.on_nan=skip
if [ "$rc" = 0 ] && grep -q "warning: step 6: not finite.*step left out (trainer.on_nan: skip; 1 so far)" "$t/skip_cpu.log" &&
   grep -q "1 steps left out (non-finite)" "$t/skip_cpu.log"; then ok "skip, cpu: step 6 left out, the run finishes"
    record nan "NaN in the batch at step 6, on_nan skip (cpu)" "exit 0, step 6 left out" "$dur" "$(last_msg skip_cpu warning)"
else bad "skip cpu (exit $rc)" "$(tail -3 "$t/skip_cpu.log")"; fi
if "$py" - "$t/skip_cpu/n/0/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert any(r.get("skipped") and r["step"] == 6 for r in rows), rows
assert all(r.get("grad_norm") is None for r in rows if r.get("step") == 6 and "loss" in r), rows
PY
then ok "skip: metrics.jsonl is valid JSON with the skipped step"; else bad "skip metrics"; fi
if ! out="$(cmp_runs "$t/ref/n/0" "$t/skip_cpu/n/0" --weights-only 2>&1)"; then ok "skip: weights differ from the uninjected run (${out##*$'\n'})"
else bad "skip changed nothing" "$out"; fi
for s in "ddp trainer.devices=2" "ddp trainer.devices=2 trainer.grad_clip=0.5" "dataparallel trainer.devices=2" \
         "sharded trainer.devices=2 strategy.stage=2" "sharded trainer.devices=2 strategy.stage=3"; do
    set -- $s; name="skip_$1_${#s}"; strat="$1"; shift
    clip=""; case "$*" in *grad_clip*) clip=1 ;; esac
    if [ -n "$clip" ]; then TRAINER_FAULT_NAN_AT_STEP=6 run "${name}_cpu" trainer.on_nan=skip trainer.grad_clip=0.5; ref="$t/${name}_cpu/n/0"
    else ref="$t/skip_cpu/n/0"; fi
    rank=1; [ "$strat" = dataparallel ] && rank=0 # one process: replica 0 gets sample 0
    TRAINER_FAULT_NAN_AT_STEP=6 TRAINER_FAULT_NAN_RANK=$rank run "$name" trainer.on_nan=skip trainer.strategy="$strat" "$@"
    if [ "$rc" = 0 ] && out="$(cmp_runs "$ref" "$t/$name/n/0" 2>&1)"; then ok "skip, $s (NaN on rank $rank) == cpu: ${out##*$'\n'}"
        record nan "NaN in rank $rank's batch at step 6, on_nan skip ($s)" "exit 0, equal to cpu's skip: ${out%%,*}" "$dur" "$(last_msg "$name" warning)"
    else bad "skip $s (exit $rc)" "$(tail -3 "$t/$name.log")" "$out"; fi
done

# A diverging model (SGD, lr 100): stop names the first non-finite activation and its layer.
run div optimizer.name=sgd optimizer.lr=100
msg="$(grep -m1 'not finite' "$t/div.log")"
if [ "$rc" = 1 ] && grep -q "the loss (nan), the gradient norm (nan); first non-finite tensor: the output of op 3 of 4 (linear), shape (32, 4), reading fc2.weight" <<<"$msg"
then ok "diverged, stop: ${msg#trainer run: }"; record nan "SGD lr 100 diverges, on_nan stop" "exit $rc" "$dur" "$(last_msg div)"; else bad "diverged stop (exit $rc)" "$msg" "$(tail -2 "$t/div.log")"; fi
# ... and under skip, max_consecutive_skips ends it.
run div_skip optimizer.name=sgd optimizer.lr=100 trainer.on_nan=skip trainer.max_consecutive_skips=3
if [ "$rc" = 1 ] && grep -q "4 steps in a row left out (trainer.max_consecutive_skips 3): the model diverged" "$t/div_skip.log"
then ok "diverged, skip: stops after 3 steps in a row left out"
     record nan "SGD lr 100 diverges, on_nan skip, max_consecutive_skips 3" "exit $rc" "$dur" "$(last_msg div_skip "in a row")"; else bad "diverged skip (exit $rc)" "$(tail -2 "$t/div_skip.log")"; fi

# Batch norm: a NaN input poisons the running statistics in the forward; skipping cannot help.
cat >"$t/cnn.yaml" <<YAML
run: {name: cnn, seed: 7}
model: {name: cnn, params: {channels: [4], fc: [16]}}
data: {name: synthetic, params: {samples: 256, val_samples: 32, shape: [1, 8, 8], classes: 4}, batch_size: 32}
trainer: {max_steps: 8, log_every: 1, progress: lines, threads: 1, on_nan: skip}
YAML
TRAINER_FAULT_NAN_AT_STEP=3 timeout 120 "$bin" run "$t/cnn.yaml" "run.output_dir=$t/cnn" >"$t/cnn.log" 2>&1; rc=$?
if [ "$rc" = 1 ] && grep -q "step 3: not finite.*first non-finite tensor: the batch's input (sample 0).*the model itself is not finite" "$t/cnn.log"
then ok "batch norm poisoned: skip refuses to go on"
     record nan "NaN input into a CNN with batch norm, on_nan skip" "exit $rc (running statistics poisoned)" - "$(grep -m1 'not finite' "$t/cnn.log" | sed 's/^trainer run: //')"; else bad "cnn skip (exit $rc)" "$(tail -2 "$t/cnn.log")"; fi

left="$(shm_new "$shm0")"
[ -z "$left" ] && ok "nothing left in /dev/shm" || bad "leftovers in /dev/shm" "$left"
finish
