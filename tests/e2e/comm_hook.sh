#!/usr/bin/env bash
# Comm hooks in the gradient-synchronisation engine (docs/strategies.md, "Communication
# hooks"), with the test hooks of tests/plugins/test_hook.c:
# - fp32_sum, a hook that sends what the engine sends itself, gives the runs without a hook
#   bit for bit (final weights, every logged loss, validation): ddp's all-reduce and sharded
#   update, with clipping and without (the per-bucket update), sharded stages 1, 2 (with
#   gradient accumulation) and 3, and ddp and sharded
#   stage 2 on 2 fake GPUs (the host staging); the log names the hook;
# - fail_at_3, failing its third bucket, ends the run non-zero on every rank with its message,
#   within the test's timeout (the communicator is broken everywhere, no rank waits for the
#   deadline), and leaves nothing in /dev/shm; failing on one rank alone (sharded stages 2-3,
#   ddp with sync_batchnorm: backward still meets collectives) it ends every rank as fast,
#   the failing rank with the hook's message;
# - an unknown strategy.comm_hook is refused naming the option and the hooks found.
# usage: comm_hook.sh TRAINER_BIN TEST_PLUGIN_DIR PYTHON
set -u
bin="$1"; plugins="$2"; py="$3"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
shm_before="$(ls /dev/shm | grep '^trainer-' || true)"
t="$(mktemp -d /tmp/trainer-comm-hook-XXXXXX)"
trap 'rm -rf "$t"' EXIT
export TRAINER_PLUGIN_PATH="$plugins/comm_hook:$plugins/fake_gpu" TRAINER_COMM_TIMEOUT=120
unset CUDA_VISIBLE_DEVICES TRAINER_FAKE_GPUS
mlp_device_yaml "$t/c.yaml" fake_gpu 1
# run NAME OVERRIDES...: 2 ranks; output in $t/NAME, log in $t/NAME.log
run() {
    local name="$1"; shift
    timeout 300 "$bin" run "$t/c.yaml" "run.output_dir=$t/$name" trainer.devices=2 "$@" >"$t/$name.log" 2>&1
}
# same NAME OVERRIDES...: the run with fp32_sum and the run without a hook, bit for bit
same() {
    local name="$1" out rc rc2; shift
    run "${name}_none" "$@"; rc=$?
    run "${name}_hook" "$@" strategy.comm_hook=fp32_sum; rc2=$?
    if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "comm hook fp32_sum" "$t/${name}_hook.log" &&
       out="$(cmp_runs "$t/${name}_hook/m/0" "$t/${name}_none/m/0" --tol 0)"; then
        ok "$name: the fp32_sum hook gives the run without a hook bit for bit ($out)"
    else bad "$name with fp32_sum" "rc=$rc rc2=$rc2 ${out:-}" "$(tail -2 "$t/${name}_hook.log")"; fi
}
cpu=(trainer.accelerator=cpu)
same ddp_all_reduce "${cpu[@]}" trainer.strategy=ddp strategy.shard_update=false strategy.bucket_mb=0.001 strategy.first_bucket_mb=0.001
same ddp_all_reduce_no_clip "${cpu[@]}" trainer.strategy=ddp strategy.shard_update=false trainer.grad_clip=0 strategy.bucket_mb=0.001 strategy.first_bucket_mb=0.001
same ddp_no_clip "${cpu[@]}" trainer.strategy=ddp trainer.grad_clip=0 strategy.bucket_mb=0.001 strategy.first_bucket_mb=0.001
same ddp_shard_update "${cpu[@]}" trainer.strategy=ddp strategy.bucket_mb=0.001 strategy.first_bucket_mb=0.001
same sharded1 "${cpu[@]}" trainer.strategy=sharded strategy.stage=1 strategy.unit_mb=0.001
same sharded2_accum "${cpu[@]}" trainer.strategy=sharded strategy.stage=2 strategy.unit_mb=0.001 trainer.grad_accum=2
same sharded3 "${cpu[@]}" trainer.strategy=sharded strategy.stage=3 strategy.unit_mb=0.001
export TRAINER_FAKE_GPUS=2
same ddp_fake_gpus trainer.accelerator=gpu trainer.strategy=ddp strategy.bucket_mb=0.001 strategy.first_bucket_mb=0.001
same sharded2_fake_gpus trainer.accelerator=gpu trainer.strategy=sharded strategy.stage=2 strategy.unit_mb=0.001
unset TRAINER_FAKE_GPUS

# fail_case STRATEGY OVERRIDES...: the run with fail_at_3 fails fast, every rank with the message
fail_case() {
    local s="$1" start rc secs n; shift
    start=$(date +%s)
    run "fail_$s" "${cpu[@]}" trainer.strategy=$s strategy.comm_hook=fail_at_3 "$@"; rc=$?
    secs=$(( $(date +%s) - start ))
    n="$(grep -c "fail_at_3: refused bucket" "$t/fail_$s.log")"
    if [ $rc != 0 ] && [ "$n" -ge 1 ] && [ $secs -lt 60 ]; then
        ok "$s: a failing hook ends the run (exit $rc, ${secs}s) with its message"
    else bad "$s with fail_at_3" "rc=$rc secs=$secs messages=$n" "$(tail -4 "$t/fail_$s.log")"; fi
}
fail_case ddp strategy.bucket_mb=0.001 strategy.first_bucket_mb=0.001
fail_case sharded strategy.unit_mb=0.001

# one_rank_fails NAME RANK OVERRIDES...: fail_at_3 on rank RANK alone, while backward goes on
# meeting collectives (stage 3's gathers, a synchronised batch norm's sums): the communicator
# is broken as the reduction fails, every rank ends fast, and the failing rank reports the
# hook's message, not the ABORTED of a collective that followed.
one_rank_fails() {
    local name="$1" r="$2" start rc secs; shift 2
    start=$(date +%s)
    TRAINER_TEST_HOOK_RANK=$r run "one_$name" "${cpu[@]}" strategy.comm_hook=fail_at_3 "$@"; rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc != 0 ] && grep -q "^\[rank $r\] trainer run: fail_at_3: refused bucket" "$t/one_$name.log" && [ $secs -lt 60 ]; then
        ok "$name: rank $r's failing hook ends the run (exit $rc, ${secs}s), that rank with its message"
    else bad "$name: fail_at_3 on rank $r alone" "rc=$rc secs=$secs" "$(tail -4 "$t/one_$name.log")"; fi
}
deep=(model.params.layers=[16,16,16,16,16,16,16,16,16,16])
one_rank_fails sharded3 1 trainer.strategy=sharded strategy.stage=3 strategy.unit_mb=0.001 "${deep[@]}"
one_rank_fails sharded2 0 trainer.strategy=sharded strategy.stage=2 strategy.unit_mb=0.001 "${deep[@]}"
cnn_device_yaml "$t/cnn.yaml" fake_gpu 1
TRAINER_TEST_HOOK_RANK=1 timeout 300 "$bin" run "$t/cnn.yaml" "run.output_dir=$t/one_bn" trainer.devices=2 "${cpu[@]}" \
    trainer.strategy=ddp strategy.sync_batchnorm=true strategy.bucket_mb=0.001 strategy.first_bucket_mb=0.001 \
    strategy.comm_hook=fail_at_3 >"$t/one_bn.log" 2>&1; rc=$?
if [ $rc != 0 ] && grep -q "^\[rank 1\] trainer run: fail_at_3: refused bucket" "$t/one_bn.log"; then
    ok "ddp with sync_batchnorm: rank 1's failing hook ends the run (exit $rc), that rank with its message"
else bad "ddp with sync_batchnorm, fail_at_3 on rank 1" "rc=$rc" "$(tail -4 "$t/one_bn.log")"; fi

out="$("$bin" run "$t/c.yaml" "run.output_dir=$t/unknown" "${cpu[@]}" trainer.devices=2 trainer.strategy=ddp \
       strategy.comm_hook=fp16_nope 2>&1)"; rc=$?
if [ $rc != 0 ] && grep -q "strategy.comm_hook: " <<<"$out" && grep -q "fp16_nope" <<<"$out" && grep -q "fp32_sum" <<<"$out"; then
    ok "an unknown comm hook is refused naming the option and the hooks found"
else bad "unknown comm hook" "rc=$rc" "$(tail -3 <<<"$out")"; fi

leak="$(shm_new "$shm_before")"
if [ -z "$leak" ]; then ok "nothing left in /dev/shm"; else bad "left in /dev/shm" "$leak"; fi
finish
