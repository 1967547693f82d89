# Shared by the e2e scripts that check several things: `ok NAME` and `bad NAME [DETAIL...]`
# count and print each check; `finish` prints the "N passed, N failed" line and fails if any
# check did. Source it: . "$(dirname "$0")/lib.sh"
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" = 0 ]; }
# `record KIND NAME OUTCOME SECONDS MESSAGE`: with RELIABILITY_LOG set, appends a row for the
# reliability report (tools/reliability): what was injected or fed, what happened, the message.
record() {
    [ -n "${RELIABILITY_LOG:-}" ] || return 0
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$(printf '%s' "$5" | tr '\t\n' '  ')" >>"$RELIABILITY_LOG"
}
# shm_new BEFORE: the trainer-* names in /dev/shm that are not in the list BEFORE and are still
# there after up to 3 s (tests running beside this one hold a segment's name for the moments
# their ranks take to join: those go away, a leak stays).
shm_new() {
    local i now
    for i in $(seq 30); do
        now="$(ls /dev/shm | grep '^trainer-' | grep -vxF -f <(printf '%s\n' "$1") || true)"
        [ -z "$now" ] && return 0
        sleep 0.1
    done
    echo "$now"
}
# mlp_device_yaml FILE BACKEND LOG_EVERY: a small MLP run with GELU, dropout, AdamW, a cosine
# schedule and clipping, on device backend BACKEND (the GPU tests train it on a device and on
# the CPU and compare).
mlp_device_yaml() {
    cat >"$1" <<YAML
run: {name: m, seed: 5}
model: {name: mlp, params: {layers: [48, 24], activation: gelu, dropout: 0.2}}
data: {name: synthetic, params: {samples: 320, val_samples: 96, features: 20, classes: 5}, batch_size: 32}
optimizer: {name: adamw, lr: 0.02, weight_decay: 0.05}
scheduler: {name: cosine, warmup_steps: 4}
trainer: {max_steps: 30, log_every: $3, grad_clip: 0.5, progress: lines, threads: 1, gpu_backend: $2}
YAML
}

# A CNN (two conv blocks: conv, batch-norm, ReLU, 2x2 max-pool; the first conv one channel in,
# the second four; dropout after the first linear layer) on GPU backend $2, logging every $3
# steps, as config file $1. SGD: a conv's bias before a batch-norm has a gradient of zero up to
# rounding, which Adam would scale into full steps, so two correct runs would drift apart.
cnn_device_yaml() {
    cat >"$1" <<YAML
run: {name: c, seed: 3}
model: {name: cnn, params: {channels: [4, 6], fc: [16], dropout: 0.25}}
data: {name: synthetic, params: {samples: 96, val_samples: 32, features: 144, classes: 4, shape: [1, 12, 12]}, batch_size: 16}
optimizer: {name: sgd, lr: 0.05, momentum: 0.9}
trainer: {max_steps: 12, log_every: $3, grad_clip: 1.0, progress: lines, threads: 1, gpu_backend: $2}
YAML
}

# A small byte-level transformer in mode $4 (lm, classify or pairs) on GPU backend $3 writing
# to $2, as config file $1 (its text next to it), 8 steps logged every step: every op the
# transformers use on a device (embedding, layer-norm, attention, slice, GELU, dropout, mean
# pooling, cross-entropy; cosine similarity and mse in mode pairs). SGD, as the CNN's: the
# attention's key bias has a gradient of zero up to rounding (softmax ignores what it adds to
# a query's scores), which Adam would scale into lr-sized steps, two correct runs apart.
transformer_device_yaml() {
    local f="$1" dir="$2" backend="$3" mode="$4" extra=""
    case "$mode" in
    lm) printf 'to be or not to be, that is the question. whether tis nobler in the mind to suffer\n%.0s' 1 2 3 4 >"$f.txt" ;;
    classify)
        printf '0\tthe cat sat on the mat\n1\tstocks fell sharply today\n0\ta dog ran in the park\n1\tmarkets rallied at the close\n%.0s' 1 2 3 4 >"$f.txt"
        extra=", vocab: 256" ;;
    pairs)
        printf '0.9\tred apple\tan apple that is red\n0.1\tred apple\tthe stock market\n0.8\tfast car\ta quick car\n0.2\tfast car\tslow tea\n%.0s' 1 2 3 4 >"$f.txt"
        extra=", vocab: 256" ;;
    esac
    cat >"$f" <<YAML
run: {name: l, seed: 1, output_dir: $dir}
model: {name: transformer, params: {mode: $mode, d_model: 16, n_head: 2, n_layer: 2, dropout: 0.1$extra}}
data: {name: text, params: {path: $f.txt, mode: $mode, seq_len: 8}, batch_size: 4}
optimizer: {name: sgd, lr: 0.05, momentum: 0.9}
trainer: {max_steps: 8, log_every: 1, grad_clip: 1.0, progress: lines, threads: 1, gpu_backend: $backend}
YAML
}

# three_ranks DIR TAG JOB_ID CMD...: ranks 0-2 of CMD started at once without a launcher
# (nothing stops the others when one fails), rank R's output in DIR/TAG.R; sets rcs (their
# exit codes, " 3 137 3") and secs (how long the slowest took).
three_ranks() {
    local dir="$1" tag="$2" job="$3" pids="" start p; shift 3
    rcs=""
    for r in 0 1 2; do RANK=$r WORLD_SIZE=3 TRAINER_JOB_ID="$job" "$@" >"$dir/$tag.$r" 2>&1 & pids="$pids $!"; done
    start=$(date +%s)
    for p in $pids; do wait "$p" 2>/dev/null; rcs="$rcs $?"; done
    secs=$(( $(date +%s) - start ))
}

# comm_killed_rank TESTS PLUGINS BACKEND DIR: 3 ranks without a launcher, rank 1 killed in the
# middle of an all-reduce; ranks 0 and 2 must fail promptly naming it.
comm_killed_rank() {
    local tests="$1" plugins="$2" backend="$3" dir="$4" rcs secs
    three_ranks "$dir" kill "fault$backend$$" env TRAINER_COMM_TIMEOUT=30 "$tests/comm_fault" "$plugins" "$backend" kill 1
    if [ "$rcs" = " 3 137 3" ] && grep -q "rank 1 (pid [0-9]*) died" "$dir/kill.0" && grep -q "died" "$dir/kill.2" && [ "$secs" -lt 20 ]; then
        ok "rank 1 killed mid all-reduce: ranks 0 and 2 fail in ${secs}s: $(cat "$dir/kill.0")"
    else bad "killed rank (exit codes$rcs, ${secs}s)" "$(cat "$dir"/kill.*)"; fi
}

# comm_peer_exits BIN TESTS PLUGINS BACKEND: a rank that comes last to the job's last barrier
# (or sends rank 0 a last value) and exits at once is no death: the others, which look at its
# process late (TRAINER_FAULT_LATE_LIVENESS_MS, as if preempted), must all succeed.
comm_peer_exits() {
    local bin="$1" tests="$2" plugins="$3" backend="$4" out rc mode
    for mode in exit send; do
        out="$(TRAINER_FAULT_LATE_LIVENESS_MS=400 timeout 60 "$bin" launch -n 3 "$tests/comm_fault" "$plugins" "$backend" "$mode" 2 2>&1)"; rc=$?
        if [ "$rc" = 0 ] && [ "$(grep -c 'rank [0-9]: ok$' <<<"$out")" = 3 ]; then ok "rank 2 $mode: a peer that delivered, then exited, is no death"
        else bad "a peer that delivered, then exited ($mode, exit $rc)" "$out"; fi
    done
}

# comm_never_joins_and_abort BIN TESTS PLUGINS BACKEND: a rank that never joins (the others
# time out naming it), then an abort (every other rank's call fails naming rank 0).
comm_never_joins_and_abort() {
    local bin="$1" tests="$2" plugins="$3" backend="$4" out rc
    out="$(TRAINER_COMM_TIMEOUT=2 timeout 60 "$bin" launch -n 3 "$tests/comm_fault" "$plugins" "$backend" nojoin 2 2>&1)"; rc=$?
    if [ "$rc" = 3 ] && grep -q "these ranks never joined: 2" <<<"$out"; then ok "never joined: $(grep -o 'timed out joining.*' <<<"$out" | head -1 | sed 's/ \/trainer-[^:]*//')"
    else bad "rank that never joins (exit $rc)" "$out"; fi
    out="$(timeout 60 "$bin" launch -n 3 "$tests/comm_fault" "$plugins" "$backend" abort 0 2>&1)"; rc=$?
    if [ "$rc" != 0 ] && grep -q "rank 0 aborted the job" <<<"$out"; then ok "abort: $(grep -o 'all_reduce.*aborted the job' <<<"$out" | head -1)"
    else bad "abort (exit $rc)" "$out"; fi
}

# comm_check_world BIN TESTS PLUGINS BACKEND W LABEL: comm_check (every collective) at world W
# under trainer launch; ok when each of the W ranks passed all its checks.
comm_check_world() {
    local bin="$1" tests="$2" plugins="$3" backend="$4" w="$5" label="$6" out rc
    out="$(timeout 300 "$bin" launch -n "$w" "$tests/comm_check" "$plugins" "$backend" 2>&1)"; rc=$?
    if [ "$rc" = 0 ] && [ "$(grep -c ' 0 failed' <<<"$out")" = "$w" ]; then
        ok "$label, world $w: $(grep -o '[0-9]* passed' <<<"$out" | head -1) per rank"
    else bad "$label, world $w (exit $rc)" "$(grep FAIL <<<"$out" | head -5)" "$(tail -3 <<<"$out")"; fi
}

# gpu_count BIN: the GPUs `trainer devices` counts here (0 without one).
gpu_count() { "$1" devices 2>/dev/null | awk '$1 == "gpu" {n = $2} END {print n + 0}'; }

# cmp_runs RUN_A RUN_B [--tol T] [--weights-only]: compare_runs.py on two runs (exit 0 when
# within tol; prints the differences).
cmp_runs() { "${py:-/usr/bin/python3}" "$(dirname "${BASH_SOURCE[0]}")/compare_runs.py" "$@"; }

# run_config CONFIG OUTPUT_DIR LOG [overrides...]: `trainer run CONFIG` ($bin) into OUTPUT_DIR,
# its output in LOG, at most 120 s; the exit status in $rc.
run_config() {
    local cfg="$1" out="$2" log="$3"; shift 3
    timeout 120 "$bin" run "$cfg" "run.output_dir=$out" "$@" >"$log" 2>&1
    rc=$?
}
