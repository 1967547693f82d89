#!/bin/sh
# mpirun's rsh agent for the hosts of tests/e2e/hosts.sh: `hosts_rsh.sh [-x] HOST CMD...` runs
# CMD (a shell command line, as ssh would) inside HOST's namespaces, found through the keeper
# pid in $HOSTS_DIR/HOST.pid.
while [ "${1#-}" != "$1" ]; do shift; done
host="$1"; shift
pid="$(cat "$HOSTS_DIR/$host.pid" 2>/dev/null)" || { echo "hosts_rsh.sh: no host '$host' in ${HOSTS_DIR:-(HOSTS_DIR unset)}" >&2; exit 255; }
exec nsenter -t "$pid" -n -m -u -- /bin/sh -c "$*"
