#!/usr/bin/env bash
# When validation runs: at every epoch's end by default; trainer.val_every_n_epochs N at the
# end of every N-th epoch and of the last; 0 never at epoch ends; trainer.val_every_n_steps
# also every N steps (not at the last step, which the epoch's end covers). Checked from the
# val_loss records of metrics.jsonl (their step and epoch, from 1). A negative cadence is refused
# naming the key.
# usage: validation_cadence.sh TRAINER_BIN CONFIG
set -u
bin="$1"; cfg="$2"
t="$(mktemp -d /tmp/trainer-valcad-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
# 1024 samples, 10% held out for validation: 921 train, batch 128: 8 steps an epoch, 24 in 3.
common=(checkpoint.resume=never trainer.max_epochs=3 trainer.threads=1 trainer.progress=lines data.params.samples=1024)
# vals NAME [overrides...]: "step/epoch" of each validation record, space-separated, or "rc=N".
vals() {
    local name="$1"; shift
    timeout 120 "$bin" run "$cfg" "run.output_dir=$t/$name" "${common[@]}" "$@" >"$t/$name.log" 2>&1 || { echo "rc=$?"; return; }
    sed -n 's/^{"step": \([0-9]*\), "epoch": \([0-9]*\), "val_loss".*/\1\/\2/p' "$t/$name/quickstart/0/metrics.jsonl" | tr '\n' ' '
}
expect() { # expect NAME GOT WANT
    if [ "$2" = "$3" ]; then ok "$1: $2"; else bad "$1" "got: $2" "want: $3"; fi
}
expect "every epoch (default)" "$(vals every)" "8/1 16/2 24/3 "
expect "every 2nd epoch and the last" "$(vals two trainer.val_every_n_epochs=2)" "16/2 24/3 "
expect "never at epoch ends" "$(vals never trainer.val_every_n_epochs=0)" ""
if grep -q "^epoch 3/3 done: train loss [0-9.]*$" "$t/never.log"; then ok "an epoch without validation still says it is done"
else bad "an epoch without validation still says it is done" "$(grep done "$t/never.log")"; fi
expect "every 5 steps only" "$(vals steps trainer.val_every_n_steps=5 trainer.val_every_n_epochs=0)" "5/1 10/2 15/2 20/3 "
expect "every 5 steps and every epoch" "$(vals both trainer.val_every_n_steps=5)" "5/1 8/1 10/2 15/2 16/2 20/3 24/3 "
"$bin" run "$cfg" "run.output_dir=$t/bad" trainer.val_every_n_epochs=-1 >"$t/bad.log" 2>&1
rc=$?
if [ "$rc" != 0 ] && grep -q "trainer.val_every_n_epochs" "$t/bad.log"; then ok "a negative cadence is refused naming the key"
else bad "a negative cadence is refused naming the key" "exit $rc" "$(tail -2 "$t/bad.log")"; fi
finish
