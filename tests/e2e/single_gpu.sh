#!/usr/bin/env bash
# Training on a GPU, end to end, through the test device plugin fake_gpu (TRAINER_FAKE_GPUS
# fake GPUs whose memory is checked mappings and whose kernels are the core's CPU kernels):
# - `trainer plan` and `trainer run` with everything auto on one GPU pick single-gpu, say why,
#   and train; the whole path runs: batches uploaded, ops through the device's kernel table,
#   gradients, clipping, dropout and AdamW on the device, the loss and norm downloaded.
# - Same kernels, same math: the checkpoint (weights and optimizer state) is byte-identical to
#   strategy cpu's, and so is every logged loss and gradient norm.
# - A run killed after a checkpoint and resumed on the device (state() downloads, sync()
#   uploads) ends byte-identical to the straight run; that checkpoint also resumes under cpu.
# - ddp on GPUs: auto on 2 and 3 fake GPUs launches one process per GPU, each rank on its own
#   device, buckets staged through host memory over shm: byte-identical to ddp over as many
#   CPU ranks with the same all-reduce update (shard_update=false; GPU ranks do not shard it);
#   killed and resumed on the GPUs: byte-identical to the straight run. Two ranks sharing one
#   GPU (devices [0, 0], the one-GPU testing mode): the same.
# - dataparallel with GPU replicas (2 on 2 fake GPUs, 2 on one: devices [0, 0], 3 on 2):
#   byte-identical to dataparallel's CPU replicas; killed and resumed: the same. The CNN with
#   sync_batchnorm on 2 GPU replicas: within 1e-5 of its CPU replicas.
# - A CNN (conv2d, batch-norm, ReLU, max-pool, dropout; SGD) trains on the device within 1e-5
#   of cpu (not byte for byte: on the CPU batch-norm, pool and ReLU are one fused op whose
#   gradient sums run in another order; on a device they are the three ops).
# - The transformer in modes lm, classify and pairs (embedding, layer-norm, attention,
#   slices, mean pooling, cosine, mse) on the device: byte-identical to cpu.
# - A kernel table without sumsq_to (a plugin built before it): the same bytes as cpu.
# - A model with an op the device has no kernel for (a plugin built before that op's entries)
#   stops with a message naming the op and the device; a model larger than the device's
#   memory stops naming the memory; both exit 1.
# usage: single_gpu.sh TRAINER_BIN FAKE_GPU_PLUGIN_DIR
set -u
bin="$1"; fake="$2"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
t="$(mktemp -d /tmp/trainer-single-gpu-XXXXXX)"
trap 'rm -rf "$t"' EXIT
export TRAINER_PLUGIN_PATH="$fake"
unset CUDA_VISIBLE_DEVICES TRAINER_FAKE_GPUS
mlp_device_yaml "$t/mlp.yaml" fake_gpu 5
echo 'checkpoint: {every_n_steps: 10}' >>"$t/mlp.yaml"
# The last checkpoint of run directory $1.
last_ckpt() { ls -d "$1"/m/*/checkpoints/step-* 2>/dev/null | tail -1; }
# Logged step and validation records without their timings (the memory record differs: on
# a device the activation arena holds data only, tensor headers stay on the host).
curve_of() { grep -v '"memory"' "$1" | sed 's/"samples_per_sec": [0-9.e+]*//; s/"tokens_per_sec": [0-9.e+]*//'; }
curve() { curve_of "$1"/m/0/metrics.jsonl; }
same_ckpt() {
    cmp -s "$1/model.safetensors" "$2/model.safetensors" && cmp -s "$1/optimizer.safetensors" "$2/optimizer.safetensors"
}

out="$(TRAINER_FAKE_GPUS=1 "$bin" plan "$t/mlp.yaml" --json 2>&1)"
if grep -q '"strategy": "single-gpu", "reason": "auto: found 1 GPU (id 0); 1 GPU -> single-gpu"' <<<"$out" &&
   grep -q '"world": 1,' <<<"$out"; then ok "plan with 1 GPU: single-gpu, and why"
else bad "plan with 1 GPU" "$out"; fi

out="$(TRAINER_FAKE_GPUS=1 timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/gpu" 2>&1)"; rc=$?
if [ $rc = 0 ] && grep -q "strategy single-gpu chosen: auto: found 1 GPU (id 0); 1 GPU -> single-gpu" <<<"$out" &&
   grep -q "strategy single-gpu (fake_gpu:0, Fake GPU 0)" <<<"$out" && grep -q "done: 30 steps" <<<"$out"; then
    ok "run with 1 GPU under auto: single-gpu chosen, said why, trained 30 steps"
else bad "run with 1 GPU" "rc=$rc" "$out"; fi
out="$(TRAINER_FAKE_GPUS=1 timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/cpu" trainer.accelerator=cpu 2>&1)"; rc=$?
a="$(last_ckpt "$t/gpu")"; b="$(last_ckpt "$t/cpu")"
if [ $rc = 0 ] && grep -q "strategy cpu (1 threads)" <<<"$out" && [ -n "$a" ] && [ "$(basename "$a")" = "$(basename "$b")" ] &&
   same_ckpt "$a" "$b"; then
    ok "single-gpu and cpu: byte-identical weights and optimizer state after 30 steps ($(basename "$a"))"
else bad "single-gpu vs cpu checkpoints" "rc=$rc" "gpu: $a" "cpu: $b" "$out"; fi
if [ -n "$(curve "$t/gpu")" ] && diff <(curve "$t/gpu") <(curve "$t/cpu") >/dev/null; then
    ok "single-gpu and cpu: identical loss, gradient norm and validation records ($(curve "$t/gpu" | wc -l) lines)"
else bad "single-gpu vs cpu metrics" "$(diff <(curve "$t/gpu") <(curve "$t/cpu") | head -6)"; fi

# Killed right after the step-20 checkpoint, resumed on the device.
(TRAINER_FAKE_GPUS=1 TRAINER_FAULT_KILL_AT_STEP=20 exec timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/killed" >"$t/k1.log" 2>&1); rc1=$?
out="$(TRAINER_FAKE_GPUS=1 timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/killed" 2>&1)"; rc=$?
c="$(last_ckpt "$t/killed")"
if [ $rc1 = 137 ] && [ $rc = 0 ] && grep -q "resuming from .*step-00000020" <<<"$out" && [ -n "$c" ] && same_ckpt "$a" "$c"; then
    ok "killed at step 20 and resumed on the device: byte-identical to the straight run"
else bad "kill and resume on single-gpu" "rc1=$rc1 rc=$rc" "$out" "$(tail -3 "$t/k1.log")"; fi
# The device's step-20 checkpoint, resumed under cpu: the same end.
mkdir -p "$t/cross"
cp -r "$t/gpu/m" "$t/cross/" && rm -rf "$t/cross/m/0/checkpoints/step-00000030"
out="$(TRAINER_FAKE_GPUS=1 timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/cross" trainer.accelerator=cpu 2>&1)"; rc=$?
d="$(last_ckpt "$t/cross")"
if [ $rc = 0 ] && grep -q "resuming from .*step-00000020" <<<"$out" && grep -q "strategy cpu" <<<"$out" && same_ckpt "$a" "$d"; then
    ok "a single-gpu checkpoint resumes under cpu and ends byte-identical"
else bad "single-gpu checkpoint resumed under cpu" "rc=$rc" "$out"; fi

# ddp with one process per fake GPU against ddp over CPU ranks (small buckets: several
# all-reduces per step, overlapping backward).
for n in 2 3; do
    out="$(TRAINER_FAKE_GPUS=$n timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/ddpg$n" strategy.first_bucket_mb=0.001 \
           strategy.bucket_mb=0.002 2>&1)"; rc=$?
    out2="$(timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/ddpc$n" trainer.accelerator=cpu trainer.devices=$n \
            strategy.first_bucket_mb=0.001 strategy.bucket_mb=0.002 strategy.shard_update=false 2>&1)"; rc2=$?
    e="$(last_ckpt "$t/ddpg$n")"; f="$(last_ckpt "$t/ddpc$n")"
    if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "strategy ddp chosen: auto: found $n GPUs" <<<"$out" &&
       grep -q "one GPU each: this rank fake_gpu:0, [0-9]* buckets" <<<"$out" && [ -n "$e" ] && same_ckpt "$e" "$f" &&
       diff <(curve "$t/ddpg$n") <(curve "$t/ddpc$n") >/dev/null; then
        ok "ddp on $n fake GPUs (auto, one process each): byte-identical to ddp on $n CPU ranks, same loss curve"
    else bad "ddp on $n fake GPUs vs CPU ranks" "rc=$rc rc2=$rc2" "$out" "$(tail -3 <<<"$out2")"; fi
done
# The one-GPU testing mode: 2 ddp ranks sharing fake GPU 0 (devices [0, 0]).
out="$(TRAINER_FAKE_GPUS=1 timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/ddp00" trainer.strategy=ddp "trainer.devices=[0, 0]" \
       strategy.first_bucket_mb=0.001 strategy.bucket_mb=0.002 2>&1)"; rc=$?
e="$(last_ckpt "$t/ddp00")"; f="$(last_ckpt "$t/ddpc2")"
if [ $rc = 0 ] && grep -q "2 ranks over shm, ranks sharing GPUs (a testing mode): this rank fake_gpu:0" <<<"$out" && [ -n "$e" ] &&
   same_ckpt "$e" "$f" && diff <(curve "$t/ddp00") <(curve "$t/ddpc2") >/dev/null; then
    ok "ddp with 2 ranks on one fake GPU (devices [0, 0], the testing mode): byte-identical to ddp on 2 CPU ranks"
else bad "ddp with 2 ranks sharing one fake GPU" "rc=$rc" "$out"; fi
(TRAINER_FAKE_GPUS=2 TRAINER_FAULT_KILL_AT_STEP=20 exec timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/ddpk" \
    strategy.first_bucket_mb=0.001 strategy.bucket_mb=0.002 >"$t/dk1.log" 2>&1); rc1=$?
out="$(TRAINER_FAKE_GPUS=2 timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/ddpk" strategy.first_bucket_mb=0.001 \
       strategy.bucket_mb=0.002 2>&1)"; rc=$?
k="$(last_ckpt "$t/ddpk")"
if [ $rc1 != 0 ] && [ $rc = 0 ] && grep -q "resuming from .*step-00000020" <<<"$out" && [ -n "$k" ] && same_ckpt "$(last_ckpt "$t/ddpg2")" "$k"; then
    ok "ddp on 2 fake GPUs killed at step 20 and resumed: byte-identical to the straight run"
else bad "ddp on fake GPUs: kill and resume" "rc1=$rc1 rc=$rc" "$out" "$(tail -3 "$t/dk1.log")"; fi

# dataparallel with GPU replicas (reduce to the primary and replicate through host memory):
# on 2 fake GPUs, on one (devices [0, 0], the testing mode) and 3 replicas on 2; the same
# bytes as dataparallel's CPU replicas.
dp_cpu() { timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dpc$1" trainer.strategy=dataparallel trainer.accelerator=cpu \
           trainer.devices=$1 >/dev/null 2>&1; }
dp_cpu 2 && dp_cpu 3
for spec in "2|[0, 1]|2" "1|[0, 0]|2" "2|[0, 1, 0]|3"; do
    IFS='|' read -r gpus ids n <<<"$spec"
    out="$(TRAINER_FAKE_GPUS=$gpus timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dpg$gpus$n" trainer.strategy=dataparallel \
           "trainer.devices=$ids" 2>&1)"; rc=$?
    e="$(last_ckpt "$t/dpg$gpus$n")"; f="$(last_ckpt "$t/dpc$n")"
    if [ $rc = 0 ] && grep -q "strategy dataparallel ($n GPU replicas on fake_gpu:" <<<"$out" && [ -n "$e" ] && same_ckpt "$e" "$f" &&
       diff <(curve "$t/dpg$gpus$n") <(curve "$t/dpc$n") >/dev/null; then
        ok "dataparallel, $n GPU replicas on $gpus fake GPU(s) (devices $ids): byte-identical to $n CPU replicas, same loss curve"
    else bad "dataparallel with $n replicas on $gpus fake GPUs vs CPU replicas" "rc=$rc" "$out"; fi
done
(TRAINER_FAKE_GPUS=1 TRAINER_FAULT_KILL_AT_STEP=20 exec timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dpk" \
    trainer.strategy=dataparallel "trainer.devices=[0, 0]" >"$t/dpk1.log" 2>&1); rc1=$?
out="$(TRAINER_FAKE_GPUS=1 timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dpk" trainer.strategy=dataparallel "trainer.devices=[0, 0]" 2>&1)"; rc=$?
k="$(last_ckpt "$t/dpk")"
if [ $rc1 = 137 ] && [ $rc = 0 ] && grep -q "resuming from .*step-00000020" <<<"$out" && [ -n "$k" ] && same_ckpt "$(last_ckpt "$t/dpc2")" "$k"; then
    ok "dataparallel on GPU replicas killed at step 20 and resumed: byte-identical to the straight run"
else bad "dataparallel on GPU replicas: kill and resume" "rc1=$rc1 rc=$rc" "$out" "$(tail -3 "$t/dpk1.log")"; fi

# A CNN through the device's conv2d, pool and batch-norm kernels.
cnn_device_yaml "$t/cnn.yaml" fake_gpu 1
out="$(TRAINER_FAKE_GPUS=1 timeout 120 "$bin" run "$t/cnn.yaml" "run.output_dir=$t/cnn_gpu" 2>&1)"; rc=$?
out2="$(timeout 120 "$bin" run "$t/cnn.yaml" "run.output_dir=$t/cnn_cpu" trainer.accelerator=cpu 2>&1)"; rc2=$?
if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "strategy single-gpu (fake_gpu:0" <<<"$out" && grep -q "done: 12 steps" <<<"$out" &&
   cmp_out="$(cmp_runs "$t/cnn_gpu/c/0" "$t/cnn_cpu/c/0" --tol 1e-5 2>&1)"; then
    ok "a CNN (conv2d, batch-norm, max-pool) on the fake GPU: within 1e-5 of cpu ($cmp_out)"
else bad "cnn on the fake GPU vs cpu" "rc=$rc rc2=$rc2" "${cmp_out:-}" "$out" "$(tail -3 <<<"$out2")"; fi
out="$(TRAINER_FAKE_GPUS=1 timeout 120 "$bin" run "$t/cnn.yaml" "run.output_dir=$t/cnn_dpg" trainer.strategy=dataparallel \
       "trainer.devices=[0, 0]" strategy.sync_batchnorm=true 2>&1)"; rc=$?
out2="$(timeout 120 "$bin" run "$t/cnn.yaml" "run.output_dir=$t/cnn_dpc" trainer.strategy=dataparallel trainer.accelerator=cpu \
        trainer.devices=2 strategy.sync_batchnorm=true 2>&1)"; rc2=$?
if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "2 GPU replicas on fake_gpu:0, fake_gpu:0.*sync batch-norm" <<<"$out" &&
   cmp_out="$(cmp_runs "$t/cnn_dpg/c/0" "$t/cnn_dpc/c/0" --tol 1e-5 2>&1)"; then
    ok "the CNN under dataparallel on 2 GPU replicas with sync_batchnorm: within 1e-5 of 2 CPU replicas ($cmp_out)"
else bad "cnn dataparallel sync_batchnorm on fake GPUs vs CPU replicas" "rc=$rc rc2=$rc2" "${cmp_out:-}" "$out" "$(tail -3 <<<"$out2")"; fi
# The transformers through the device's kernels (embedding, layer-norm, attention, slices,
# pooling, cosine, mse): the same kernels as cpu, so byte for byte.
for mode in lm classify pairs; do
    transformer_device_yaml "$t/tf_$mode.yaml" "$t/tf_$mode" fake_gpu $mode
    out="$(TRAINER_FAKE_GPUS=1 timeout 120 "$bin" run "$t/tf_$mode.yaml" "run.output_dir=$t/tf_${mode}_gpu" 2>&1)"; rc=$?
    out2="$(timeout 120 "$bin" run "$t/tf_$mode.yaml" "run.output_dir=$t/tf_${mode}_cpu" trainer.accelerator=cpu 2>&1)"; rc2=$?
    a="$(ls -d "$t/tf_${mode}_gpu"/l/0/checkpoints/step-* 2>/dev/null | tail -1)"; b="${a/_gpu/_cpu}"
    if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "strategy single-gpu (fake_gpu:0" <<<"$out" && grep -q "done: 8 steps" <<<"$out" &&
       [ -n "$a" ] && same_ckpt "$a" "$b" &&
       diff <(curve_of "$t/tf_${mode}_gpu"/l/0/metrics.jsonl) <(curve_of "$t/tf_${mode}_cpu"/l/0/metrics.jsonl) >/dev/null; then
        ok "a transformer (mode $mode) on the fake GPU: byte-identical to cpu after 8 steps, same loss curve"
    else bad "transformer mode $mode on the fake GPU vs cpu" "rc=$rc rc2=$rc2" "$out" "$(tail -3 <<<"$out2")"; fi
done
# A device plugin built before the transformers' entries: a clear stop, not a wrong result.
out="$(TRAINER_FAKE_GPUS=1 TRAINER_FAKE_GPU_OLD_KERNELS=1 timeout 60 "$bin" run "$t/tf_lm.yaml" 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "embedding: device fake_gpu:0 has no kernel for this op" <<<"$out"; then
    ok "an op the device has no kernel for stops the run naming op and device: $(grep -o 'embedding: device[^(]*' <<<"$out" | head -1)"
else bad "transformer on a fake GPU without its kernels" "rc=$rc" "$out"; fi
# A device plugin built before the fused self-attention (attention_qkv): the transformer's
# attention is composed of three slices and attention there; the same bytes as cpu's fused op.
out="$(TRAINER_FAKE_GPUS=1 TRAINER_FAKE_GPU_OLD_KERNELS=qkv timeout 120 "$bin" run "$t/tf_lm.yaml" \
       "run.output_dir=$t/tf_lm_noqkv" 2>&1)"; rc=$?
a="$(ls -d "$t/tf_lm_noqkv"/l/0/checkpoints/step-* 2>/dev/null | tail -1)"; b="$(ls -d "$t/tf_lm_cpu"/l/0/checkpoints/step-* 2>/dev/null | tail -1)"
if [ $rc = 0 ] && grep -q "done: 8 steps" <<<"$out" && [ -n "$a" ] && [ -n "$b" ] && same_ckpt "$a" "$b" &&
   diff <(curve_of "$t/tf_lm_noqkv"/l/0/metrics.jsonl) <(curve_of "$t/tf_lm_cpu"/l/0/metrics.jsonl) >/dev/null; then
    ok "a device without the fused self-attention: slices and attention there, byte-identical to cpu after 8 steps"
else bad "transformer on a fake GPU without attention_qkv" "rc=$rc" "$out"; fi
# A kernel table from before sumsq_to (which queues each parameter's gradient sum into device
# memory): the core sums with sumsq and uploads each value instead; the same bytes as cpu.
out="$(TRAINER_FAKE_GPUS=1 TRAINER_FAKE_GPU_OLD_KERNELS=1 timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/old" 2>&1)"; rc=$?
a="$(last_ckpt "$t/old")"; b="$(last_ckpt "$t/cpu")"
if [ $rc = 0 ] && [ -n "$a" ] && [ "$(basename "$a")" = "$(basename "$b")" ] && same_ckpt "$a" "$b" &&
   diff <(curve "$t/old") <(curve "$t/cpu") >/dev/null; then
    ok "a device without sumsq_to: gradient norms summed and uploaded, byte-identical to cpu ($(basename "$a"))"
else bad "single-gpu on a kernel table without sumsq_to" "rc=$rc" "$out"; fi
# A model larger than the device's memory (1 MiB): the allocation fails, named.
out="$(TRAINER_FAKE_GPUS=1 TRAINER_FAKE_GPU_MIB=1 timeout 60 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/big" \
       "model.params.layers=[1024, 1024]" 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "fake_gpu:0: out of device memory" <<<"$out"; then
    ok "a model larger than device memory: $(grep -o 'fake_gpu:0: out of device memory[^;]*' <<<"$out" | head -1)"
else bad "model larger than the fake GPU" "rc=$rc" "$out"; fi
# A device plugin without set_precision (fp32 only) asked for bf16-mixed: refused by the
# probes; under auto the CPU, then refused too on a CPU without AVX512-BF16 (forced: where the
# CPU has it, auto trains there), the message saying both.
out="$(TRAINER_CPU_NO_BF16=1 TRAINER_FAKE_GPUS=1 timeout 60 "$bin" run "$t/mlp.yaml" trainer.precision=bf16-mixed 2>&1)"; rc=$?
out2="$(TRAINER_FAKE_GPUS=1 timeout 60 "$bin" run "$t/mlp.yaml" trainer.precision=bf16-mixed trainer.accelerator=gpu 2>&1)"; rc2=$?
if [ $rc = 1 ] && [ $rc2 = 1 ] && grep -q "bf16-mixed on the CPU (strategy cpu: auto: found no GPU (1 GPU of fake_gpu left unused: device plugin fake_gpu .* computes in fp32 only.*without AVX512-BF16" <<<"$out" &&
   grep -q "strategy single-gpu .* cannot run here: device plugin fake_gpu .* computes in fp32 only: its table has no 'set_precision' entry" <<<"$out2"; then
    ok "bf16-mixed on a device plugin that computes in fp32 only: refused under auto and under accelerator gpu"
else bad "bf16-mixed on fake_gpu" "rc=$rc rc2=$rc2" "$out" "$out2"; fi
finish
