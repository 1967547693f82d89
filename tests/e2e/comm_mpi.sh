#!/usr/bin/env bash
# The mpi communicator under mpirun: every collective at world sizes 1-4 (oversubscribed on
# small machines), and a rank killed mid all-reduce ends the job non-zero in bounded time.
# usage: comm_mpi.sh MPIRUN TESTS_DIR PLUGIN_DIR      (skips, 77, without MPI or the plugin)
set -u
mpirun="$1"; tests="$2"; plugins="$3"
[ -n "$mpirun" ] && [ -x "$(command -v "$mpirun")" ] && [ -e "$plugins/comm/tr_comm_mpi.so" ] ||
    { echo "SKIP: no mpirun or no mpi backend built"; exit 77; }
# As root in containers: allowed explicitly; no CMA single-copy (ptrace is often denied).
run() { timeout 300 "$mpirun" --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none "$@"; }
# OpenMPI frees little at MPI_Finalize and unloads its components first, so LeakSanitizer (in
# the ASan build) reports unattributable leaks: leak checking stays on for the shm runs of the
# same programs (comm_shm.sh), off here.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
pass=0; fail=0
for w in 1 2 3 4; do
    out="$(run -np "$w" "$tests/comm_check" "$plugins" mpi 2>&1)"; rc=$?
    n="$(grep -c ' 0 failed' <<<"$out")"
    if [ "$rc" = 0 ] && [ "$n" = "$w" ]; then echo "ok   world $w: $(grep -o '[0-9]* passed' <<<"$out" | head -1) per rank"; pass=$((pass + 1))
    else echo "FAIL world $w (exit $rc)"; tail -5 <<<"$out"; fail=$((fail + 1)); fi
done
start=$(date +%s)
out="$(TRAINER_COMM_TIMEOUT=20 run -np 3 "$tests/comm_fault" "$plugins" mpi kill 1 2>&1)"; rc=$?
secs=$(( $(date +%s) - start ))
if [ "$rc" != 0 ] && [ "$secs" -lt 60 ]; then echo "ok   a killed rank ends the mpirun job (exit $rc, ${secs}s)"; pass=$((pass + 1))
else echo "FAIL killed rank under mpirun (exit $rc, ${secs}s)"; tail -5 <<<"$out"; fail=$((fail + 1)); fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
