#!/usr/bin/env bash
# The real nccl backend on this machine's GPUs (label gpu; exit 77, skipped, without one):
# comm_check at world 1 (host buffers staged through the GPU), and with 2 GPUs or more at
# world 2 and ddp over nccl on 2 GPUs against cpu (within 1e-4).
# usage: gpu_nccl.sh TRAINER_BIN TESTS_DIR PLUGIN_DIR
set -u
bin="$1"; tests="$2"; plugins="$3"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
gpus="$(gpu_count "$bin")"
if [ "$gpus" = 0 ]; then echo "no GPU here: skipped"; exit 77; fi
t="$(mktemp -d /tmp/trainer-gpu-nccl-XXXXXX)"
trap 'rm -rf "$t"' EXIT
export TRAINER_COMM_TIMEOUT=60
worlds=1; [ "$gpus" -ge 2 ] && worlds="1 2"
for w in $worlds; do comm_check_world "$bin" "$tests" "$plugins" nccl "$w" "nccl, a GPU per rank"; done
if [ "$gpus" -ge 2 ]; then
    mlp_device_yaml "$t/mlp.yaml" cuda 1
    out="$(timeout 300 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/ddp" trainer.devices=2 2>&1)"; rc=$?
    out2="$(timeout 300 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/cpu" trainer.accelerator=cpu 2>&1)"; rc2=$?
    if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "over nccl, one GPU each: .* all-reduced in device memory" <<<"$out" &&
       cmp_out="$(cmp_runs "$t/ddp/m/0" "$t/cpu/m/0" --tol 1e-4 2>&1)"; then
        ok "ddp over nccl on 2 GPUs: within 1e-4 of cpu ($cmp_out)"
    else bad "ddp over nccl on 2 GPUs" "rc=$rc rc2=$rc2" "${cmp_out:-}" "$(tail -5 <<<"$out")"; fi
fi
finish
