#!/usr/bin/env bash
# Checkpoint selection, early stopping and init_from, checked against metrics.jsonl's values
# with an independent oracle (select_oracle.py):
# - checkpoint.monitor, mode min and max, save_top_k: the checkpoints kept are the top k by
#   metrics.jsonl and the newest keep_last (keep_last never removes one of the top k);
#   checkpoints/best points at the best; eval/predict --checkpoint best (and RUN/best) score
#   that checkpoint; save_last's `last`; a killed-and-resumed or extended run keeps the same
#   top k (the best is not forgotten); sharded x2 too, and its consolidated best;
# - trainer.early_stopping stops at the step the same run's validation losses say (patience,
#   min_delta), on cpu and on ddp x2 (the same step), resumed mid-count too; the final
#   checkpoint and an {"early_stopped": true} record; exit 0; a rerun starts the next version;
# - model.init_from (a checkpoint folder, a consolidated .safetensors, RUN/best, `best`): the
#   first step's loss is the source weights' loss, the optimizer fresh (Adam's first step);
#   ignored on a resume, said so; mismatches refused naming the tensor and shapes;
# - refusals before anything is written: a typo, a metric the run does not log, no
#   validation, options without a monitor.
# usage: ckpt_select.sh TRAINER_BIN [PYTHON]
set -u
bin="$1"
py="${2:-/usr/bin/python3}"
here="$(cd "$(dirname "$0")" && pwd)"
t="$(mktemp -d /tmp/trainer-ckpt-select-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$here/lib.sh"
oracle() { PYTHONPATH="$here" "$py" "$here/select_oracle.py" "$@"; }

# 160 samples, batch 16: 10 steps an epoch. SGD at lr 2 makes the validation loss go up and
# down (its best is not the last epoch's), the accuracy too.
cat >"$t/c.yaml" <<'YAML'
run: {name: r, seed: 3}
model: {name: mlp, params: {layers: [16]}}
data: {name: synthetic, params: {samples: 160, val_samples: 64, features: 8, classes: 3}, batch_size: 16}
optimizer: {name: sgd, lr: 2.0}
trainer: {max_epochs: 8, log_every: 100, progress: lines, threads: 1}
YAML
run() { local out="$1" log="$2"; shift 2; run_config "$t/c.yaml" "$t/$out" "$t/$log" "$@"; } # run OUT LOG [overrides...]
m() { echo "$t/$1/r/${2:-0}/metrics.jsonl"; }
ck() { echo "$t/$1/r/${2:-0}/checkpoints"; }
kept() { ls "$(ck "$1" "${2:-0}")" | grep '^step-' | sed 's/step-0*//' | sort -n | tr '\n' ' ' | sed 's/ $//'; }
best_of() { readlink "$(ck "$1" "${2:-0}")/best" | sed 's/step-0*//'; }
newest() { kept "$1" "${2:-0}" | tr ' ' '\n' | tail -1; }
union() { printf '%s\n' "$@" | tr ' ' '\n' | grep . | sort -nu | tr '\n' ' ' | sed 's/ $//'; }
# check_topk NAME OUT METRIC MODE K: the top k by metrics.jsonl and the newest are kept, nothing else; best the best.
check_topk() {
    local name="$1" out="$2" o want
    o=($(oracle topk "$(m "$out")" "$3" "$4" "$5"))
    want="$(union "${o[*]:1}" "$(newest "$out")")"
    if [ "$rc" = 0 ] && [ "$(kept "$out")" = "$want" ] && [ "$(best_of "$out")" = "${o[0]}" ]; then
        ok "$name: kept $want (top $5 by $3: ${o[*]:1}, and the newest), best -> step ${o[0]}"
    else bad "$name" "exit $rc" "kept: $(kept "$out"), want $want; best: $(best_of "$out"), want ${o[0]}" "$(tail -2 "$t/$out.log")"; fi
}
val_at() { grep "^{\"step\": $2, .*\"val_loss\"" "$(m "$1")" | tail -1 | sed 's/.*"val_loss": \([^,}]*\).*/\1/'; }
acc_at() { grep "^{\"step\": $2, .*\"val_loss\"" "$(m "$1")" | tail -1 | sed 's/.*"val_accuracy": \([^,}]*\).*/\1/'; }
# The loss an eval line prints ("... loss 0.3021  accuracy 92.19%") and a metrics value at 4 decimals.
eval_loss() { sed -n 's/.* samples: loss \([0-9.]*\).*/\1/p' "$1"; }
d4() { awk -v v="$1" 'BEGIN {printf "%.4f", v}'; }

# 1. val_loss (min), top 3, keep_last 1: the three best survive however old.
run a a.log checkpoint.monitor=val_loss checkpoint.save_top_k=3 checkpoint.keep_last=1
check_topk "val_loss min, save_top_k 3, keep_last 1" a val_loss min 3
if grep -q '^  mode: min$' "$t/a/r/0/config.yaml" && grep -q '^  save_top_k: 3$' "$t/a/r/0/config.yaml"; then
    ok "the resolved config.yaml says mode min (val_loss's direction) and save_top_k 3"
else bad "the resolved config.yaml says mode min and save_top_k 3" "$(grep -A8 '^checkpoint:' "$t/a/r/0/config.yaml")"; fi
state="$(ck a)/step-00000080/state.json"
if "$py" -c 'import json,sys; s=json.load(open(sys.argv[1]))["loop"]["selection"]; sys.exit(not (s["monitor"] == "val_loss" and s["mode"] == "min" and len(s["top_k"]) == 3))' "$state"; then
    ok "the newest state.json records the top k (loop.selection: monitor, mode and 3 entries)"
else bad "state.json records the top k" "$(cat "$state")"; fi

# 2. val_accuracy (max by default), top 2, validating every 5 steps too (mid-epoch checkpoints).
run b b.log checkpoint.monitor=val_accuracy checkpoint.save_top_k=2 checkpoint.keep_last=1 trainer.val_every_n_steps=5
check_topk "val_accuracy max, save_top_k 2, validation every 5 steps" b val_accuracy max 2
bs="$(best_of b)"
st="$(ck b)/step-$(printf %08d "$bs")/state.json"
if grep -q "\"batch_in_epoch\": $((bs % 10))," "$st"; then
    ok "the best (step $bs) is a checkpoint that resumes where it was taken ($(grep -o '"batch_in_epoch": [0-9]*' "$st"))"
else bad "the best is a checkpoint that resumes where it was taken" "$(head -5 "$st")"; fi

# save_top_k -1 keeps every validation's checkpoint; a language model's val_perplexity.
run all all.log checkpoint.monitor=val_loss checkpoint.save_top_k=-1 checkpoint.keep_last=1
check_topk "save_top_k -1: every validation's" all val_loss min -1
transformer_device_yaml "$t/lm.yaml" "$t/lm" auto lm
timeout 60 "$bin" run "$t/lm.yaml" trainer.max_steps=12 trainer.val_every_n_steps=3 checkpoint.monitor=val_perplexity \
    checkpoint.save_top_k=2 checkpoint.keep_last=1 >"$t/lm.log" 2>&1; rc=$?
o=($(oracle topk "$t/lm/l/0/metrics.jsonl" val_perplexity min 2))
if [ "$rc" = 0 ] && [ "$(readlink "$t/lm/l/0/checkpoints/best")" = "step-$(printf %08d "${o[0]}")" ] &&
    [ -d "$t/lm/l/0/checkpoints/step-$(printf %08d "${o[2]}")" ]; then
    ok "a language model's val_perplexity (min): best -> step ${o[0]}, top 2 ${o[*]:1}"
else bad "a language model's val_perplexity" "exit $rc" "$(ls "$t/lm/l/0/checkpoints")" "want ${o[*]}"; fi

# 3. eval, predict and embed-style resolution of best: the checkpoint's own numbers.
timeout 60 "$bin" eval "$t/c.yaml" "run.output_dir=$t/a" --checkpoint best >"$t/eb.log" 2>&1; rc1=$?
timeout 60 "$bin" eval "$t/c.yaml" --checkpoint "$t/a/r/0/best" >"$t/eb2.log" 2>&1; rc2=$?
timeout 60 "$bin" predict "$t/c.yaml" "run.output_dir=$t/a" --checkpoint best --output "$t/p.csv" >"$t/pb.log" 2>&1; rc3=$?
ba="$(best_of a)"
if [ "$rc1$rc2$rc3" = 000 ] && [ "$(eval_loss "$t/eb.log")" = "$(d4 "$(val_at a "$ba")")" ] &&
    grep -q "step-$(printf %08d "$ba") (step $ba)" "$t/eb.log" && [ "$(eval_loss "$t/eb2.log")" = "$(eval_loss "$t/eb.log")" ] &&
    [ "$(wc -l <"$t/p.csv")" = 65 ]; then
    ok "eval --checkpoint best (and RUN/best): step $ba, loss $(eval_loss "$t/eb.log") = metrics.jsonl's $(val_at a "$ba"); predict too"
else bad "eval --checkpoint best scores the best checkpoint" "exit $rc1 $rc2 $rc3" "$(head -1 "$t/eb.log")" "$(head -1 "$t/eb2.log")" \
    "want step $ba, loss $(val_at a "$ba")"; fi
timeout 60 "$bin" eval "$t/c.yaml" "run.output_dir=$t/none" --checkpoint best >"$t/en.log" 2>&1; rc=$?
if [ "$rc" != 0 ] && grep -q "best: no version of the run $t/none/r has checkpoints/best (kept when checkpoint.monitor is set)" "$t/en.log"; then
    ok "--checkpoint best without one is refused: $(tail -1 "$t/en.log" | cut -c1-80)..."
else bad "--checkpoint best without one is refused" "exit $rc" "$(cat "$t/en.log")"; fi

# 4. save_last: `last` points at the newest checkpoint; --checkpoint last scores it.
run l l.log checkpoint.save_last=true trainer.max_epochs=3
timeout 60 "$bin" eval "$t/c.yaml" "run.output_dir=$t/l" --checkpoint last >"$t/el.log" 2>&1
if [ "$rc" = 0 ] && [ "$(readlink "$(ck l)/last")" = step-00000030 ] && grep -q "step-00000030 (step 30)" "$t/el.log" && [ ! -e "$(ck l)/best" ]; then
    ok "save_last: checkpoints/last -> step-00000030, --checkpoint last scores it; no best without a monitor"
else bad "save_last: checkpoints/last points at the newest" "$(ls -l "$(ck l)")" "$(cat "$t/el.log")"; fi

# 5. The best is not forgotten: killed at step 45 and resumed, and run 4 epochs then extended to
# 8, the top k and best are the uninterrupted run's (the killed run's are in state.json).
args=(checkpoint.monitor=val_loss checkpoint.save_top_k=3 checkpoint.keep_last=1)
TRAINER_FAULT_KILL_AT_STEP=45 run k k1.log "${args[@]}" checkpoint.every_n_steps=5
rc1=$rc
run k k2.log "${args[@]}" checkpoint.every_n_steps=5
if [ "$rc1" = 137 ] && grep -q "resuming from .*step-00000045" "$t/k2.log" && [ "$(best_of k)" = "$(best_of a)" ] &&
    [ "$(kept k)" = "$(kept a)" ]; then
    ok "killed at step 45 and resumed: the top 3 ($(kept k)) and best (step $(best_of k)) are the uninterrupted run's"
else bad "killed and resumed: the top k and best as uninterrupted" "exit $rc1 $rc" "kept $(kept k) vs $(kept a); best $(best_of k) vs $(best_of a)"; fi
check_topk "killed and resumed, against its own metrics.jsonl" k val_loss min 3
run x x1.log "${args[@]}" trainer.max_epochs=4
run x x2.log "${args[@]}"
if [ "$rc" = 0 ] && [ "$(best_of x)" = "$(best_of a)" ] && [ "$(kept x)" = "$(kept a)" ]; then
    ok "4 epochs extended to 8: the top 3 and best are the 8-epoch run's"
else bad "4 epochs extended to 8: the top 3 and best are the 8-epoch run's" "kept $(kept x) vs $(kept a); best $(best_of x) vs $(best_of a)"; fi

# 6. sharded x2: the top k of sharded checkpoints, best evaluated, and consolidated.
run s s.log checkpoint.monitor=val_loss checkpoint.save_top_k=2 checkpoint.keep_last=1 trainer.strategy=sharded trainer.devices=2
check_topk "sharded x2: val_loss min, save_top_k 2" s val_loss min 2
bs="$(best_of s)"
timeout 60 "$bin" eval "$t/c.yaml" "run.output_dir=$t/s" --checkpoint best >"$t/es.log" 2>&1
timeout 60 "$bin" checkpoint consolidate "$t/s/r/0/best" "$t/best.safetensors" >"$t/cs.log" 2>&1
timeout 60 "$bin" eval "$t/c.yaml" --checkpoint "$t/best.safetensors" >"$t/ef.log" 2>&1; rc=$?
if [ -e "$(ck s)/step-$(printf %08d "$bs")/index.json" ] && [ "$(eval_loss "$t/es.log")" = "$(d4 "$(val_at s "$bs")")" ] &&
    grep -q "(which $t/s/r/0/best points at)" "$t/cs.log" && [ "$rc" = 0 ] && grep -q "best.safetensors (weights file)" "$t/ef.log" &&
    [ "$(eval_loss "$t/ef.log")" = "$(eval_loss "$t/es.log")" ]; then
    ok "sharded best (step $bs) scores $(eval_loss "$t/es.log") = metrics.jsonl's; consolidated, the .safetensors scores the same"
else bad "sharded best evaluated and consolidated" "$(cat "$t/es.log" "$t/cs.log" "$t/ef.log")" "want $(val_at s "$bs")"; fi

timeout 60 "$bin" checkpoint consolidate "$t/best.safetensors" "$t/again.safetensors" >"$t/cs2.log" 2>&1
if cmp -s "$t/best.safetensors" "$t/again.safetensors"; then ok "checkpoint consolidate takes a weights file too (the same bytes)"
else bad "checkpoint consolidate takes a weights file too" "$(cat "$t/cs2.log")"; fi

# 7. Early stopping: at the step the 8-epoch run's own validation losses say (patience 2 and
# min_delta 0.01 on val_loss; patience 1 on val_accuracy), on cpu and ddp x2.
es() { echo "trainer.early_stopping={monitor: $1, patience: $2, min_delta: $3}"; }
last_step() { grep '"train_loss"' "$(m "$1")" | tail -1 | sed 's/.*"step": \([0-9]*\).*/\1/'; }
read -r want want_best <<<"$(oracle stop "$(m a)" val_loss min 2 0.01)"
run e e.log "$(es val_loss 2 0.01)" "trainer.loggers=[jsonl, csv]"
rec="$(grep '"early_stopped"' "$(m e)")"
if [ "$rc" = 0 ] && [ "$want" != none ] && [ "$(last_step e)" = "$want" ] && [ "$(newest e)" = "$want" ] &&
    grep -q "^{\"step\": $want, \"epoch\": $((want / 10)), \"early_stopped\": true, \"best_val_loss\": $(val_at a "$want_best"), \"best_step\": $want_best, \"patience\": 2}$" <<<"$rec" &&
    grep -q "^early stopping at step $want: val_loss has not improved on its best, .* by more than 0.01 in 2 validations (trainer.early_stopping.patience 2)" "$t/e.log" &&
    grep -q '"stopped": true' "$(ck e)/step-$(printf %08d "$want")/state.json"; then
    ok "early stopping (val_loss, patience 2, min_delta 0.01) at step $want of 80, as the validation losses say; exit 0; $rec"
else bad "early stopping at the oracle's step" "exit $rc, stopped at $(last_step e), want $want" "$rec" "$(grep -i "early\|error" "$t/e.log")"; fi
csv="$t/e/r/0/metrics.csv"
if "$py" -c 'import csv, sys; r = [x for x in csv.DictReader(open(sys.argv[1])) if x["early_stopped"]]; sys.exit(not (len(r) == 1 and r[0]["early_stopped"] == "true" and r[0]["step"] == sys.argv[2] and r[0]["best_step"] == sys.argv[3]))' "$csv" "$want" "$want_best"; then
    ok "metrics.csv has the early stop's row (early_stopped true, best_step $want_best)"
else bad "metrics.csv has the early stop's row" "$(head -1 "$csv")" "$(tail -3 "$csv")"; fi
read -r want2 _ <<<"$(oracle stop "$(m a)" val_accuracy max 1 0)"
run e2 e2.log "$(es val_accuracy 1 0)"
if [ "$rc" = 0 ] && [ "$want2" != none ] && [ "$(last_step e2)" = "$want2" ]; then ok "early stopping on val_accuracy (max), patience 1: step $want2, as the oracle"
else bad "early stopping on val_accuracy (max), patience 1" "exit $rc, stopped at $(last_step e2), want $want2"; fi
run ed ed.log "$(es val_loss 2 0.01)" trainer.strategy=ddp trainer.devices=2
if [ "$rc" = 0 ] && [ "$(last_step ed)" = "$want" ] && grep -q "\"step\": $want, .*\"early_stopped\": true" "$(m ed)"; then
    ok "ddp x2 stops at the same step ($want), every rank (exit 0)"
else bad "ddp x2 stops at the same step" "exit $rc, stopped at $(last_step ed), want $want" "$(grep -i "early\|error\|rank 1" "$t/ed.log" | head -5)"; fi
# Killed after the first validation without improvement and resumed: the count goes on.
first_miss=$((want_best + 10))
TRAINER_FAULT_KILL_AT_STEP=$((first_miss + 3)) run er er1.log "$(es val_loss 2 0.01)"
run er er2.log "$(es val_loss 2 0.01)"
if [ "$rc" = 0 ] && grep -q "resuming from" "$t/er2.log" && [ "$(last_step er)" = "$want" ]; then
    ok "killed after step $((first_miss + 3)) (one validation without improvement) and resumed: stops at $want too"
else bad "resumed mid-count: stops at the same step" "exit $rc, stopped at $(last_step er), want $want" "$(tail -3 "$t/er2.log")"; fi
run e e3.log "$(es val_loss 2 0.01)"
if [ "$rc" = 0 ] && grep -q "$t/e/r/0 is complete (trainer.early_stopping ended it at step $want); starting a new version" "$t/e3.log"; then
    ok "a rerun of an early-stopped run starts the next version"
else bad "a rerun of an early-stopped run starts the next version" "exit $rc" "$(head -2 "$t/e3.log")"; fi

# 8. init_from: the full training set in one batch, so that step 1's loss is the loss of the
# weights the run starts from over the training split, which `trainer eval --split train` gives.
fb=(data.batch_size=160 optimizer.name=adam optimizer.lr=0.01 trainer.log_every=1 run.name=r)
step1() { grep -m1 '^{"step": 1,' "$(m "$1" "${2:-0}")" | sed 's/.*"loss": \([^,]*\),.*/\1/'; }
src="$t/a/r/0/checkpoints/step-$(printf %08d "$(best_of a)")"
timeout 60 "$bin" eval "$t/c.yaml" "${fb[@]}" --checkpoint "$src" --split train >"$t/et.log" 2>&1
run f0 f0.log "${fb[@]}" trainer.max_steps=1
run f f.log "${fb[@]}" trainer.max_steps=1 "model.init_from=$src"
steps_meta() { "$py" -c 'import sys; sys.path.insert(0, sys.argv[2]); from compare_runs import read_safetensors; print(read_safetensors(sys.argv[1])[1]["steps"])' "$1" "$here"; }
if [ "$rc" = 0 ] && [ "$(d4 "$(step1 f)")" = "$(eval_loss "$t/et.log")" ] && [ "$(step1 f)" != "$(step1 f0)" ] &&
    grep -q "^model.init_from: starting from the weights of $src (step $(best_of a)); the optimizer state, step count and schedule start afresh" "$t/f.log" &&
    [ "$(steps_meta "$(ck f)/step-00000001/optimizer.safetensors")" = 1 ]; then
    ok "init_from a checkpoint: step 1's loss $(step1 f) = the source's train loss $(eval_loss "$t/et.log") (fresh: $(step1 f0)); 1 optimizer step"
else bad "init_from a checkpoint: step 1's loss is the source weights'" "exit $rc" "step 1: $(step1 f), source: $(eval_loss "$t/et.log"), fresh: $(step1 f0)" \
    "$(grep -i "init_from\|error" "$t/f.log")"; fi
if out="$(oracle adam_step "$src" "$(ck f)/step-00000001" 0.01)"; then ok "init_from: a fresh optimizer (Adam's first step): $out"
else bad "init_from: a fresh optimizer (Adam's first step)" "$out"; fi
timeout 60 "$bin" checkpoint consolidate "$src" "$t/src.safetensors" >/dev/null 2>&1
run g g.log "${fb[@]}" trainer.max_steps=1 "model.init_from=$t/src.safetensors"
run h h.log "${fb[@]}" trainer.max_steps=1 "model.init_from=$t/a/r/0/best"
if [ "$rc" = 0 ] && [ -n "$(step1 g)" ] && [ "$(step1 g)" = "$(step1 f)" ] && [ "$(step1 h)" = "$(step1 f)" ] &&
    grep -q "starting from the weights of $t/src.safetensors (a weights file)" "$t/g.log"; then
    ok "init_from a consolidated .safetensors and from RUN/best: the same step-1 loss $(step1 g)"
else bad "init_from a consolidated .safetensors and RUN/best" "steps 1: $(step1 g) $(step1 h), want $(step1 f)" "$(tail -2 "$t/g.log" "$t/h.log")"; fi
run gs gs.log "${fb[@]}" trainer.max_steps=1 "model.init_from=$t/src.safetensors" trainer.strategy=sharded trainer.devices=2
if [ "$rc" = 0 ] && [ -n "$(step1 gs)" ] && [ "$(d4 "$(step1 gs)")" = "$(d4 "$(step1 f)")" ]; then
    ok "init_from a .safetensors under sharded x2 (each rank its shard): step 1's loss $(step1 gs)"
else bad "init_from under sharded x2" "exit $rc, step 1: $(step1 gs), want $(step1 f)" "$(tail -2 "$t/gs.log")"; fi
# A relative path is from the working directory (as --checkpoint), written absolute.
(cd "$t" && timeout 60 "$bin" run "$t/c.yaml" "run.output_dir=$t/rel" "${fb[@]}" trainer.max_steps=1 model.init_from=a/r/0/best >"$t/rel.log" 2>&1)
if [ "$(step1 rel)" = "$(step1 f)" ] && grep -q "^  init_from: $t/a/r/0/best$" "$t/rel/r/0/config.yaml"; then
    ok "init_from a/r/0/best, relative to the working directory, is written absolute into config.yaml"
else bad "init_from relative to the working directory" "$(tail -2 "$t/rel.log")" "$(grep init_from "$t/rel/r/0/config.yaml")"; fi
# `best` alone: the config's own run's, here a finished monitored run; the next version starts from it.
run a ab.log "${fb[@]}" trainer.max_steps=1 model.init_from=best checkpoint.monitor=val_loss
if [ "$rc" = 0 ] && [ "$(step1 a 1)" = "$(step1 f)" ] && grep -q "starting from the weights of $src " "$t/ab.log"; then
    ok "init_from: best (the config's run, version 0's best) starts version 1 from it"
else bad "init_from: best starts the next version from the run's best" "exit $rc" "$(grep -i "init_from\|error\|->" "$t/ab.log")"; fi
# A resume ignores it, and says so.
TRAINER_FAULT_KILL_AT_STEP=3 run n n1.log "${fb[@]}" trainer.max_steps=5 "model.init_from=$src" checkpoint.every_n_steps=2
run n n2.log "${fb[@]}" trainer.max_steps=5 "model.init_from=$src" checkpoint.every_n_steps=2
if [ "$rc" = 0 ] && grep -q "^model.init_from $src ignored: the run resumes from its own checkpoint .*step-00000002" "$t/n2.log"; then
    ok "a resume ignores init_from and says so"
else bad "a resume ignores init_from and says so" "exit $rc" "$(head -4 "$t/n2.log")"; fi
# Refusals name the tensor and shapes; nothing is left behind.
oracle add_tensor "$t/src.safetensors" "$t/extra.safetensors" head.extra
refuse() { # refuse NAME PATTERN OVERRIDES...
    local name="$1" pat="$2"; shift 2
    run z z.log "$@"
    if [ "$rc" != 0 ] && grep -q -- "$pat" "$t/z.log" && [ -z "$(ls -A "$t/z" 2>/dev/null)" ]; then ok "$name: $(tail -1 "$t/z.log" | sed "s|$t/||g" | cut -c1-150)"
    else bad "$name" "exit $rc" "$(tail -2 "$t/z.log")" "$(ls -R "$t/z" 2>/dev/null | head -5)"; fi
}
refuse "init_from another shape" "command line:1:17: model.init_from: checkpoint refused: .*model.safetensors: parameter 'fc1.weight' has shape (16, 8) in the checkpoint, the model has (32, 8)" \
    "model.init_from=$src" model.params.layers=[32]
refuse "init_from a file with a tensor the model lacks" "model.init_from: checkpoint refused: $t/extra.safetensors: the checkpoint has 'head.extra' but the model does not" \
    "model.init_from=$t/extra.safetensors"
refuse "init_from a file lacking a tensor" "model.init_from: checkpoint refused: $t/src.safetensors: the model has 'fc3.weight' but the checkpoint does not" \
    "model.init_from=$t/src.safetensors" model.params.layers=[16,3]
refuse "init_from nothing there" "model.init_from: $t/missing: no checkpoint there" "model.init_from=$t/missing"
refuse "monitor typo" "checkpoint.monitor: expected val_loss, val_accuracy or val_perplexity, got 'val_los'" checkpoint.monitor=val_los
refuse "a metric the run does not log" "checkpoint.monitor: this run does not log val_perplexity (a classification model's validation logs val_loss, val_accuracy)" \
    checkpoint.monitor=val_perplexity
refuse "a monitor without validation" "trainer.early_stopping.monitor: val_loss is measured by validation, which trainer.val_every_n_epochs 0 and val_every_n_steps 0 turn off" \
    "$(es val_loss 2 0)" trainer.val_every_n_epochs=0
printf 'a,b,label\n1,2,0\n2,1,1\n3,3,0\n1,1,1\n' >"$t/d.csv"
refuse "a monitor on data without a validation split" "checkpoint.monitor: val_loss is measured on the validation split, and this run's data has none" \
    data.name=csv "data.params={path: $t/d.csv}" data.val_fraction=0 checkpoint.monitor=val_loss
refuse "save_top_k without a monitor" "checkpoint.save_top_k: keeps the best checkpoints by checkpoint.monitor, which is not set" checkpoint.save_top_k=2
refuse "save_top_k 0" "checkpoint.save_top_k: 0 would keep no checkpoint" checkpoint.monitor=val_loss checkpoint.save_top_k=0
refuse "early_stopping without a monitor" "trainer.early_stopping.monitor: required key is missing" "trainer.early_stopping={patience: 2}"
refuse "an early_stopping key misspelt" "trainer.early_stopping.patiense: unknown key (did you mean 'patience'?)" "trainer.early_stopping={monitor: val_loss, patiense: 2}"
finish
