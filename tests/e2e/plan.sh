#!/usr/bin/env bash
# `trainer plan`: a dry run whose memory estimate is what a real run measures.
# - For the MLP and the transformer LM under cpu, ddp x2 and sharded (stage 2 and 3 x2),
#   the chosen strategy's estimate per rank (parameters, gradients, optimizer state,
#   activations, total) is within 15% of what the run reports in metrics.jsonl (the unit
#   buffers, a small part of the total, are printed but not bounded on their own).
# - Under an outside launcher (WORLD_SIZE set), devices auto means the job's ranks.
# - `trainer devices` lists the CPU (cores), the cuda plugin's GPUs (or why none) and backends.
# - It says which strategy auto picks and why (cpu for 1 device, ddp with 3 processes for 3),
#   lists the alternatives (cpu, ddp, sharded stages 1-3), writes no run folder, and refuses
#   a strategy that cannot run here (an unknown backend) before anything starts.
# usage: plan.sh TRAINER_BIN PYTHON
set -u
bin="$1"; py="$2"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
t="$(mktemp -d /tmp/trainer-plan-XXXXXX)"
trap 'rm -rf "$t"' EXIT
export TRAINER_COMM_TIMEOUT=120
cat >"$t/mlp.yaml" <<YAML
run: {name: m, seed: 3, output_dir: $t/runs}
model: {name: mlp, params: {layers: [256, 128]}}
data: {name: synthetic, params: {samples: 2000, val_samples: 200, features: 64, classes: 10}, batch_size: 100}
optimizer: {name: adamw, lr: 0.001}
trainer: {max_steps: 6, log_every: 1, progress: lines, threads: 1}
YAML
cat >"$t/lm.yaml" <<YAML
run: {name: l, seed: 3, output_dir: $t/runs}
model: {name: transformer, params: {d_model: 64, n_head: 4, n_layer: 2, dropout: 0.1}}
data: {name: synthetic, params: {task: lm, samples: 512, val_samples: 64, seq_len: 32, vocab: 50}, batch_size: 16}
optimizer: {name: adamw, lr: 0.001}
trainer: {max_steps: 6, log_every: 1, progress: lines, threads: 1}
YAML

# check NAME CONFIG OVERRIDES...: plan --json vs the run's memory record.
check() {
    local name="$1" cfg="$2"; shift 2
    if ! "$bin" plan "$cfg" --json "run.name=$name" "$@" >"$t/$name.plan" 2>"$t/$name.plan.err"; then
        bad "$name: plan failed" "$(cat "$t/$name.plan.err")"; return
    fi
    if ! timeout 300 "$bin" run "$cfg" "run.name=$name" "$@" >"$t/$name.log" 2>&1; then
        bad "$name: run failed" "$(tail -3 "$t/$name.log")"; return
    fi
    local out
    if out="$("$py" - "$t/$name.plan" "$t/runs/$name/0/metrics.jsonl" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
est = next(r for r in plan["rows"] if r["chosen"])["memory"]
meas = [json.loads(l)["memory"] for l in open(sys.argv[2]) if '"memory"' in l][-1]
est["total"] = sum(est[k] for k in ("params", "grads", "optimizer", "activations", "other"))
meas["total"] = sum(meas[k] for k in ("params", "grads", "optimizer", "activations", "other"))
worst, parts = 0.0, []
# The unit buffers (other) are working memory whose count depends on the order backward
# touches units (tied weights keep one busy throughout): printed, inside the total's bound.
for k in ("params", "grads", "optimizer", "activations", "other", "total"):
    e, m = est[k], meas[k]
    err = abs(e - m) / m if m else (0.0 if e == 0 else 1.0)
    if k != "other":
        worst = max(worst, err)
    parts.append(f"{k} {e / 2**20:.2f}/{m / 2**20:.2f} MiB")
print(f"worst {100 * worst:.1f}%: " + ", ".join(parts))
sys.exit(0 if worst <= 0.15 else 1)
PY
)"; then ok "$name: plan within 15% of the run (estimated/measured): $out"
    else bad "$name: plan vs run" "$out"; fi
}
check mlp_cpu "$t/mlp.yaml"
check mlp_ddp "$t/mlp.yaml" trainer.devices=2
check mlp_z3 "$t/mlp.yaml" trainer.strategy=sharded strategy.stage=3 trainer.devices=2
check lm_cpu "$t/lm.yaml"
check lm_ddp "$t/lm.yaml" trainer.devices=2
check lm_z2 "$t/lm.yaml" trainer.strategy=sharded strategy.stage=2 strategy.unit_mb=0.05 trainer.devices=2

out="$("$bin" plan "$t/mlp.yaml" "run.output_dir=$t/none" 2>&1)"
if grep -q "strategy cpu (auto: found no GPU (.*); 1 CPU device -> cpu)" <<<"$out" &&
   [ "$(grep -cE '^[* ] (cpu|ddp|sharded stage [123]) +[0-9]' <<<"$out")" = 5 ] && [ ! -e "$t/none" ]; then
    ok "plan: auto picks cpu for one device and says why; five strategies listed; no run folder written"
else bad "plan output" "$out"; fi
out="$("$bin" plan "$t/mlp.yaml" trainer.devices=3 2>&1)"
if grep -q "strategy ddp (auto: found no GPU (.*); 3 CPU devices -> ddp (one process each))" <<<"$out" &&
   grep -q "world 3 (3 processes on this host), global batch 100, per-rank batch 34" <<<"$out"; then
    ok "plan: auto picks ddp with 3 processes for 3 devices (per-rank batch 34 of 100)"
else bad "plan devices=3" "$out"; fi
out="$("$bin" plan "$t/mlp.yaml" trainer.devices=2 strategy.backend=nosuch 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "strategy ddp (.*) cannot run here: strategy.backend: no comm plugin named 'nosuch'" <<<"$out"; then
    ok "plan: a strategy that cannot run here is refused with the reason"
else bad "plan refusal" "rc=$rc" "$out"; fi
out="$("$bin" plan "$t/mlp.yaml" trainer.devices=2 strategy.backend=nccl 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "strategy ddp (.*) cannot run here: strategy.backend: nccl joins GPU ranks (one GPU each); ranks on the CPU use shm (one host) or mpi (hosts)" <<<"$out"; then
    ok "plan: nccl for CPU ranks is refused, naming the backends that fit"
else bad "plan nccl on CPU ranks" "rc=$rc" "$out"; fi
out="$("$bin" plan "$t/mlp.yaml" trainer.accelerator=gpu 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "trainer.accelerator: gpu asked, but this machine found no GPU (.*); accelerator cpu or auto trains on the CPU" <<<"$out"; then
    ok "plan: accelerator gpu without a GPU is refused, saying what was found and what would work"
else bad "accelerator gpu" "rc=$rc" "$out"; fi
out="$("$bin" plan "$t/mlp.yaml" trainer.devices=-1 2>&1)"
if grep -q "world $(nproc) " <<<"$out"; then ok "plan: devices -1 on the CPU is one rank per core ($(nproc))"
else bad "devices -1" "$out"; fi
out="$(RANK=0 WORLD_SIZE=3 LOCAL_RANK=0 LOCAL_WORLD_SIZE=3 TRAINER_JOB_ID=plan$$ "$bin" plan "$t/mlp.yaml" 2>&1)"
if grep -q "strategy ddp (auto: .*3 CPU devices -> ddp" <<<"$out"; then
    ok "plan under an outside launcher (WORLD_SIZE 3): devices auto means the job's 3 ranks"
else bad "plan under a launcher" "$out"; fi
out="$("$bin" devices 2>&1)"
# The cuda device plugin is built unless TRAINER_CUDA=OFF: its line when it is there.
cuda_line=1; "$bin" plugins 2>/dev/null | grep -Eq "^device +cuda " || cuda_line=0
if grep -Eq "^cpu +$(nproc) " <<<"$out" && { [ $cuda_line = 0 ] || grep -Eq "^gpu .*\(device plugin cuda[,:] " <<<"$out"; } &&
   grep -q "communication backends: .*shm" <<<"$out"; then
    ok "trainer devices: $(nproc) CPU cores, what the cuda device plugin sees (or why not), the backends found"
else bad "trainer devices" "$out"; fi
finish
