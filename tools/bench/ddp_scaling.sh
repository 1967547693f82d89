#!/usr/bin/env bash
# DDP scaling on this host, trainer beside PyTorch, one after the other in one run: samples/s
# of one process with one thread (`cpu`, trainer.threads=1) and of ddp with 2 ranks of one
# thread each, for the MLP, FashionCNN and transformer workloads (tools/bench/configs/);
# scaling efficiency = ddp / (2 x single). Then the same with PyTorch (torch_ddp.py: one
# process, and DistributedDataParallel over gloo with 2 processes).
# usage: tools/bench/ddp_scaling.sh [BUILD_DIR]        (prints a markdown table)
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$root/build}/bin/trainer"
py=/usr/bin/python3
out="$(mktemp -d /tmp/trainer-bench-XXXXXX)"
trap 'rm -rf "$out"' EXIT
sps() { sed -n 's/.*done: .*(\([0-9]*\) samples\/s).*/\1/p' | tail -1; }
echo "| workload | trainer cpu 1 thread | trainer ddp 2x1 | efficiency | torch 1 thread | torch DDP-gloo 2x1 | efficiency |"
echo "|---|---|---|---|---|---|---|"
for m in mlp cnn transformer; do
    cfg="$root/tools/bench/configs/ddp_$m.yaml"
    a="$("$bin" run "$cfg" "run.output_dir=$out" trainer.strategy=cpu trainer.threads=1 2>&1 | sps)"
    b="$("$bin" run "$cfg" "run.output_dir=$out" trainer.strategy=ddp trainer.devices=2 2>&1 | sps)"
    c="$("$py" "$root/tools/bench/torch_ddp.py" "$m" single 2>&1 | sed -n 's/.*: \([0-9.]*\) samples.*/\1/p')"
    d="$("$py" "$root/tools/bench/torch_ddp.py" "$m" ddp 2>&1 | sed -n 's/.*: \([0-9.]*\) samples.*/\1/p')"
    awk -v m="$m" -v a="$a" -v b="$b" -v c="$c" -v d="$d" 'BEGIN {
        printf "| %s | %.0f | %.0f | %.0f%% | %.0f | %.0f | %.0f%% |\n", m, a, b, 100 * b / (2 * a), c, d, 100 * d / (2 * c) }'
done
