#!/usr/bin/env bash
# The byte-level LM config trains on a text file until its validation loss is below a bound,
# then `trainer eval` reproduces that loss from the checkpoint and `trainer predict` writes one
# row per validation sample whose mean loss is the same number.
# usage: lm_loss.sh TRAINER_BIN CONFIG MAX_VAL_LOSS TEXT_FILE [OVERRIDE...]
# Skips (77) when TEXT_FILE is missing. Removes its run directory.
set -u
bin="$1"; cfg="$2"; bound="$3"; need="$4"; shift 4
if [ ! -e "$need" ]; then echo "SKIP: $need not found"; exit 77; fi
out="$(mktemp -d /tmp/trainer-lm-XXXXXX)"
trap 'rm -rf "$out"' EXIT
fails=0
log="$("$bin" run "$cfg" "run.output_dir=$out" trainer.progress=lines "$@" 2>&1)"; rc=$?
echo "$log" | tail -3
[ "$rc" = 0 ] || { echo "FAIL: trainer run exited $rc"; exit 1; }
first="$(sed -n 's/.*step 50\/.* loss \([0-9.]*\) .*/\1/p' <<<"$log" | head -1)"
vloss="$(sed -n 's/^epoch .*val loss \([0-9.]*\) .*/\1/p' <<<"$log" | tail -1)"  # the run's last validation
[ -n "$vloss" ] && [ -n "$first" ] || { echo "FAIL: no losses printed"; exit 1; }
if awk -v v="$vloss" -v b="$bound" -v f="$first" 'BEGIN { exit !(v + 0 < b + 0 && v + 0 < f + 0) }'; then
    echo "ok   validation loss $vloss < $bound nats/byte (loss at step 50: $first)"
else
    echo "FAIL: validation loss $vloss not below $bound and the step-50 loss $first"; fails=1
fi
run="$(ls -d "$out"/*/0)"
elog="$("$bin" eval "$cfg" --checkpoint "$run" "$@" 2>&1)" || { echo "FAIL: eval: $elog"; exit 1; }
eloss="$(sed -n 's/.*: loss \([0-9.]*\) .*/\1/p' <<<"$elog")"
[ "$eloss" = "$vloss" ] && echo "ok   eval reproduces the validation loss $eloss" ||
    { echo "FAIL: eval loss '$eloss' != training's final validation loss $vloss"; fails=1; }
plog="$("$bin" predict "$cfg" --checkpoint "$run" --output "$out/preds.csv" "$@" 2>&1)" || { echo "FAIL: predict: $plog"; exit 1; }
n="$(sed -n 's/.* split, \([0-9]*\) samples.*/\1/p' <<<"$plog")"
if head -1 "$out/preds.csv" | grep -qx "index,loss,accuracy,next_token" &&
   awk -F, -v n="$n" -v l="$vloss" 'NR > 1 { s += $2; c++ } END { m = s / c; d = m - l; if (d < 0) d = -d;
       printf "predict: %d rows, mean loss %.5f\n", c, m; exit !(c == n && d < 1e-3) }' "$out/preds.csv"; then
    echo "ok   predict writes $n rows whose mean loss matches"
else
    echo "FAIL: predictions.csv does not match the evaluation"; fails=1
fi
[ "$fails" = 0 ] && echo "3 passed, 0 failed" || echo "failures: $fails"
exit "$fails"
