#!/usr/bin/env bash
# dataparallel inference: `trainer predict` and `trainer eval` with 1, 2, 3 and 4 replicas give
# the same outputs, in the same order, as with `cpu` (one replica), for a classifier and a
# transformer LM whose validation sets end in a batch that does not divide by the replicas.
# A checkpoint trained with dataparallel resumes under cpu (same files).
# usage: dataparallel_predict.sh TRAINER_BIN PYTHON
set -u
bin="$1"; py="$2"
t="$(mktemp -d /tmp/trainer-dpp-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
cat >"$t/mlp.yaml" <<YAML
run: {name: mlp, seed: 3}
model: {name: mlp, params: {layers: [64, 32], dropout: 0.1}}
data: {name: synthetic, params: {samples: 600, val_samples: 203, features: 16, classes: 5, noise: 1.5}, batch_size: 50}
optimizer: {name: adamw, lr: 0.003}
trainer: {max_steps: 30, log_every: 10, progress: lines, threads: 1}
YAML
cat >"$t/lm.yaml" <<YAML
run: {name: lm, seed: 5}
model: {name: transformer, params: {mode: lm, d_model: 32, n_head: 2, n_layer: 2}}
data: {name: synthetic, params: {task: lm, samples: 300, val_samples: 37, seq_len: 16, vocab: 24}, batch_size: 16}
optimizer: {name: adamw, lr: 0.002}
trainer: {max_steps: 20, log_every: 10, progress: lines, threads: 1}
YAML
same_csv() { # same_csv A B: same rows, same order; numbers equal to 1e-5
    "$py" - "$1" "$2" <<'PY'
import sys
a = [l.rstrip("\n").split(",") for l in open(sys.argv[1])]
b = [l.rstrip("\n").split(",") for l in open(sys.argv[2])]
if len(a) != len(b) or a[0] != b[0]:
    print(f"{len(a)} vs {len(b)} lines"); sys.exit(1)
worst = 0.0
for x, y in zip(a[1:], b[1:]):
    if x[0] != y[0] or len(x) != len(y):
        print("row order differs:", x[0], y[0]); sys.exit(1)
    for u, v in zip(x[1:], y[1:]):
        worst = max(worst, abs(float(u) - float(v)) / max(1.0, abs(float(u))))
print(f"{len(a) - 1} rows, worst difference {worst:.1e}")
sys.exit(0 if worst <= 1e-5 else 1)
PY
}
for m in mlp lm; do
    "$bin" run "$t/$m.yaml" "run.output_dir=$t/runs" trainer.strategy=dataparallel trainer.devices=2 >"$t/$m.train.log" 2>&1 ||
        { bad "$m: dataparallel training" "$(tail -3 "$t/$m.train.log")"; continue; }
    ck="$t/runs/$m/0"
    # Memory is reported; the primary holds its own replica, the optimizer state and the
    # gathered outputs, the other replica's parameters, gradients and activations are its own.
    if r="$("$py" - "$ck/metrics.jsonl" <<'PY'
import json, sys
m = [r["memory"] for r in map(json.loads, open(sys.argv[1])) if "memory" in r][-1]
primary = m["params"] + m["grads"] + m["optimizer"] + m["activations"] + m["other"]
rest = m["all_devices"] - primary
print(f"primary {primary} bytes, the other replica {rest} bytes")
sys.exit(0 if m["activations"] > 0 and rest >= m["params"] + m["grads"] + 1 else 1)
PY
)"; then ok "$m memory reported: $r"; else bad "$m memory record" "$r"; fi
    "$bin" predict "$t/$m.yaml" --checkpoint "$ck" --output "$t/$m.cpu.csv" trainer.strategy=cpu >"$t/$m.p1.log" 2>&1 ||
        { bad "$m: predict with cpu" "$(tail -3 "$t/$m.p1.log")"; continue; }
    e1="$("$bin" eval "$t/$m.yaml" --checkpoint "$ck" trainer.strategy=cpu 2>&1 | grep -o 'loss [0-9.]*.*')"
    for w in 1 2 3 4; do
        if ! "$bin" predict "$t/$m.yaml" --checkpoint "$ck" --output "$t/$m.$w.csv" trainer.strategy=dataparallel trainer.devices=$w \
             >"$t/$m.p$w.log" 2>&1; then bad "$m: predict with dataparallel x$w" "$(tail -3 "$t/$m.p$w.log")"; continue; fi
        if r="$(same_csv "$t/$m.cpu.csv" "$t/$m.$w.csv")"; then ok "$m predict, dataparallel x$w = cpu: $r"
        else bad "$m predict, dataparallel x$w vs cpu" "$r"; fi
        e2="$("$bin" eval "$t/$m.yaml" --checkpoint "$ck" trainer.strategy=dataparallel trainer.devices=$w 2>&1 | grep -o 'loss [0-9.]*.*')"
        if [ -n "$e1" ] && [ "$e1" = "$e2" ]; then ok "$m eval, dataparallel x$w = cpu: $e2"; else bad "$m eval x$w" "cpu: $e1" "dataparallel: $e2"; fi
    done
done
# The dataparallel checkpoint continues under cpu (one more epoch's worth of steps).
out="$("$bin" run "$t/mlp.yaml" "run.output_dir=$t/runs" trainer.strategy=cpu trainer.max_steps=40 2>&1)"
if grep -q "resuming from .*step-00000030" <<<"$out" && grep -q "done: 40 steps" <<<"$out"; then ok "dataparallel checkpoint resumed under cpu"
else bad "dataparallel -> cpu resume" "$(tail -3 <<<"$out")"; fi
finish
