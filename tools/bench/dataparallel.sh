#!/usr/bin/env bash
# dataparallel on this host, one run: training samples/s of `cpu` (1 process, 1 thread),
# `ddp` (2 ranks x 1 thread) and `dataparallel` (2 replicas x 1 thread) for the MLP, FashionCNN
# and transformer workloads of tools/bench/configs/ (steady state: the median of the logged
# windows after the first), runs interleaved, median of REPS; then inference (`trainer eval`
# over 16,384 (MLP) or 4,096 validation samples) with 1 replica on all cores (`cpu`), 1 replica on 1 thread
# and 2 replicas on 1 thread each, for a sweep of batch sizes.
# usage: tools/bench/dataparallel.sh [BUILD_DIR] [REPS]      (prints markdown tables)
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$root/build}/bin/trainer"
reps="${2:-3}"
out="$(mktemp -d /tmp/trainer-bench-XXXXXX)"
trap 'rm -rf "$out"' EXIT
. "$root/tools/bench/lib.sh"
run() { "$bin" run "$cfg" "run.output_dir=$out" data.workers=0 "$@" 2>&1 | sps; }
echo "| workload | cpu 1 thread | ddp 2x1 | dataparallel 2x1 | dataparallel / ddp | dataparallel efficiency |"
echo "|---|---|---|---|---|---|"
for m in mlp cnn transformer; do
    cfg="$root/tools/bench/configs/ddp_$m.yaml"
    A=""; B=""; C=""
    for r in $(seq "$reps"); do
        A="$A $(run trainer.strategy=cpu trainer.threads=1)"
        B="$B $(run trainer.strategy=ddp trainer.devices=2)"
        C="$C $(run trainer.strategy=dataparallel trainer.devices=2)"
    done
    a="$(median <<<"$A")"; b="$(median <<<"$B")"; c="$(median <<<"$C")"
    awk -v m="$m" -v a="$a" -v b="$b" -v c="$c" 'BEGIN {
        printf "| %s | %.0f | %.0f | %.0f | %.2f | %.0f%% |\n", m, a, b, c, c / b, 100 * c / (2 * a) }'
done
echo
# Inference: a trained checkpoint, then eval with each batch size.
for m in mlp cnn transformer; do
    cfg="$root/tools/bench/configs/ddp_$m.yaml"
    nv=4096; [ "$m" = mlp ] && nv=16384
    "$bin" run "$cfg" "run.output_dir=$out/inf_$m" trainer.max_steps=2 data.params.val_samples=$nv >/dev/null 2>&1
    ck="$(ls -d "$out/inf_$m"/*/0)"
    echo
    echo "| $m inference, batch | cpu (1 replica, all cores) | dataparallel 1x1 | dataparallel 2x1 | 2 replicas / best single |"
    echo "|---|---|---|---|---|"
    for bs in 1 8 32 128 512; do
        X=""; Y=""; Z=""
        for r in $(seq "$reps"); do
            ev() { "$bin" eval "$cfg" --checkpoint "$ck" data.params.val_samples=$nv data.batch_size=$bs data.workers=0 "$@" 2>&1 | isps; }
            X="$X $(ev trainer.strategy=cpu)"
            Y="$Y $(ev trainer.strategy=dataparallel trainer.devices=1 trainer.threads=1)"
            Z="$Z $(ev trainer.strategy=dataparallel trainer.devices=2)"
        done
        x="$(median <<<"$X")"; y="$(median <<<"$Y")"; z="$(median <<<"$Z")"
        awk -v b="$bs" -v x="$x" -v y="$y" -v z="$z" 'BEGIN {
            s = x > y ? x : y; printf "| %d | %.0f | %.0f | %.0f | %.2f |\n", b, x, y, z, z / s }'
    done
done
