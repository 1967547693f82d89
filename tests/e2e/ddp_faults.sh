#!/usr/bin/env bash
# ddp beyond the happy path: bucket all-reduces start during backward (trace); a rank killed
# mid-epoch ends the job non-zero naming it; with trainer.max_restarts=1 the job resumes from
# its newest checkpoint and ends with exactly the weights of an uninterrupted run; a ddp
# checkpoint resumes under cpu and a cpu checkpoint under ddp with another world size.
# usage: ddp_faults.sh TRAINER_BIN PYTHON
set -u
bin="$1"; py="$2"
t="$(mktemp -d /tmp/trainer-ddpf-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
export TRAINER_COMM_TIMEOUT=120
shm0="$(ls /dev/shm | grep '^trainer-')"
cat >"$t/c.yaml" <<YAML
run: {name: f, seed: 11}
model: {name: mlp, params: {layers: [128, 64], dropout: 0.1}}
data: {name: synthetic, params: {samples: 1200, val_samples: 100, features: 24, classes: 6}, batch_size: 64}
optimizer: {name: adamw, lr: 0.002}
trainer: {max_steps: 40, log_every: 5, progress: lines, threads: 1}
checkpoint: {every_n_steps: 10, keep_last: 5}
YAML
same_weights() { # same_weights RUN_A RUN_B MAX_REL
    "$py" - "$1" "$2" "$3" <<'PY'
import json, struct, glob, sys
import numpy as np
def w(run):
    ck = sorted(glob.glob(run + "/checkpoints/step-*"))[-1] + "/model.safetensors"
    b = open(ck, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return np.concatenate([np.frombuffer(b[8 + n + e["data_offsets"][0]: 8 + n + e["data_offsets"][1]], dtype=np.float32)
                           for _, e in sorted(h.items())])
a, b = w(sys.argv[1]), w(sys.argv[2])
rel = float(np.linalg.norm(a - b) / np.linalg.norm(a))
print(f"rel L2 {rel:.2e}")
sys.exit(0 if rel <= float(sys.argv[3]) else 1)
PY
}

# Overlap: small buckets, the trace shows all-reduces started before backward returned.
out="$(TRAINER_DDP_TRACE=1 "$bin" run "$t/c.yaml" "run.output_dir=$t/trace" trainer.devices=2 trainer.max_steps=3 \
       strategy.bucket_mb=0.02 strategy.first_bucket_mb=0.01 2>&1)"
line="$(grep -m1 'ddp trace rank 0 step 1:' <<<"$out")"
k="$(sed -n 's/.*step 1: \([0-9]*\) of \([0-9]*\) bucket.*/\1/p' <<<"$line")"; n="$(sed -n 's/.*step 1: \([0-9]*\) of \([0-9]*\) bucket.*/\2/p' <<<"$line")"
if [ -n "$k" ] && [ "$n" -ge 3 ] && [ "$k" -ge $((n - 1)) ]; then ok "overlap: ${line#*: }"
else bad "overlap trace" "$(grep 'ddp trace' <<<"$out" | head -3)" "$(tail -3 <<<"$out")"; fi

# The uninterrupted reference.
"$bin" run "$t/c.yaml" "run.output_dir=$t/ref" trainer.devices=2 >"$t/ref.log" 2>&1 || bad "reference ddp run" "$(tail -3 "$t/ref.log")"

# Rank 1 killed at step 25 (between checkpoints): the job fails naming it.
start=$(date +%s)
out="$(TRAINER_FAULT_KILL_AT_STEP=25 TRAINER_FAULT_KILL_RANK=1 "$bin" run "$t/c.yaml" "run.output_dir=$t/k" trainer.devices=2 2>&1)"; rc=$?
secs=$(( $(date +%s) - start ))
if [ "$rc" = 137 ] && grep -q "rank 1 was killed by signal 9" <<<"$out" && [ "$secs" -lt 60 ]; then ok "killed rank 1: job exits 137 naming it (${secs}s)"
else bad "killed rank (exit $rc)" "$(tail -4 <<<"$out")"; fi

# The same with max_restarts 1: resumed from step 20, same final weights as the reference.
out="$(TRAINER_FAULT_KILL_AT_STEP=25 TRAINER_FAULT_KILL_RANK=1 "$bin" run "$t/c.yaml" "run.output_dir=$t/r" trainer.devices=2 \
       trainer.max_restarts=1 2>&1)"; rc=$?
a="$(ls -d "$t"/ref/f/0/checkpoints/step-* | tail -1)"; b="$(ls -d "$t"/r/f/0/checkpoints/step-* 2>/dev/null | tail -1)"
if [ "$rc" = 0 ] && grep -q "resuming from .*step-00000020" <<<"$out" && cmp -s "$a/model.safetensors" "$b/model.safetensors" &&
   cmp -s "$a/optimizer.safetensors" "$b/optimizer.safetensors"; then ok "max_restarts 1: resumed at step 20, weights and optimizer identical to the uninterrupted run"
else bad "restart and resume (exit $rc)" "$(grep -E 'resuming|restart|rank 1' <<<"$out" | head -4)" "$a" "$b"; fi

# ddp -> cpu and cpu -> ddp x3 resumes against a cpu run straight through.
"$bin" run "$t/c.yaml" "run.output_dir=$t/cpu" trainer.strategy=cpu >/dev/null 2>&1
"$bin" run "$t/c.yaml" "run.output_dir=$t/x" trainer.devices=2 trainer.max_steps=20 >/dev/null 2>&1
out="$("$bin" run "$t/c.yaml" "run.output_dir=$t/x" trainer.strategy=cpu 2>&1)"
if grep -q "resuming from .*step-00000020" <<<"$out" && r="$(same_weights "$t/cpu/f/0" "$t/x/f/0" 1e-5)"; then ok "ddp x2 checkpoint resumed under cpu: $r from the straight cpu run"
else bad "ddp -> cpu resume" "$(tail -3 <<<"$out")" "${r:-}"; fi
"$bin" run "$t/c.yaml" "run.output_dir=$t/y" trainer.strategy=cpu trainer.max_steps=20 >/dev/null 2>&1
out="$("$bin" run "$t/c.yaml" "run.output_dir=$t/y" trainer.devices=3 2>&1)"
if grep -q "resuming from .*step-00000020" <<<"$out" && r="$(same_weights "$t/cpu/f/0" "$t/y/f/0" 1e-5)"; then ok "cpu checkpoint resumed under ddp x3: $r"
else bad "cpu -> ddp resume" "$(tail -3 <<<"$out")" "${r:-}"; fi
left="$(shm_new "$shm0")"
[ -z "$left" ] && ok "nothing left in /dev/shm" || bad "leftovers in /dev/shm" "$left"
finish
