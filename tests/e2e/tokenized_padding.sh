#!/usr/bin/env bash
# Padding is invisible to the numbers: one checkpoint of the transformer classifier, trained on
# the tokenized reviews CSV (tests/data/tokdata) with batches of one, gives the same eval loss
# and the same per-sample predictions at batch 1 (no padding), at batch 16 with padding longest
# (each batch cut to its longest sample) and with padding max_length (every batch 64 long);
# with dropout, ddp and sharded x2 give cpu's loss at every step (the same masks with padding
# longest); then the example configs/reviews_tokenized.yaml trains above chance. Needs a model that
# honours the -1 padding ids (zero embedding, masked keys, excluded from pooling): until the
# transformer does, its refusal of id -1 skips the test (77), saying so.
# usage: tokenized_padding.sh TRAINER_BIN
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$(dirname "$0")/lib.sh"
t="$(mktemp -d /tmp/trainer-tokpad-XXXXXX)"
trap 'rm -rf "$t"' EXIT
cd "$t" || exit 1
cp "$root"/tests/data/tokdata/* .
cat >c.yaml <<'YAML'
run: {name: r, seed: 1, output_dir: runs}
model: {name: transformer, params: {mode: classify, d_model: 32, n_head: 2, n_layer: 1, dropout: 0.0, max_seq: 64}}
data: {name: csv, params: {path: reviews.csv, tokenizer: tokenizer.json, max_length: 64}, batch_size: 1, val_fraction: 0.2}
trainer: {max_epochs: 1, progress: lines, threads: 1, log_every: 1000}
optimizer: {name: adamw, lr: 0.003}
YAML
out="$("$bin" run c.yaml 2>&1)" || { bad "train at batch 1" "$(tail -3 <<<"$out")"; finish; exit 1; }
pending() { # the model refuses -1 ids: not yet able to run this test
    if grep -q "embedding: id -1" <<<"$1"; then
        echo "SKIP: the model does not honour -1 padding yet ($(grep -o 'embedding: id -1[^)]*)' <<<"$1" | head -1))"
        exit 77
    fi
}
for v in b1:1:longest longest:16:longest maxlen:16:max_length; do
    IFS=: read -r name batch padding <<<"$v"
    out="$("$bin" predict c.yaml --checkpoint runs/r/0 --output "$name.csv" data.batch_size="$batch" data.params.padding="$padding" 2>&1)"
    pending "$out"
    [ -s "$name.csv" ] || bad "predict $name" "$(tail -3 <<<"$out")"
    loss="$("$bin" eval c.yaml --checkpoint runs/r/0 data.batch_size="$batch" data.params.padding="$padding" 2>&1 | sed -n 's/.*: loss \([0-9.]*\) .*/\1/p')"
    eval "loss_$name=\$loss"
done
[ -n "$loss_b1" ] && [ "$loss_b1" = "$loss_longest" ] && [ "$loss_b1" = "$loss_maxlen" ] &&
    ok "eval loss $loss_b1 at batch 1, batch 16 longest and batch 16 max_length" ||
    bad "eval losses differ: batch 1 '$loss_b1', longest '$loss_longest', max_length '$loss_maxlen'"
same() { # same A.csv B.csv: labels and predictions equal, confidence and class probabilities within 1e-4
    paste -d, "$1" "$2" | awk -F, 'NR > 1 { n = NF / 2; if ($2 != $(n + 2) || $3 != $(n + 3)) bad = 1
            for (k = 4; k <= n; k++) if ($k - $(n + k) > 1e-4 || $(n + k) - $k > 1e-4) bad = 1
            if (bad) { print "row " NR ": " $0; exit 1 } }'
}
d="$(same b1.csv longest.csv)" && ok "predictions: batch 16 longest = batch 1" || bad "predictions longest vs batch 1" "$(head -3 <<<"$d")"
d="$(same b1.csv maxlen.csv)" && ok "predictions: batch 16 max_length = batch 1" || bad "predictions max_length vs batch 1" "$(head -3 <<<"$d")"

# With dropout, ddp and sharded x2 draw cpu's masks: every rank cuts its share of a batch to
# the longest text of the whole global batch, as one process does (a mask is keyed by an
# element's index within its sample), so the loss of every step agrees (before, each rank cut
# to its own share's longest: losses 7e-2 apart). Adam's eps 1e-6: strategy_invariance.sh says why.
losses() { sed -n 's/.*"step": \([0-9]*\),.*"loss": \([-0-9.e]*\),.*/\1 \2/p' "$1"; }
for s in cpu ddp sharded; do
    out="$("$bin" run c.yaml run.name="drop_$s" trainer.strategy=$s trainer.devices=$([ $s = cpu ] && echo 1 || echo 2) \
        model.params.dropout=0.1 data.batch_size=11 data.params.padding=longest trainer.max_steps=8 \
        trainer.log_every=1 optimizer.eps=1.0e-6 2>&1)" || bad "dropout run under $s" "$(tail -3 <<<"$out")"
done
for s in ddp sharded; do
    d="$(paste -d' ' <(losses runs/drop_cpu/0/metrics.jsonl) <(losses "runs/drop_$s/0/metrics.jsonl") |
        awk 'NF == 4 { n++; e = $2 - $4; if (e < 0) e = -e; if (e > m) m = e } END { printf "%d %.3g", n, m; exit !(n == 8 && m <= 1e-5) }')" &&
        ok "dropout 0.1, padding longest: $s x2 has cpu's loss at every step (steps, max diff: $d)" ||
        bad "dropout 0.1, padding longest: $s x2 vs cpu losses (steps, max diff: $d)"
done

# the worked example
cp "$root/configs/reviews_tokenized.yaml" ex.yaml
sed -i "s|\.\./tests/data/tokdata/|$t/|g" ex.yaml
out="$("$bin" run ex.yaml trainer.progress=lines 2>&1)"
pending "$out"
acc="$(sed -n 's/.*final validation accuracy: \([0-9.]*\)%.*/\1/p' <<<"$out")"
if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 80) }'; then ok "configs/reviews_tokenized.yaml: validation accuracy $acc%"
else bad "configs/reviews_tokenized.yaml: accuracy '$acc'" "$(tail -3 <<<"$out")"; fi
finish
