#!/usr/bin/env bash
# Faults, end to end (docs/distributed.md, "When things go wrong"):
#  - a rank killed (SIGKILL) after a step, in the middle of a collective and in the middle of
#    a checkpoint write (the TRAINER_FAULT_KILL_* points), under ddp x2 and sharded stage 3
#    x2: the job exits 137 within seconds naming the rank; the newest complete checkpoint is
#    the one before and is byte-identical to an uninterrupted run's; a leftover .tmp-* folder
#    is ignored by eval and removed by the resume; rerunning and trainer.max_restarts=1
#    finish with the weights of the uninterrupted run (ddp byte-identical, sharded rel L2
#    <= 1e-6);
#  - a full disk while a checkpoint is written (ulimit -f: EFBIG, and a real ENOSPC on a
#    small tmpfs where mount namespaces exist), ddp and sharded: a clear error naming the file
#    and the reason, no partial checkpoint, the previous one unchanged and loadable;
#  - an unwritable run folder (a file on the way; a read-only bind mount where namespaces
#    exist): refused before any rank trains;
#  - cleanup on every exit path (normal, config error, a rank's error, kill -9 of a rank,
#    SIGTERM and SIGINT to the launcher, a comm timeout): no /dev/shm segment of the job, no
#    process, an empty TMPDIR.
# With RELIABILITY_LOG=FILE, one line per scenario is appended to FILE (lib.sh's record):
#   fault<TAB>scenario<TAB>outcome<TAB>seconds<TAB>message (the one-line error the user sees)
# usage: faults.sh TRAINER_BIN PYTHON
set -u
bin="$1"; py="$2"
t="$(mktemp -d /tmp/trainer-faults-XXXXXX)"
tag="faults-$$-$RANDOM"
export TRAINER_FAULTS_TEST_TAG="$tag" # marks this test's processes (see procs)
export TMPDIR="$t/tmp"
mkdir -p "$TMPDIR"
. "$(dirname "$0")/lib.sh"

# This test's trainer processes still alive.
procs() {
    local p c
    for p in /proc/[0-9]*; do
        { read -r c <"$p/comm"; } 2>/dev/null || continue
        [ "$c" = trainer ] || continue
        tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "TRAINER_FAULTS_TEST_TAG=$tag" && echo "${p#/proc/}"
    done
}
cleanup() {
    local p
    for p in $(procs); do kill -9 "$p" 2>/dev/null; done
    rm -rf "$t"
}
trap cleanup EXIT
export TRAINER_COMM_TIMEOUT=60 # a killed peer must be noticed long before this

cat >"$t/c.yaml" <<'YAML'
run: {name: f, seed: 11}
model: {name: mlp, params: {layers: [512, 256], dropout: 0.1}}
data: {name: synthetic, params: {samples: 1200, val_samples: 100, features: 24, classes: 6}, batch_size: 64}
optimizer: {name: adamw, lr: 0.002}
trainer: {max_steps: 40, log_every: 5, progress: lines, threads: 1, devices: 2}
checkpoint: {every_n_steps: 10, keep_last: 5}
YAML
# (146k parameters: a gradient all-reduce spans 3 of shm's 256 KiB chunks, so a rank dying
# half-way leaves its peer waiting inside the same collective.)

now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# job NAME [VAR=VALUE...] -- COMMAND [ARGS...]: runs it (120 s at most) with its output in
# $t/NAME.log; sets rc, secs, out and lpid (the launcher's pid: its shm segments are named
# trainer-trainer-<lpid>-*).
job() {
    local name="$1" envs=()
    shift
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local t0
    t0="$(now)"
    env "${envs[@]}" timeout -k 5 120 bash -c 'echo $$ >"$0"; exec "$@"' "$t/$name.pid" "$@" >"$t/$name.log" 2>&1
    rc=$?
    secs="$(since "$t0")"
    out="$(cat "$t/$name.log")"
    lpid="$(cat "$t/$name.pid" 2>/dev/null)"
}
# The one-line error the user sees last: the launcher's or the command's own; after a
# success, the launcher's restart line if it restarted, else nothing.
msg() {
    if [ "$rc" = 0 ]; then grep -E '^\[launcher\] ' <<<"$out" | tail -1; return; fi
    grep -E '^trainer [a-z]+: ' <<<"$out" | tail -1
}
# relog WHAT SCENARIO OUTCOME: the reliability row (lib.sh's record, KIND fault) of the job just
# run: "WHAT: SCENARIO", the outcome, its seconds and the user's one-line message.
relog() { record fault "$1: $2" "$3" "$secs" "$(msg)"; }
# clean LABEL: nothing of the job just run is left: no shm segment, no process, empty TMPDIR.
clean() {
    local segs="" p left tmpf
    [ -n "$lpid" ] && segs="$(ls /dev/shm | grep -E "^trainer-trainer-$lpid-" || true)"
    left="$(procs | tr '\n' ' ')"
    tmpf="$(ls -A "$TMPDIR")"
    if [ -z "$segs$left$tmpf" ]; then ok "$1: nothing left (no /dev/shm segment, no process, TMPDIR empty)"
    else bad "$1: leftovers" "shm: $segs" "processes: $left" "TMPDIR: $tmpf"; fi
    for p in $left; do kill -9 "$p" 2>/dev/null; done
}
# refused_before_launch LABEL REGEX: the job just run exited 1 with a line matching REGEX and
# never launched a rank; recorded and checked for leftovers.
refused_before_launch() {
    if [ "$rc" = 1 ] && grep -q "$2" <<<"$out" && ! grep -q "launching" <<<"$out"; then
        ok "$1: refused before launching, in ${secs}s: $(msg)"
    else bad "$1: exit $rc" "$(tail -3 <<<"$out")"; fi
    relog "unwritable run folder" "$1" "exit $rc; refused before any rank started"
    clean "$1"
}
ck() { printf '%s/f/0/checkpoints/step-%08d' "$1" "$2"; }
newest() { ls -d "$1"/f/0/checkpoints/step-* 2>/dev/null | grep -v '\.tmp' | tail -1; }
# same_files DIR_A DIR_B: every file of checkpoint A is byte-identical in B.
same_files() {
    local f
    [ -d "$1" ] && [ -d "$2" ] || return 1
    for f in "$1"/*; do cmp -s "$f" "$2/${f##*/}" || return 1; done
}
# same_weights RUN_A RUN_B STRATEGY: their newest checkpoints hold the same final weights:
# byte-identical (ddp), or byte-identical / rel L2 <= 1e-6 consolidated (sharded).
same_weights() {
    local a b
    a="$(newest "$1")"; b="$(newest "$2")"
    [ "${a##*/}" = "${b##*/}" ] || { echo "newest checkpoints differ: ${a##*/} ${b##*/}"; return 1; }
    if [ "$3" = ddp ]; then
        same_files "$a" "$b" && echo "model and optimizer byte-identical" && return 0
        echo "files differ"; return 1
    fi
    same_files "$a" "$b" && echo "every shard byte-identical" && return 0
    "$bin" checkpoint consolidate "$a" "$t/wa.safetensors" >/dev/null 2>&1 &&
        "$bin" checkpoint consolidate "$b" "$t/wb.safetensors" >/dev/null 2>&1 || { echo "consolidate failed"; return 1; }
    "$py" - "$t/wa.safetensors" "$t/wb.safetensors" <<'PY'
import json, struct, sys
import numpy as np
def w(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return np.concatenate([np.frombuffer(b[8 + n + e["data_offsets"][0]: 8 + n + e["data_offsets"][1]], dtype=np.float32)
                           for _, e in sorted(h.items())])
a, b = w(sys.argv[1]), w(sys.argv[2])
rel = float(np.linalg.norm(a - b) / np.linalg.norm(a))
print(f"rel L2 {rel:.2e}")
sys.exit(0 if rel <= 1e-6 else 1)
PY
}

# ---- uninterrupted references ----
for s in ddp sharded; do
    job "ref-$s" -- "$bin" run "$t/c.yaml" "run.output_dir=$t/ref-$s" "trainer.strategy=$s"
    [ "$rc" = 0 ] && [ -d "$(ck "$t/ref-$s" 40)" ] || bad "uninterrupted $s run (exit $rc)" "$(tail -3 <<<"$out")"
done

# ---- a rank killed at a fault point ----
job fault-bad TRAINER_FAULT_KILL_AT_STEP=3 TRAINER_FAULT_KILL_POINT=middle -- "$bin" run "$t/c.yaml" \
    "run.output_dir=$t/fault-bad" trainer.strategy=cpu trainer.devices=1
[ "$rc" = 1 ] && grep -q "TRAINER_FAULT_KILL_POINT='middle': expected step, collective or checkpoint" <<<"$out" &&
    ! [ -e "$t/fault-bad" ] && ok "a bad fault point is refused before anything is made: $(msg)" ||
    bad "bad TRAINER_FAULT_KILL_POINT (exit $rc)" "$(tail -2 <<<"$out")"
job late-bad TRAINER_FAULT_LATE_LIVENESS_MS=soon -- "$bin" run "$t/c.yaml" "run.output_dir=$t/late-bad" trainer.strategy=cpu \
    trainer.devices=1
[ "$rc" = 1 ] && grep -q "TRAINER_FAULT_LATE_LIVENESS_MS='soon': expected an integer >= 0" <<<"$out" && ! [ -e "$t/late-bad" ] &&
    ok "a bad liveness delay is refused before anything is made: $(msg)" ||
    bad "bad TRAINER_FAULT_LATE_LIVENESS_MS (exit $rc)" "$(tail -2 <<<"$out")"
# kill_case POINT STRATEGY STEP RANK PREVIOUS
kill_case() {
    local point="$1" s="$2" n="$3" r="$4" prev="$5" d="$t/$1-$2" label res
    label="$s x2: rank $r killed with SIGKILL ($point point, step $n)"
    local fenv=("TRAINER_FAULT_KILL_AT_STEP=$n" "TRAINER_FAULT_KILL_RANK=$r" "TRAINER_FAULT_KILL_POINT=$point")
    job "$point-$s" "${fenv[@]}" -- "$bin" run "$t/c.yaml" "run.output_dir=$d" "trainer.strategy=$s"
    local outcome="exit $rc"
    if [ "$rc" = 137 ] && grep -q "^trainer run: rank $r was killed by signal 9" <<<"$out" && lt "$secs" 15; then
        ok "$label: the job exits 137 in ${secs}s naming rank $r"
    else bad "$label: exit $rc in ${secs}s" "$(tail -4 <<<"$out")"; fi
    case "$point" in
    collective) # the peer was waiting inside the very collective the rank died in (it says so
        # unless the launcher's SIGTERM reached it before it noticed: a race it may lose)
        local op peer
        op="$(sed -n "s/.*fault injection.*: rank $r inside \([a-z_]* #[0-9]*\) .*/\1/p" <<<"$out" | head -1)"
        peer="$(grep "died .* operation" <<<"$out" | head -1)"
        if [ -n "$op" ] && { [ -z "$peer" ] || grep -q "${op} (.*): rank $r (pid [0-9]*) died in the middle of this operation" <<<"$peer"; }; then
            ok "$label: it died inside $op after part of it went through; $([ -n "$peer" ] && echo "the peer, waiting in it, said so" || echo "the peer was stopped before it noticed")"
            outcome="$outcome; died inside $op$([ -n "$peer" ] && echo ", the peer waiting in it")"
        else bad "$label: not in the middle of a collective" "$(grep -E 'fault injection|died' <<<"$out")"; fi ;;
    checkpoint)
        if grep -q "fault injection.*: writing .*step-$(printf %08d "$n")\.tmp-.*bytes written" <<<"$out" &&
           ! [ -d "$(ck "$d" "$n")" ]; then
            ok "$label: it died half-way through a file of step-$(printf %08d "$n"); no such complete checkpoint"
        else bad "$label: no kill during the checkpoint write, or the checkpoint exists" "$(grep 'fault injection' <<<"$out")"; fi ;;
    esac
    record fault "$label" "$outcome" "$secs" "$(msg)"
    clean "$label"
    # The previous checkpoint: the newest complete one, byte-identical to the reference's.
    local tmps
    tmps="$(ls -d "$d"/f/0/checkpoints/*.tmp-* 2>/dev/null | wc -l)"
    if [ "$(newest "$d")" = "$(ck "$d" "$prev")" ] && same_files "$(ck "$t/ref-$s" "$prev")" "$(ck "$d" "$prev")"; then
        ok "$label: step-$(printf %08d "$prev") is the newest complete checkpoint, byte-identical to the uninterrupted run's ($tmps .tmp folder left)"
    else bad "$label: previous checkpoint" "newest: $(newest "$d")" "$(ls "$d"/f/0/checkpoints)"; fi
    job "$point-$s-eval" -- "$bin" eval "$t/c.yaml" --checkpoint "$d/f/0"
    if [ "$rc" = 0 ] && grep -q "step-$(printf %08d "$prev") (step $prev) on the validation split" <<<"$out"; then
        ok "$label: trainer eval loads step $prev$([ "$tmps" -gt 0 ] && echo ", ignoring the .tmp folder")"
    else bad "$label: eval of the run folder (exit $rc)" "$(tail -2 <<<"$out")"; fi
    # Run again: resumes there, removes the leftover, ends with the uninterrupted weights.
    job "$point-$s-again" -- "$bin" run "$t/c.yaml" "run.output_dir=$d" "trainer.strategy=$s"
    if [ "$rc" = 0 ] && grep -q "resuming from .*step-$(printf %08d "$prev")" <<<"$out" &&
       ! ls -d "$d"/f/0/checkpoints/*.tmp-* >/dev/null 2>&1 && res="$(same_weights "$t/ref-$s" "$d" "$s")"; then
        ok "$label: run again: resumed at step $prev$([ "$tmps" -gt 0 ] && echo ", removed the .tmp folder"), final weights: $res"
    else bad "$label: run again (exit $rc)" "$(grep -E 'resuming|removed|error' <<<"$out" | head -3)" "${res:-}"; fi
    # trainer.max_restarts=1: the launcher relaunches, the job ends as if never interrupted.
    job "$point-$s-restart" "${fenv[@]}" -- "$bin" run "$t/c.yaml" "run.output_dir=$d-r" "trainer.strategy=$s" \
        trainer.max_restarts=1
    if [ "$rc" = 0 ] && grep -q "restarting all 2 ranks (restart 1 of 1)" <<<"$out" &&
       grep -q "resuming from .*step-$(printf %08d "$prev")" <<<"$out" && res="$(same_weights "$t/ref-$s" "$d-r" "$s")"; then
        ok "$label: with max_restarts=1: relaunched, resumed at step $prev, finished in ${secs}s; final weights: $res"
        record fault "$label, trainer.max_restarts=1" "exit 0; resumed at step $prev; $res" "$secs" "$(msg)"
    else bad "$label: max_restarts=1 (exit $rc)" "$(grep -E 'restart|resuming' <<<"$out" | head -3)" "${res:-}"; fi
    clean "$label, restarted"
}
kill_case step ddp 25 1 20
kill_case collective ddp 25 1 20
kill_case checkpoint ddp 30 0 20
kill_case collective sharded 25 1 20
kill_case checkpoint sharded 30 1 20

# ---- disk full while a checkpoint is written ----
# The earlier checkpoint (step 10) is made without a limit; the resumed run's save at the end
# of the first epoch (step 19) then fails. ulimit -f caps every file a process writes, shm's
# 2.6 MB segment too, so the model is larger there (1.1M parameters, a 4.3 MB model file).
big='model.params.layers=[1024,1024]'
# after_full LABEL DIR STRATEGY: what every disk-full case checks once the save failed.
after_full() {
    if ! [ -e "$(ck "$2" 19)" ] && ! ls -d "$2"/f/0/checkpoints/*.tmp-* >/dev/null 2>&1; then
        ok "$1: no step-00000019 and no partial checkpoint folder left"
    else bad "$1: partial checkpoint left" "$(ls "$2"/f/0/checkpoints)"; fi
    if same_files "$t/saved" "$(ck "$2" 10)" && [ "$(newest "$2")" = "$(ck "$2" 10)" ]; then
        ok "$1: step-00000010 unchanged (byte-identical to before) and still the newest"
    else bad "$1: step-00000010 changed or not the newest" "$(newest "$2")"; fi
}
disk_case() { # disk_case STRATEGY FILE_PATTERN
    local s="$1" d="$t/full-$1" label="$1 x2: file size limit (ulimit -f 3072 KiB) during the step-19 checkpoint"
    job "full-$s-0" -- "$bin" run "$t/c.yaml" "run.output_dir=$d" "trainer.strategy=$s" "$big" trainer.max_steps=10
    rm -rf "$t/saved"; cp -r "$(ck "$d" 10)" "$t/saved"
    # No SIGXFSZ trap here: trainer itself ignores the signal, so write() fails with EFBIG.
    job "full-$s" -- bash -c 'ulimit -f 3072 && exec "$@"' _ "$bin" run "$t/c.yaml" "run.output_dir=$d" \
        "trainer.strategy=$s" "$big" trainer.max_steps=20
    if [ "$rc" = 1 ] && grep -qE "^trainer run: rank [01] exited with code 1; its last line: .*checkpoint .*step-00000019 not saved: .*$2: write failed after [0-9]+ of [0-9]+ bytes: File too large \(over the file size limit" <<<"$out"; then
        ok "$label: exit 1 in ${secs}s: $(msg | sed 's/.*its last line: trainer run: //' | cut -c1-150)..."
    else bad "$label: exit $rc" "$(tail -3 <<<"$out")"; fi
    relog "disk full" "$label" "exit $rc; no partial checkpoint; step-00000010 intact"
    after_full "$label" "$d"
    job "full-$s-eval" -- "$bin" eval "$t/c.yaml" --checkpoint "$d/f/0" "$big"
    [ "$rc" = 0 ] && grep -q "(step 10) on the validation split" <<<"$out" && ok "$label: trainer eval loads step 10" ||
        bad "$label: eval (exit $rc)" "$(tail -2 <<<"$out")"
    clean "$label"
}
disk_case ddp "model.safetensors"
disk_case sharded "shard-0000[01]-of-00002.safetensors"

# The run's log and metrics files on a full disk (each a link to /dev/full, where every write
# fails with ENOSPC): the run stops at its next record naming the file.
for f in log.txt metrics.jsonl; do
    d="$t/devfull-$f"
    job "devfull-$f-0" -- "$bin" run "$t/c.yaml" "run.output_dir=$d" trainer.max_steps=10
    rm -f "$d/f/0/$f" && ln -s /dev/full "$d/f/0/$f"
    job "devfull-$f" -- "$bin" run "$t/c.yaml" "run.output_dir=$d" trainer.max_steps=20
    label="ddp x2: $f on a full disk (a link to /dev/full), resuming from step 10"
    if [ "$rc" = 1 ] && grep -q "^trainer run: rank 0 exited with code 1; its last line: trainer run: $d/f/0/$f: write failed: No space left on device" <<<"$out"; then
        ok "$label: exit 1 in ${secs}s: $(msg | sed 's/.*its last line: //')"
    else bad "$label: exit $rc" "$(tail -3 <<<"$out")"; fi
    relog "disk full" "$label" "exit $rc"
    clean "$label"
done

# A real full disk (ENOSPC) and a read-only file system, in a private mount namespace so the
# mounts vanish with it whatever happens.
if unshare -m --propagation private true 2>/dev/null &&
   unshare -m --propagation private bash -c "mkdir -p '$t/probe' && mount -t tmpfs -o size=1m tmpfs '$t/probe'" 2>/dev/null; then
    d="$t/enospc"; mkdir -p "$d"
    # 3 MiB: the step-10 checkpoint (1.75 MB) fits, the next one does not.
    job enospc -- unshare -m --propagation private bash -c '
        mount -t tmpfs -o size=3m tmpfs "$1" || exit 90
        "$2" run "$3" "run.output_dir=$1" trainer.max_steps=10 >"$4.first" 2>&1 || exit 91
        cp -r "$1/f/0/checkpoints/step-00000010" "$4.saved"
        t0=$EPOCHREALTIME
        bash -c "echo \$\$ >$4.lpid; exec \"\$@\"" _ "$2" run "$3" "run.output_dir=$1" trainer.max_steps=20
        echo "$? $t0 $EPOCHREALTIME" >"$4.rc"
        ls -A "$1/f/0/checkpoints" >"$4.ls"
        cmp -s "$4.saved/model.safetensors" "$1/f/0/checkpoints/step-00000010/model.safetensors" &&
            cmp -s "$4.saved/optimizer.safetensors" "$1/f/0/checkpoints/step-00000010/optimizer.safetensors" && echo same >"$4.cmp"
        "$2" eval "$3" --checkpoint "$1/f/0" >"$4.eval" 2>&1' _ "$d" "$bin" "$t/c.yaml" "$t/enospc"
    label="ddp x2: a full file system (3 MiB tmpfs) during the step-19 checkpoint"
    read -r rc a b <"$t/enospc.rc" 2>/dev/null || rc="none"
    secs="$(awk -v a="${a:-0}" -v b="${b:-0}" 'BEGIN { printf "%.2f", b - a }')"
    lpid="$(cat "$t/enospc.lpid" 2>/dev/null)"
    if [ "$rc" = 1 ] &&
       grep -qE "^trainer run: rank 0 exited with code 1; its last line: trainer run: checkpoint .*step-00000019 not saved: .*safetensors: write failed after [0-9]+ of [0-9]+ bytes: No space left on device" <<<"$out"; then
        ok "$label: exit 1 in ${secs}s: $(msg | sed 's/.*its last line: trainer run: //' | cut -c1-150)..."
    else bad "$label: exit $rc" "$(tail -3 <<<"$out")"; fi
    if [ "$(cat "$t/enospc.ls")" = "step-00000010" ] && [ "$(cat "$t/enospc.cmp" 2>/dev/null)" = same ] &&
       grep -q "(step 10) on the validation split" "$t/enospc.eval"; then
        ok "$label: no partial checkpoint, step-00000010 unchanged and trainer eval loads it"
    else bad "$label: checkpoints afterwards" "$(cat "$t/enospc.ls")" "$(tail -1 "$t/enospc.eval")"; fi
    relog "disk full" "$label" "exit $rc; no partial checkpoint; step-00000010 intact"
    clean "$label"

    d="$t/rofs"; mkdir -p "$d"
    job rofs-0 -- "$bin" run "$t/c.yaml" "run.output_dir=$d" trainer.max_steps=10
    job rofs -- unshare -m --propagation private bash -c \
        'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 90; exec "$2" run "$3" "run.output_dir=$1" trainer.max_steps=20' \
        _ "$d" "$bin" "$t/c.yaml"
    refused_before_launch "ddp x2: the run folder on a read-only file system (resuming from step 10)" \
        "^trainer run: run.output_dir: $d cannot be written: Read-only file system"
else
    echo "skip ENOSPC and read-only cases: no mount namespace here (unshare -m and mount need CAP_SYS_ADMIN)"
fi

# An unwritable run folder: a regular file where a folder of run.output_dir should be.
: >"$t/afile"
job notdir -- "$bin" run "$t/c.yaml" "run.output_dir=$t/afile/runs"
refused_before_launch "ddp x2: run.output_dir under a regular file" \
    "^trainer run: run.output_dir: $t/afile/runs cannot be created: $t/afile is not a directory"

# ---- cleanup on every exit path ----
long=(trainer.max_steps=1000000 trainer.max_epochs=100000)
# bg NAME [VAR=VALUE...] -- ARGS...: starts `trainer run ARGS` in the background and waits for
# its step 5; sets bgpid (the timeout wrapper) and lpid (the launcher).
bg() {
    local name="$1" envs=()
    shift
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    bgt0="$(now)"
    env "${envs[@]}" timeout -k 5 120 bash -c 'echo $$ >"$0"; exec "$@"' "$t/$name.pid" "$bin" run "$@" >"$t/$name.log" 2>&1 &
    bgpid=$!
    local i
    for i in $(seq 300); do grep -q "step 5/" "$t/$name.log" 2>/dev/null && break; sleep 0.05; done
    lpid="$(cat "$t/$name.pid")"
}
# rank_pid R: the pid of rank R of the launcher lpid.
rank_pid() {
    local c
    for c in $(pgrep -P "$lpid"); do
        tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "RANK=$1" && echo "$c" && return
    done
}
# bg_end NAME: waits for the background job; sets rc, secs (from the signal), out.
bg_end() {
    local t0
    t0="$(now)"
    wait "$bgpid"
    rc=$?
    secs="$(since "$t0")"
    out="$(cat "$t/$1.log")"
}

job clean-ok -- "$bin" run "$t/c.yaml" "run.output_dir=$t/cl" trainer.max_steps=10
[ "$rc" = 0 ] && ok "normal exit: exit 0" || bad "normal exit (exit $rc)" "$(tail -2 <<<"$out")"
relog "exit path" "ddp x2: normal exit" "exit $rc"
clean "normal exit"

job clean-config -- "$bin" run "$t/c.yaml" "run.output_dir=$t/cl" trainer.max_steps=abc
[ "$rc" = 1 ] && grep -q "trainer.max_steps" <<<"$out" && ok "config error: exit 1: $(msg)" || bad "config error (exit $rc)" "$out"
relog "exit path" "ddp x2: config error" "exit $rc"
clean "config error"

job clean-rank-error -- "$bin" run "$t/c.yaml" "run.output_dir=$t/cl-err" optimizer.lr=1e3
if [ "$rc" = 1 ] && grep -qE "^trainer run: rank [01] exited with code 1; its last line: trainer run: step [0-9]+: .*not finite" <<<"$out"; then
    ok "a rank's error exit: exit 1 in ${secs}s: $(msg | cut -c1-120)"
else bad "rank error exit (exit $rc)" "$(tail -3 <<<"$out")"; fi
relog "exit path" "ddp x2: a rank fails (optimizer.lr=1e3: the loss is not finite)" "exit $rc"
clean "a rank's error exit"

bg clean-kill -- "$t/c.yaml" "run.output_dir=$t/cl2" "${long[@]}"
r1="$(rank_pid 1)"
[ -n "$r1" ] && kill -9 "$r1"
bg_end clean-kill
if [ -n "$r1" ] && [ "$rc" = 137 ] && grep -q "^trainer run: rank 1 was killed by signal 9" <<<"$out" && lt "$secs" 10; then
    ok "kill -9 of rank 1 from outside: exit 137 in ${secs}s naming it"
else bad "kill -9 of rank 1 (pid '${r1}', exit $rc, ${secs}s)" "$(tail -3 <<<"$out")"; fi
relog "kill -9 (from outside)" "ddp x2: kill -9 of rank 1 mid-training" "exit $rc"
clean "kill -9 of a rank"

for sig in TERM INT; do
    bg "clean-$sig" -- "$t/c.yaml" "run.output_dir=$t/cl3" "${long[@]}"
    kill -s "$sig" "$lpid"
    bg_end "clean-$sig"
    code=$((128 + $(kill -l "$sig")))
    if [ "$rc" = "$code" ] && grep -qE "^trainer run: stopped by signal $(kill -l "$sig") .*: (every rank stopped by itself|the ranks were terminated)" <<<"$out" &&
       lt "$secs" 10; then
        ok "SIG$sig to the launcher: exit $rc in ${secs}s: $(msg)"
    else bad "SIG$sig to the launcher (exit $rc, ${secs}s)" "$(tail -3 <<<"$out")"; fi
    relog "signal to the launcher" "ddp x2: SIG$sig to trainer run" "exit $rc"
    clean "SIG$sig to the launcher"
done

# A hung rank (SIGSTOP): its peer times out (TRAINER_COMM_TIMEOUT=2) naming it; the launcher
# ends the stopped rank too.
bg clean-timeout TRAINER_COMM_TIMEOUT=2 -- "$t/c.yaml" "run.output_dir=$t/cl4" "${long[@]}"
r1="$(rank_pid 1)"
[ -n "$r1" ] && kill -STOP "$r1"
bg_end clean-timeout
if [ -n "$r1" ] && [ "$rc" = 1 ] && grep -q "^trainer run: rank 0 exited with code 1; its last line: .*timed out in .*these ranks did not arrive: 1 " <<<"$out" &&
   lt "$secs" 10; then
    ok "comm timeout (rank 1 stopped): exit 1 in ${secs}s: $(msg | sed 's/.*its last line: //' | cut -c1-140)"
else bad "comm timeout (pid '$r1', exit $rc, ${secs}s)" "$(tail -3 <<<"$out")"; fi
relog "hung rank" "ddp x2: rank 1 hangs (SIGSTOP), TRAINER_COMM_TIMEOUT=2" "exit $rc"
clean "comm timeout"

finish
