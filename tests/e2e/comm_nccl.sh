#!/usr/bin/env bash
# The nccl backend (plugins/comm/nccl/nccl.c) over the emulated NCCL (nccl_emu): every
# collective at world sizes 1-4 with device buffers and with host buffers (staged), the
# unique id over MPI, two ranks on one GPU refused, a rank killed mid all-reduce, a rank that
# never joins, one that fails or dies in NCCL's join, one that stops calling, abort; and the real plugin's message where this machine
# cannot run NCCL. Nothing may be left in /dev/shm.
# usage: comm_nccl.sh TRAINER_BIN TESTS_DIR EMU_PLUGIN_DIR REAL_PLUGIN_DIR [MPIEXEC]
set -u
bin="$1"; tests="$2"; emu="$3"; real="$4"; mpiexec="${5:-}"
t="$(mktemp -d /tmp/trainer-nccl-XXXXXX)"
cleanup() { rm -rf "$t"; }
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"
shm_before="$(ls /dev/shm | grep '^trainer-')"
export TRAINER_COMM_TIMEOUT=20

for w in 1 2 3 4; do comm_check_world "$bin" "$tests" "$emu" nccl_emu "$w" "device buffers"; done
for w in 2 3; do TRAINER_NCCL_EMU_HOST=1 comm_check_world "$bin" "$tests" "$emu" nccl_emu "$w" "host buffers staged"; done

# The unique id over MPI: two ranks that each say they are alone on their host.
if [ -n "$mpiexec" ]; then
    # OpenMPI leaks by design at exit (as in comm_mpi.sh): no leak report under ASan here.
    out="$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 "$mpiexec" --allow-run-as-root --oversubscribe -n 2 sh -c \
        "RANK=\$OMPI_COMM_WORLD_RANK WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 exec '$tests/comm_check' '$emu' nccl_emu quick" 2>&1)"; rc=$?
    if [ "$rc" = 0 ] && [ "$(grep -c ' 0 failed' <<<"$out")" = 2 ]; then ok "bootstrap over MPI (one rank per host): $(grep -o '[0-9]* passed' <<<"$out" | head -1) per rank"
    else bad "bootstrap over MPI (exit $rc)" "$(tail -5 <<<"$out")"; fi
fi

# NCCL runs one rank per GPU: two ranks on GPU 0 are refused at join, naming them.
out="$(TRAINER_NCCL_EMU_DEVICE=0 timeout 60 "$bin" launch -n 2 "$tests/comm_check" "$emu" nccl_emu 2>&1)"; rc=$?
if [ "$rc" != 0 ] && grep -q "ranks 0 and 1 are both on GPU 0 (emu-gpu-0): NCCL needs a GPU per rank (to test several ranks on one GPU, use backend shm)" <<<"$out"
then ok "two ranks on one GPU: $(grep -o 'ranks 0 and 1 are both.*' <<<"$out" | head -1 | cut -c1-70)..."
else bad "two ranks on one GPU (exit $rc)" "$(tail -4 <<<"$out")"; fi

# A rank killed in the middle of an all-reduce, without a launcher: the others fail promptly.
comm_killed_rank "$tests" "$emu" nccl_emu "$t"

# A rank that fails, or dies, inside NCCL's join of the ranks (ncclCommInitRank), without a
# launcher to stop the others: they must leave their own joins promptly, naming it, long
# before their deadline (NCCL's blocking join would wait for ever).
init_fault() { # VARIABLE EXPECTED_CODES PATTERN LABEL
    local rcs secs
    three_ranks "$t" init "init$$" env "$1=1" TRAINER_COMM_TIMEOUT=60 timeout 120 "$tests/comm_fault" "$emu" nccl_emu stall -1
    if [ "$rcs" = "$2" ] && grep -q "$3" "$t/init.0" && grep -q "$3" "$t/init.2" && [ "$secs" -lt 30 ]; then
        ok "$4: ranks 0 and 2 leave NCCL's join in ${secs}s: $(cut -c1-110 "$t/init.0")"
    else bad "$4 (exit codes$rcs, ${secs}s)" "$(cat "$t"/init.*)"; fi
}
init_fault TRAINER_NCCL_EMU_INIT_FAIL " 3 3 3" "rank 1 aborted the job while NCCL was joining the ranks" \
    "a rank whose NCCL join fails"
init_fault TRAINER_NCCL_EMU_INIT_DIE " 3 9 3" "rank 1 (pid [0-9]*) died while NCCL was joining the ranks" \
    "a rank that dies in NCCL's join"

out="$(TRAINER_COMM_TIMEOUT=3 timeout 60 "$bin" launch -n 3 "$tests/comm_fault" "$emu" nccl_emu stall 1 2>&1)"; rc=$?
if [ "$rc" = 3 ] && grep -q "all_reduce #[0-9]* (1048576 x f32): timed out; ranks that did not arrive: 1" <<<"$out"; then
    ok "a rank stops calling: $(grep -o 'all_reduce #.*' <<<"$out" | head -1)"
else bad "stalled rank (exit $rc)" "$out"; fi

comm_never_joins_and_abort "$bin" "$tests" "$emu" nccl_emu

# The real plugin where this machine has no GPU (or no NCCL): a clear message, not a crash.
if [ "$(gpu_count "$bin")" = 0 ]; then
    out="$(timeout 60 "$bin" launch -n 1 "$tests/comm_check" "$real" nccl 2>&1)"; rc=$?
    if [ "$rc" != 0 ] && grep -q "comm nccl rank 0 of 1: cannot run NCCL here: " <<<"$out"; then
        ok "real nccl without a GPU: $(grep -o 'cannot run NCCL here: .*' <<<"$out" | head -1 | cut -c1-80)"
    else bad "real nccl without a GPU (exit $rc)" "$out"; fi
fi

left="$(shm_new "$shm_before")"
[ -z "$left" ] && ok "nothing left in /dev/shm" || bad "leftovers in /dev/shm" "$left"
finish
