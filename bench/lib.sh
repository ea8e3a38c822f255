# shellcheck shell=bash
# lib.sh: what the bench scripts share. Sourced, not run.

# stop_pid PID [SIGNAL]: signal one process the script started (TERM by
# default), wait up to 10 s for it to go, then SIGKILL it; reap it. An
# empty or already gone PID is fine.
stop_pid() {
  local pid=$1 sig=${2:-TERM}
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill "-$sig" "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# free_port: a loopback TCP port nothing listens on now (the kernel's pick
# for a socket bound to port 0; without python, the first port from a
# random one up that refuses a connection).
free_port() {
  local py p
  for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null 2>&1; then
      "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
      return
    fi
  done
  p=$((20000 + RANDOM % 20000))
  while timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" 2>/dev/null; do p=$((p + 1)); done
  echo "$p"
}

# free_ports N: N distinct free loopback ports, on one line.
free_ports() {
  /usr/bin/python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# start_cluster DIR NODES FABRIC [LINE...]: a cluster of NODES rckv-server
# processes ($RCKV) on FABRIC, on free loopback ports, node i in DIR/node<i>
# with its log in DIR/node<i>.log; each LINE goes to their shared cluster
# file DIR/cluster.conf; SERVER_ARGS (if set) adds options to every node.
# Sets CONF (that file) and PORTS (client ports, node i at index i - 1),
# appends the processes to PIDS (the caller's trap stops them: stop_pid),
# and returns once every node answers PING (each does once its peers
# joined); exits the script if a node dies or does not answer in 60 s.
start_cluster() {
  local dir=$1 nodes=$2 fabric=$3 i try line
  shift 3
  local -a ports
  read -r -a ports <<<"$(free_ports $((2 * nodes)))"
  CONF="$dir/cluster.conf"
  PORTS=()
  {
    echo "# written by $(basename "$0")"
    for i in $(seq 1 "$nodes"); do
      PORTS+=("${ports[$((2 * i - 2))]}")
      echo "cluster-node $i 127.0.0.1:${ports[$((2 * i - 2))]} 127.0.0.1:${ports[$((2 * i - 1))]}"
    done
    echo "fabric $fabric"
    for line in "$@"; do echo "$line"; done
  } >"$CONF"
  for i in $(seq 1 "$nodes"); do
    mkdir -p "$dir/node$i"
    # shellcheck disable=SC2086 # SERVER_ARGS is a list of options
    "$RCKV" "$CONF" --node "$i" --dir "$dir/node$i" ${SERVER_ARGS:-} >"$dir/node$i.log" 2>&1 &
    PIDS+=($!)
  done
  local first=$((${#PIDS[@]} - nodes))
  for i in $(seq 1 "$nodes"); do
    for try in $(seq 600); do
      kill -0 "${PIDS[$((first + i - 1))]}" 2>/dev/null || {
        echo "$(basename "$0"): node $i exited during start; its log:" >&2
        tail -20 "$dir/node$i.log" >&2
        exit 1
      }
      [ "$(timeout 2 redis-cli -h 127.0.0.1 -p "${PORTS[$((i - 1))]}" ping 2>/dev/null)" = PONG ] &&
        break
      if [ "$try" -eq 600 ]; then
        tail -20 "$dir/node$i.log" >&2
        echo "$(basename "$0"): node $i did not answer PING" >&2
        exit 1
      fi
      sleep 0.1
    done
  done
}
