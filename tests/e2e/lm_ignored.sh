#!/usr/bin/env bash
# Targets -100 (ignored by the loss, as Hugging Face's labels at padding) are left out of what
# eval and predict report for a language model: a transformer LM scored on samples of 16
# tokens whose targets from position 8 on are -100 (tests/plugins/masked_lm.c) gives the loss,
# accuracy and perplexity of the same samples cut to their first 8 tokens, which a causal model
# scores alike; so do predict's rows (mean loss and accuracy per sample). Counting the ignored
# targets would halve the loss and the accuracy.
# usage: lm_ignored.sh TRAINER_BIN TEST_PLUGIN_DIR PYTHON
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; plugins="$(cd "$2" && pwd)/masked_lm"; py="$3"
t="$(mktemp -d /tmp/trainer-lmign-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
cd "$t" || exit 1
cat >lm.yaml <<YAML
run: {name: lm, seed: 4, output_dir: runs}
model: {name: transformer, params: {mode: lm, d_model: 16, n_head: 2, n_layer: 1, max_seq: 16}}
data: {name: masked_lm, params: {seq_len: 16, vocab: 16}, batch_size: 16}
optimizer: {name: adamw, lr: 0.01}
trainer: {max_steps: 30, log_every: 10, progress: lines, threads: 1}
plugins: [$plugins]
YAML
if ! o="$("$bin" run lm.yaml 2>&1)"; then bad "training" "$(tail -3 <<<"$o")"; finish; exit; fi
ck=runs/lm/0
last_eval() { "$py" -c 'import json,sys; r=[json.loads(l)["eval"] for l in open(sys.argv[1]) if l.startswith("{\"eval\"")][-1]; print(r["val_loss"], r["val_accuracy"], r["val_perplexity"], r["samples"])' "$ck/metrics.jsonl"; }
"$bin" eval lm.yaml --checkpoint $ck data.params.mask_from=8 >masked.log 2>&1 || bad "eval, masked" "$(tail -3 masked.log)"
read -r lm am pm nm <<<"$(last_eval)"
"$bin" eval lm.yaml --checkpoint $ck data.params.seq_len=8 >cut.log 2>&1 || bad "eval, cut" "$(tail -3 cut.log)"
read -r lc ac pc nc <<<"$(last_eval)"
if "$py" - "$lm" "$lc" "$am" "$ac" "$pm" "$pc" <<'PY'
import sys
v = [float(x) for x in sys.argv[1:]]
sys.exit(0 if all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(v[0::2], v[1::2])) and v[2] > 0.1 else 1)
PY
then ok "eval, 8 of 16 targets ignored = eval of the first 8 tokens: loss $lm ($lc), accuracy $am ($ac), perplexity $pm, $nm samples"
else bad "eval with ignored targets" "masked: loss $lm accuracy $am perplexity $pm" "cut:    loss $lc accuracy $ac perplexity $pc"; fi
"$bin" predict lm.yaml --checkpoint $ck --output masked.csv data.params.mask_from=8 >/dev/null 2>&1 &&
    "$bin" predict lm.yaml --checkpoint $ck --output cut.csv data.params.seq_len=8 >/dev/null 2>&1 ||
    bad "predict" "$(tail -3 masked.log)"
if r="$("$py" - masked.csv cut.csv "$lm" <<'PY'
import csv, sys
a = list(csv.DictReader(open(sys.argv[1])))
b = list(csv.DictReader(open(sys.argv[2])))
worst = max(abs(float(x[k]) - float(y[k])) for x, y in zip(a, b) for k in ("loss", "accuracy"))
mean = sum(float(x["loss"]) for x in a) / len(a)
print(f"{len(a)} rows, worst difference {worst:.1e}, mean loss {mean:.6f}")
sys.exit(0 if len(a) == len(b) == 37 and worst <= 1e-5 and abs(mean - float(sys.argv[3])) <= 1e-5 else 1)
PY
)"; then ok "predict's rows, ignored targets left out: $r"; else bad "predict's rows with ignored targets" "$r"; fi
finish
