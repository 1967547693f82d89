# Several "hosts" on one machine, for rehearsing a cluster run (docs/distributed.md, "Several
# hosts"). Source it, then `hosts_up N DIR`: N hosts host0..host<N-1>, each a process holding
# its own network, mount and UTS namespaces (hostname hostI, private tmpfs /dev/shm and /tmp,
# its own /etc/hosts), joined by veth pairs to a bridge in host0 on 10.231.0.0/24 (host I is
# 10.231.0.<I+1>); nothing else is reachable and no traffic leaves them. DIR is the shared
# "cluster file system" (not under /tmp, which each host hides: the source tree and the paths
# in HOSTS_KEEP (colon-separated: the build) that lie under /tmp are kept visible); it holds the hostfile and the
# keepers' pids that hosts_rsh.sh (mpirun's rsh agent) reads. `in_host I CMD...` runs CMD on
# host I; `hosts_mpirun ARGS...` runs mpirun on host0 over every host; `hosts_down` ends
# everything (it is also the EXIT trap's business: hosts_up installs none, call it from yours).
# `hosts_skip_reason` says why namespaces cannot be made here (empty when they can). What runs
# on a host dies with this shell, even by SIGKILL (pdeathsig): the keepers, and mpirun, whose
# daemons then end the ranks.
HOSTS_NET=10.231.0
HOSTS_SUBNET=$HOSTS_NET.0/24
hosts_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hosts_pids=()

hosts_skip_reason() {
    local t
    for t in ip unshare nsenter setpriv; do
        command -v "$t" >/dev/null || { echo "no $t (Debian: iproute2, util-linux)"; return; }
    done
    [ "$(id -u)" = 0 ] || { echo "not root: network and mount namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN"; return; }
    local out
    out="$(timeout 10 unshare --net --mount --uts sh -c 'mount -t tmpfs tmpfs /dev/shm &&
        ip link add name x type veth peer name y && ip link add name b type bridge' 2>&1)" ||
        echo "cannot make network, mount and UTS namespaces with veth pairs and a bridge here: $out"
}

# hosts_up N DIR: returns non-zero (saying why) when a host cannot be made.
hosts_up() {
    local n="$1" i pid
    HOSTS_DIR="$2"
    export HOSTS_DIR
    {
        echo "127.0.0.1 localhost"
        for ((i = 0; i < n; i++)); do echo "$HOSTS_NET.$((i + 1)) host$i"; done
    } >"$HOSTS_DIR/etc_hosts"
    : >"$HOSTS_DIR/hostfile"
    local keep=() p
    local IFS_=$IFS; IFS=:
    for p in "$(cd "$hosts_here/../.." && pwd)" ${HOSTS_KEEP:-}; do
        p="$(realpath -m "$p")"
        case "$p" in /tmp/*) keep+=("$p") ;; esac
    done
    IFS=$IFS_
    for ((i = 0; i < n; i++)); do
        # The keeper dies with this shell (pdeathsig), and the namespaces with their last process.
        # Paths under /tmp that the hosts need (the source tree, HOSTS_KEEP: the build) are kept
        # through the private /tmp: bound aside first, then bound back onto the new tmpfs.
        setpriv --pdeathsig KILL unshare --net --mount --uts --propagation private sh -c '
            dir="$1"; name="$2"; shift 2; k=0
            for p in "$@"; do mkdir -p "$dir/keep.$name.$k" && mount --bind "$p" "$dir/keep.$name.$k" || exit 1; k=$((k + 1)); done
            mount -t tmpfs -o size=512m,mode=1777 tmpfs /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /tmp || exit 1
            k=0
            for p in "$@"; do mkdir -p "$p" && mount --bind "$dir/keep.$name.$k" "$p" || exit 1; k=$((k + 1)); done
            mount --bind "$dir/etc_hosts" /etc/hosts && hostname "$name" && ip link set lo up && touch "$dir/$name.up" &&
            exec sleep 100000' keeper "$HOSTS_DIR" "host$i" "${keep[@]}" &
        hosts_pids+=($!)
        echo "$!" >"$HOSTS_DIR/host$i.pid"
        echo "host$i slots=${HOSTS_SLOTS:-2}" >>"$HOSTS_DIR/hostfile"
    done
    for ((i = 0; i < n; i++)); do
        local w=0
        while [ ! -e "$HOSTS_DIR/host$i.up" ]; do
            kill -0 "${hosts_pids[$i]}" 2>/dev/null && [ $w -lt 200 ] ||
                { echo "host$i: its namespaces could not be set up"; return 1; }
            sleep 0.05; w=$((w + 1))
        done
    done
    in_host 0 ip link add name br0 type bridge stp_state 0 forward_delay 0 &&
        in_host 0 ip addr add "$HOSTS_NET.1/24" dev br0 && in_host 0 ip link set br0 up ||
        { echo "host0: no bridge"; return 1; }
    for ((i = 1; i < n; i++)); do
        pid="${hosts_pids[$i]}"
        ip link add name eth0 netns "$pid" type veth peer name "p$i" netns "${hosts_pids[0]}" &&
            in_host 0 ip link set "p$i" master br0 up &&
            in_host "$i" ip addr add "$HOSTS_NET.$((i + 1))/24" dev eth0 && in_host "$i" ip link set eth0 up ||
            { echo "host$i: no veth pair to host0"; return 1; }
    done
}

in_host() {
    local i="$1"; shift
    setpriv --pdeathsig KILL nsenter -t "$(cat "$HOSTS_DIR/host$i.pid")" -n -m -u -- "$@"
}

# hosts_mpirun ARGS...: mpirun started on host0, its ranks on the hostfile's hosts through the
# rsh agent, OpenMPI's own traffic on the veth subnet; at most HOSTS_TIMEOUT seconds (120).
hosts_mpirun() {
    in_host 0 timeout "${HOSTS_TIMEOUT:-120}" setpriv --pdeathsig KILL env HOSTS_DIR="$HOSTS_DIR" TMPDIR=/tmp \
        mpirun --allow-run-as-root --bind-to none --hostfile "$HOSTS_DIR/hostfile" \
        --mca plm_rsh_agent "$hosts_here/hosts_rsh.sh" --mca plm_rsh_no_tree_spawn 1 \
        --mca oob_tcp_if_include "$HOSTS_SUBNET" --mca btl_tcp_if_include "$HOSTS_SUBNET" \
        --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none "$@"
}

# hosts_shm_left: each host's /dev/shm entries, as "hostI:NAME" lines (empty when clean).
hosts_shm_left() {
    local i
    for ((i = 0; i < ${#hosts_pids[@]}; i++)); do in_host "$i" ls -A /dev/shm | sed "s/^/host$i:/"; done
}

hosts_down() { # never fails (it runs in EXIT traps, also under set -e)
    local p
    for p in "${hosts_pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    for p in "${hosts_pids[@]}"; do wait "$p" 2>/dev/null || true; done
    hosts_pids=()
}
