#!/usr/bin/env bash
# Launchers and the world size: the contract each launcher gives its ranks, and a world the
# launcher and the config disagree on refused before anything trains.
# - 2 ranks started with exactly the environment torchrun, mpirun (OpenMPI) and srun set for
#   their ranks (on one host: shm) train to the weights of the cpu strategy; so do
#   `trainer launch -n 2 trainer run` (devices auto: the launcher's ranks), `trainer run
#   trainer.devices=2`, the real mpirun where there is one, and the real torchrun where it can
#   start (Debian's torchrun 1.13 fails on Python 3.11 before it starts any rank: skipped then,
#   saying so).
# - Refused, exit 1, no run folder: a launcher's 2 ranks with trainer.devices=4; strategy cpu
#   or dataparallel under 2 ranks (by every rank); strategy cpu with trainer.devices=2; a
#   global batch smaller than the ranks (by `trainer plan` as by `trainer run`, which says it
#   once, before starting ranks); torchrun's ranks on two hosts (no MPI to carry them), at once;
#   srun's ranks on two nodes over shm, naming the nodes.
# - `trainer checkpoint consolidate RUN_FOLDER OUT` writes the run's newest checkpoint and says
#   which, equal to the run's weights.
# usage: launchers.sh TRAINER_BIN PYTHON [MPIEXEC]
set -u
bin="$1"; py="$2"; mpirun="${3:-}"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
t="$(mktemp -d /tmp/trainer-launchers-XXXXXX)"
pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$t"' EXIT
# The test's own launcher variables (a CI job under srun or mpirun) would make every run a rank.
unset $(env | grep -oE '^(SLURM|OMPI|PMIX|TORCHELASTIC)[A-Za-z0-9_]*' | sort -u) RANK WORLD_SIZE LOCAL_RANK \
    LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE MASTER_ADDR MASTER_PORT TRAINER_JOB_ID 2>/dev/null
export TRAINER_COMM_TIMEOUT=60
cat >"$t/c.yaml" <<YAML
run: {name: w, seed: 7}
model: {name: mlp, params: {layers: [24]}}
data: {name: synthetic, params: {samples: 256, val_samples: 32, features: 12, classes: 3}, batch_size: 32}
optimizer: {name: adamw, lr: 0.01}
trainer: {max_steps: 8, log_every: 1, progress: lines, threads: 1, accelerator: cpu}
checkpoint: {every_n_steps: 4}
YAML
run_ok() { # NAME ARGS...: a trainer run that must succeed
    local name="$1"; shift
    timeout 120 "$bin" run "$t/c.yaml" "run.output_dir=$t/$name" "$@" >"$t/$name.log" 2>&1 ||
        { bad "$name: run failed" "$(tail -3 "$t/$name.log")"; return 1; }
}
same_as_cpu() { # NAME LABEL: the run's weights against the cpu run's
    local o
    if o="$(cmp_runs "$t/cpu/w/0" "$t/$1/w/0" --weights-only)"; then ok "$2: the weights of the cpu strategy: $o"
    else bad "$2: weights differ from cpu" "$o"; fi
}
run_ok cpu trainer.strategy=cpu || { finish; exit 1; }

# ---- each launcher's contract: 2 ranks with its environment (env_F RANK prints it) ----
port=$((20000 + $$ % 20000))
env_torchrun() {
    echo RANK=$1 LOCAL_RANK=$1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 GROUP_WORLD_SIZE=1 ROLE_RANK=$1 \
        ROLE_NAME=default ROLE_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_RESTART_COUNT=0 \
        TORCHELASTIC_MAX_RESTARTS=0 TORCHELASTIC_RUN_ID=e2e$$ TORCHELASTIC_USE_AGENT_STORE=True \
        NCCL_ASYNC_ERROR_HANDLING=1 OMP_NUM_THREADS=1
}
env_mpirun() { # OpenMPI 4's mpirun -np 2 on one host
    echo OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=$1 OMPI_COMM_WORLD_LOCAL_SIZE=2 \
        OMPI_COMM_WORLD_NODE_RANK=$1 OMPI_UNIVERSE_SIZE=2 OMPI_APP_CTX_NUM_PROCS=2 OMPI_NUM_APP_CTX=1 OMPI_FIRST_RANKS=0 \
        OMPI_MCA_ess=^singleton OMPI_MCA_ess_base_jobid=$$ OMPI_MCA_ess_base_vpid=$1 PMIX_NAMESPACE=$$ PMIX_RANK=$1
}
env_srun() { # srun -n 2 on one node
    echo SLURM_PROCID=$1 SLURM_LOCALID=$1 SLURM_NTASKS=2 SLURM_NPROCS=2 SLURM_NNODES=1 SLURM_NODEID=0 \
        SLURM_STEP_NUM_TASKS=2 SLURM_STEP_NUM_NODES=1 SLURM_STEP_TASKS_PER_NODE=2 SLURM_TASKS_PER_NODE=2 \
        SLURM_JOB_ID=$$ SLURM_JOBID=$$ SLURM_STEP_ID=0 SLURM_STEPID=0 SLURM_NODELIST=localhost \
        SLURM_STEP_NODELIST=localhost SLURMD_NODENAME=localhost SLURM_GTIDS=0,1 SLURM_LAUNCH_NODE_IPADDR=127.0.0.1
}
# ranks NAME ENV_FN [overrides...]: ranks 0 and 1 of `trainer run` at once, 60 s at most;
# fails unless both exit 0. Their output: $t/NAME.R.log.
ranks() {
    local name="$1" fn="$2" r rc=0 mine=""; shift 2
    for r in 0 1; do
        env $($fn $r) timeout 60 "$bin" run "$t/c.yaml" "run.output_dir=$t/$name" "$@" >"$t/$name.$r.log" 2>&1 &
        mine="$mine $!"
    done
    pids="$pids$mine"
    for r in $mine; do wait "$r" || rc=1; done
    return $rc
}
for l in torchrun mpirun srun; do
    if ranks "$l" "env_$l" && [ "$(ls "$t/$l/w")" = 0 ]; then same_as_cpu "$l" "$l's environment, 2 ranks"
    else bad "$l's environment: the ranks failed" "$(tail -2 "$t/$l.0.log")" "$(tail -2 "$t/$l.1.log")"; fi
done
if timeout 120 "$bin" launch -n 2 "$bin" run "$t/c.yaml" "run.output_dir=$t/launch" >"$t/launch.log" 2>&1 &&
   grep -q "2 CPU devices -> ddp" "$t/launch.log"; then same_as_cpu launch "trainer launch -n 2 (devices auto: 2 ranks of ddp)"
else bad "trainer launch -n 2" "$(tail -3 "$t/launch.log")"; fi
run_ok self trainer.devices=2 && same_as_cpu self "trainer run trainer.devices=2"

# The real launchers, where they run.
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null; then
    if ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 120 "$mpirun" --allow-run-as-root --oversubscribe \
           --mca btl_vader_single_copy_mechanism none -np 2 "$bin" run "$t/c.yaml" "run.output_dir=$t/realmpi" \
           >"$t/realmpi.log" 2>&1; then same_as_cpu realmpi "mpirun -np 2"
    else bad "mpirun -np 2" "$(tail -3 "$t/realmpi.log")"; fi
fi
if command -v torchrun >/dev/null; then
    timeout 120 torchrun --no_python --nproc_per_node=2 --master_port=$((port + 1)) "$bin" run "$t/c.yaml" \
        "run.output_dir=$t/realtorch" >"$t/realtorch.log" 2>&1; rc=$?
    if [ $rc = 0 ]; then same_as_cpu realtorch "torchrun --nproc_per_node=2"
    elif [ ! -e "$t/realtorch" ] && grep -q "Traceback" "$t/realtorch.log"; then
        ok "torchrun cannot start here, no rank started (skipped): $(tail -1 "$t/realtorch.log")"
    else bad "torchrun --nproc_per_node=2" "$(tail -3 "$t/realtorch.log")"; fi
fi

# ---- refused before anything trains ----
# refused NAME RC REGEX COUNT: the command just run exited RC, printed REGEX COUNT times (0: at
# least once) and wrote no run folder.
refused() {
    local n; n="$(grep -c -- "$3" "$t/out")"
    if [ "$2" = 1 ] && [ "$n" -ge 1 ] && { [ "$4" = 0 ] || [ "$n" = "$4" ]; } && [ ! -e "$t/$1" ]; then
        ok "$1 refused: $(grep -o -- "$3.*" "$t/out" | head -1 | cut -c1-220)"
    else bad "$1: want exit 1, '$3' (x$4) and no run folder" "rc=$2, $n lines" "$(tail -4 "$t/out")"; fi
}
timeout 60 "$bin" launch -n 2 "$bin" run "$t/c.yaml" "run.output_dir=$t/dev4" trainer.devices=4 >"$t/out" 2>&1
refused dev4 $? "trainer.devices: launched as 2 ranks by trainer launch (WORLD_SIZE=2), but trainer.devices is 4 and strategy ddp runs one rank per device: drop trainer.devices (auto takes the launcher's ranks) or launch 4 ranks" 0
for s in cpu dataparallel; do
    timeout 60 "$bin" launch -n 2 "$bin" run "$t/c.yaml" "run.output_dir=$t/l$s" trainer.strategy=$s >"$t/out" 2>&1
    refused "l$s" $? "trainer.strategy: strategy $s runs in one process (.*), but trainer launch started 2 ranks of this command (WORLD_SIZE=2): each would run the whole job alone, as 2 independent copies" 0
    [ "$(grep -c "^\[rank [01]\] .*strategy $s runs in one process" "$t/out")" = 2 ] && ok "$s under 2 ranks: both ranks refuse" ||
        bad "$s under 2 ranks: not refused by both ranks" "$(cat "$t/out")"
done
ranks trcpu env_torchrun trainer.strategy=cpu >/dev/null 2>&1; cat "$t"/trcpu.?.log >"$t/out"
refused trcpu 1 "strategy cpu runs in one process (.*), but torchrun started 2 ranks of this command (WORLD_SIZE=2)" 2
"$bin" run "$t/c.yaml" "run.output_dir=$t/cpu2" trainer.strategy=cpu trainer.devices=2 >"$t/out" 2>&1
refused cpu2 $? "trainer.strategy: cpu trains one replica in one process, but trainer.devices asks for 2 CPU devices; strategy ddp or sharded runs 2 ranks, dataparallel 2 replicas in one process; or set trainer.devices: 1" 1
small="data.batch_size: the global batch (2) is smaller than the number of ranks (4): every rank needs at least one sample; set data.batch_size to 4 or more"
"$bin" plan "$t/c.yaml" "run.output_dir=$t/planb" trainer.devices=4 data.batch_size=2 >"$t/out" 2>&1
refused planb $? "trainer plan: command line:1:17: $small" 1
timeout 60 "$bin" run "$t/c.yaml" "run.output_dir=$t/runb" trainer.devices=4 data.batch_size=2 >"$t/out" 2>&1; rc=$?
grep -q "launching\|\[rank" "$t/out" && rc="ranks started"
refused runb "$rc" "trainer run: command line:1:17: $small" 1
# torchrun on two hosts (one rank each) over shm: refused at once by both, not left to time out.
env_torchrun_hosts() {
    echo RANK=$1 LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 GROUP_RANK=$1 GROUP_WORLD_SIZE=2 ROLE_RANK=$1 \
        ROLE_NAME=default ROLE_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 2)) \
        TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 TORCHELASTIC_RUN_ID=e2e$$ OMP_NUM_THREADS=1
}
# No engine carries their collectives (mpi needs mpirun's or srun's ranks): refused whatever the
# backend, saying which launchers work.
for b in shm auto; do
    start=$(date +%s)
    ranks "hosts$b" env_torchrun_hosts "strategy.backend=$b" >/dev/null 2>&1; cat "$t"/hosts$b.?.log >"$t/out"
    took=$(($(date +%s) - start))
    refused "hosts$b" 1 "torchrun started this job's 2 ranks on 2 nodes (GROUP_WORLD_SIZE); 1 rank on this one, [^:]*: across hosts without MPI nothing carries the collectives (.*); launch on several hosts with mpirun (mpirun -np 2 --hostfile HOSTS trainer run CONFIG) or srun (srun -N NODES --ntasks-per-node 1 trainer run CONFIG), or run torchrun on one host (--nnodes=1)" 2
    [ "$took" -lt 20 ] && ok "torchrun on two hosts, backend $b: refused in ${took} s (the comm timeout is 60 s)" || bad "torchrun on two hosts, backend $b, took ${took} s"
done
# srun's ranks on two nodes over shm: refused by both before anything, naming srun's nodes.
env_srun_nodes() {
    echo SLURM_PROCID=$1 SLURM_LOCALID=0 SLURM_NTASKS=2 SLURM_NNODES=2 SLURM_NODEID=$1 SLURM_STEP_NUM_TASKS=2 \
        SLURM_STEP_NUM_NODES=2 SLURM_STEP_TASKS_PER_NODE="1(x2)" SLURM_JOB_ID=$$ SLURM_STEP_ID=0 \
        SLURM_STEP_NODELIST="node[1-2]" SLURM_JOB_NODELIST="node[1-2]"
}
ranks srunshm env_srun_nodes trainer.strategy=ddp strategy.backend=shm >/dev/null 2>&1; cat "$t"/srunshm.?.log >"$t/out"
refused srunshm 1 "strategy.backend: shm joins the ranks of one host, but srun started this job's 2 ranks on 2 hosts (node\[1-2\], SLURM_STEP_NODELIST); 1 rank on this one, [^:]*: use strategy.backend: mpi (auto picks it when ranks span hosts)" 2

# ---- consolidate a run folder: its newest checkpoint, named ----
if "$bin" checkpoint consolidate "$t/torchrun/w/0" "$t/c.safetensors" >"$t/out" 2>&1 &&
   grep -qx "wrote $t/c.safetensors from $t/torchrun/w/0/checkpoints/step-00000008 (the newest checkpoint in $t/torchrun/w/0)" "$t/out" &&
   o="$(cmp_runs "$t/c.safetensors" "$t/torchrun/w/0" --weights-only --tol 0)"; then
    ok "consolidate of a run folder: the newest checkpoint (step 8), named, equal to the run's weights: $o"
else bad "consolidate of a run folder" "$(cat "$t/out")" "${o:-}"; fi
finish
