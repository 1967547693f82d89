#!/usr/bin/env bash
# All-reduce bus bandwidth between two hosts over TCP: trainer's mpi backend (bench_comm under
# mpirun, one rank per host) beside PyTorch's gloo (the pinned PyPI torch of the peer venv,
# tools/bench/peer_venv.py), f32 sum, 4 KiB to MAX_MIB MiB. The hosts are two network
# namespaces joined by a veth pair (tests/e2e/hosts.sh; root), so "the network" is the
# kernel's TCP over veth on this machine. ROUNDS rounds of both, one after the other (a busy
# machine drifts), then per size from 1 MiB the median busbw of each and their ratio.
# Figures: docs/benchmarks.md. Never run in CI.
# usage: tools/bench/multihost_allreduce.sh [MAX_MIB] [ROUNDS]          (after tools/dev build)
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
max="${1:-256}"; rounds="${2:-3}"
. "$root/tests/e2e/hosts.sh"
reason="$(hosts_skip_reason)"
[ -z "$reason" ] || { echo "multihost_allreduce.sh: $reason" >&2; exit 77; }
py="$("$root/tools/bench/peer_venv.py" python)"
dir="$(mktemp -d /var/tmp/trainer-bench-hosts-XXXXXX)"
trap 'hosts_down; rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM
HOSTS_SLOTS=1 hosts_up 2 "$dir"
port=$((29000 + $$ % 1000))
gloo() { # one gloo run: rank 1 on host1 in the background, rank 0 (host0, the store) prints
    in_host 1 env RANK=1 WORLD_SIZE=2 MASTER_ADDR="$HOSTS_NET.1" MASTER_PORT="$port" GLOO_SOCKET_IFNAME=eth0 \
        timeout 900 "$py" "$root/tools/bench/gloo_allreduce.py" 2 "$max" >/dev/null 2>&1 &
    local peer=$!
    in_host 0 env RANK=0 WORLD_SIZE=2 MASTER_ADDR="$HOSTS_NET.1" MASTER_PORT="$port" GLOO_SOCKET_IFNAME=br0 \
        timeout 900 "$py" "$root/tools/bench/gloo_allreduce.py" 2 "$max" 2>/dev/null
    wait "$peer"
    port=$((port + 1))
}
echo "# mpi: trainer's mpi backend over OpenMPI $(mpirun --version | sed -n 's/.*Open MPI) //p') (btl tcp); gloo: $("$py" -c 'import torch; print("torch", torch.__version__)'); 2 hosts, 1 rank each"
for ((r = 1; r <= rounds; r++)); do
    echo "# round $r, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    HOSTS_TIMEOUT=900 hosts_mpirun -np 2 "$root/build/bin/bench_comm" "$root/build/plugins" mpi "$max" all_reduce |
        tee -a "$dir/rows" | grep -v '^#'
    gloo | tee -a "$dir/rows" | grep -v '^#'
done
echo "# medians over $rounds rounds (busbw GB/s)"
awk '$1 == "all_reduce" || $1 == "gloo_all_reduce" { k = ($1 == "all_reduce") ? "mpi" : "gloo"; v[k ":" $2] = v[k ":" $2] " " $5; if ($2 > top) top = $2 }
     function med(str,   a, n, i, j, t) { n = split(str, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
                                          return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     END { printf "%12s %10s %10s %8s   %s\n", "bytes", "mpi", "gloo", "mpi/gloo", "(mpi runs | gloo runs)"
           for (b = 1048576; b <= top; b *= 4) { m = med(v["mpi:" b]); g = med(v["gloo:" b])
               printf "%12d %10.2f %10.2f %8.2f   (%s |%s)\n", b, m, g, (g > 0 ? m / g : 0), v["mpi:" b], v["gloo:" b] } }' "$dir/rows"
