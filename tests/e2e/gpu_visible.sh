#!/usr/bin/env bash
# On a machine with a GPU (label gpu; skipped with code 77 elsewhere): the cuda device plugin
# sees it, and CUDA_VISIBLE_DEVICES="" hides it, so that auto selects the CPU and says why.
# usage: gpu_visible.sh TRAINER_BIN
set -u
bin="$1"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
t="$(mktemp -d /tmp/trainer-gpuvis-XXXXXX)"
trap 'rm -rf "$t"' EXIT
out="$("$bin" devices 2>&1)"
if ! grep -Eq "^gpu +1 .*\(device plugin cuda, id 0;" <<<"$out"; then
    echo "skipped: the cuda device plugin sees no GPU here: $(grep 'device plugin cuda' <<<"$out")"
    exit 77
fi
cat >"$t/mlp.yaml" <<YAML
run: {name: m, seed: 3, output_dir: $t/runs}
model: {name: mlp, params: {layers: [32]}}
data: {name: synthetic, params: {samples: 256, val_samples: 64, features: 16, classes: 4}, batch_size: 32}
optimizer: {name: adamw, lr: 0.01}
trainer: {max_steps: 4, threads: 1, gpu_backend: cuda}
YAML
n="$(grep -cE '^gpu +1 .*\(device plugin cuda, id' <<<"$out")"
ok "devices: the cuda plugin sees $n GPU(s)"
out="$(CUDA_VISIBLE_DEVICES= "$bin" plan "$t/mlp.yaml" 2>&1)"
if grep -q "strategy cpu (auto: found no GPU (cuda: no GPU visible: CUDA_VISIBLE_DEVICES='' hides every device)" <<<"$out"; then
    ok "plan with CUDA_VISIBLE_DEVICES='': auto selects cpu and says why"
else bad "plan with CUDA_VISIBLE_DEVICES=''" "$out"; fi
out="$("$bin" plan "$t/mlp.yaml" 2>&1)"
if grep -Eq "strategy [a-z-]+ \(auto: .*$n GPU" <<<"$out"; then ok "plan without it: auto counts the $n GPU(s)"
else bad "plan with the GPUs visible" "$out"; fi
finish
