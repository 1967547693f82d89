#!/usr/bin/env bash
# Training on a CUDA device plugin's GPUs against the CPU, end to end. Run twice: on this
# machine's GPUs through the real `cuda` plugin (label gpu; exit 77, skipped, without one) and,
# in every build, on 2 GPUs of the CPU emulator of CUDA (`cuda_emu`, the same plugin sources
# and kernels.cu). With NCCL the backend `nccl` (`nccl_emu` for the emulator).
# - single-gpu: the MLP (GELU, dropout, AdamW, cosine, clipping; 30 steps), the CNN (conv2d,
#   batch-norm, max-pool, dropout; SGD; 12 steps) and the transformer in modes lm, classify
#   and pairs (embedding, layer-norm, attention, slices, pooling, cosine, mse; 8 steps):
#   weights, every logged loss and the validation metrics within 1e-4 of cpu on a GPU (expf,
#   erff, tanhf and cuBLAS's sums differ from the CPU's by ulps), 1e-5 on the emulator;
# - the one-GPU testing modes on GPU 0 against single-gpu (the same tolerance): dataparallel with
#   devices [0, 0] (2 replicas in one process), ddp with 2 ranks on GPU 0 and sharded
#   (stage 3) with 2 ranks on GPU 0 (both staged through host memory over shm);
# - with 2 GPUs or more: ddp and sharded (stage 3) with a rank per GPU over the NCCL backend
#   (collectives in device memory), against cpu;
# - trainer.precision bf16-mixed: single-gpu on the transformer lm (20 steps), the CNN and
#   the MLP: the loss curve (every logged loss) within 3e-2 of fp32's single-gpu run, and on
#   the emulator not the same run (weights more than 1e-6 apart: the GEMMs did round); ddp with 2 ranks on
#   GPU 0 in bf16-mixed within the tolerance above of single-gpu's bf16-mixed run. Every run
#   must exit 0.
# usage: gpu_train.sh TRAINER_BIN DEVICE_PLUGIN (cuda or cuda_emu) [PYTHON]
set -u
bin="$1"; dev="$2"; py="${3:-/usr/bin/python3}"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
nccl=nccl
# The emulated NCCL then also checks that the ranks hand it their device's compute stream.
[ "$dev" = cuda_emu ] && nccl=nccl_emu && export TRAINER_NCCL_EMU_STREAM=1
gpus="$("$bin" devices 2>/dev/null | grep -cE "^gpu +1 .*\(device plugin $dev, id")"
if [ "$gpus" = 0 ]; then echo "skipped: the $dev device plugin sees no GPU here"; exit 77; fi
t="$(mktemp -d /tmp/trainer-gpu-train-XXXXXX)"
trap 'rm -rf "$t"' EXIT
export TRAINER_COMM_TIMEOUT=120
tol=1e-4; [ "$dev" = cuda_emu ] && tol=1e-5
# train NAME CONFIG [overrides...]: a run into $t/NAME, its log in $t/NAME.log, its exit
# status in $t/NAME.rc.
train() {
    local name="$1" cfg="$2"; shift 2
    timeout 600 "$bin" run "$cfg" "run.output_dir=$t/$name" "$@" >"$t/$name.log" 2>&1
    echo $? >"$t/$name.rc"
}
# near NAME REF WHAT GREP: NAME exited 0, its log says GREP, and it is within $tol of REF.
near() {
    local name="$1" ref="$2" what="$3" want="$4" d
    d="$(ls -d "$t/$name"/*/0 2>/dev/null | head -1)"
    if [ "$(cat "$t/$name.rc")" = 0 ] && [ -n "$d" ] && grep -q "$want" "$t/$name.log" &&
       cmp_out="$(cmp_runs "$d" "${d/\/$name\//\/$ref\/}" --tol $tol 2>&1)"; then
        ok "$what: within $tol of $ref ($cmp_out)"
    else bad "$what" "rc=$(cat "$t/$name.rc")" "${cmp_out:-}" "$(tail -3 "$t/$name.log")"; fi
}

mlp_device_yaml "$t/mlp.yaml" "$dev" 1
cnn_device_yaml "$t/cnn.yaml" "$dev" 1
for m in lm classify pairs; do transformer_device_yaml "$t/$m.yaml" "$t/$m" "$dev" $m; done
for c in mlp cnn lm classify pairs; do
    train "${c}_cpu" "$t/$c.yaml" trainer.accelerator=cpu
    [ "$(cat "$t/${c}_cpu.rc")" = 0 ] || bad "$c on cpu failed" "$(tail -3 "$t/${c}_cpu.log")"
    train "${c}_gpu" "$t/$c.yaml" trainer.strategy=single-gpu trainer.devices=1
    near "${c}_gpu" "${c}_cpu" "$c under single-gpu on $dev:0" "strategy single-gpu ($dev:0"
done

# The one-GPU testing modes against single-gpu.
train dp "$t/mlp.yaml" trainer.strategy=dataparallel "trainer.devices=[0, 0]"
near dp mlp_gpu "dataparallel with 2 replicas on $dev:0 (devices [0, 0])" "2 GPU replicas on $dev:0, $dev:0"
train ddp00 "$t/mlp.yaml" trainer.strategy=ddp "trainer.devices=[0, 0]" strategy.first_bucket_mb=0.001 strategy.bucket_mb=0.002
near ddp00 mlp_gpu "ddp with 2 ranks on $dev:0 (devices [0, 0])" "ranks sharing GPUs (a testing mode).* staged through host memory"
train z00 "$t/mlp.yaml" trainer.strategy=sharded "trainer.devices=[0, 0]" strategy.stage=3 strategy.unit_mb=0.001
near z00 mlp_gpu "sharded stage 3 with 2 ranks on $dev:0 (devices [0, 0])" "ranks sharing GPUs (a testing mode).* staged through host memory"

# bf16-mixed against fp32: close, not equal.
# bf16 NAME REF WHAT: NAME exited 0 in bf16-mixed, its loss curve within 3e-2 of REF's (fp32);
# on the emulator (every operand rounded) its weights not REF's. cuBLAS may keep a shape in a
# more precise arithmetic, so on a GPU the distance is reported, not asserted.
bf16() {
    local name="$1" ref="$2" what="$3" d near_out far_out far_rc far_ok=1
    d="$(ls -d "$t/$name"/*/0 2>/dev/null | head -1)"
    far_out="$(cmp_runs "$d" "${d/\/$name\//\/$ref\/}" --tol 1e-6 --weights-only 2>&1)"; far_rc=$?
    if [ "$dev" = cuda_emu ]; then { [ $far_rc = 1 ] && grep -q "^weights rel L2" <<<"$far_out"; } || far_ok=0; fi
    if [ "$(cat "$t/$name.rc")" = 0 ] && [ -n "$d" ] && grep -q "precision bf16-mixed: the GEMMs" "$t/$name.log" &&
       near_out="$(cmp_runs "$d" "${d/\/$name\//\/$ref\/}" --tol 3e-2 --losses-only 2>&1)" && [ $far_ok = 1 ]; then
        ok "$what: loss curve within 3e-2 of fp32's ($near_out)"
    else bad "$what" "rc=$(cat "$t/$name.rc")" "${near_out:-}" "apart from fp32: ${far_out:-}" "$(tail -3 "$t/$name.log")"; fi
}
train lm20 "$t/lm.yaml" trainer.strategy=single-gpu trainer.devices=1 trainer.max_steps=20
train lm20_bf16 "$t/lm.yaml" trainer.strategy=single-gpu trainer.devices=1 trainer.max_steps=20 trainer.precision=bf16-mixed
bf16 lm20_bf16 lm20 "transformer lm in bf16-mixed on $dev:0 (20 steps)"
for c in cnn mlp; do
    train ${c}_bf16 "$t/$c.yaml" trainer.strategy=single-gpu trainer.devices=1 trainer.precision=bf16-mixed
    bf16 ${c}_bf16 ${c}_gpu "$c in bf16-mixed on $dev:0"
done
train ddp00_bf16 "$t/mlp.yaml" trainer.strategy=ddp "trainer.devices=[0, 0]" trainer.precision=bf16-mixed \
    strategy.first_bucket_mb=0.001 strategy.bucket_mb=0.002
near ddp00_bf16 mlp_bf16 "ddp in bf16-mixed with 2 ranks on $dev:0" "precision bf16-mixed: the GEMMs"

# A rank per GPU over NCCL.
if [ "$gpus" -ge 2 ]; then
    train ddp2 "$t/mlp.yaml" trainer.strategy=ddp trainer.devices=2 strategy.backend=$nccl strategy.first_bucket_mb=0.001
    near ddp2 mlp_cpu "ddp on 2 GPUs over $nccl" "over $nccl, one GPU each: .* all-reduced in device memory"
    train z2 "$t/mlp.yaml" trainer.strategy=sharded trainer.devices=2 strategy.backend=$nccl strategy.unit_mb=0.001
    near z2 mlp_cpu "sharded stage 3 on 2 GPUs over $nccl" "over $nccl, one GPU each: .* in device memory"
fi
finish
