#!/usr/bin/env bash
# run.sh: what `make run` calls after building. Starts the local 3-node
# cluster of conf/cluster-3.conf on the shm fabric (ports 7001 to 7003)
# with scripts/cluster.sh, prints how to connect to each node, shows the
# nodes' log lines as they come, and stops all three on Ctrl-C (or when one
# of them exits). Extra arguments go to every node, e.g.
# `scripts/run.sh --cc nowait`.
# Env: RCKV_SERVER (binary, default build/rckv-server), RCKV_CLUSTER_CONF
# (default conf/cluster-3.conf), RCKV_FABRIC (default shm), and the other
# variables scripts/cluster.sh reads (RCKV_CLUSTER_RUN: pid files, logs and
# regions, default data/cluster).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${RCKV_SERVER:-build/rckv-server}
CONF=${RCKV_CLUSTER_CONF:-conf/cluster-3.conf}
FABRIC=${RCKV_FABRIC:-shm}
RUN=${RCKV_CLUSTER_RUN:-data/cluster}
export RCKV_SERVER=$BIN RCKV_CLUSTER_CONF=$CONF RCKV_CLUSTER_RUN=$RUN

if [ ! -x "$BIN" ]; then
  echo "run.sh: $BIN not found; build it first with 'make'" >&2
  exit 1
fi
if [ ! -f "$CONF" ]; then
  echo "run.sh: cluster file $CONF not found" >&2
  exit 1
fi

# "id host:port" of each node's client address.
mapfile -t NODES < <(awk '
  /^[ \t]*#/ { next }
  tolower($1) == "cluster-node" && NF >= 4 { print $2, $3 }
' "$CONF")
if [ ${#NODES[@]} -eq 0 ]; then
  echo "run.sh: $CONF has no cluster-node lines" >&2
  exit 1
fi

# A cluster that scripts/cluster.sh started (and did not stop) is still
# running: say so rather than fight it for the ports.
status=$(scripts/cluster.sh status 2>/dev/null || true)
if grep -q ': running' <<<"$status"; then
  echo "run.sh: a cluster is already running (scripts/cluster.sh status shows it);" >&2
  echo "        stop it first with: scripts/cluster.sh stop" >&2
  exit 1
fi

# Refuse clearly if something already listens on a client port: otherwise
# a node would fail with a bind error further down its log.
port_taken() {
  if command -v ss >/dev/null 2>&1; then
    [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
  else
    timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
  fi
}
busy=()
for n in "${NODES[@]}"; do
  read -r id addr <<<"$n"
  port=${addr##*:}
  if port_taken "$port"; then busy+=("$port (node $id)"); fi
done
if [ ${#busy[@]} -gt 0 ]; then
  list=$(printf ', %s' "${busy[@]}")
  echo "run.sh: port ${list:2} already in use (another rckv-server or redis-server?)." >&2
  echo "        Stop it, or use another cluster file: RCKV_CLUSTER_CONF=my.conf scripts/run.sh" >&2
  exit 1
fi

tailpid=""
stopping=0
stop_all() {
  [ $stopping -eq 0 ] || return 0
  stopping=1
  trap '' INT TERM HUP
  echo
  echo "Stopping the cluster..."
  scripts/cluster.sh stop || true
  if [ -n "$tailpid" ]; then
    kill "$tailpid" 2>/dev/null || true
    wait "$tailpid" 2>/dev/null || true
  fi
}
on_signal() {
  stop_all
  exit 0
}
trap on_signal INT TERM HUP
trap stop_all EXIT

echo "Starting a ${#NODES[@]}-node rckv cluster on the $FABRIC fabric ($BIN $CONF${*:+ $*})"
args=(start --fabric "$FABRIC")
[ $# -gt 0 ] && args+=(-- "$@")
if ! scripts/cluster.sh "${args[@]}"; then
  echo "run.sh: the cluster did not start (see above)" >&2
  exit 1
fi

echo
echo "rckv is running: any node serves any key, and MULTI/EXEC may span nodes."
for n in "${NODES[@]}"; do
  read -r id addr <<<"$n"
  host=${addr%:*}
  if [ "$host" = 127.0.0.1 ] || [ "$host" = localhost ]; then
    echo "  node $id: redis-cli -p ${addr##*:}"
  else
    echo "  node $id: redis-cli -h $host -p ${addr##*:}"
  fi
done
echo "Logs: $RUN/node-<id>.log (new lines follow).  In another terminal: scripts/cluster.sh status"
echo "Press Ctrl-C to stop all ${#NODES[@]} nodes."
echo

# Follow the logs (the nodes prefix each line with node=<id>).
logs=()
for n in "${NODES[@]}"; do
  read -r id _ <<<"$n"
  logs+=("$RUN/node-$id.log")
done
tail -q -n 0 -F "${logs[@]}" 2>/dev/null &
tailpid=$!

# Wait for Ctrl-C; if a node exits by itself, stop the others too.
while :; do
  for n in "${NODES[@]}"; do
    read -r id _ <<<"$n"
    pid=$(cat "$RUN/node-$id.pid" 2>/dev/null || true)
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null ||
      [[ $(ps -o stat= -p "$pid" 2>/dev/null) == Z* ]]; then
      sleep 0.3 # let tail print its last lines
      echo "run.sh: node $id exited (see $RUN/node-$id.log); stopping the others" >&2
      stop_all
      exit 1
    fi
  done
  sleep 1 &
  wait $! || true
done
