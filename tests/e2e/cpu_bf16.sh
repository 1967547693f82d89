#!/usr/bin/env bash
# trainer.precision bf16-mixed on the CPU (docs/gpu.md, Precision), end to end:
# - refused before training, exit 1 with the reason, where the CPU has no AVX512-BF16
#   (TRAINER_CPU_NO_BF16=1 stands for such a CPU); with no such CPU here the rest is skipped
#   (exit 77) after that check;
# - the transformer LM (20 steps), the MLP and the CNN on strategy cpu: the loss curve within
#   3e-2 of fp32's (gpu_train.sh's bound for the GPUs' bf16-mixed) and the weights more than
#   1e-6 apart (the GEMMs did round); the LM again with the other kernel forced;
# - ddp with 2 ranks and dataparallel with 2 replicas in bf16-mixed: within 1e-3 of cpu's
#   bf16-mixed weights and losses, and more than 1e-3 from fp32's weights (their ranks round
#   too). Not fp32's 1e-5: the batch split changes the order of the weight gradients' sums, so
#   the fp32 master weights differ in their last bits, and a weight or activation that sits on
#   a bf16 tie then rounds to the other neighbour, a step of 2^-8 (measured on the MLP: 6e-8
#   with the vdpbf16ps kernel, where no rounding flipped, 3.3e-4 with the fma one);
# - beside PyTorch's torch.autocast("cpu", dtype=torch.bfloat16) (tools/bench/torch_peer.py
#   --bf16, from trainer's initial weights, dropout off, batches in file order): the GPT LM and
#   the MLP of tools/bench/cpu_vs_torch.py over 5 steps within 3e-2 (skipped without torch).
# usage: cpu_bf16.sh TRAINER_BIN [PYTHON]
set -u
bin="$1"; py="${2:-/usr/bin/python3}"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
bench="$here/../../tools/bench"
t="$(mktemp -d /tmp/trainer-cpu-bf16-XXXXXX)"
trap 'rm -rf "$t"' EXIT
export TRAINER_COMM_TIMEOUT=120

mlp_device_yaml "$t/mlp.yaml" cuda 1
cnn_device_yaml "$t/cnn.yaml" cuda 1
transformer_device_yaml "$t/lm.yaml" "$t/lm" cuda lm

# Refused where the CPU lacks the instruction: nothing trained, nothing written.
out="$(TRAINER_CPU_NO_BF16=1 timeout 60 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/refused" trainer.precision=bf16-mixed 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "command line:1:19: trainer.precision: bf16-mixed on the CPU (strategy cpu.*TRAINER_CPU_NO_BF16=1 treats this CPU as one without AVX512-BF16 (vdpbf16ps), which bf16-mixed needs there; run with trainer.precision=fp32" <<<"$out" &&
   [ ! -e "$t/refused" ]; then
    ok "bf16-mixed refused on a CPU without AVX512-BF16: $out"
else bad "bf16-mixed on a CPU without AVX512-BF16" "rc=$rc" "$out"; fi
out="$(timeout 60 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/probe" trainer.precision=bf16-mixed trainer.max_steps=1 2>&1)"; rc=$?
if [ $rc != 0 ] && grep -q "this CPU has no AVX512-BF16" <<<"$out"; then
    ok "this CPU has no AVX512-BF16: refused ($out)"
    finish || exit 1
    echo "skipped: the rest needs a CPU with AVX512-BF16"; exit 77
fi

train() {
    local name="$1" cfg="$2"; shift 2
    timeout 600 "$bin" run "$cfg" "run.output_dir=$t/$name" "$@" >"$t/$name.log" 2>&1
    echo $? >"$t/$name.rc"
}
rundir() { ls -d "$t/$1"/*/0 2>/dev/null | head -1; }

# bf16 NAME REF WHAT: NAME (bf16-mixed) exited 0, said so, its losses within 3e-2 of REF's
# (fp32) and its weights not REF's.
bf16() {
    local name="$1" ref="$2" what="$3" near_out far_out far_rc
    far_out="$(cmp_runs "$(rundir "$name")" "$(rundir "$ref")" --tol 1e-6 --weights-only 2>&1)"; far_rc=$?
    if [ "$(cat "$t/$name.rc")" = 0 ] && grep -q "precision bf16-mixed: the GEMMs" "$t/$name.log" &&
       near_out="$(cmp_runs "$(rundir "$name")" "$(rundir "$ref")" --tol 3e-2 --losses-only 2>&1)" && [ $far_rc = 1 ]; then
        ok "$what: loss curve within 3e-2 of fp32's ($near_out)"
    else bad "$what" "rc=$(cat "$t/$name.rc")" "${near_out:-}" "apart from fp32: ${far_out:-}" "$(tail -3 "$t/$name.log")"; fi
}
for c in lm mlp cnn; do
    steps=(); [ $c = lm ] && steps=(trainer.max_steps=20)
    train ${c}32 "$t/$c.yaml" trainer.strategy=cpu "${steps[@]}"
    train ${c}16 "$t/$c.yaml" trainer.strategy=cpu trainer.precision=bf16-mixed "${steps[@]}"
    bf16 ${c}16 ${c}32 "$c in bf16-mixed on the CPU"
done
# Each kernel (kernels/gemm_bf16.c; the default one above): the LM with the other one forced.
# (the run names its kernel: "the CPU's bf16 GEMM kernel: NAME")
other=dpbf16; grep -q "bf16 GEMM kernel: dpbf16" "$t/lm16.log" && other=fma
grep -q "bf16 GEMM kernel: \(dpbf16\|fma\)" "$t/lm16.log" || bad "the run names its bf16 kernel" "$(grep precision "$t/lm16.log")"
TRAINER_CPU_BF16_KERNEL=$other train lm16k "$t/lm.yaml" trainer.strategy=cpu trainer.precision=bf16-mixed trainer.max_steps=20
bf16 lm16k lm32 "lm in bf16-mixed on the CPU, TRAINER_CPU_BF16_KERNEL=$other"

# Strategy invariance under bf16-mixed, up to roundings flipped by last-bit differences.
same() {
    local name="$1" what="$2" out far far_rc
    far="$(cmp_runs "$(rundir "$name")" "$(rundir mlp32)" --tol 1e-3 --weights-only 2>&1)"; far_rc=$?
    if [ "$(cat "$t/$name.rc")" = 0 ] && out="$(cmp_runs "$(rundir "$name")" "$(rundir mlp16)" --tol 1e-3 2>&1)" &&
       [ $far_rc = 1 ]; then
        ok "$what: within 1e-3 of cpu's bf16-mixed run ($out), not fp32's ($far)"
    else bad "$what" "rc=$(cat "$t/$name.rc")" "${out:-}" "from fp32: $far" "$(tail -3 "$t/$name.log")"; fi
}
train ddp16 "$t/mlp.yaml" trainer.strategy=ddp trainer.devices=2 trainer.precision=bf16-mixed strategy.first_bucket_mb=0.001
same ddp16 "ddp with 2 ranks in bf16-mixed"
train dp16 "$t/mlp.yaml" trainer.strategy=dataparallel trainer.devices=2 trainer.precision=bf16-mixed
same dp16 "dataparallel with 2 replicas in bf16-mixed"

# Beside torch.autocast("cpu", dtype=torch.bfloat16).
if "$py" -c "import torch, numpy" 2>/dev/null; then
    "$py" "$bench/torch_peer.py" data "$t/data"
    for w in gpt mlp128; do
        d="$t/data"
        if [ $w = gpt ]; then ov=("data.params.path=$d/lm.txt")
        else ov=("data.params.images=$d/images" "data.params.labels=$d/labels" "data.val_params.images=$d/images" "data.val_params.labels=$d/labels"); fi
        cfg="$bench/configs/vs_torch_$w.yaml"
        train init_$w "$cfg" data.workers=0 trainer.max_epochs=100000 "${ov[@]}" optimizer.lr=1e-12 trainer.max_steps=1 trainer.threads=2
        train peer_$w "$cfg" data.workers=0 trainer.max_epochs=100000 "${ov[@]}" trainer.max_steps=5 trainer.log_every=1 \
            data.shuffle=false model.params.dropout=0 trainer.precision=bf16-mixed trainer.threads=2
        ck="$(ls -d "$(rundir init_$w)"/checkpoints/* | tail -1)/model.safetensors"
        theirs="$("$py" "$bench/torch_peer.py" check $w "$d" "$ck" 5 --bf16 2>&1)"
        ours="$("$py" -c 'import json, sys
print(" ".join(str(r["loss"]) for r in map(json.loads, open(sys.argv[1])) if "samples_per_sec" in r))' "$(rundir peer_$w)/metrics.jsonl" 2>&1)"
        if d_out="$("$py" -c 'import sys
a, b = [float(v) for v in sys.argv[1].split()], [float(v) for v in sys.argv[2].split()]
d = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) == 5 else float("inf")
print(f"max loss diff {d:.2e} over 5 steps")
sys.exit(0 if d <= 3e-2 else 1)' "$ours" "$theirs" 2>&1)"; then
            ok "$w in bf16-mixed beside torch.autocast(cpu, bfloat16): $d_out"
        else bad "$w beside torch.autocast(cpu, bfloat16)" "$d_out" "trainer: $ours" "torch: $theirs" "$(tail -3 "$t/peer_$w.log")"; fi
    done
else
    echo "note: no torch/numpy in $py: the comparison with torch.autocast is left out"
fi
finish
