#!/usr/bin/env bash
# Strategy `sharded` (ZeRO) on GPU ranks, through the test device plugin fake_gpu (device
# memory is checked host mappings, the kernels are the core's CPU kernels, so a GPU run must
# equal the CPU run byte for byte):
# - Stages 1, 2 and 3 on 2 fake GPUs (one rank each, collectives staged through host memory
#   over shm): shard files and loss curve byte-identical to sharded over 2 CPU ranks.
# - The one-GPU testing mode: stage 3 with devices [0, 0] (2 ranks on one GPU): the same bytes.
# - The transformer LM at stage 3 in small units (tied embedding, views of gathered weights):
#   byte-identical to CPU ranks; the CNN with sync_batchnorm at stage 2 (buffers broadcast
#   through the host): within 1e-5 (on a device batch-norm, ReLU and pooling are three ops).
# - Stage 2 with gradient accumulation (2 micro-batches: the slices added on the device) and
#   no clipping (each unit updated as soon as its sum is in): byte-identical to CPU ranks.
# - Killed at step 20 (stage 3 on 2 fake GPUs) and resumed: the straight run's bytes; a CPU
#   run's checkpoint at step 20 resumed on 2 fake GPUs: the same bytes.
# - A device plugin without the copy_rows kernel (an older table): stage 2 refused at start
#   naming the kernel.
# - ZeRO's point: a 0.92M-parameter MLP with AdamW on 4 fake GPUs of 12 MiB each: ddp runs
#   out of device memory (16 bytes a parameter), sharded stage 3 trains, each rank reporting
#   16/N bytes of model state a parameter (rank 0's record). One that does not fit even at
#   stage 3 (a unit's gradients cannot be allocated inside backward) fails with the device's message and
#   exit 1 on every rank, no crash, nothing left in /dev/shm.
# - A start-up failure on one rank alone (its device too small): the other rank ends at once,
#   told that rank 1 aborted the job (the communicator broken in create's failure path).
# usage: sharded_gpu.sh TRAINER_BIN FAKE_GPU_PLUGIN_DIR PYTHON
set -u
bin="$1"; fake="$2"; py="$3"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
shm_before="$(ls /dev/shm | grep '^trainer-' || true)"
t="$(mktemp -d /tmp/trainer-sharded-gpu-XXXXXX)"
trap 'rm -rf "$t"' EXIT
export TRAINER_PLUGIN_PATH="$fake" TRAINER_COMM_TIMEOUT=120
unset CUDA_VISIBLE_DEVICES TRAINER_FAKE_GPUS
mlp_device_yaml "$t/mlp.yaml" fake_gpu 5
echo 'checkpoint: {every_n_steps: 10, keep_last: 5}' >>"$t/mlp.yaml"
last_ckpt() { ls -d "$1"/*/0/checkpoints/step-* 2>/dev/null | tail -1; }
# Every file of two sharded checkpoints but state.json (it holds the run's timings) equal.
same_shards() {
    [ -n "$1" ] && [ -n "$2" ] && [ -e "$1/index.json" ] || return 1
    local f
    for f in $(ls "$1" | grep -v state.json); do cmp -s "$1/$f" "$2/$f" || return 1; done
}
curve() { grep -v '"memory"' "$1"/*/0/metrics.jsonl | sed 's/"samples_per_sec": [0-9.e+]*//; s/"tokens_per_sec": [0-9.e+]*//'; }
# run NAME GPUS CONFIG [overrides...]: GPUS fake GPUs (0: CPU ranks); output in $t/NAME, log in $t/NAME.log
run() {
    local name="$1" gpus="$2" cfg="$3"; shift 3
    local acc=(trainer.accelerator=gpu)
    [ "$gpus" = 0 ] && acc=(trainer.accelerator=cpu)
    TRAINER_FAKE_GPUS=$gpus timeout 300 "$bin" run "$cfg" "run.output_dir=$t/$name" trainer.strategy=sharded "${acc[@]}" \
        "$@" >"$t/$name.log" 2>&1
}

for s in 1 2 3; do
    run g$s 2 "$t/mlp.yaml" strategy.stage=$s strategy.unit_mb=0.001 trainer.devices=2; rc=$?
    run c$s 0 "$t/mlp.yaml" strategy.stage=$s strategy.unit_mb=0.001 trainer.devices=2; rc2=$?
    if [ $rc = 0 ] && [ $rc2 = 0 ] &&
       grep -q "sharded (ZeRO stage $s, 2 ranks over shm, one GPU each: this rank fake_gpu:0, [0-9]* units staged through host memory)" "$t/g$s.log" &&
       same_shards "$(last_ckpt "$t/g$s")" "$(last_ckpt "$t/c$s")" && diff <(curve "$t/g$s") <(curve "$t/c$s") >/dev/null; then
        ok "stage $s on 2 fake GPUs: shards and loss curve byte-identical to 2 CPU ranks"
    else bad "stage $s on 2 fake GPUs vs CPU ranks" "rc=$rc rc2=$rc2" "$(tail -3 "$t/g$s.log")" "$(tail -2 "$t/c$s.log")"; fi
done

run g00 1 "$t/mlp.yaml" strategy.stage=3 strategy.unit_mb=0.001 "trainer.devices=[0, 0]"; rc=$?
if [ $rc = 0 ] && grep -q "ranks sharing GPUs (a testing mode): this rank fake_gpu:0" "$t/g00.log" &&
   same_shards "$(last_ckpt "$t/g00")" "$(last_ckpt "$t/c3")" && diff <(curve "$t/g00") <(curve "$t/c3") >/dev/null; then
    ok "stage 3 with 2 ranks on one fake GPU (devices [0, 0], the testing mode): byte-identical to 2 CPU ranks"
else bad "stage 3 with devices [0, 0]" "rc=$rc" "$(tail -3 "$t/g00.log")"; fi

transformer_device_yaml "$t/lm.yaml" "$t/lm" fake_gpu lm
echo 'checkpoint: {every_n_steps: 8}' >>"$t/lm.yaml"
run lmg 2 "$t/lm.yaml" strategy.stage=3 strategy.unit_mb=0.002 trainer.devices=2; rc=$?
run lmc 0 "$t/lm.yaml" strategy.stage=3 strategy.unit_mb=0.002 trainer.devices=2; rc2=$?
if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "done: 8 steps" "$t/lmg.log" &&
   same_shards "$(last_ckpt "$t/lmg")" "$(last_ckpt "$t/lmc")" && diff <(curve "$t/lmg") <(curve "$t/lmc") >/dev/null; then
    ok "the transformer LM at stage 3 on 2 fake GPUs ($(grep -o '[0-9]* units' "$t/lmg.log" | head -1)): byte-identical to 2 CPU ranks"
else bad "transformer LM stage 3 on fake GPUs vs CPU ranks" "rc=$rc rc2=$rc2" "$(tail -3 "$t/lmg.log")" "$(tail -2 "$t/lmc.log")"; fi

cnn_device_yaml "$t/cnn.yaml" fake_gpu 1
run cnng 2 "$t/cnn.yaml" strategy.stage=2 strategy.unit_mb=0.001 strategy.sync_batchnorm=true trainer.devices=2; rc=$?
run cnnc 0 "$t/cnn.yaml" strategy.stage=2 strategy.unit_mb=0.001 strategy.sync_batchnorm=true trainer.devices=2; rc2=$?
if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "done: 12 steps" "$t/cnng.log" &&
   cmp_out="$(cmp_runs "$t/cnng/c/0" "$t/cnnc/c/0" --tol 1e-5 2>&1)"; then
    ok "the CNN with sync_batchnorm at stage 2 on 2 fake GPUs: within 1e-5 of 2 CPU ranks ($cmp_out)"
else bad "cnn stage 2 sync_batchnorm on fake GPUs vs CPU ranks" "rc=$rc rc2=$rc2" "${cmp_out:-}" "$(tail -3 "$t/cnng.log")"; fi

run acc2 2 "$t/mlp.yaml" strategy.stage=2 strategy.unit_mb=0.001 trainer.devices=2 trainer.grad_accum=2 trainer.grad_clip=0; rc=$?
run acc2c 0 "$t/mlp.yaml" strategy.stage=2 strategy.unit_mb=0.001 trainer.devices=2 trainer.grad_accum=2 trainer.grad_clip=0; rc2=$?
if [ $rc = 0 ] && [ $rc2 = 0 ] && same_shards "$(last_ckpt "$t/acc2")" "$(last_ckpt "$t/acc2c")" &&
   diff <(curve "$t/acc2") <(curve "$t/acc2c") >/dev/null; then
    ok "stage 2 with 2 micro-batches a step and no clipping on 2 fake GPUs: byte-identical to 2 CPU ranks"
else bad "stage 2 grad_accum 2 on fake GPUs vs CPU ranks" "rc=$rc rc2=$rc2" "$(tail -3 "$t/acc2.log")"; fi

TRAINER_FAULT_KILL_AT_STEP=20 run kill 2 "$t/mlp.yaml" strategy.stage=3 strategy.unit_mb=0.001 trainer.devices=2; rc1=$?
run kill 2 "$t/mlp.yaml" strategy.stage=3 strategy.unit_mb=0.001 trainer.devices=2; rc=$?
if [ $rc1 != 0 ] && [ $rc = 0 ] && grep -q "resuming from .*step-00000020" "$t/kill.log" &&
   same_shards "$(last_ckpt "$t/kill")" "$(last_ckpt "$t/g3")" && diff <(curve "$t/kill" | tail -3) <(curve "$t/g3" | tail -3) >/dev/null; then
    ok "stage 3 on 2 fake GPUs killed at step 20 and resumed: the straight run's shards"
else bad "stage 3 on fake GPUs: kill and resume" "rc1=$rc1 rc=$rc" "$(tail -3 "$t/kill.log")"; fi
TRAINER_FAULT_KILL_AT_STEP=20 run x 0 "$t/mlp.yaml" strategy.stage=3 strategy.unit_mb=0.001 trainer.devices=2; rc1=$?
run x 2 "$t/mlp.yaml" strategy.stage=3 strategy.unit_mb=0.001 trainer.devices=2; rc=$?
if [ $rc1 != 0 ] && [ $rc = 0 ] && grep -q "resuming from .*step-00000020" "$t/x.log" && grep -q "this rank fake_gpu:0" "$t/x.log" &&
   same_shards "$(last_ckpt "$t/x")" "$(last_ckpt "$t/g3")"; then
    ok "a CPU run's stage-3 checkpoint at step 20 resumed on 2 fake GPUs: the straight run's shards"
else bad "CPU checkpoint resumed on fake GPUs" "rc1=$rc1 rc=$rc" "$(tail -3 "$t/x.log")"; fi
TRAINER_FAKE_GPU_OLD_KERNELS=1 run old 2 "$t/mlp.yaml" strategy.stage=2 trainer.devices=2; rc=$?
if [ $rc = 1 ] && grep -q "stage 2 adds gradient slices on the device .*fake_gpu:[01]: its kernel table has no 'copy_rows' kernel" "$t/old.log"; then
    ok "stage 2 on a device without copy_rows: refused at start ($(grep -o "stage 2 adds gradient slices.*'copy_rows' kernel" "$t/old.log" | head -1))"
else bad "stage 2 without copy_rows" "rc=$rc" "$(tail -3 "$t/old.log")"; fi

# ZeRO on small devices: 4 fake GPUs of 12 MiB, a model whose ddp state needs about 14 MiB.
big=(model.params.layers=[512,512,512,512] model.params.dropout=0 data.params.features=256 data.params.samples=256
     trainer.max_steps=2 checkpoint.every_n_steps=0 trainer.devices=4)
TRAINER_FAKE_GPUS=4 TRAINER_FAKE_GPU_MIB=12 timeout 300 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/bigddp" \
    trainer.strategy=ddp "${big[@]}" >"$t/bigddp.log" 2>&1; rc1=$?
TRAINER_FAKE_GPU_MIB=12 run big3 4 "$t/mlp.yaml" strategy.stage=3 strategy.unit_mb=1 "${big[@]}"; rc=$?
if [ $rc1 != 0 ] && grep -q "out of device memory" "$t/bigddp.log" && [ $rc = 0 ] && grep -q "done: 2 steps" "$t/big3.log" &&
   out="$("$py" - "$t/big3/m/0/metrics.jsonl" <<'PY'
import json, sys
n = 256 * 512 + 512 + 3 * (512 * 512 + 512) + 512 * 5 + 5   # trainable parameters
m = [r["memory"] for r in map(json.loads, open(sys.argv[1])) if "memory" in r][0]
b = (m["params"] + m["grads"] + m["optimizer"]) / n
print(f"stage 3: {b:.2f} B/param of model state per rank (formula 16/4 = 4)")
sys.exit(0 if abs(b / 4 - 1) <= 0.1 else 1)
PY
)"; then
    ok "0.92M parameters on 4 fake GPUs of 12 MiB: ddp runs out of device memory, sharded stage 3 trains; $out"
else bad "ZeRO on small fake GPUs" "rc1=$rc1 rc=$rc" "$(grep -o 'out of device memory[^;]*' "$t/bigddp.log" | head -1)" \
         "$(tail -3 "$t/big3.log")" "${out:-}"; fi
TRAINER_FAKE_GPU_MIB=12 run big4 4 "$t/mlp.yaml" strategy.stage=3 "${big[@]}" model.params.layers=[1024,1024]; rc=$?
if [ $rc = 1 ] && grep -q "sharded: a unit's gradients .*fake_gpu:[0-3]: out of device memory" "$t/big4.log" &&
   ! grep -q "signal" "$t/big4.log"; then
    ok "a model that does not fit at stage 3: exit 1, $(grep -o "sharded: a unit's gradients.*in use" "$t/big4.log" | head -1)"
else bad "out of device memory inside backward" "rc=$rc" "$(tail -3 "$t/big4.log")"; fi
# A start-up failure on one rank alone (rank 1's fake GPU of 2 MiB cannot hold the buffers;
# rank 0's can), ranks started without a launcher: rank 1 breaks the communicator, so rank 0
# fails at once with "rank 1 aborted the job" on any backend (shm alone would also notice the
# process gone; a TCP or NCCL peer would wait for its deadline).
b3=(run "$t/mlp.yaml" "run.output_dir=$t/b3" trainer.accelerator=gpu trainer.devices=2 trainer.strategy=sharded
    strategy.stage=2 model.params.layers=[1024,1024] data.params.features=256 trainer.max_steps=2)
start=$(date +%s); pids=""
for r in 0 1; do
    mib=16384; [ $r = 1 ] && mib=2
    RANK=$r WORLD_SIZE=2 TRAINER_JOB_ID="b3$$" TRAINER_FAKE_GPUS=2 TRAINER_FAKE_GPU_MIB=$mib timeout 200 "$bin" "${b3[@]}" \
        >"$t/b3.$r" 2>&1 & pids="$pids $!"
done
rcs=""; for p in $pids; do wait "$p"; rcs="$rcs $?"; done
secs=$(( $(date +%s) - start ))
if [ "$rcs" = " 1 1" ] && grep -q "rank 1 aborted the job" "$t/b3.0" && grep -q "out of device memory" "$t/b3.1" && [ $secs -lt 60 ]; then
    ok "rank 1 fails alone at start-up: rank 0 ends in ${secs}s, $(grep -o 'rank 1 aborted the job' "$t/b3.0" | head -1)"
else bad "start-up failure on rank 1 alone (exit codes$rcs, ${secs}s)" "$(tail -n 1 "$t/b3.0")" "$(tail -n 1 "$t/b3.1")"; fi
left="$(shm_new "$shm_before")"
if [ -z "$left" ]; then ok "nothing left in /dev/shm"; else bad "segments left in /dev/shm" "$left"; fi
finish
