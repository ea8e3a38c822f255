#!/usr/bin/env bash
# cluster.sh: start, stop and inspect a local rckv cluster, one
# rckv-server process per `cluster-node` line of a cluster file.
#
#   scripts/cluster.sh start  [N] [--fabric shm|tcp|verbs] [--conf FILE] [-- server options]
#   scripts/cluster.sh stop   [N] [--conf FILE]
#   scripts/cluster.sh status [N] [--conf FILE]
#
# N is one node id (default: every node of the file). Every node is started
# as `rckv-server FILE --node N --dir DIR [--fabric F] [server options]`, detached
# (its own session), with its pid in RUN/node-N.pid and its output appended
# to RUN/node-N.log.
#
# start  launches the nodes that are not running, then waits until each
#        answers PING (a node answers only once every peer has joined). If
#        a node exits or does not answer in time, it prints that node's log
#        since its start, stops the nodes this start launched, and exits 1.
#        Starting some nodes while their peers are down is allowed: they are
#        left waiting for the others, and start says so. The fabric is
#        remembered (RUN/fabric) so that a node started later joins with the
#        same one; asking for another while nodes run is refused.
# stop   SIGTERM, then SIGKILL after a deadline; removes the pid files.
# status each node (running or not, pid, client and fabric address, whether
#        it answers), then the layout one node publishes (RCKV NODES), the
#        protocol in use and the number of keys. Exit 0 if every node asked
#        about runs and answers, 3 otherwise.
#
# A pid file whose process is gone, or is not this node's rckv-server, is
# stale: it is reported and removed. Running start or stop twice is harmless.
#
# Env: RCKV_SERVER (binary, default build/rckv-server),
#      RCKV_CLUSTER_CONF (cluster file, default conf/cluster-3.conf; --conf wins),
#      RCKV_CLUSTER_RUN (pid files and logs, default data/cluster),
#      RCKV_CLUSTER_DIR (the nodes' --dir, where their region files live;
#        default RCKV_CLUSTER_RUN, so that they never meet the region file of
#        a standalone server in ./data; set it empty to keep the file's dir),
#      RCKV_START_TIMEOUT (seconds, default 30), RCKV_STOP_TIMEOUT (default 10).
# The nodes run in the repository root: relative paths in the env and in
# the cluster file are taken from there; --conf FILE from where you are.
set -euo pipefail
here=$PWD
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$self")/.."

BIN=${RCKV_SERVER:-build/rckv-server}
CONF=${RCKV_CLUSTER_CONF:-conf/cluster-3.conf}
RUN=${RCKV_CLUSTER_RUN:-data/cluster}
DIR=${RCKV_CLUSTER_DIR-$RUN}
START_TIMEOUT=${RCKV_START_TIMEOUT:-30}
STOP_TIMEOUT=${RCKV_STOP_TIMEOUT:-10}

me=cluster.sh

usage() {
  sed -n '4,7p' "$self" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

die() {
  echo "$me: $*" >&2
  exit 1
}

# ---- arguments ----

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
  start | stop | status) ;;
  -h | --help | help) usage ;;
  *) echo "$me: unknown command '$cmd'" >&2; usage ;;
esac

only=""
fabric=""
server_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --fabric)
      [ $# -ge 2 ] || die "--fabric needs a value (shm, tcp or verbs)"
      fabric=$2
      shift 2
      ;;
    --fabric=*) fabric=${1#--fabric=}; shift ;;
    --conf | -c)
      [ $# -ge 2 ] || die "$1 needs a file"
      CONF=$2
      [[ $CONF == /* ]] || CONF=$here/$CONF
      shift 2
      ;;
    --conf=*)
      CONF=${1#--conf=}
      [[ $CONF == /* ]] || CONF=$here/$CONF
      shift
      ;;
    --)
      shift
      server_args=("$@")
      break
      ;;
    -h | --help) usage ;;
    *)
      if [[ $1 =~ ^[0-9]+$ ]] && [ -z "$only" ]; then
        only=$1
        shift
      else
        echo "$me: unexpected argument '$1'" >&2
        usage
      fi
      ;;
  esac
done
if [ -n "$fabric" ] && [ "$cmd" != start ]; then
  die "--fabric only applies to start"
fi
if [ ${#server_args[@]} -gt 0 ] && [ "$cmd" != start ]; then
  die "server options only apply to start"
fi
case $fabric in
  "" | shm | tcp | verbs) ;;
  *) die "unknown fabric '$fabric' (shm, tcp or verbs)" ;;
esac

# ---- the cluster file ----

[ -f "$CONF" ] || die "cluster file $CONF not found"

# "id client fabric" per cluster-node line, in file order.
mapfile -t NODE_LINES < <(awk '
  /^[ \t]*#/ { next }
  tolower($1) == "cluster-node" && NF >= 4 { print $2, $3, $4 }
' "$CONF")
[ ${#NODE_LINES[@]} -gt 0 ] || die "$CONF has no cluster-node lines"

declare -A CLIENT FABADDR
ALL_IDS=()
for line in "${NODE_LINES[@]}"; do
  read -r id client fab <<<"$line"
  [[ $id =~ ^[0-9]+$ ]] || die "$CONF: bad node id '$id'"
  ALL_IDS+=("$id")
  CLIENT[$id]=$client
  FABADDR[$id]=$fab
done

if [ -n "$only" ]; then
  [ -n "${CLIENT[$only]:-}" ] || die "node $only is not in $CONF (nodes: ${ALL_IDS[*]})"
  IDS=("$only")
else
  IDS=("${ALL_IDS[@]}")
fi

host_of() {
  local h=${1%:*}
  h=${h#[}
  echo "${h%]}"
}
port_of() { echo "${1##*:}"; }

pidfile() { echo "$RUN/node-$1.pid"; }
logfile() { echo "$RUN/node-$1.log"; }

# ---- processes ----

# The pid of node $1 if it runs, else nothing. A stale pid file (process
# gone, or another program, or another node, behind the pid) is removed.
node_pid() {
  local id=$1 f pid args
  f=$(pidfile "$id")
  [ -f "$f" ] || return 0
  pid=$(tr -dc '0-9' <"$f")
  if [ -n "$pid" ] && args=$(ps -o args= -p "$pid" 2>/dev/null) &&
    [[ $args == *rckv-server* && $args == *"--node $id"* ]]; then
    echo "$pid"
    return 0
  fi
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
    [[ $(ps -o stat= -p "$pid" 2>/dev/null) != Z* ]]; then
    echo "$me: node $id: removing stale pid file $f (pid $pid is another program)" >&2
  else
    echo "$me: node $id: removing stale pid file $f (process ${pid:-?} is gone)" >&2
  fi
  rm -f "$f"
}

port_taken() {
  if command -v ss >/dev/null 2>&1; then
    [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
  else
    timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
  fi
}

# True if node $1 answers PING within a second. A node that still waits for
# its peers may accept the connection without answering.
answers_ping() {
  local addr=${CLIENT[$1]}
  timeout 2 bash -c '
    exec 3<>"/dev/tcp/$1/$2" || exit 1
    printf "*1\r\n\$4\r\nPING\r\n" >&3
    IFS= read -r -t 1 line <&3 || exit 1
    [[ $line == +PONG* || $line == -NOAUTH* ]]
  ' _ "$(host_of "$addr")" "$(port_of "$addr")" 2>/dev/null
}

# The last lines ($2, default 20) of node $1's log since its last start.
log_tail() {
  local f
  f=$(logfile "$1")
  echo "--- $f (since its last start) ---" >&2
  awk -v max="${2:-20}" '
    /^=== / { first = NR }
    { line[NR] = $0 }
    END {
      s = first ? first : 1
      if (NR - s + 1 > max) s = NR - max + 1
      for (i = s; i <= NR; i++) print line[i]
    }' "$f" >&2 2>/dev/null || echo "(no log)" >&2
}

# ---- start ----

# Report a node that exited during start, with its log tail (once).
declare -A REPORTED
report_exit() {
  [ -n "${REPORTED[$1]:-}" ] && return 0
  REPORTED[$1]=1
  echo "$me: node $1 exited during start" >&2
  log_tail "$1"
}

do_start() {
  [ -x "$BIN" ] || die "$BIN not found; build it first with 'make'"
  mkdir -p "$RUN"
  [ -z "$DIR" ] || mkdir -p "$DIR"

  local id pid to_start=() others_running=() missing=()
  for id in "${IDS[@]}"; do
    pid=$(node_pid "$id")
    if [ -n "$pid" ]; then
      echo "node $id: already running (pid $pid)"
    else
      to_start+=("$id")
    fi
  done
  for id in "${ALL_IDS[@]}"; do
    if [ -n "$(node_pid "$id")" ]; then
      others_running+=("$id")
    elif [[ " ${IDS[*]} " != *" $id "* ]]; then
      missing+=("$id") # a peer nobody starts now
    fi
  done

  # Every node of a cluster must use the same fabric: remember the one the
  # running nodes were started with.
  local fabfile="$RUN/fabric"
  if [ ${#others_running[@]} -gt 0 ] && [ -f "$fabfile" ]; then
    local used
    used=$(cat "$fabfile")
    if [ -n "$fabric" ] && [ -n "$used" ] && [ "$fabric" != "$used" ]; then
      die "node(s) ${others_running[*]} run with fabric '$used'; stop them first to use '$fabric'"
    fi
    [ -z "$fabric" ] && fabric=$used
  fi

  [ ${#to_start[@]} -gt 0 ] || return 0

  # Refuse clearly if something else listens on a node's ports: otherwise
  # the node would fail with a bind error further down its log.
  local busy=0 p
  for id in "${to_start[@]}"; do
    for p in "$(port_of "${CLIENT[$id]}")" "$(port_of "${FABADDR[$id]}")"; do
      if port_taken "$p"; then
        echo "$me: node $id: port $p is already in use (another rckv-server or redis-server?)" >&2
        busy=1
      fi
    done
  done
  [ $busy -eq 0 ] || die "nothing started; free the port(s) or use another cluster file"

  if [ ${#others_running[@]} -eq 0 ]; then
    # The fabric these nodes use: --fabric, else the file's (shm by default).
    local used=$fabric
    [ -n "$used" ] || used=$(awk '/^[ \t]*#/ { next } tolower($1) == "fabric" { f = $2 }
                                 END { print f ? f : "shm" }' "$CONF")
    echo "$used" >"$fabfile"
  fi

  local opts=()
  [ -n "$DIR" ] && opts+=(--dir "$DIR")
  [ -n "$fabric" ] && opts+=(--fabric "$fabric")
  opts+=("${server_args[@]+"${server_args[@]}"}")
  local log
  for id in "${to_start[@]}"; do
    log=$(logfile "$id")
    echo "=== $(date '+%F %T') start: $BIN $CONF --node $id ${opts[*]}" >>"$log"
    # setsid: the node has its own session, so a Ctrl-C or a hangup in this
    # terminal later does not reach it. In a non-interactive shell the
    # background child is not a group leader, so setsid execs in place and
    # $! is the server's pid.
    setsid "$BIN" "$CONF" --node "$id" "${opts[@]}" </dev/null >>"$log" 2>&1 &
    echo $! >"$(pidfile "$id")"
    echo "node $id: started (pid $!), client ${CLIENT[$id]}, fabric ${FABADDR[$id]}, log $log"
  done

  # Wait until each answers PING. Nodes whose peers are not all running
  # cannot become ready: then only check they survive their first second.
  local t0=$SECONDS deadline=$((SECONDS + START_TIMEOUT)) failed=0
  local pending=("${to_start[@]}") still
  sleep 0.2
  while [ ${#pending[@]} -gt 0 ]; do
    still=()
    for id in "${pending[@]}"; do
      if [ -z "$(node_pid "$id" 2>/dev/null)" ]; then
        report_exit "$id"
        failed=1
      elif [ ${#missing[@]} -eq 0 ] && answers_ping "$id"; then
        echo "node $id: ready on ${CLIENT[$id]}"
      else
        still+=("$id")
      fi
    done
    pending=("${still[@]+"${still[@]}"}")
    [ $failed -eq 0 ] || break
    if [ ${#missing[@]} -gt 0 ] && [ $((SECONDS - t0)) -ge 1 ]; then
      echo "node(s) ${pending[*]} wait for node(s) ${missing[*]}, which are not running;" \
        "they become ready once those start (scripts/cluster.sh start <id>)"
      break
    fi
    if [ ${#pending[@]} -gt 0 ] && [ $SECONDS -ge $deadline ]; then
      for id in "${pending[@]}"; do
        echo "$me: node $id did not answer PING within ${START_TIMEOUT} s" >&2
        log_tail "$id"
      done
      failed=1
      break
    fi
    sleep 0.2
  done

  if [ $failed -ne 0 ]; then
    # Do not leave half a cluster waiting for a node that failed: stop what
    # this start launched (nodes that were already running stay).
    echo "$me: start failed; stopping the node(s) it started: ${to_start[*]}" >&2
    IDS=("${to_start[@]}")
    do_stop >/dev/null
    exit 1
  fi
}

# ---- stop ----

do_stop() {
  local id pid pids=() ids=()
  for id in "${IDS[@]}"; do
    pid=$(node_pid "$id")
    if [ -z "$pid" ]; then
      echo "node $id: not running"
      continue
    fi
    kill -TERM "$pid" 2>/dev/null || true
    pids+=("$pid")
    ids+=("$id")
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  local deadline=$((SECONDS + STOP_TIMEOUT)) i left
  while :; do
    left=0
    for i in "${!pids[@]}"; do
      kill -0 "${pids[$i]}" 2>/dev/null && left=1
    done
    [ $left -eq 0 ] && break
    if [ $SECONDS -ge $deadline ]; then
      for i in "${!pids[@]}"; do
        if kill -0 "${pids[$i]}" 2>/dev/null; then
          echo "$me: node ${ids[$i]} (pid ${pids[$i]}) still running after ${STOP_TIMEOUT} s: SIGKILL" >&2
          kill -KILL "${pids[$i]}" 2>/dev/null || true
        fi
      done
      sleep 0.2
      break
    fi
    sleep 0.1
  done
  for i in "${!pids[@]}"; do
    rm -f "$(pidfile "${ids[$i]}")"
    echo "node ${ids[$i]}: stopped (pid ${pids[$i]})"
  done
}

# ---- status ----

# Send one command ($@) to node $1's client address on fd 3 (opened by the
# caller) and read its reply with the helpers below.
resp_send() {
  local out="*$#\r\n" a
  for a in "$@"; do
    out+="\$${#a}\r\n$a\r\n"
  done
  printf '%b' "$out" >&3
}

# One reply line without its type byte and CR; RESP_TYPE gets the type.
RESP_TYPE=""
resp_line() {
  local line
  IFS= read -r -t 2 line <&3 || return 1
  line=${line%$'\r'}
  RESP_TYPE=${line:0:1}
  RESP_VAL=${line:1}
  if [ "$RESP_TYPE" = '$' ] && [ "$RESP_VAL" -ge 0 ]; then
    IFS= read -r -t 2 line <&3 || return 1
    RESP_VAL=${line%$'\r'}
  fi
}

# Print the layout published by node $1 (RCKV NODES), the protocol and the
# key count, from fd 3 (opened by the caller). Returns 1 on a short or
# unexpected reply.
layout_read() {
  local id=$1 n i j nid host port fab nr ranges count s e
  resp_send RCKV NODES
  resp_line && [ "$RESP_TYPE" = '*' ] || return 1
  n=$RESP_VAL
  echo "layout (RCKV NODES via node $id): $n nodes, 16384 slots"
  for ((i = 0; i < n; i++)); do
    resp_line || return 1 # *5
    resp_line || return 1
    nid=$RESP_VAL
    resp_line || return 1
    host=$RESP_VAL
    resp_line || return 1
    port=$RESP_VAL
    resp_line || return 1
    fab=$RESP_VAL
    resp_line || return 1
    nr=$RESP_VAL
    ranges="" count=0
    for ((j = 0; j < nr; j++)); do
      resp_line || return 1 # *2
      resp_line || return 1
      s=$RESP_VAL
      resp_line || return 1
      e=$RESP_VAL
      ranges+="${ranges:+,}$s-$e"
      count=$((count + e - s + 1))
    done
    printf '  node %s  client %s:%s  fabric %s  slots %s (%d)\n' \
      "$nid" "$host" "$port" "$fab" "$ranges" "$count"
  done
  resp_send CONFIG GET cc
  if resp_line && [ "$RESP_TYPE" = '*' ] && resp_line && resp_line; then
    echo "protocol (cc): $RESP_VAL"
  fi
  resp_send DBSIZE
  resp_line || return 1
  if [ "$RESP_TYPE" = ':' ]; then
    echo "keys (DBSIZE, every node): $RESP_VAL"
  else
    echo "DBSIZE: $RESP_VAL"
  fi
}

layout_summary() {
  local addr=${CLIENT[$1]} rc=0
  exec 3<>"/dev/tcp/$(host_of "$addr")/$(port_of "$addr")" 2>/dev/null || return 1
  layout_read "$1" || rc=1
  exec 3<&- 3>&-
  return $rc
}

do_status() {
  local id pid rc=0 answering="" any=""
  for id in "${IDS[@]}"; do
    pid=$(node_pid "$id")
    if [ -z "$pid" ]; then
      printf 'node %s: not running     client %s  fabric %s\n' "$id" "${CLIENT[$id]}" "${FABADDR[$id]}"
      rc=3
    elif answers_ping "$id"; then
      printf 'node %s: running, pid %s  client %s  fabric %s  answers PING\n' \
        "$id" "$pid" "${CLIENT[$id]}" "${FABADDR[$id]}"
      [ -z "$answering" ] && answering=$id
      any=1
    else
      any=1
      printf 'node %s: running, pid %s  client %s  fabric %s  NOT answering (waiting for peers?)\n' \
        "$id" "$pid" "${CLIENT[$id]}" "${FABADDR[$id]}"
      rc=3
    fi
  done
  if [ -n "$any" ] && [ -f "$RUN/fabric" ]; then
    echo "fabric at start: $(cat "$RUN/fabric")"
  fi
  if [ -n "$answering" ]; then
    layout_summary "$answering" || echo "(node $answering did not answer RCKV NODES)"
  fi
  return $rc
}

case $cmd in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status || exit $? ;;
esac
