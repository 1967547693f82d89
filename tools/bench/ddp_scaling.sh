#!/usr/bin/env bash
# DDP scaling on this host, trainer beside PyTorch in one run: samples/s of one process with
# one thread (`cpu`, trainer.threads=1, loading on the training thread) and of ddp with 2
# ranks of one thread each, for the MLP, FashionCNN and transformer workloads
# (tools/bench/configs/, in-memory synthetic data); scaling efficiency = ddp / (2 x single).
# Then the same with PyTorch (torch_ddp.py: one process; DistributedDataParallel over gloo in
# 2 processes; the current PyTorch from PyPI, tools/bench/peer_venv.py). Each figure is the median of REPS runs, the runs of a workload interleaved.
# usage: tools/bench/ddp_scaling.sh [BUILD_DIR] [REPS]      (prints a markdown table)
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$root/build}/bin/trainer"
reps="${2:-3}"
out="$(mktemp -d /tmp/trainer-bench-XXXXXX)"
trap 'rm -rf "$out"' EXIT
# Steady state: the median of the logged windows' samples/s, the first window (warm-up) left out.
. "$root/tools/bench/lib.sh"
py="$(peer_py)"   # PyTorch from PyPI (TRAINER_BENCH_PEER=debian: Debian's)
tsps() { sed -n 's/.*: \([0-9.]*\) samples.*/\1/p'; }
echo "| workload | trainer cpu 1 thread | trainer ddp 2x1 | efficiency | torch 1 thread | torch DDP-gloo 2x1 | efficiency |"
echo "|---|---|---|---|---|---|---|"
for m in mlp cnn transformer; do
    cfg="$root/tools/bench/configs/ddp_$m.yaml"
    A=""; B=""; C=""; D=""
    for r in $(seq "$reps"); do
        A="$A $("$bin" run "$cfg" "run.output_dir=$out" trainer.strategy=cpu trainer.threads=1 data.workers=0 2>&1 | sps)"
        B="$B $("$bin" run "$cfg" "run.output_dir=$out" trainer.strategy=ddp trainer.devices=2 data.workers=0 2>&1 | sps)"
        C="$C $("$py" "$root/tools/bench/torch_ddp.py" "$m" single 2>&1 | tsps)"
        D="$D $("$py" "$root/tools/bench/torch_ddp.py" "$m" ddp 2>&1 | tsps)"
    done
    a="$(median <<<"$A")"; b="$(median <<<"$B")"; c="$(median <<<"$C")"; d="$(median <<<"$D")"
    awk -v m="$m" -v a="$a" -v b="$b" -v c="$c" -v d="$d" 'BEGIN {
        printf "| %s | %.0f | %.0f | %.0f%% | %.0f | %.0f | %.0f%% |\n", m, a, b, 100 * b / (2 * a), c, d, 100 * d / (2 * c) }'
done
