#!/usr/bin/env bash
# trainer.profile: a run writes profile.txt and profile.json into its folder, covering the
# steps after the first up to the end of the last (the run's last validation and checkpoint
# left out); its time is within the run's wall time; the MLP's three linear layers give 3
# forward and 3 backward linear regions a step, one batch is loaded a step (two with
# accumulation of 2), validations and checkpoints inside the run count; the log
# names the file; with shapes a row per op and input shape; profiling changes no loss; a run of one step says nothing was recorded;
# under ddp each rank writes its own (profile.json, profile-rank1.json) with ddp's regions; a bad value is
# refused naming the key.
# usage: profile.sh TRAINER_BIN CONFIG PYTHON
set -u
bin="$1"; cfg="$2"; py="$3"
t="$(mktemp -d /tmp/trainer-profile-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
export TRAINER_COMM_TIMEOUT=120
common=(checkpoint.resume=never trainer.max_epochs=1 trainer.max_steps=12 trainer.log_every=1 trainer.threads=1
        trainer.progress=lines data.params.samples=4096)

t0="$EPOCHREALTIME"
if timeout 120 "$bin" run "$cfg" "run.output_dir=$t/p" trainer.profile=true "${common[@]}" >"$t/p.log" 2>&1; then
    t1="$EPOCHREALTIME"
    ok "a profiled run finishes"
else
    t1="$t0"
    bad "a profiled run finishes" "$(tail -3 "$t/p.log")"
fi
dir="$t/p/quickstart/0"
if grep -q "^profile: .* ms a step over 11 steps: .*($dir/profile.txt)" "$t/p.log"; then
    ok "the log names the table"
else
    bad "the log names the table" "$(grep profile "$t/p.log")"
fi
if [ -s "$dir/profile.txt" ] && grep -q "^# wall time of the training thread over 11 steps" "$dir/profile.txt"; then
    ok "profile.txt"
else
    bad "profile.txt" "$(head -3 "$dir/profile.txt" 2>&1)"
fi
if out="$("$py" - "$dir/profile.json" "$t0" "$t1" <<'PY' 2>&1
import json, sys
p = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
r = {(x["phase"], x["name"]): x for x in p["regions"]}
def calls(phase, name):
    return r[(phase, name)]["calls"] if (phase, name) in r else 0
assert p["steps"] == 11, p["steps"]
assert 0 < p["seconds"] < wall, ("the profiled time is within the run's wall time", p["seconds"], wall)
assert calls("forward", "linear") == 33 and calls("backward", "linear") == 33, (calls("forward", "linear"), calls("backward", "linear"))
assert calls("forward", "relu") == 22 and calls("backward", "cross_entropy") == 11
assert calls("data", "next batch") == 11 and calls("strategy", "optim_step") == 11
assert calls("backward", "(seed gradient)") == 11 and calls("loop", "logging and metrics") == 11
# the run's last validation and checkpoint are left out, so are the epoch's end and the first step
assert calls("loop", "validation") == 0 and calls("loop", "checkpoint") == 0 and calls("loop", "epoch end") == 0
assert r[("backward", "linear")]["seconds"] > 0 and r[("forward", "linear")]["seconds"] > 0
secs = [x["seconds"] for x in p["regions"]]
assert secs == sorted(secs, reverse=True), "largest first"
print("ok")
PY
)"; then
    ok "profile.json: counts per step, within the run's wall time"
else
    bad "profile.json: counts per step, within the run's wall time" "$out"
fi

# With shapes: a row per layer (quickstart: 32 features, 256 and 256 hidden, 8 classes, batch 128).
if timeout 120 "$bin" run "$cfg" "run.output_dir=$t/s" trainer.profile=shapes "${common[@]}" >"$t/s.log" 2>&1 &&
    grep -q '"phase": "forward", "name": "linear (128, 32) (256, 32)", "calls": 11,' "$t/s/quickstart/0/profile.json" &&
    grep -q '"phase": "forward", "name": "linear (128, 256) (256, 256)", "calls": 11,' "$t/s/quickstart/0/profile.json" &&
    grep -q '"phase": "forward", "name": "linear (128, 256) (8, 256)", "calls": 11,' "$t/s/quickstart/0/profile.json" &&
    grep -q '"phase": "backward", "name": "linear (128, 32) (256, 32)", "calls": 11,' "$t/s/quickstart/0/profile.json"; then
    ok "shapes: a row per op and input shape"
else
    bad "shapes: a row per op and input shape" "$(tail -2 "$t/s.log")" "$(grep -o '"name": "linear[^"]*"' "$t/s/quickstart/0/profile.json" 2>&1)"
fi

# Accumulation (2 batches a step), validation and checkpoints inside the run: their regions
# count each time (steps 4 and 8 validate, 5 and 10 save; step 12's are the run's last, left out).
if timeout 120 "$bin" run "$cfg" "run.output_dir=$t/a" trainer.profile=true "${common[@]}" trainer.grad_accum=2 \
        data.batch_size=64 trainer.val_every_n_steps=4 checkpoint.every_n_steps=5 >"$t/a.log" 2>&1 &&
    out="$("$py" - "$t/a/quickstart/0/profile.json" <<'PY' 2>&1
import json, sys
p = json.load(open(sys.argv[1]))
r = {(x["phase"], x["name"]): x["calls"] for x in p["regions"]}
assert p["steps"] == 11, p["steps"]
assert r.get(("data", "next batch")) == 22 and r.get(("forward", "linear")) == 66, r
assert r.get(("loop", "validation")) == 2 and r.get(("loop", "checkpoint")) == 2, r
PY
)"; then
    ok "accumulation, validation and checkpoints inside the run"
else
    bad "accumulation, validation and checkpoints inside the run" "$(tail -2 "$t/a.log")" "${out:-}"
fi

# The same run unprofiled: the same losses, step by step.
if timeout 120 "$bin" run "$cfg" "run.output_dir=$t/u" "${common[@]}" >"$t/u.log" 2>&1 &&
    [ ! -e "$t/u/quickstart/0/profile.txt" ] &&
    diff <(grep -o '"loss": [^,]*' "$dir/metrics.jsonl") <(grep -o '"loss": [^,]*' "$t/u/quickstart/0/metrics.jsonl") >/dev/null; then
    ok "profiling changes no loss (and is off by default)"
else
    bad "profiling changes no loss (and is off by default)" "$(tail -2 "$t/u.log")"
fi

# One step: the first step is warm-up, left out.
if timeout 120 "$bin" run "$cfg" "run.output_dir=$t/one" trainer.profile=true checkpoint.resume=never trainer.max_steps=1 \
        trainer.threads=1 >"$t/one.log" 2>&1 &&
    grep -q "profile: nothing recorded (the first step of a run is left out" "$t/one.log" &&
    [ ! -e "$t/one/quickstart/0/profile.txt" ]; then
    ok "one step: nothing recorded, said so"
else
    bad "one step: nothing recorded, said so" "$(tail -3 "$t/one.log")"
fi

# ddp with 2 ranks: one table per rank.
if timeout 200 "$bin" run "$cfg" "run.output_dir=$t/d" trainer.profile=true trainer.devices=2 trainer.strategy=ddp \
        "${common[@]}" >"$t/d.log" 2>&1 &&
    [ -s "$t/d/quickstart/0/profile.json" ] && [ -s "$t/d/quickstart/0/profile-rank1.json" ] &&
    [ -s "$t/d/quickstart/0/profile-rank1.txt" ] &&
    grep -q '"phase": "backward", "name": "linear", "calls": 33,' "$t/d/quickstart/0/profile-rank1.json" &&
    grep -q '"phase": "strategy", "name": "ddp: update", "calls": ' "$t/d/quickstart/0/profile-rank1.json" &&
    grep -q '"phase": "strategy", "name": "ddp: waiting for ' "$t/d/quickstart/0/profile.json"; then
    ok "ddp: a table per rank"
else
    bad "ddp: a table per rank" "$(tail -3 "$t/d.log")" "$(ls "$t/d/quickstart/0" 2>&1)"
fi

# A bad value.
"$bin" run "$cfg" "run.output_dir=$t/bad" trainer.profile=sometimes >"$t/bad.log" 2>&1
rc=$?
if [ "$rc" != 0 ] && grep -q "trainer.profile" "$t/bad.log"; then
    ok "a bad value is refused naming the key"
else
    bad "a bad value is refused naming the key" "exit $rc" "$(tail -2 "$t/bad.log")"
fi
finish
