#!/usr/bin/env bash
# Lightning's limits, counted in metrics.jsonl against what Lightning 2.x does on the same
# data (10 training batches an epoch, 3 validation batches):
# - trainer.limit_train_batches (a count, a fraction: int(f * 10)), with grad_accum, and the
#   cosine schedule's length following it (the lr of every step that of a run of that length);
# - trainer.limit_val_batches (a count, a fraction, 0: validation off): the val_loss that of a
#   validation split of that many batches;
# - trainer.val_check_interval (a fraction: every int(f * batches) batches, a count), its
#   validations on the interval only (none at an epoch end off it), as Lightning's;
# - val_every_n_steps landing on an epoch's end validates once, and at the run's last step too,
#   before that step's checkpoint (which holds its top-k decision); checkpoint.every_n_steps
#   landing on an epoch's end validated there saves once, after that validation (killed after
#   that step and its checkpoint and resumed too);
# - a run stopped part-way with limits and extended, or killed and resumed, gives an
#   uninterrupted run's records;
# - ddp, sharded and dataparallel x2: the same counts and values as cpu;
# - trainer.fast_dev_run (true, N): N batches of each, exit 0, nothing written, an existing
#   run's folder untouched and not resumed;
# - bad values refused naming the key and where it was set.
# usage: limits.sh TRAINER_BIN
set -u
bin="$1"
t="$(mktemp -d /tmp/trainer-limits-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"

# 320 samples, batch 32: 10 training batches an epoch; 96 validation samples: 3 batches.
cat >"$t/c.yaml" <<'YAML'
run: {name: r, seed: 4}
model: {name: mlp, params: {layers: [16]}}
data: {name: synthetic, params: {samples: 320, val_samples: 96, features: 8, classes: 3}, batch_size: 32}
optimizer: {name: sgd, lr: 0.1}
trainer: {max_epochs: 2, log_every: 1, progress: lines, threads: 1}
checkpoint: {resume: never}
YAML
run() { local out="$1"; shift; last="$t/$out.log"; run_config "$t/c.yaml" "$t/$out" "$last" "$@"; } # run OUT [overrides...]
m() { echo "$t/$1/r/0/metrics.jsonl"; }
# epochs OUT: "epoch/step" of each epoch record; vals OUT: "step/epoch" of each validation;
# trains OUT: the number of step records; valloss OUT: the val_loss values; lrs OUT: the lr values.
epochs() { sed -n 's/^{"epoch": \([0-9]*\), "step": \([0-9]*\), "train_loss".*/\1\/\2/p' "$(m "$1")" | tr '\n' ' ' | sed 's/ $//'; }
vals() { sed -n 's/^{"step": \([0-9]*\), "epoch": \([0-9]*\), "val_loss".*/\1\/\2/p' "$(m "$1")" | tr '\n' ' ' | sed 's/ $//'; }
trains() { grep -c '"loss":' "$(m "$1")"; }
valloss() { sed -n 's/.*"val_loss": \([^,}]*\).*/\1/p' "$(m "$1")" | tr '\n' ' '; }
lrs() { sed -n 's/.*"lr": \([^,}]*\).*/\1/p' "$(m "$1")" | tr '\n' ' '; }
# expect NAME GOT WANT (the run's exit code must be 0)
expect() {
    if [ "$rc" = 0 ] && [ "$2" = "$3" ]; then ok "$1: $2"; else bad "$1" "exit $rc; got: $2" "want: $3" "$(tail -3 "$last")"; fi
}

run base
expect "no limit: 10 steps an epoch, validated at each end" "$(epochs base) | $(vals base)" "1/10 2/20 | 10/1 20/2"

# limit_train_batches: a count caps the epoch; a fraction is int(f * 10); 1.0 is all.
run ltb3 trainer.limit_train_batches=3
expect "limit_train_batches 3" "$(epochs ltb3) | $(vals ltb3) | $(trains ltb3) step records" "1/3 2/6 | 3/1 6/2 | 6 step records"
if grep -q "limits: 3 of 10 training batches an epoch (trainer.limit_train_batches 3)" "$t/ltb3.log" &&
   grep -q "step 6/6" "$t/ltb3.log"; then ok "limit_train_batches 3: said in the log, the progress total 6 steps"
else bad "limit_train_batches 3: the log's line and totals" "$(grep -E 'limits|step 6' "$t/ltb3.log")"; fi
run ltb025 trainer.limit_train_batches=0.25
expect "limit_train_batches 0.25: int(0.25 * 10) = 2" "$(epochs ltb025)" "1/2 2/4"
run ltb1 trainer.limit_train_batches=1.0
expect "limit_train_batches 1.0: every batch" "$(epochs ltb1)" "1/10 2/20"
run ltb99 trainer.limit_train_batches=99
expect "limit_train_batches 99: the epoch's 10" "$(epochs ltb99)" "1/10 2/20"
# With grad_accum 2, 5 batches make 3 optimizer steps (the last one of a single batch).
run accum trainer.limit_train_batches=5 trainer.grad_accum=2
expect "limit_train_batches 5, grad_accum 2: 3 steps an epoch" "$(epochs accum) | $(vals accum)" "1/3 2/6 | 3/1 6/2"
# The cosine schedule runs over the limited run's 6 steps: the lr of each step is that of a run
# of 6 steps without limits (over 20 steps they would differ).
run cos trainer.limit_train_batches=3 scheduler.name=cosine
run cos6 trainer.max_steps=6 scheduler.name=cosine
run cos20 scheduler.name=cosine
expect "cosine over the limited length: the lrs of a 6-step run" "$(lrs cos)" "$(lrs cos6)"
[ "$(lrs cos)" != "$(lrs cos20 | cut -d' ' -f1-6) " ] || bad "the limited run's lrs are those of 20 steps" "$(lrs cos)"

# limit_val_batches: each validation over the first N batches (the split is not shuffled): the
# val_loss of a split of 64 samples (2 batches).
run lvb2 trainer.limit_val_batches=2
run val64 data.params.val_samples=64
expect "limit_val_batches 2: val_loss of a 2-batch split" "$(vals lvb2) | $(valloss lvb2)" "10/1 20/2 | $(valloss val64)"
run lvb07 trainer.limit_val_batches=0.7
expect "limit_val_batches 0.7: int(0.7 * 3) = 2 batches" "$(valloss lvb07)" "$(valloss val64)"
[ "$(valloss lvb2)" != "$(valloss base)" ] || bad "limit_val_batches 2 changes nothing" "$(valloss base)"
run lvb0 trainer.limit_val_batches=0
expect "limit_val_batches 0: no validation, training unchanged" "$(vals lvb0) | $(epochs lvb0)" " | 1/10 2/20"
if grep -q "^epoch 2/2 done: train loss [0-9.]*$" "$t/lvb0.log"; then ok "limit_val_batches 0: the epoch's line without validation"
else bad "limit_val_batches 0: the epoch's line" "$(grep done "$t/lvb0.log")"; fi

# val_check_interval: Lightning validates after batch b when b % int(f * batches) == 0 (or b %
# N for a count), so an epoch's end off the interval has none.
run vci025 trainer.val_check_interval=0.25
expect "val_check_interval 0.25: every 2 batches" "$(vals vci025)" "2/1 4/1 6/1 8/1 10/1 12/2 14/2 16/2 18/2 20/2"
run vci3 trainer.val_check_interval=3
expect "val_check_interval 3: batches 3, 6, 9 of each epoch" "$(vals vci3)" "3/1 6/1 9/1 13/2 16/2 19/2"
run vcil trainer.val_check_interval=0.5 trainer.limit_train_batches=4
expect "val_check_interval 0.5 of 4 limited batches" "$(vals vcil) | $(epochs vcil)" "2/1 4/1 6/2 8/2 | 1/4 2/8"
run vcie trainer.val_check_interval=0.5 trainer.val_every_n_epochs=2 trainer.max_epochs=3
expect "val_check_interval with val_every_n_epochs 2: epochs 2 and 3 (the last)" "$(vals vcie)" "15/2 20/2 25/3 30/3"

# val_every_n_steps on an epoch's end validates once; at the run's last step too.
run steps5 trainer.val_every_n_steps=5
expect "val_every_n_steps 5 landing on epoch ends: once each" "$(vals steps5)" "5/1 10/1 15/2 20/2"
run steps5only trainer.val_every_n_steps=5 trainer.val_every_n_epochs=0
expect "val_every_n_steps 5 only: the run's last step too" "$(vals steps5only)" "5/1 10/1 15/2 20/2"

# ... before that step's checkpoint, which then holds its top-k decision: best is the step of
# the lowest val_loss, and no checkpoint is made at the step after.
run sel trainer.val_every_n_steps=10 checkpoint.every_n_steps=10 checkpoint.monitor=val_loss trainer.max_epochs=3
low="$(sed -n 's/^{"step": \([0-9]*\), .*"val_loss": \([^,]*\),.*/\2 \1/p' "$(m sel)" | sort -g | head -1 | cut -d' ' -f2)"
kept="$(ls "$t/sel/r/0/checkpoints" | tr '\n' ' ')"
expect "val_every_n_steps 10 with every_n_steps 10: validations; kept; best" "$(vals sel) | $kept| $(readlink "$t/sel/r/0/checkpoints/best")" \
    "10/1 20/2 30/3 | best step-00000010 step-00000020 step-00000030 | $(printf 'step-%08d' "$low")"
# Stopped at step 5 (mid-epoch 2 of 3-batch epochs), then extended: the records of the
# uninterrupted run (the last record of each kind per step, docs/config.md).
run whole trainer.limit_train_batches=3 trainer.limit_val_batches=2 trainer.max_epochs=3
grep -v '^checkpoint' "$t/c.yaml" >"$t/r.yaml"
lim=(trainer.limit_train_batches=3 trainer.limit_val_batches=2 trainer.max_epochs=3)
run_config "$t/r.yaml" "$t/part" "$t/part1.log" "${lim[@]}" trainer.max_steps=5
rc1=$rc
run_config "$t/r.yaml" "$t/part" "$t/part2.log" "${lim[@]}"
# The last step record per step and epoch record per epoch (docs/config.md, "metrics.jsonl"),
# throughput and the partial mark left out, and the last validation.
last_of() { python3 - "$1" <<'PY'
import json, sys
seen, val = {}, None
for line in open(sys.argv[1]):
    r = json.loads(line)
    for k in ("samples_per_sec", "partial"): r.pop(k, None)
    if "val_loss" in r: val = r
    elif "train_loss" in r: seen[("epoch", r["epoch"])] = r
    elif "loss" in r: seen[("step", r["step"])] = r
for k in sorted(seen): print(k, seen[k])
print(val)
PY
}
if [ "$rc1" = 0 ] && [ "$rc" = 0 ] && grep -q "resuming from" "$t/part2.log" && [ "$(last_of "$t/part/r/0/metrics.jsonl")" = "$(last_of "$(m whole)")" ]; then
    ok "stopped at step 5 and extended: the uninterrupted run's records (validations $(vals whole))"
else bad "stopped and extended with limits" "exit $rc1 $rc" "$(diff <(last_of "$t/part/r/0/metrics.jsonl") <(last_of "$(m whole)") | head -5)"; fi

# Killed after step 5 (its checkpoint saved; mid-epoch 2) and resumed: the same records.
lim=(trainer.limit_train_batches=4 trainer.limit_val_batches=2 trainer.val_check_interval=2 trainer.max_epochs=3)
run whole2 "${lim[@]}"
rc1="$(TRAINER_FAULT_KILL_AT_STEP=5 run_config "$t/r.yaml" "$t/kill" "$t/kill1.log" "${lim[@]}" checkpoint.every_n_steps=1; echo $rc)" 2>/dev/null
run_config "$t/r.yaml" "$t/kill" "$t/kill2.log" "${lim[@]}" checkpoint.every_n_steps=1
if [ "$rc1" != 0 ] && [ "$rc" = 0 ] && grep -q "resuming from .*step-00000005" "$t/kill2.log" && [ "$(vals kill)" = "$(vals whole2)" ] &&
   [ "$(last_of "$(m kill)")" = "$(last_of "$(m whole2)")" ]; then
    ok "killed at step 5 and resumed: the uninterrupted run's records (validations $(vals whole2))"
else bad "killed and resumed with limits" "exit $rc1 $rc; validations $(vals kill), want $(vals whole2)" "$(diff <(last_of "$(m kill)") <(last_of "$(m whole2)") | head -5)"; fi

# checkpoint.every_n_steps landing on an epoch's last step that the epoch's end validates: one
# checkpoint, saved after that validation (as Lightning's ModelCheckpoint), so that it holds the
# validation's top-k decision and resumes at the next epoch: no checkpoint at the step after,
# best at the lowest val_loss. Killed after step 20 and its checkpoint, and resumed: the same.
# (Saved before the validation, the decision was lost: a stray step-00000011, best one behind.)
topk() { ls "$t/$1/r/0/checkpoints" | tr '\n' ' '; echo "-> $(readlink "$t/$1/r/0/checkpoints/best")"; }
at() { tr -d ' \n' <"$t/$1/r/0/checkpoints/step-$(printf %08d "$2")/state.json" | grep -o '"epoch":[0-9]*,"step":[0-9]*,"batch_in_epoch":[0-9]*'; }
ck=(checkpoint.every_n_steps=10 checkpoint.monitor=val_loss trainer.max_epochs=3)
run ckend "${ck[@]}"
low="$(sed -n 's/^{"step": \([0-9]*\), .*"val_loss": \([^,]*\),.*/\2 \1/p' "$(m ckend)" | sort -g | head -1 | cut -d' ' -f2)"
expect "every_n_steps 10 at epoch ends validated there: validations; kept -> best; step 20 resumes at epoch 3" \
    "$(vals ckend) | $(topk ckend) | $(at ckend 20)" \
    "10/1 20/2 30/3 | best step-00000010 step-00000020 step-00000030 -> $(printf 'step-%08d' "$low") | \"epoch\":2,\"step\":20,\"batch_in_epoch\":0"
low20="$(sed -n 's/^{"step": \([12]0\), .*"val_loss": \([^,]*\),.*/\2 \1/p' "$(m ckend)" | sort -g | head -1 | cut -d' ' -f2)"
rc1="$(TRAINER_FAULT_KILL_AT_STEP=20 run_config "$t/r.yaml" "$t/ckkill" "$t/ckkill1.log" "${ck[@]}"; echo $rc)" 2>/dev/null
kept1="$(topk ckkill)"
run_config "$t/r.yaml" "$t/ckkill" "$t/ckkill2.log" "${ck[@]}"
if [ "$rc1" = 137 ] && [ "$kept1" = "best step-00000010 step-00000020 -> $(printf 'step-%08d' "$low20")" ] &&
   [ "$rc" = 0 ] && grep -q "resuming from .*step-00000020 (epoch 3, step 20)" "$t/ckkill2.log" && [ "$(topk ckkill)" = "$(topk ckend)" ] &&
   [ "$(last_of "$(m ckkill)")" = "$(last_of "$(m ckend)")" ]; then
    ok "killed after step 20 (an epoch's end) and its checkpoint, resumed at epoch 3: $(topk ckkill)"
else bad "killed after step 20 and its checkpoint" "exit $rc1 $rc; killed: $kept1; resumed: $(topk ckkill), want $(topk ckend)" \
    "$(grep resuming "$t/ckkill2.log")" "$(diff <(last_of "$(m ckkill)") <(last_of "$(m ckend)") | head -5)"; fi

# ddp, sharded and dataparallel x2: every rank the same counts (no collective left waiting),
# the cpu run's values.
lim=(trainer.limit_train_batches=3 trainer.limit_val_batches=2 trainer.val_check_interval=0.5)
run cpu "${lim[@]}"
for st in ddp sharded dataparallel; do
    run "$st" trainer.strategy="$st" trainer.devices=2 "${lim[@]}"
    if [ "$rc" = 0 ] && [ "$(vals "$st") | $(epochs "$st")" = "1/1 2/1 3/1 4/2 5/2 6/2 | 1/3 2/6" ] && [ "$(vals cpu)" = "$(vals "$st")" ] &&
       awk -v a="$(valloss "$st")" -v b="$(valloss cpu)" 'BEGIN { n = split(a, x, " "); split(b, y, " "); if (n != 6) exit 1
            for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-4 * y[i]) exit 1 } }'; then
        ok "$st x2: validations $(vals "$st"), epochs $(epochs "$st"), val_loss as cpu's"
    else bad "$st x2 with limits" "exit $rc" "$st: $(vals "$st") | $(epochs "$st") | $(valloss "$st")" "cpu: $(vals cpu) | $(valloss cpu)" "$(tail -3 "$t/$st.log")"; fi
done

# fast_dev_run: N batches of train and validation in one epoch; nothing written; exit 0.
fdr() { # fdr NAME OUT [overrides...]: sets rc, the log in $t/NAME.log
    local name="$1" out="$2"; shift 2
    timeout 60 "$bin" run "$t/c.yaml" "run.output_dir=$out" "$@" >"$t/$name.log" 2>&1; rc=$?
}
fdr fdr2 "$t/fdr2" trainer.fast_dev_run=2 checkpoint.every_n_steps=1 trainer.loggers=[jsonl,csv] checkpoint.monitor=val_loss
if [ "$rc" = 0 ] && [ ! -e "$t/fdr2" ] && [ "$(grep -c '^epoch 1  step [0-9]*/2 ' "$t/fdr2.log")" = 2 ] &&
   grep -q "^fast_dev_run: 2 training batches and 2 validation batches in one epoch" "$t/fdr2.log" &&
   [ "$(grep -c 'val loss' "$t/fdr2.log")" = 1 ] && grep -q "^done: 2 steps" "$t/fdr2.log"; then
    ok "fast_dev_run 2: 2 steps, 1 validation, exit 0, no run folder, checkpoints or log files"
else bad "fast_dev_run 2" "exit $rc; written: $(find "$t/fdr2" 2>/dev/null | head -3)" "$(grep -E 'fast_dev_run|step|val loss|done' "$t/fdr2.log")"; fi
fdr fdrt "$t/fdrt" trainer.fast_dev_run=true trainer.max_epochs=5 trainer.val_every_n_epochs=0
if [ "$rc" = 0 ] && [ ! -e "$t/fdrt" ] && grep -q "^done: 1 steps" "$t/fdrt.log" && [ "$(grep -c 'val loss' "$t/fdrt.log")" = 1 ]; then
    ok "fast_dev_run true: 1 step and 1 validation (max_epochs and val_every_n_epochs overridden)"
else bad "fast_dev_run true" "exit $rc" "$(grep -E 'fast_dev_run|val loss|done' "$t/fdrt.log")"; fi
# Beside an existing run with checkpoints: neither resumed nor touched.
before="$(cd "$t/base" && find . -type f -exec md5sum {} + | sort)"
fdr fdre "$t/base" trainer.fast_dev_run=3 checkpoint.resume=auto
if [ "$rc" = 0 ] && ! grep -q "resuming" "$t/fdre.log" && grep -q "^done: 3 steps" "$t/fdre.log" &&
   [ "$(cd "$t/base" && find . -type f -exec md5sum {} + | sort)" = "$before" ] && [ ! -e "$t/base/r/1" ]; then
    ok "fast_dev_run beside an existing run: not resumed, its folder untouched, no new version"
else bad "fast_dev_run beside an existing run" "exit $rc" "$(grep -E 'resum|done' "$t/fdre.log")"; fi

# Bad values: a non-zero exit and a message naming the key and where it was set.
refuse() { # refuse WANT [overrides...]
    local want="$1"; shift
    timeout 60 "$bin" run "$t/c.yaml" "run.output_dir=$t/bad" "$@" >"$t/bad.log" 2>&1; rc=$?
    if [ "$rc" != 0 ] && grep -qF -- "$want" "$t/bad.log" && [ ! -e "$t/bad/r/0/metrics.jsonl" ]; then ok "refused $*: $want"
    else bad "refused $*" "exit $rc, want: $want" "$(tail -2 "$t/bad.log")"; fi
}
refuse "trainer.limit_train_batches: a count of batches is 0 or more, got '-1'" trainer.limit_train_batches=-1
grep -q "^trainer run: command line:[0-9]*:[0-9]*: trainer.limit_train_batches" "$t/bad.log" && ok "an override's refusal says it came from the command line" ||
    bad "an override's refusal says where" "$(tail -1 "$t/bad.log")"
refuse "trainer.limit_train_batches: a fraction of the epoch's batches is in [0.0, 1.0], got '1.5'" trainer.limit_train_batches=1.5
refuse "trainer.limit_val_batches: a fraction of the epoch's batches is in [0.0, 1.0], got '2.0' (a count of batches is written as an integer: 2, not 2.0)" trainer.limit_val_batches=2.0
refuse "trainer.limit_val_batches: expected a count of batches (an integer, 0 or more) or a fraction" trainer.limit_val_batches=abc
refuse "trainer.limit_val_batches: a count of batches is 0 or more, got '-3'" trainer.limit_val_batches=-3
refuse "trainer.limit_train_batches: 0 would train nothing" trainer.limit_train_batches=0
refuse "trainer.limit_train_batches: 0.05 of the training split's 10 batches is less than one batch; give at least 0.1 (1/10)" trainer.limit_train_batches=0.05
refuse "trainer.limit_val_batches: 0.2 of the validation split's 3 batches is less than one batch" trainer.limit_val_batches=0.2
refuse "trainer.val_check_interval: 11 is more batches than an epoch trains (10)" trainer.val_check_interval=11
refuse "trainer.val_check_interval: 4 is more batches than an epoch trains (3)" trainer.val_check_interval=4 trainer.limit_train_batches=3
refuse "trainer.val_check_interval: 0 is no interval" trainer.val_check_interval=0.0
refuse "trainer.val_check_interval: trainer.val_every_n_steps 3 also says when to validate" trainer.val_check_interval=0.5 trainer.val_every_n_steps=3
refuse "trainer.val_check_interval: validates within epochs, which trainer.val_every_n_epochs 0 turns off" trainer.val_check_interval=2 trainer.val_every_n_epochs=0
refuse "checkpoint.monitor: val_loss is measured by validation, which trainer.limit_val_batches 0 turns off" trainer.limit_val_batches=0 checkpoint.monitor=val_loss
refuse "trainer.fast_dev_run: a count of batches is 0 (off) to 1000000000, got '-1'" trainer.fast_dev_run=-1
refuse "trainer.fast_dev_run: expected true, false or a count of batches (an integer), got '0.5'" trainer.fast_dev_run=0.5
# In a config file: its name, line and column.
sed 's/^trainer: {/trainer: {limit_train_batches: -2, /' "$t/c.yaml" >"$t/bad.yaml"
timeout 60 "$bin" run "$t/bad.yaml" "run.output_dir=$t/bad" >"$t/bad.log" 2>&1; rc=$?
if [ "$rc" != 0 ] && grep -q "bad.yaml:5:32: trainer.limit_train_batches: a count of batches is 0 or more, got '-2'" "$t/bad.log"; then
    ok "a bad value in a config file: $(grep -o 'bad.yaml:.*' "$t/bad.log")"
else bad "a bad value in a config file" "exit $rc" "$(tail -2 "$t/bad.log")"; fi
finish
