#!/usr/bin/env bash
# Trains a config end to end and asserts its final validation accuracy and run directory.
# usage: run_accuracy.sh TRAINER_BIN CONFIG MIN_ACCURACY_PERCENT [FILE_THAT_MUST_EXIST [OVERRIDE...]]
# Skips (77) when the optional data file is missing. Removes its run directory.
set -u
bin="$1"; cfg="$2"; min="$3"; need="${4:-}"
shift $(( $# < 4 ? $# : 4 ))
if [ -n "$need" ] && [ ! -e "$need" ]; then echo "SKIP: $need not found"; exit 77; fi
out="$(mktemp -d /tmp/trainer-e2e-XXXXXX)"
trap 'rm -rf "$out"' EXIT
log="$("$bin" run "$cfg" "run.output_dir=$out" "$@" 2>&1)"; rc=$?
echo "$log" | tail -4
[ "$rc" = 0 ] || { echo "FAIL: trainer run exited $rc"; exit 1; }
acc="$(sed -n 's/.*final validation accuracy: \([0-9.]*\)%.*/\1/p' <<<"$log")"
[ -n "$acc" ] || { echo "FAIL: no final accuracy printed"; exit 1; }
dir="$(ls -d "$out"/*/0 2>/dev/null | head -1)"
fails=0
for f in config.yaml metrics.jsonl log.txt; do
    [ -s "$dir/$f" ] || { echo "FAIL: run directory lacks $f"; fails=1; }
done
grep -q '"val_accuracy"' "$dir/metrics.jsonl" 2>/dev/null || { echo "FAIL: metrics.jsonl has no epoch record"; fails=1; }
# The resolved config re-runs: it parses and names the same model.
grep -q '^model:' "$dir/config.yaml" || { echo "FAIL: resolved config lacks model"; fails=1; }
if awk -v a="$acc" -v m="$min" 'BEGIN { exit !(a + 0 >= m + 0) }'; then
    echo "accuracy $acc% >= $min%"
else
    echo "FAIL: accuracy $acc% below $min%"; fails=1
fi
[ "$fails" = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit "$fails"
