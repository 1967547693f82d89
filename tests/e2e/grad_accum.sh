#!/usr/bin/env bash
# Gradient accumulation is exact: batch 128, batch 64 x 2 micro-batches and batch 32 x 4 train
# the same model (same data order, losses normalised by the whole group) to the same
# validation loss within float-summation noise.
# usage: grad_accum.sh TRAINER_BIN CONFIG
set -u
bin="$1"; cfg="$2"
out="$(mktemp -d /tmp/trainer-accum-XXXXXX)"
trap 'rm -rf "$out"' EXIT
losses=()
for a in "128 1" "64 2" "32 4"; do
    set -- $a
    l="$("$bin" run "$cfg" "run.output_dir=$out" checkpoint.resume=never trainer.max_epochs=2 \
          "data.batch_size=$1" "trainer.grad_accum=$2" 2>&1 | sed -n 's/.*epoch 2\/2 done:.*val loss \([0-9.]*\).*/\1/p')"
    [ -n "$l" ] || { echo "FAIL: batch $1 x $2 did not finish"; exit 1; }
    echo "batch $1 x accum $2: val loss $l"
    losses+=("$l")
done
if awk -v a="${losses[0]}" -v b="${losses[1]}" -v c="${losses[2]}" \
    'function d(x, y) { return (x > y ? x - y : y - x) / y } BEGIN { exit !(d(b, a) < 1e-3 && d(c, a) < 1e-3) }'; then
    echo "1 passed, 0 failed"
else
    echo "FAIL: validation losses differ"; echo "0 passed, 1 failed"; exit 1
fi
