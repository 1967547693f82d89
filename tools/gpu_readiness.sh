#!/usr/bin/env bash
# GPU readiness in one call (`tools/dev gpu`, docs/gpu.md): on a machine with an NVIDIA GPU,
# build with CUDA on every core, run the tests labelled gpu and a short GPU benchmark beside
# PyTorch, and print one summary. Everything goes to one log folder:
#
#   tools/gpu_readiness.sh BUILD_DIR LOG_DIR
#
# LOG_DIR gets build.log, ctest.log, bench.log, nvidia-smi.txt and summary.txt. Each stage
# has its own time limit so that the whole stays within 8 minutes on an H100 (build 210 s,
# tests 180 s, benchmark 80 s; GPU_BUILD_S, GPU_TESTS_S, GPU_BENCH_S override them). Exit 0 when the
# build and every gpu test that ran passed (a benchmark that cannot run is reported, not an
# error), 1 otherwise, 77 when no GPU is visible (nvidia-smi finds none).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:?usage: gpu_readiness.sh BUILD_DIR LOG_DIR}"
LOGS="${2:?usage: gpu_readiness.sh BUILD_DIR LOG_DIR}"
BUILD_S="${GPU_BUILD_S:-210}"
TESTS_S="${GPU_TESTS_S:-180}"
BENCH_S="${GPU_BENCH_S:-80}"
mkdir -p "$LOGS"
SUMMARY="$LOGS/summary.txt"
: >"$SUMMARY"
say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

say "== tools/dev gpu: $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no git')"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >"$LOGS/nvidia-smi.txt" 2>&1 ||
    ! grep -q '^GPU ' "$LOGS/nvidia-smi.txt"; then
    say "no GPU visible (nvidia-smi: $(head -c 200 "$LOGS/nvidia-smi.txt" 2>/dev/null | tr '\n' ' ')); nothing to check"
    exit 77
fi
nvidia-smi >>"$LOGS/nvidia-smi.txt" 2>&1
gpus=$(grep -c '^GPU ' "$LOGS/nvidia-smi.txt")
say "gpus: $gpus ($(grep '^GPU 0' "$LOGS/nvidia-smi.txt" | sed 's/ (UUID.*//; s/^GPU 0: //'))"
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    say "FAIL: no CUDA toolkit (nvcc) on this machine: the CUDA kernels cannot be built"
    exit 1
fi
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"

# Build: every core, CUDA required (a silent CPU-only build would skip every gpu test).
jobs=$(nproc)
t0=$(elapsed)
if timeout "$BUILD_S" cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTRAINER_CUDA=ON \
        -DTRAINER_WERROR=ON >"$LOGS/build.log" 2>&1 &&
    timeout $(( BUILD_S - ($(elapsed) - t0) )) cmake --build "$BUILD" -j "$jobs" >>"$LOGS/build.log" 2>&1; then
    say "build: ok in $(( $(elapsed) - t0 )) s on $jobs cores ($(grep -o 'CUDA toolkit [0-9.]*' "$LOGS/build.log" | head -1))"
else
    say "FAIL: build (exit or timeout after $(( $(elapsed) - t0 )) s); the last lines of $LOGS/build.log:"
    grep -E 'error|Error' "$LOGS/build.log" | head -20 | tee -a "$SUMMARY"
    exit 1
fi

# The gpu tests: one at a time on one GPU (they each take the whole device).
t0=$(elapsed)
(cd "$BUILD" && timeout "$TESTS_S" ctest -L gpu -V --timeout "$TESTS_S" -j 1) >"$LOGS/ctest.log" 2>&1
rc=$?
results=$(grep -E 'Test +#[0-9]+: ' "$LOGS/ctest.log" | sed -E 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: //; s/ \.+ */ /; s/\*\*\*//')
passed=$(grep -c ' Passed ' <<<"$results")
skipped=$(grep -c ' Skipped ' <<<"$results")
failed=$(grep -cvE ' (Passed|Skipped) ' <<<"$results")
[ -z "$results" ] && failed=0
say "gpu tests: $passed passed, $failed failed, $skipped skipped in $(( $(elapsed) - t0 )) s (ctest exit $rc)"
# each test's line; a skipped one with its last line of output (the reason)
while read -r name verdict _; do
    [ -n "$name" ] || continue
    why=""
    if [ "$verdict" = Skipped ]; then
        n=$(grep -m1 -E "Test +#[0-9]+: $name " "$LOGS/ctest.log" | sed -E 's/.*#([0-9]+):.*/\1/')
        why=": $(grep -E "^$n: " "$LOGS/ctest.log" | grep -v '^[0-9]*: Test command' | tail -1 | sed -E "s/^$n: //" | cut -c1-160)"
    fi
    say "  $name $verdict$why"
done <<<"$results"
status=0
if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
    say "FAIL: gpu tests (see $LOGS/ctest.log)"
    status=1
fi

# The short benchmark: the small LM, one round; torch's side needs a torch with CUDA.
t0=$(elapsed)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
timeout "$BENCH_S" "$py" "$ROOT/tools/bench/gpu_vs_torch.py" --build "$BUILD" --size small --reps 1 \
    --windows 3 --steps 10 >"$LOGS/bench.log" 2>&1
brc=$?
case "$brc" in
    0) say "bench (gpu_vs_torch.py --size small --reps 1, $(( $(elapsed) - t0 )) s):"
       grep -E '^(\||trainer vs|loss check|target|no torch)' "$LOGS/bench.log" | sed 's/^/  /' | tee -a "$SUMMARY" ;;
    77) say "bench: $(grep -m1 'skipped' "$LOGS/bench.log")" ;;
    124) say "bench: stopped at its ${BENCH_S} s limit (see $LOGS/bench.log)" ;;
    *) say "bench: failed, exit $brc: $(tail -3 "$LOGS/bench.log" | tr '\n' ' ')"
       status=1 ;;
esac
say "total: $(elapsed) s; logs in $LOGS; $([ $status -eq 0 ] && echo OK || echo FAILED)"
exit $status
