#!/usr/bin/env bash
# The loop's state across a stop and a resume, checked on metrics.jsonl's values:
# - killed mid-epoch and resumed, a run writes {"resumed_from_step": N}, and its epoch train
#   losses and (the last record of each step) its step records equal an uninterrupted run's;
# - stopped part-way through an epoch by trainer.max_steps and then extended, a run goes on
#   from that batch (state.json says where) and ends with the uninterrupted run's weights and
#   records; a cosine schedule follows the new length and says so, naming both lengths;
# - trainer.max_steps 0 is refused, pointing at -1 and `trainer eval`;
# - epochs count from 1 in the records as in the log; tokens_per_sec for language models only;
#   validation inside a throughput window is not counted in its samples/s;
# - a second trainer on a run folder in use refuses, naming the first's pid; a killed run's
#   lock is taken over; the ranks of a ddp job do not lock each other out.
# usage: resume_state.sh TRAINER_BIN
set -u
bin="$1"
t="$(mktemp -d /tmp/trainer-resume-state-XXXXXX)"
bg=""
trap '[ -n "$bg" ] && kill -9 "$bg" 2>/dev/null; rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"

# 160 samples, batch 16: 10 steps an epoch, 20 in 2; dropout on, so the RNG must resume too.
cat >"$t/c.yaml" <<'YAML'
run: {name: r, seed: 3}
model: {name: mlp, params: {layers: [16], dropout: 0.1}}
data: {name: synthetic, params: {samples: 160, val_samples: 32, features: 8, classes: 3}, batch_size: 16}
optimizer: {name: adamw, lr: 0.01}
trainer: {max_epochs: 2, log_every: 3, progress: lines, threads: 1}
YAML
run() { # run OUT LOG [overrides...]: exit status in $rc
    local out="$1" log="$2"; shift 2
    timeout 120 "$bin" run "$t/c.yaml" "run.output_dir=$t/$out" "$@" >"$t/$log" 2>&1
    rc=$?
}
m() { echo "$t/$1/r/0/metrics.jsonl"; }
# The last record of each step ("step" first: the loss rows), rates left out, sorted by step.
steps() { grep '^{"step"' "$1" | grep '"loss"' | sed 's/, "samples_per_sec": [0-9.e+]*//; s/, "tokens_per_sec": [0-9.e+]*//' |
    awk -F'[:,]' '{last[$2 + 0] = $0} END {for (s in last) print s "\t" last[s]}' | sort -n | cut -f2; }
epochs() { grep '^{"epoch"' "$1" | grep -v '"partial"' | awk -F'[:,]' '{last[$2 + 0] = $0} END {for (e in last) print last[e]}' | sort; }
same() { # same NAME A B
    if [ "$2" = "$3" ] && [ -n "$2" ]; then ok "$1"; else bad "$1" "got:" "$3" "want:" "$2"; fi
}

run a a.log
[ "$rc" = 0 ] || { bad "uninterrupted run" "exit $rc" "$(tail -3 "$t/a.log")"; finish; exit; }

# 1. Killed after step 6, the newest checkpoint step 4: steps 5 and 6 are logged again.
TRAINER_FAULT_KILL_AT_STEP=6 run b b1.log checkpoint.every_n_steps=4
[ "$rc" = 137 ] || bad "killed at step 6" "exit $rc" "$(tail -2 "$t/b1.log")"
run b b2.log checkpoint.every_n_steps=4
if [ "$rc" = 0 ] && grep -qx '{"resumed_from_step": 4}' "$(m b)"; then ok 'a resume writes {"resumed_from_step": 4}'
else bad 'a resume writes {"resumed_from_step": 4}' "exit $rc" "$(grep -n resumed "$(m b)")" "$(tail -2 "$t/b2.log")"; fi
same "killed and resumed: epoch train losses as uninterrupted" "$(epochs "$(m a)")" "$(epochs "$(m b)")"
same "killed and resumed: the last record of each step as uninterrupted" "$(steps "$(m a)")" "$(steps "$(m b)")"

# 3. Stopped at step 7 of epoch 1's 10 by max_steps, then extended to the 2 epochs.
run c c1.log trainer.max_steps=7
st="$t/c/r/0/checkpoints/step-00000007/state.json"
if [ "$rc" = 0 ] && grep -q '"epoch": 0,' "$st" && grep -q '"batch_in_epoch": 7,' "$st"; then
    ok "max_steps 7: the checkpoint is at epoch 0 (counted from 0), batch 7"
else bad "max_steps 7: the checkpoint is at epoch 0 (counted from 0), batch 7" "exit $rc" "$(cat "$st" 2>&1 | tr '\n' ' ')"; fi
if grep -q "^epoch 1/1 stopped at step 7 by trainer.max_steps (batch 7 of 10): train loss so far" "$t/c1.log" &&
    grep -q '^{"epoch": 1, "step": 7, "train_loss": [0-9.e-]*, "partial": true}$' "$(m c)"; then
    ok "a stop part-way through an epoch is said as such, and its epoch record is partial"
else bad "a stop part-way through an epoch is said as such, and its epoch record is partial" "$(grep -h "epoch 1" "$t/c1.log" "$(m c)")"; fi
run c c2.log
if [ "$rc" = 0 ] && cmp -s "$t/a/r/0/checkpoints/step-00000020/model.safetensors" "$t/c/r/0/checkpoints/step-00000020/model.safetensors" &&
    cmp -s "$t/a/r/0/checkpoints/step-00000020/optimizer.safetensors" "$t/c/r/0/checkpoints/step-00000020/optimizer.safetensors"; then
    ok "stopped by max_steps 7, extended to 20: weights and optimizer state byte-equal to uninterrupted"
else bad "stopped by max_steps 7, extended to 20: weights and optimizer state byte-equal to uninterrupted" "exit $rc" \
    "$(ls "$t/c/r/0/checkpoints")" "$(grep -h "resuming\|done" "$t/c2.log")"; fi
same "stopped and extended: epoch train losses as uninterrupted" "$(epochs "$(m a)")" "$(epochs "$(m c)")"
same "stopped and extended: the step records as uninterrupted" "$(steps "$(m a)" | grep -v '"step": 7,')" \
    "$(steps "$(m c)" | grep -v '"step": 7,')"

# 3'. A cosine schedule over a run stopped at 7 steps follows the extended length, saying so.
run d d1.log trainer.max_steps=7 scheduler.name=cosine
run d d2.log trainer.max_steps=16 scheduler.name=cosine
run e e.log trainer.max_steps=16 scheduler.name=cosine
lr_at() { grep -h "^{\"step\": $2," "$(m "$1")" | tail -1 | sed 's/.*"lr": \([^,]*\),.*/\1/'; }
if grep -q "warning: the run's length changes from 7 to 16 steps (trainer.max_steps or max_epochs), and the learning-rate schedule follows it: step 8 runs at lr" "$t/d2.log" &&
    [ -n "$(lr_at e 9)" ] && [ "$(lr_at d 9)" = "$(lr_at e 9)" ] && [ "$(lr_at d 15)" = "$(lr_at e 15)" ]; then
    ok "cosine, 7 steps extended to 16: a warning names both lengths; lr then as a 16-step run's ($(lr_at d 9) at step 9)"
else bad "cosine, 7 steps extended to 16: a warning names both lengths; lr then as a 16-step run's" "$(grep -h "warning\|error" "$t/d2.log")" \
    "lr at 9: $(lr_at d 9) vs $(lr_at e 9)"; fi

# A checkpoint whose loop figures are malformed is refused, naming the key; nothing written.
sed -i 's/"epoch_steps": [0-9]*/"epoch_steps": -1/' "$t/e/r/0/checkpoints/step-00000016/state.json"
cp "$(m e)" "$t/e.before"
run e e2.log trainer.max_steps=18 scheduler.name=cosine
if [ "$rc" != 0 ] && grep -q "checkpoint refused: .*step-00000016/state.json: loop.epoch_steps must be a non-negative integer" "$t/e2.log" &&
    cmp -s "$t/e.before" "$(m e)"; then ok "malformed loop figures in state.json are refused, naming the key; metrics.jsonl untouched"
else bad "malformed loop figures in state.json are refused, naming the key; metrics.jsonl untouched" "exit $rc" "$(tail -2 "$t/e2.log")"; fi

# 2. max_steps 0 trains nothing: refused, naming the no-limit value and `trainer eval`.
run z z.log trainer.max_steps=0
if [ "$rc" != 0 ] && grep -q "trainer.max_steps: 0 would train nothing; use -1 for no limit" "$t/z.log" &&
    grep -q "trainer eval" "$t/z.log" && [ ! -e "$t/z" ]; then ok "max_steps 0 is refused before anything is written"
else bad "max_steps 0 is refused before anything is written" "exit $rc" "$(tail -2 "$t/z.log")"; fi

# 4. Epochs from 1, as the log says them; no tokens for an MLP.
if grep -q '^{"step": 3, "epoch": 1, "loss"' "$(m a)" && grep -q '^{"step": 18, "epoch": 2, "loss"' "$(m a)" &&
    grep -q '^{"step": 10, "epoch": 1, "val_loss"' "$(m a)" && grep -q '^{"epoch": 2, "step": 20, "train_loss"' "$(m a)" &&
    grep -q '^epoch 2/2 done' "$t/a.log" && grep -q '^epoch 1  step 3/20' "$t/a.log"; then ok "epochs count from 1 in metrics.jsonl and the log"
else bad "epochs count from 1 in metrics.jsonl and the log" "$(head -4 "$(m a)")"; fi
if ! grep -q tokens "$(m a)" "$t/a.log"; then ok "no tokens_per_sec for a model without tokens"
else bad "no tokens_per_sec for a model without tokens" "$(grep -m1 tokens "$(m a)")"; fi

transformer_device_yaml "$t/lm.yaml" "$t/lm" auto lm
timeout 60 "$bin" run "$t/lm.yaml" trainer.max_steps=2 >"$t/lm.log" 2>&1
if grep -q "tokens/s" "$t/lm.log" && grep '"step": 2, ' "$t"/lm/l/0/metrics.jsonl |
    awk -F'"samples_per_sec": |, "tokens_per_sec": |}' '{d = $3 - 8 * $2; exit !(NF >= 3 && $2 > 0 && d < 1 && d > -1)}'; then
    ok "a language model (8 tokens a sample) logs tokens_per_sec = 8 x samples_per_sec"
else bad "a language model (8 tokens a sample) logs tokens_per_sec = 8 x samples_per_sec" "$(tail -2 "$t"/lm/l/0/metrics.jsonl)"; fi

# Throughput: the same steps with a validation pass after each (8192 samples, a few times a
# step's work) and without; counted in, validation would cut the logged samples/s several-fold.
cat >"$t/v.yaml" <<'YAML'
run: {name: v, seed: 1}
model: {name: mlp, params: {layers: [256]}}
data: {name: synthetic, params: {samples: 8192, val_samples: 8192, features: 64, classes: 4}, batch_size: 256}
trainer: {max_steps: 24, log_every: 4, val_every_n_epochs: 0, progress: lines, threads: 1}
YAML
rate() { # median samples/s of the windows after the first
    timeout 120 "$bin" run "$t/v.yaml" "run.output_dir=$t/$1" "${@:2}" >"$t/$1.log" 2>&1 || { echo 0; return; }
    grep '"samples_per_sec"' "$t/$1/v/0/metrics.jsonl" | tail -n +2 | sed 's/.*"samples_per_sec": \([0-9.]*\).*/\1/' |
        sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)] + 0}'
}
with="$(rate val trainer.val_every_n_steps=1)"
without="$(rate noval)"
if awk -v a="$with" -v b="$without" 'BEGIN {exit !(a > 0 && b > 0 && a * 3 > b)}'; then
    ok "samples/s leaves validation out: $with with a validation every step, $without without"
else bad "samples/s leaves validation out" "$with samples/s with a validation every step, $without without"; fi

# A second trainer on the folder of a run in progress refuses, naming its pid; once that run
# is killed, its lock is taken over.
cat >"$t/l.yaml" <<'YAML'
run: {name: l, seed: 1}
model: {name: mlp, params: {layers: [8]}}
data: {name: synthetic, params: {samples: 64, val_samples: 16, features: 4, classes: 2}, batch_size: 8}
trainer: {max_epochs: 1000000, max_steps: 10000000, log_every: 1000, progress: lines, threads: 1}
checkpoint: {every_n_steps: 1, keep_last: 1}
YAML
"$bin" run "$t/l.yaml" "run.output_dir=$t/l" >"$t/l1.log" 2>&1 &
bg=$!
for _ in $(seq 200); do ls -d "$t"/l/l/0/checkpoints/step-* >/dev/null 2>&1 && break; sleep 0.1; done
timeout 60 "$bin" run "$t/l.yaml" "run.output_dir=$t/l" >"$t/l2.log" 2>&1
rc=$?
if [ "$rc" != 0 ] && grep -q "$t/l/l/0 is in use by another trainer (pid $bg), which holds $t/l/l/0/run.lock" "$t/l2.log"; then
    ok "a second trainer on a run folder in use refuses, naming the first's pid"
else bad "a second trainer on a run folder in use refuses, naming the first's pid" "exit $rc" "$(tail -2 "$t/l2.log")"; fi
kill -9 "$bg" 2>/dev/null; wait "$bg" 2>/dev/null; bg=""
step="$(ls -d "$t"/l/l/0/checkpoints/step-* | grep -v '\.tmp' | tail -1 | sed 's/.*step-0*//')"
timeout 60 "$bin" run "$t/l.yaml" "run.output_dir=$t/l" "trainer.max_steps=$((step + 2))" >"$t/l3.log" 2>&1
rc=$?
if [ "$rc" = 0 ] && grep -q "resuming from .*step-0*$step " "$t/l3.log" && [ ! -e "$t/l/l/0/run.lock" ]; then
    ok "a killed run's lock is taken over (resumed from step $step); a finished run leaves none"
else bad "a killed run's lock is taken over; a finished run leaves none" "exit $rc" "$(tail -2 "$t/l3.log")" "$(ls "$t/l/l/0")"; fi

# The ranks of one ddp job share the folder (rank 0 holds the lock), resuming too.
timeout 120 "$bin" run "$t/l.yaml" "run.output_dir=$t/p" trainer.strategy=ddp trainer.devices=2 trainer.max_steps=3 >"$t/p1.log" 2>&1
rc1=$?
timeout 120 "$bin" run "$t/l.yaml" "run.output_dir=$t/p" trainer.strategy=ddp trainer.devices=2 trainer.max_steps=6 >"$t/p2.log" 2>&1
rc2=$?
if [ "$rc1" = 0 ] && [ "$rc2" = 0 ] && grep -q "resuming from .*step-00000003" "$t/p2.log"; then ok "ddp x2: the ranks of one job do not lock each other out"
else bad "ddp x2: the ranks of one job do not lock each other out" "exit $rc1, $rc2" "$(tail -2 "$t/p1.log" "$t/p2.log")"; fi
finish
