#!/usr/bin/env bash
# sharded (ZeRO) against ddp on this host, one run: training samples/s at 2 ranks x 1 thread
# of `ddp` and `sharded` stages 1, 2 and 3 for the MLP, FashionCNN and transformer workloads
# of tools/bench/configs/ (steady state: the median of the logged windows after the first),
# runs interleaved, median of REPS; with each strategy's measured model-state memory per rank
# (parameters + gradients + optimizer state, from the run's metrics; in brackets the unit
# buffers stage 2 and 3 hold while a unit is gathered or its gradients are reduced).
# usage: tools/bench/sharded.sh [BUILD_DIR] [REPS]      (prints a markdown table)
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$root/build}/bin/trainer"
reps="${2:-3}"
out="$(mktemp -d /tmp/trainer-bench-XXXXXX)"
trap 'rm -rf "$out"' EXIT
. "$root/tools/bench/lib.sh"
# run NAME ARGS...: one run's samples/s; its memory record stays in $out/NAME.mem
run() {
    local name="$1"; shift
    rm -rf "$out/$name"
    "$bin" run "$cfg" "run.output_dir=$out/$name" data.workers=0 trainer.devices=2 "$@" 2>&1 | sps
    grep -h '"memory"' "$out/$name"/*/0/metrics.jsonl >"$out/$name.mem"
}
# state_mib NAME: "model state (+ unit buffers)" MiB per rank, from the run's memory record
state_mib() { sed 's/.*"params": \([0-9]*\), "grads": \([0-9]*\), "optimizer": \([0-9]*\), .*"other": \([0-9]*\).*/\1 \2 \3 \4/' "$out/$1.mem" |
              awk '{ printf "%.2f (+%.2f)", ($1 + $2 + $3) / 1048576, $4 / 1048576 }'; }
echo "| workload | ddp 2x1 | stage 1 | stage 2 | stage 3 | stage 1 / ddp | stage 2 / ddp | stage 3 / ddp | model state (+ unit buffers) MiB/rank: ddp, 1, 2, 3 |"
echo "|---|---|---|---|---|---|---|---|---|"
for m in mlp cnn transformer; do
    cfg="$root/tools/bench/configs/ddp_$m.yaml"
    D=""; S1=""; S2=""; S3=""
    for r in $(seq "$reps"); do
        D="$D $(run ddp trainer.strategy=ddp)"
        S1="$S1 $(run s1 trainer.strategy=sharded strategy.stage=1)"
        S2="$S2 $(run s2 trainer.strategy=sharded strategy.stage=2)"
        S3="$S3 $(run s3 trainer.strategy=sharded strategy.stage=3)"
    done
    d="$(median <<<"$D")"; a="$(median <<<"$S1")"; b="$(median <<<"$S2")"; c="$(median <<<"$S3")"
    mem="$(state_mib ddp), $(state_mib s1), $(state_mib s2), $(state_mib s3)"
    awk -v m="$m" -v d="$d" -v a="$a" -v b="$b" -v c="$c" -v mem="$mem" 'BEGIN {
        printf "| %s | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %s |\n", m, d, a, b, c, a / d, b / d, c / d, mem }'
done
