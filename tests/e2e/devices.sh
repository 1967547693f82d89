#!/usr/bin/env bash
# Device discovery and auto selection with the test device plugin fake_gpu, which reports
# TRAINER_FAKE_GPUS GPUs and honours CUDA_VISIBLE_DEVICES as the CUDA driver does:
# - `trainer devices` lists each fake GPU (name, memory, plugin, id), or why there is none
#   (unset, hidden by CUDA_VISIBLE_DEVICES); the cuda plugin says what it sees or why not.
# - `trainer plan` with accelerator/devices/strategy auto for 0, 1, 2 and 8 GPUs: the choice
#   and its reason (one GPU: single-gpu; several: ddp with one process per GPU; both train:
#   tests/e2e/single_gpu.sh); where the GPU choice cannot run here (a device plugin that can
#   list GPUs but not run on them), auto trains on the CPU and says why — never silently.
# - Impossible requests are refused, saying what was found and what would work: accelerator
#   gpu without a usable GPU, more GPUs than exist, a GPU id that does not exist, an unknown
#   trainer.gpu_backend. strategy cpu stays on the CPU whatever GPUs exist.
# - Under a launcher's ranks (torchrun's variables), auto is one GPU per rank of this host and
#   the plan's world is the launcher's (2 hosts x 2 GPUs: 4, not the CPU); ddp on a host with
#   fewer GPUs shares them; a GPU count that is not the ranks, and single-gpu under 2 ranks,
#   are refused.
# - `trainer run` under auto with fake GPUs prints the choice and its reason and trains.
# - A device plugin whose ops table is too small is refused, naming the file and the reason,
#   by `trainer plugins --check` and in `trainer devices`, without stopping the others.
# usage: devices.sh TRAINER_BIN FAKE_GPU_PLUGIN_DIR BAD_DEVICE_PLUGIN_DIR
set -u
bin="$1"; fake="$2"; baddev="$3"; old="$(dirname "$fake")/old"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
t="$(mktemp -d /tmp/trainer-devices-XXXXXX)"
trap 'rm -rf "$t"' EXIT
export TRAINER_PLUGIN_PATH="$fake"
unset CUDA_VISIBLE_DEVICES TRAINER_FAKE_GPUS
cat >"$t/mlp.yaml" <<YAML
run: {name: m, seed: 3, output_dir: $t/runs}
model: {name: mlp, params: {layers: [32]}}
data: {name: synthetic, params: {samples: 256, val_samples: 64, features: 16, classes: 4}, batch_size: 32}
optimizer: {name: adamw, lr: 0.01}
trainer: {max_steps: 16, log_every: 8, progress: lines, threads: 1, gpu_backend: fake_gpu}
YAML

# ---- trainer devices ----
# The cuda device plugin is built unless TRAINER_CUDA=OFF: its line when it is there.
cuda_line=1; "$bin" plugins 2>/dev/null | grep -Eq "^device +cuda " || cuda_line=0
# On a machine with a real GPU the cuda plugin counts it too: the no-GPU checks need none.
cuda_gpus="$("$bin" devices 2>/dev/null | grep -c 'device plugin cuda, id')"
out="$(TRAINER_FAKE_GPUS=2 TRAINER_FAKE_GPU_MIB=2048 "$bin" devices 2>&1)"
if [ "$(grep -cE '^gpu +1 +Fake GPU [01] +2\.0 GiB \(device plugin fake_gpu, id [01];' <<<"$out")" = 2 ] &&
   { [ $cuda_line = 0 ] || grep -Eq "^gpu .*\(device plugin cuda[,:] " <<<"$out"; } &&
   grep -q "strategy auto here: 2 GPUs of fake_gpu: single-gpu for devices 1, ddp with one process per GPU" <<<"$out"; then
    ok "devices: two fake GPUs listed with name, memory, plugin and id; the cuda plugin's line; auto's rule for 2 GPUs"
else bad "devices with 2 fake GPUs" "$out"; fi
out="$("$bin" devices 2>&1)"
if grep -Eq "^gpu +0 .*device plugin fake_gpu: TRAINER_FAKE_GPUS is not set" <<<"$out" &&
   { [ "$cuda_gpus" != 0 ] || grep -q "strategy auto here: cpu for trainer.devices 1" <<<"$out"; }; then
    ok "devices: no fake GPU, with the reason; auto's rule without a GPU"
else bad "devices with none" "$out"; fi
out="$(TRAINER_FAKE_GPUS=2 CUDA_VISIBLE_DEVICES= "$bin" devices 2>&1)"
if grep -Eq "^gpu +0 .*device plugin fake_gpu: no GPU visible: CUDA_VISIBLE_DEVICES='' hides every device" <<<"$out"; then
    ok "devices: CUDA_VISIBLE_DEVICES='' hides every GPU, and says so"
else bad "devices with CUDA_VISIBLE_DEVICES empty" "$out"; fi
out="$(TRAINER_FAKE_GPUS=2 CUDA_VISIBLE_DEVICES=1 "$bin" devices 2>&1)"
if [ "$(grep -c 'Fake GPU' <<<"$out")" = 1 ]; then ok "devices: CUDA_VISIBLE_DEVICES=1 shows one of two GPUs"
else bad "devices with CUDA_VISIBLE_DEVICES=1" "$out"; fi
out="$(TRAINER_FAKE_GPUS=lots "$bin" devices 2>&1)"
if grep -q "TRAINER_FAKE_GPUS='lots' is not a count" <<<"$out"; then ok "devices: a bad count is a reason, not a crash"
else bad "devices with a bad count" "$out"; fi

out="$(TRAINER_FAKE_GPUS=3 "$bin" plugins --describe fake_gpu 2>&1)"
if grep -q "devices: 3 GPUs" <<<"$out"; then ok "plugins --describe: a device plugin says how many GPUs it sees"
else bad "plugins --describe fake_gpu" "$out"; fi
out="$("$bin" plugins --check "$baddev/fake_bad_device.so" 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "devices: refused: .*fake_bad_device.so: device plugin fake_bad_device: its ops table has 8 bytes, a device plugin needs at least 16 (count, info)" <<<"$out"; then
    ok "plugins --check: a device plugin with too small a table is refused, naming the file"
else bad "plugins --check of a bad device plugin" "rc=$rc" "$out"; fi
out="$(TRAINER_PLUGIN_PATH="$baddev:$fake" TRAINER_FAKE_GPUS=1 "$bin" devices 2>&1)"; rc=$?
if [ $rc = 0 ] && grep -q "device plugin fake_bad_device refused: .*needs at least 16" <<<"$out" && grep -q "Fake GPU 0" <<<"$out"; then
    ok "devices: a refused device plugin is listed with the reason, the others still counted"
else bad "devices with a bad device plugin" "rc=$rc" "$out"; fi

# ---- trainer plan: auto for 0, 1, 2 and 8 GPUs ----
# plan_is GPUS WANT_STRATEGY WANT_WORLD REASON_REGEX [overrides...]
plan_is() {
    local gpus="$1" want="$2" world="$3" why="$4"; shift 4
    local out
    out="$(TRAINER_FAKE_GPUS=$gpus "$bin" plan "$t/mlp.yaml" --json "$@" 2>&1)"
    if grep -q "\"strategy\": \"$want\", \"reason\": \"$why" <<<"$out" && grep -q "\"params\": [0-9]*, \"world\": $world," <<<"$out"; then
        ok "plan with $gpus GPU(s) $*: $want x$world ($(sed -n 's/.*"reason": "\([^"]*\)".*/\1/p' <<<"$out" | cut -c1-110))"
    else bad "plan with $gpus GPU(s) $*: want $want x$world, reason ~ $why" "$out"; fi
}
plan_is 0 cpu 1 "auto: found no GPU (fake_gpu: TRAINER_FAKE_GPUS=0); 1 CPU device -> cpu"
plan_is 1 single-gpu 1 "auto: found 1 GPU (id 0); 1 GPU -> single-gpu"
TRAINER_FAKE_GPU_DISCOVERY_ONLY=1 plan_is 1 cpu 1 "auto: found no GPU (1 GPU of fake_gpu left unused: device plugin fake_gpu (.*) can list its GPUs but not run on them: its table has no 'open' entry"
plan_is 2 ddp 2 "auto: found 2 GPUs (ids 0-1); 2 GPUs -> ddp (one process each)"
plan_is 8 ddp 8 "auto: found 8 GPUs (ids 0-7); 8 GPUs -> ddp (one process each)"
TRAINER_FAKE_GPU_DISCOVERY_ONLY=1 plan_is 2 cpu 1 "auto: found no GPU (2 GPUs of fake_gpu left unused: device plugin fake_gpu (.*) can list its GPUs but not run on them"
plan_is 2 single-gpu 1 "auto: found 2 GPUs (ids 0-1); 1 GPU -> single-gpu" trainer.devices=1
plan_is 2 ddp 2 "named in trainer.strategy; 2 CPU devices" trainer.accelerator=cpu trainer.devices=2 trainer.strategy=ddp
plan_is 8 cpu 1 "named in trainer.strategy; 1 CPU device" trainer.strategy=cpu
# Under auto, a GPU request the rule refuses runs on the CPU, saying why.
plan_is 2 ddp 3 "auto: found no GPU (2 GPUs of fake_gpu left unused: trainer.devices: 3 GPUs asked, but this machine found 2 GPUs" trainer.devices=3
# A strategy without a probe (or built before ABI 0.4) never runs on GPUs: the CPU, saying why.
plan_is 2 old_strategy 0 "named in trainer.strategy; 1 CPU device; 2 GPUs of fake_gpu left unused: strategy old_strategy cannot run on GPUs (it has no probe to say it can)" trainer.strategy=old_strategy "plugins=[$old]"
CUDA_VISIBLE_DEVICES= plan_is 2 cpu 1 "auto: found no GPU (fake_gpu: no GPU visible: CUDA_VISIBLE_DEVICES='' hides every device)"
# Under a launcher's ranks (torchrun's variables): auto is one GPU per rank of this host, and
# the world is the launcher's; a host with fewer GPUs than ranks shares them.
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 \
    plan_is 4 ddp 2 "auto: found 4 GPUs (ids 0-3); 2 GPUs -> ddp (one process each)" trainer.accelerator=gpu
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 \
    plan_is 1 ddp 2 "named in trainer.strategy; 1 GPU" trainer.accelerator=gpu trainer.strategy=ddp

# ---- impossible requests ----
# refused GPUS REGEX overrides...
refused() {
    local gpus="$1" want="$2"; shift 2
    local out rc
    out="$(TRAINER_FAKE_GPUS=$gpus "$bin" plan "$t/mlp.yaml" "$@" 2>&1)"; rc=$?
    if [ $rc = 1 ] && grep -q "$want" <<<"$out"; then ok "refused with $gpus GPU(s) $*: $(tail -1 <<<"$out" | cut -c1-150)"
    else bad "refusal with $gpus GPU(s) $*: want '$want'" "rc=$rc" "$out"; fi
}
refused 0 "trainer.accelerator: gpu asked, but this machine found no GPU (fake_gpu: TRAINER_FAKE_GPUS=0); accelerator cpu or auto trains on the CPU" trainer.accelerator=gpu
refused 2 "4 GPUs asked, but this machine found 2 GPUs (ids 0-1); devices: 2" trainer.accelerator=gpu trainer.devices=4
refused 2 "GPU id 5 does not exist: this machine found 2 GPUs" "trainer.devices=[0, 5]"
refused 2 "strategy ddp (.*) cannot run here: strategy.backend: no comm plugin named 'nosuch' (available: .*nccl" trainer.accelerator=gpu strategy.backend=nosuch
TRAINER_FAKE_GPU_DISCOVERY_ONLY=1 refused 1 "strategy single-gpu (.*) cannot run here: device plugin fake_gpu (.*) can list its GPUs but not run on them" trainer.accelerator=gpu
refused 2 "trainer.gpu_backend: no device plugin named 'nope' (available: .*fake_gpu" trainer.gpu_backend=nope
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 refused 4 "trainer.devices: launched as 2 ranks by torchrun \
(WORLD_SIZE=2), but trainer.devices is 4 and strategy ddp runs one rank per device: drop trainer.devices (auto takes the \
launcher's ranks) or launch 4 ranks (on each host, one per GPU)" trainer.devices=4
# torchrun across nodes: no engine carries the collectives without MPI (docs/distributed.md,
# "Several hosts"), GPU ranks too (nccl's id goes over MPI): refused, naming what works.
RANK=0 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 GROUP_WORLD_SIZE=2 refused 2 "torchrun started \
this job's 4 ranks on 2 nodes (GROUP_WORLD_SIZE); 2 ranks on this one.*launch on several hosts with mpirun"
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 refused 2 "trainer.devices: strategy single-gpu runs in one process \
(auto: found 2 GPUs (ids 0-1); 1 GPU -> single-gpu), but torchrun started 2 ranks of this command" trainer.devices=1

# ---- trainer run under auto with fake GPUs: the choice printed, training happens ----
out="$(TRAINER_FAKE_GPUS=2 timeout 120 "$bin" run "$t/mlp.yaml" 2>&1)"; rc=$?
if [ $rc = 0 ] && grep -q "strategy ddp chosen: auto: found 2 GPUs (ids 0-1); 2 GPUs -> ddp (one process each)" <<<"$out" &&
   grep -q "done: 16 steps" <<<"$out"; then
    ok "run with 2 fake GPUs: ddp with one process per GPU chosen, said why, trained"
else bad "run with 2 fake GPUs" "rc=$rc" "$out"; fi
out="$(TRAINER_FAKE_GPUS=2 TRAINER_FAKE_GPU_DISCOVERY_ONLY=1 timeout 120 "$bin" run "$t/mlp.yaml" 2>&1)"; rc=$?
if [ $rc = 0 ] && grep -q "strategy cpu chosen: auto: found no GPU (2 GPUs of fake_gpu left unused: device plugin fake_gpu" <<<"$out" &&
   grep -q "done: 16 steps" <<<"$out"; then
    ok "run with 2 GPUs a plugin cannot run on: trains on the CPU and prints why the GPUs were left unused"
else bad "run with 2 discovery-only GPUs" "rc=$rc" "$out"; fi
finish
