#!/usr/bin/env bash
# The shm communicator and the launcher: every collective at world sizes 1-4 (oversubscribed
# on small machines), a rank killed mid all-reduce, a peer that delivers then exits (no death),
# a rank that never joins, abort, and the launcher's contract (environment, prefixed output,
# exit codes, SIGTERM, max_restarts).
# Nothing may be left in /dev/shm. usage: comm_shm.sh TRAINER_BIN TESTS_DIR PLUGIN_DIR
set -u
bin="$1"; tests="$2"; plugins="$3"
t="$(mktemp -d /tmp/trainer-comm-XXXXXX)"
cleanup() { pkill -KILL -f "$t/marker" 2>/dev/null; rm -rf "$t"; }
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"
shm_before="$(ls /dev/shm | grep '^trainer-')"
export TRAINER_COMM_TIMEOUT=20

for w in 1 2 3 4; do comm_check_world "$bin" "$tests" "$plugins" shm "$w" "every collective"; done

# A rank killed in the middle of an all-reduce, without a launcher: the others fail promptly.
comm_killed_rank "$tests" "$plugins" shm "$t"

# The same under the launcher: it names the rank and its signal and stops the rest.
out="$(timeout 60 "$bin" launch -n 3 "$tests/comm_fault" "$plugins" shm kill 2 2>&1)"; rc=$?
if [ "$rc" = 137 ] && grep -q "rank 2 was killed by signal 9" <<<"$out"; then ok "launcher: $(grep -o 'rank 2 was killed.*' <<<"$out" | cut -c1-60)"
else bad "launcher with a killed rank (exit $rc)" "$out"; fi

# A rank that arrives last and exits at once (the job's last collective) is not dead.
comm_peer_exits "$bin" "$tests" "$plugins" shm

# A rank that never joins: the others time out naming it; abort: the others fail naming rank 0.
comm_never_joins_and_abort "$bin" "$tests" "$plugins" shm

# Launcher contract.
out="$("$bin" launch -n 3 -- sh -c 'echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR ${TRAINER_JOB_ID:+job}"; echo to-stderr >&2' 2>&1)"; rc=$?
if [ "$rc" = 0 ] && grep -qx '\[rank 2\] 2 3 2 3 127.0.0.1 job' <<<"$out" && grep -qx '\[rank 0\] to-stderr' <<<"$out"; then ok "environment and [rank N] prefixes"
else bad "launcher environment (exit $rc)" "$out"; fi
start=$(date +%s)
out="$("$bin" launch -n 3 -- sh -c "if [ \$RANK = 1 ]; then echo last words; exit 5; fi; exec sleep 60 # $t/marker" 2>&1)"; rc=$?
secs=$(( $(date +%s) - start ))
if [ "$rc" = 5 ] && grep -q "rank 1 exited with code 5; its last line: last words" <<<"$out" && [ "$secs" -lt 15 ]; then ok "exit code 5 propagated, others stopped in ${secs}s"
else bad "exit code propagation (exit $rc, ${secs}s)" "$out"; fi
"$bin" launch -n 2 -- sh -c "exec sleep 60 # $t/marker" >"$t/term.out" 2>&1 & lp=$!
sleep 1; kill -TERM "$lp"; start=$(date +%s); wait "$lp"; rc=$?; secs=$(( $(date +%s) - start ))
sleep 0.2
if [ "$rc" = 143 ] && ! pgrep -f "$t/marker" >/dev/null && [ "$secs" -lt 10 ]; then ok "SIGTERM stops every rank (exit 143 in ${secs}s)"
else bad "SIGTERM (exit $rc, ${secs}s)" "$(cat "$t/term.out")" "$(pgrep -af "$t/marker")"; fi
out="$("$bin" launch -n 2 --max-restarts 2 -- sh -c '[ "$TRAINER_RESTART_COUNT" -ge 1 ] || exit 7' 2>&1)"; rc=$?
if [ "$rc" = 0 ] && [ "$(grep -c 'restarting all 2 ranks (restart 1 of 2)' <<<"$out")" = 1 ] && ! grep -q "restart 2 of 2" <<<"$out"; then ok "max_restarts: the failed job ran again and succeeded"
else bad "max_restarts (exit $rc)" "$out"; fi
out="$("$bin" launch -n 2 --max-restarts 1 -- sh -c 'exit 9' 2>&1)"; rc=$?
if [ "$rc" = 9 ] && [ "$(grep -c restarting <<<"$out")" = 1 ]; then ok "max_restarts exhausted: exit 9 after one restart"
else bad "restarts exhausted (exit $rc)" "$out"; fi
out="$("$bin" launch -n 0 true 2>&1)"; rc=$?
[ "$rc" = 2 ] && grep -q "expected an integer from 1" <<<"$out" && ok "bad -n refused" || bad "bad -n (exit $rc)" "$out"
out="$("$bin" launch -n 2 "$t/no-such-program" 2>&1)"; rc=$?
[ "$rc" = 127 ] && grep -q "cannot run" <<<"$out" && ok "missing program: exit 127 naming it" || bad "missing program (exit $rc)" "$out"

left="$(shm_new "$shm_before")"
[ -z "$left" ] && ok "nothing left in /dev/shm" || bad "leftovers in /dev/shm" "$left"
finish
