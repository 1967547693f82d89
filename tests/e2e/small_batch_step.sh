#!/usr/bin/env bash
# The cpu strategy's small-batch step, where backward leaves the linear layers' weight
# gradients unwritten and the optimizer recomputes them tile by tile inside the update
# (autograd/node.h: deferred parameter gradients; tr_optim_step_tn, fused with Adam on AVX-512
# builds), ends with the same
# bits as the same run under ddp with one rank, which stores every gradient: weights,
# the loss at every step and validation metrics equal exactly (tolerance 0). For an MLP at
# batch 8 with AdamW and with SGD with momentum, and a CNN at batch 8 (its fully connected
# layers take a reshaped input); with gradient accumulation too (its steps defer nothing but
# the epoch's odd last batch, a step of its own). With clipping
# (the coefficient enters each tile) the norm of a deferred gradient comes from the Gram
# matrices of dy and x, exact for the real product, where ddp sums the squares of the stored
# float values: the coefficients can round apart in the last bit, so those runs agree to 1e-6
# (they often agree exactly).
# usage: small_batch_step.sh TRAINER_BIN PYTHON
set -u
bin="$1"; py="$2"
t="$(mktemp -d /tmp/trainer-small-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
export TRAINER_COMM_TIMEOUT=120
cat >"$t/mlp.yaml" <<YAML
run: {name: m, seed: 3}
model: {name: mlp, params: {layers: [300, 70], dropout: 0.1}}
data: {name: synthetic, params: {samples: 500, val_samples: 61, features: 120, classes: 5, noise: 1.5}, batch_size: 8}
optimizer: {name: adamw, lr: 0.003}
scheduler: {name: cosine, warmup_steps: 5}
trainer: {max_steps: 40, log_every: 1, progress: lines, threads: 1}
YAML
cat >"$t/cnn.yaml" <<YAML
run: {name: m, seed: 7}
model: {name: cnn, params: {channels: [4, 8], fc: [32, 16], dropout: 0.25}}
data: {name: synthetic, params: {samples: 300, val_samples: 61, shape: [1, 12, 12], classes: 4, noise: 2.0}, batch_size: 8}
optimizer: {name: adamw, lr: 0.003}
trainer: {max_steps: 30, log_every: 1, progress: lines, threads: 1}
YAML
same() { # same NAME TOL CONFIG [overrides...]: cpu and ddp x1 end alike (relative, TOL 0: bit for bit)
    local name="$1" tol="$2" cfg="$3"; shift 3
    if ! timeout 300 "$bin" run "$cfg" "run.output_dir=$t/cpu" trainer.strategy=cpu "$@" >"$t/cpu.log" 2>&1; then
        bad "$name: cpu run" "$(tail -3 "$t/cpu.log")"; return
    fi
    if ! timeout 300 "$bin" run "$cfg" "run.output_dir=$t/ddp" trainer.strategy=ddp trainer.devices=1 "$@" >"$t/ddp.log" 2>&1; then
        bad "$name: ddp x1 run" "$(tail -3 "$t/ddp.log")"; return
    fi
    if out="$(cmp_runs "$t/cpu/m/0" "$t/ddp/m/0" --tol "$tol")"; then ok "$name: $out"
    else bad "$name" "$out"; fi
    rm -rf "$t/cpu" "$t/ddp"
}
same "mlp, batch 8" 0 "$t/mlp.yaml"
same "mlp, batch 16, 2 threads" 0 "$t/mlp.yaml" data.batch_size=16 trainer.threads=2
same "mlp, batch 8, sgd with momentum" 0 "$t/mlp.yaml" optimizer.name=sgd optimizer.lr=0.05 optimizer.momentum=0.9
same "mlp, batch 8 as 2 micro-batches (accumulated; the epoch's odd last batch alone defers)" 0 "$t/mlp.yaml" trainer.grad_accum=2
same "cnn, batch 8" 0 "$t/cnn.yaml"
same "mlp, batch 8, clipped to 0.3" 1e-6 "$t/mlp.yaml" trainer.grad_clip=0.3
same "mlp, batch 16, clipped to 0.3, 2 threads" 1e-6 "$t/mlp.yaml" data.batch_size=16 trainer.grad_clip=0.3 trainer.threads=2
finish
