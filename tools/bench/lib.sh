# Shared by the benchmark scripts (source it): median of whitespace-separated numbers, the
# throughput a `trainer` log reports, and the PyTorch peer's python.
# median: stdin numbers -> their median
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# sps: a run's log -> training samples/s in the steady state (the median of the logged
# windows after the first, which includes warm-up)
sps() { sed -n 's/.*step [0-9]*\/[0-9]*  .*  \([0-9]*\) samples\/s.*/\1/p' | tail -n +2 | median; }
# isps: an eval/predict log -> inference samples/s
isps() { sed -n 's/.*inference: .*(\([0-9]*\) samples\/s.*/\1/p' | tail -1; }
# peer_py: the python of the PyTorch peer: the current PyTorch from PyPI in the venv
# tools/bench/peer_venv.py makes (once, cached); TRAINER_BENCH_PEER=debian: Debian's torch.
peer_py() {
    if [ "${TRAINER_BENCH_PEER:-pypi}" = debian ]; then
        echo /usr/bin/python3
    else
        "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/peer_venv.py" python
    fi
}
