#!/usr/bin/env bash
# Query/passage scoring with an embedding model (configs/text_pairs.yaml on
# tools/data/license_pairs.sh): training brings the validation loss (squared error of the
# cosine score) far below 0.25, the best a constant score can do on these half-related pairs;
# `trainer predict` writes index,score,similarity per pair, related pairs score far higher than
# unrelated ones, and dataparallel with 3 replicas writes the same scores in the same order and
# trains with cpu's dropout masks (each text keyed as its own row: the same losses).
# usage: text_pairs.sh TRAINER_BIN SOURCE_DIR PYTHON MAX_VAL_LOSS
# Skips (77) when /usr/share/common-licenses lacks the texts.
set -u
bin="$1"; src="$2"; py="$3"; max="$4"
[ -r /usr/share/common-licenses/GPL-3 ] || { echo "SKIP: /usr/share/common-licenses not found"; exit 77; }
t="$(mktemp -d /tmp/trainer-pairs-XXXXXX)"
trap 'rm -rf "$t"' EXIT
"$src/tools/data/license_pairs.sh" "$t/pairs.tsv" || exit 1
cfg="$src/configs/text_pairs.yaml"
set -- "data.params.path=$t/pairs.tsv" "run.output_dir=$t/runs"
out="$("$bin" run "$cfg" "$@" trainer.progress=lines 2>&1)" || { echo "FAIL: training"; tail -5 <<<"$out"; exit 1; }
vl="$(grep -o 'val loss [0-9.]*' <<<"$out" | tail -1 | cut -d' ' -f3)"
fail=0
if awk -v v="$vl" -v m="$max" 'BEGIN { exit !(v < m) }'; then echo "ok   validation loss $vl < $max (a constant score: 0.25)"
else echo "FAIL validation loss $vl, bound $max"; fail=1; fi
ck="$t/runs/text_pairs/0"
"$bin" predict "$cfg" "$@" --checkpoint "$ck" --output "$t/one.csv" trainer.strategy=cpu >/dev/null 2>&1 || { echo "FAIL: predict"; exit 1; }
"$bin" predict "$cfg" "$@" --checkpoint "$ck" --output "$t/dp.csv" trainer.strategy=dataparallel trainer.devices=3 >/dev/null 2>&1 ||
    { echo "FAIL: predict with dataparallel"; exit 1; }
"$py" - "$t/one.csv" "$t/dp.csv" <<'PY' || fail=1
import sys
a = [l.rstrip("\n").split(",") for l in open(sys.argv[1])]
b = [l.rstrip("\n").split(",") for l in open(sys.argv[2])]
assert a[0] == ["index", "score", "similarity"], a[0]
rel = [float(r[2]) for r in a[1:] if float(r[1]) == 1]
unrel = [float(r[2]) for r in a[1:] if float(r[1]) == 0]
gap = sum(rel) / len(rel) - sum(unrel) / len(unrel)
same = len(a) == len(b) and all(x[0] == y[0] and abs(float(x[2]) - float(y[2])) <= 1e-5 for x, y in zip(a[1:], b[1:]))
print(f"{'ok  ' if gap > 0.5 else 'FAIL'} mean similarity of related pairs minus unrelated: {gap:.3f} ({len(a) - 1} pairs)")
print(f"{'ok  ' if same else 'FAIL'} dataparallel x3 scores equal one replica's, in order")
sys.exit(0 if gap > 0.5 and same else 1)
PY
# dropout (0.1) keyed per text: dataparallel x3 trains with cpu's masks (the same losses)
for s in cpu:1 dataparallel:3; do
    "$bin" run "$cfg" "data.params.path=$t/pairs.tsv" "run.output_dir=$t/inv" "run.name=${s%%:*}" "trainer.strategy=${s%%:*}" \
        "trainer.devices=${s##*:}" trainer.max_steps=4 trainer.log_every=1 data.shuffle=false >/dev/null 2>&1 ||
        { echo "FAIL: 4 steps with ${s%%:*}"; fail=1; }
done
"$py" - "$t/inv/cpu/0/metrics.jsonl" "$t/inv/dataparallel/0/metrics.jsonl" <<'PY' || fail=1
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f) if '"lr"' in l] for f in sys.argv[1:])
worst = max((abs(x - y) / abs(x) for x, y in zip(a, b)), default=1.0)
ok = len(a) == len(b) == 4 and worst <= 1e-5
print(f"{'ok  ' if ok else 'FAIL'} training with dropout: dataparallel x3 losses equal cpu's within {worst:.2g} ({a})")
sys.exit(0 if ok else 1)
PY
exit "$fail"
