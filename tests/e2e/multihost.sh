#!/usr/bin/env bash
# Runs across hosts: 2 hosts x 2 ranks under the real mpirun, each host a set of namespaces
# with its own network, hostname, /dev/shm and /tmp (tests/e2e/hosts.sh), the run folder on a
# folder every host sees (the cluster's shared file system).
# - train: ddp and sharded stages 1-3 (backend auto: mpi) end at the cpu strategy's weights
#   (1e-5), with one run folder written from both hosts; each one's step-4 checkpoint resumes
#   on one host at another world size (3 ranks over shm) to the same weights.
# - faults: `trainer plan` under mpirun across hosts (world 4, 2 here, backend mpi; shm when
#   every rank is on one host); strategy.backend shm across hosts refused by every rank naming
#   both hosts, before any run folder; rank 3 killed on host1 ends the job within 30 s, the
#   output naming rank 3 and host1, nothing left in any host's /dev/shm.
# - comm (a third host): comm_check (every collective) over mpi (2 hosts x 2 ranks, and 3 x 1,
#   where OpenMPI's TCP progress thread moves the data), and over the nccl backend (nccl_emu, its
#   "wire" a file on the shared folder): NCCL's id goes over MPI (no host sees another's
#   /dev/shm), nothing is left in any host's /dev/shm; ddp on emulated GPUs (cuda_emu, 2 per
#   host) over it reaches cpu's weights (1e-4).
# Skips (77) without mpirun, the mpi backend, or where namespaces cannot be made.
# usage: multihost.sh train|faults|comm TRAINER_BIN PYTHON TESTS_DIR PLUGIN_DIR [EMU_PLUGIN_DIR]
set -u
# Absolute paths: a host's commands start at its root.
what="$1"; bin="$(realpath -m "$2")"; py="$3"; tests="$(realpath -m "$4")"; plugins="$(realpath -m "$5")"
emu="${6:+$(realpath -m "$6")}"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
. "$here/hosts.sh"
command -v mpirun >/dev/null && [ -e "$plugins/comm/tr_comm_mpi.so" ] || { echo "SKIP: no mpirun or no mpi backend built"; exit 77; }
reason="$(hosts_skip_reason)"
[ -z "$reason" ] || { echo "SKIP: $reason"; exit 77; }
unset $(env | grep -oE '^(SLURM|OMPI|PMIX|TORCHELASTIC)[A-Za-z0-9_]*' | sort -u) RANK WORLD_SIZE LOCAL_RANK \
    LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE MASTER_ADDR MASTER_PORT TRAINER_JOB_ID 2>/dev/null
# Shared by every host: not under /tmp, which each host hides behind its own.
t="$(mktemp -d /var/tmp/trainer-multihost-XXXXXX 2>/dev/null || mktemp -d "$PWD/trainer-multihost-XXXXXX")" || exit 1
trap 'hosts_down; rm -rf "$t"' EXIT
trap 'exit 1' INT TERM
n=2; [ "$what" = comm ] && n=3 # comm: a third host for a ring of one rank per host
HOSTS_KEEP="$(dirname "$(dirname "$bin")"):$tests:$plugins${emu:+:$emu}" hosts_up "$n" "$t" >"$t/up.log" 2>&1 || { echo "FAIL: the hosts could not be made: $(cat "$t/up.log")"; exit 1; }
export TRAINER_COMM_TIMEOUT=60 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # OpenMPI leaks by design
# mpi4 LOG ARGS...: mpirun -np 4 over both hosts (ranks 0-1 on host0, 2-3 on host1), 120 s at most.
mpi4() { local log="$1"; shift; hosts_mpirun -np 4 -x TRAINER_COMM_TIMEOUT -x ASAN_OPTIONS "$@" >"$log" 2>&1; }
# 20k parameters: ddp's one bucket (80 KB) takes the mpi backend's ring all-reduce.
cat >"$t/c.yaml" <<YAML
run: {name: w, seed: 7}
model: {name: mlp, params: {layers: [256, 64]}}
data: {name: synthetic, params: {samples: 256, val_samples: 32, features: 12, classes: 3}, batch_size: 32}
optimizer: {name: adamw, lr: 0.01}
trainer: {max_steps: 8, log_every: 1, progress: lines, threads: 1, accelerator: cpu}
checkpoint: {every_n_steps: 4}
YAML

train() {
    timeout 120 "$bin" run "$t/c.yaml" "run.output_dir=$t/cpu" trainer.strategy=cpu >"$t/cpu.log" 2>&1 ||
        { bad "cpu run" "$(tail -3 "$t/cpu.log")"; return; }
    local name args o
    for name in ddp z1 z2 z3; do
        case $name in
        ddp) args="trainer.strategy=ddp" ;;
        *) args="trainer.strategy=sharded strategy.stage=${name#z} strategy.unit_mb=0.001" ;;
        esac
        if ! mpi4 "$t/$name.log" "$bin" run "$t/c.yaml" "run.output_dir=$t/$name" $args; then
            bad "$name across 2 hosts x 2 ranks: failed" "$(tail -5 "$t/$name.log")"; continue
        fi
        local shards; shards="$(ls "$t/$name/w/0/checkpoints/step-00000008" | grep -c '^shard-0000[0-3]-of-00004')"
        if [ "$name" != ddp ] && [ "$shards" != 4 ]; then bad "$name: not 4 shard files from 4 ranks" "$(ls "$t/$name/w/0/checkpoints/step-00000008")"; fi
        grep -q "4 ranks over mpi" "$t/$name.log" || bad "$name: not 4 ranks over mpi" "$(grep -m1 "^strategy" "$t/$name.log")"
        if [ "$(ls "$t/$name/w")" = 0 ] && o="$(cmp_runs "$t/cpu/w/0" "$t/$name/w/0" --weights-only)"; then
            ok "$name across 2 hosts x 2 ranks (mpi): one run folder, the cpu strategy's weights: $o"
        else bad "$name across hosts: weights or run folder" "$(ls "$t/$name/w")" "${o:-}"; fi
        # Its step-4 checkpoint, resumed on one host by 3 ranks (trainer launches them, shm).
        cp -r "$t/$name" "$t/$name.r" && rm -rf "$t/$name.r/w/0/checkpoints/step-00000008"
        if timeout 120 "$bin" run "$t/c.yaml" "run.output_dir=$t/$name.r" $args trainer.devices=3 >"$t/$name.r.log" 2>&1 &&
           grep -q "resuming from .*step-00000004" "$t/$name.r.log" && o="$(cmp_runs "$t/cpu/w/0" "$t/$name.r/w/0" --weights-only)"; then
            ok "$name: its step-4 checkpoint from 2 hosts resumes on one host at 3 ranks: $o"
        else bad "$name: resume at 3 ranks on one host" "$(tail -3 "$t/$name.r.log")" "${o:-}"; fi
    done
}

faults() {
    local o n rc start secs left
    # The plan under mpirun: the MPI world, this host's share, and the backend auto takes.
    if mpi4 "$t/plan.log" "$bin" plan "$t/c.yaml" && [ "$(grep -c "world 4 (2 processes on this host)" "$t/plan.log")" = 4 ] &&
       n="$(grep -c "communication mpi (strategy.backend auto picks it: CPU ranks on 2 hosts (OMPI_MCA_orte_num_nodes); 2 ranks on this one, host[01])" "$t/plan.log")" &&
       [ "$n" = 4 ] && [ "$(grep -c "strategy ddp" "$t/plan.log")" = 4 ]; then
        ok "trainer plan under mpirun on 2 hosts: ddp, $(grep -o "world 4 ([^)]*)" "$t/plan.log" | head -1), $(grep -o "communication .*" "$t/plan.log" | head -1)"
    else bad "trainer plan across hosts" "$(grep -e world -e communication -e strategy -e rror "$t/plan.log" | head -6)"; fi
    if in_host 0 timeout 60 mpirun --allow-run-as-root --host host0:2 -np 2 --mca btl self,vader \
           --mca btl_vader_single_copy_mechanism none "$bin" plan "$t/c.yaml" >"$t/plan1.log" 2>&1 &&
       [ "$(grep -c "communication shm (strategy.backend auto picks it: CPU ranks on one host)" "$t/plan1.log")" = 2 ]; then
        ok "trainer plan under mpirun on one host: $(grep -o "communication .*" "$t/plan1.log" | head -1)"
    else bad "trainer plan under mpirun on one host" "$(tail -4 "$t/plan1.log")"; fi
    # shm across hosts: every rank refuses, naming its host, before any run folder.
    # (mpirun lets every rank end, and then exits 0: by default it kills the others when the
    # first one exits 1, before they can say why)
    mpi4 "$t/shm.log" --mca orte_abort_on_non_zero_status 0 \
        "$bin" run "$t/c.yaml" "run.output_dir=$t/shm" trainer.strategy=ddp strategy.backend=shm; rc=$?
    local msg="strategy.backend: shm joins the ranks of one host, but mpirun started this job's 4 ranks on 2 hosts (OMPI_MCA_orte_num_nodes); 2 ranks on this one, host"
    if [ ! -e "$t/shm" ] && [ "$(grep -c "$msg[01]: use strategy.backend: mpi" "$t/shm.log")" = 4 ] &&
       grep -q "${msg}0" "$t/shm.log" && grep -q "${msg}1" "$t/shm.log"; then
        ok "shm across hosts refused by all 4 ranks, no run folder: $(grep -o "strategy.backend: shm joins.*" "$t/shm.log" | head -1)"
    else bad "shm across hosts (exit $rc)" "$(grep -v '^\s*$' "$t/shm.log" | head -6)"; fi
    # Rank 3 (host1) killed at step 3: mpirun ends the job and says which rank on which host.
    # mpirun sends the others SIGTERM (a graceful stop at the next step, which the collective
    # waiting for rank 3 never reaches), then SIGKILL; on a loaded host that SIGKILL once came
    # only after the collective's 60 s deadline. A 20 s deadline here: the survivors end by
    # themselves, with the timeout's error, if mpirun has not ended them.
    start=$(date +%s%N)
    TRAINER_COMM_TIMEOUT=20 TRAINER_FAULT_KILL_AT_STEP=3 TRAINER_FAULT_KILL_RANK=3 mpi4 "$t/kill.log" -x TRAINER_FAULT_KILL_AT_STEP \
        -x TRAINER_FAULT_KILL_RANK "$bin" run "$t/c.yaml" "run.output_dir=$t/kill" trainer.max_steps=400; rc=$?
    local ms=$((($(date +%s%N) - start) / 1000000)); secs="$((ms / 1000)).$((ms % 1000 / 100))"
    left="$(hosts_shm_left)"
    if [ $rc != 0 ] && [ "$ms" -lt 30000 ] && grep -q "rank 3 .*on node host1 exited on signal 9" "$t/kill.log" &&
       [ -z "$left" ]; then
        ok "rank 3 killed on host1 at step 3: the job, start to end, took $secs s (exit $rc): $(grep -o "[^ ]* noticed that process rank 3 .*" "$t/kill.log" | head -1); every host's /dev/shm empty"
    else bad "rank 3 killed on host1 (exit $rc, ${secs}s)" "left in /dev/shm: ${left:-nothing}" "$(tail -8 "$t/kill.log")"; fi
}

comm() {
    # Every collective over mpi between the hosts (TCP; the ring all-reduce from 64 KiB).
    mpi4 "$t/mpi.log" "$tests/comm_check" "$plugins" mpi; local rc=$?
    if [ $rc = 0 ] && [ "$(grep -c ' 0 failed' "$t/mpi.log")" = 4 ]; then
        ok "mpi on 2 hosts x 2 ranks: $(grep -o '[0-9]* passed' "$t/mpi.log" | head -1) per rank"
    else bad "comm_check over mpi across hosts (exit $rc)" "$(grep FAIL "$t/mpi.log" | head -3)" "$(tail -5 "$t/mpi.log")"; fi
    # One rank on each of 3 hosts: all traffic over TCP, moved by OpenMPI's progress thread
    # while the ranks sleep; the ring's blocks uneven.
    hosts_mpirun -np 3 --map-by node -x TRAINER_COMM_TIMEOUT "$tests/comm_check" "$plugins" mpi quick >"$t/mpi1.log" 2>&1; rc=$?
    if [ $rc = 0 ] && [ "$(grep -c ' 0 failed' "$t/mpi1.log")" = 3 ] && [ "$(grep -c "^rank [012] of 3" "$t/mpi1.log")" = 3 ]; then
        ok "mpi on 3 hosts x 1 rank (TCP progress thread): $(grep -o '[0-9]* passed' "$t/mpi1.log" | head -1) per rank"
    else bad "comm_check over mpi, one rank on each of 3 hosts (exit $rc)" "$(grep FAIL "$t/mpi1.log" | head -3)" "$(tail -5 "$t/mpi1.log")"; fi
    [ -n "$emu" ] && [ -e "$emu/nccl_emu.so" ] || { bad "no nccl_emu plugin in '$emu' (it is built with comm_check)"; return; }
    mkdir -p "$t/wire"
    mpi4 "$t/nccl.log" -x TRAINER_NCCL_EMU_DIR="$t/wire" "$tests/comm_check" "$emu" nccl_emu quick; local rc=$?
    local left; left="$(hosts_shm_left)"
    if [ $rc = 0 ] && [ "$(grep -c ' 0 failed' "$t/nccl.log")" = 4 ] && [ -z "$left" ] && [ -z "$(ls -A "$t/wire")" ]; then
        ok "nccl (emulated) on 2 hosts x 2 ranks, the id over MPI: $(grep -o '[0-9]* passed' "$t/nccl.log" | head -1) per rank; nothing left in /dev/shm"
    else bad "nccl across hosts (exit $rc)" "left: ${left:-nothing} $(ls -A "$t/wire")" "$(grep FAIL "$t/nccl.log" | head -3)" "$(tail -5 "$t/nccl.log")"; fi
    # ddp on 2 emulated GPUs per host over it: the cpu strategy's weights.
    mlp_device_yaml "$t/m.yaml" cuda_emu 1
    TRAINER_PLUGIN_PATH="$emu" timeout 120 "$bin" run "$t/m.yaml" "run.output_dir=$t/mcpu" trainer.accelerator=cpu >"$t/mcpu.log" 2>&1 ||
        { bad "cpu run of the GPU config" "$(tail -3 "$t/mcpu.log")"; return; }
    local o
    if TRAINER_PLUGIN_PATH="$emu" TRAINER_CUDA_EMU_GPUS=2 TRAINER_NCCL_EMU_STREAM=1 TRAINER_NCCL_EMU_DIR="$t/wire" \
           mpi4 "$t/gddp.log" -x TRAINER_PLUGIN_PATH -x TRAINER_CUDA_EMU_GPUS -x TRAINER_NCCL_EMU_STREAM -x TRAINER_NCCL_EMU_DIR \
           "$bin" run "$t/m.yaml" "run.output_dir=$t/gddp" trainer.strategy=ddp strategy.backend=nccl_emu &&
       grep -q "4 ranks over nccl_emu, one GPU each" "$t/gddp.log" && o="$(cmp_runs "$t/mcpu/m/0" "$t/gddp/m/0" --tol 1e-4)"; then
        ok "ddp on emulated GPUs, 2 hosts x 2 ranks over nccl_emu: within 1e-4 of cpu: $o"
    else bad "ddp over nccl_emu across hosts" "$(grep -m1 "ranks over" "$t/gddp.log")" "${o:-}" "$(tail -4 "$t/gddp.log")"; fi
}

case "$what" in
train | faults | comm) "$what" ;;
*) echo "multihost.sh: unknown scenario '$what' (train, faults, comm)"; exit 2 ;;
esac
finish
