#!/usr/bin/env bash
# sweep.sh: rckv-bench sweeps and their charts, and the rckv-bench part of
# `make bench`.
#
#   bench/sweep.sh                      the standard run (what `make bench` calls)
#   bench/sweep.sh --port P [sweep options] [-- rckv-bench options]
#   bench/sweep.sh --cluster FILE [sweep options] [-- rckv-bench options]
#
# Sweep mode runs one rckv-bench sweep against a running rckv (one node, or
# the cluster FILE describes): every protocol of --protocols x every value
# of --param, written as JSON lines to OUT/NAME.jsonl and drawn by
# bench/plot into OUT/NAME-throughput.{png,svg} and OUT/NAME-aborts.{png,svg},
# one line per protocol (plus "redis" with --redis HOST:PORT).
#   --param NAME        zipf (default), write-ratio, nodes-per-txn, ops, threads,
#                       clients or pipeline
#   --values V1,V2,...  default per parameter (see default_values below)
#   --protocols P1,...  default $BENCH_PROTOCOLS or nowait,silo
#   --workload W        default ycsb-t
#   --redis HOST:PORT   also run the sweep (without protocols) against Redis
#   --name NAME         output prefix, default sweep-PARAM
#   --out DIR           default bench/results
#
# The standard run starts its own rckv-server (--persistence none, memory
# sized for the records) and redis-server 7 (--save "" --appendonly no) on
# free loopback ports, or, with RCKV_CLUSTER=FILE, uses that running rckv
# cluster instead of its own rckv-server. It writes to bench/results/:
#   ycsb-t.txt/.json     ycsb-t, rckv against redis (--compare, 2 rounds)
#   ycsb-a.txt/.json     ycsb-a, rckv against redis
#   sweep-zipf.*         throughput and abort rate against zipf, per protocol and redis
#   sweep-write-ratio.*  the same against the write ratio
# ycsb-t uses --nodes-per-txn 2 on a cluster and 1 on a single node.
#
# Env: RCKV_SERVER (build/rckv-server), REDIS_SERVER (redis-server),
# RCKV_BENCH (build/rckv-bench), RCKV_CLUSTER, BENCH_RECORDS (1000000),
# BENCH_VALUE_SIZE (1000), BENCH_WARMUP (2), BENCH_DURATION (10, the
# comparisons), BENCH_SWEEP_DURATION (5, each sweep point), BENCH_THREADS (1),
# BENCH_CLIENTS (8), BENCH_PROTOCOLS (nowait,silo).
set -euo pipefail
cd "$(dirname "$0")/.."

RCKV=${RCKV_SERVER:-build/rckv-server}
REDIS=${REDIS_SERVER:-redis-server}
BENCH=${RCKV_BENCH:-build/rckv-bench}
PLOT=bench/plot
RECORDS=${BENCH_RECORDS:-1000000}
VALUE_SIZE=${BENCH_VALUE_SIZE:-1000}
WARMUP=${BENCH_WARMUP:-2}
DURATION=${BENCH_DURATION:-10}
SWEEP_DURATION=${BENCH_SWEEP_DURATION:-5}
THREADS=${BENCH_THREADS:-1}
CLIENTS=${BENCH_CLIENTS:-8}
PROTOCOLS=${BENCH_PROTOCOLS:-nowait,silo}
OUT=bench/results

die() { echo "sweep.sh: $*" >&2; exit 1; }

default_values() {
  case $1 in
    zipf) echo 0,0.2,0.4,0.6,0.8,0.9,0.99 ;;
    write-ratio) echo 0,0.1,0.2,0.5,0.8,1 ;;
    nodes-per-txn) echo 1,2,3 ;;
    ops) echo 1,2,5,10,20 ;;
    threads) echo 1,2,4 ;;
    clients) echo 1,2,4,8,16,32 ;;
    pipeline) echo 1,2,4,8,16 ;;
    *) die "no default values for --param $1; give --values" ;;
  esac
}

# --- servers we start (only these are ever stopped) ----------------------

TMP=""
PIDS=()
# shellcheck source=bench/lib.sh
. bench/lib.sh  # stop_pid (the script cd-ed to the repository above)
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  [ -n "$TMP" ] && rm -rf "$TMP"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_ready() {  # name port pid log
  for _ in $(seq 600); do
    if ! kill -0 "$3" 2>/dev/null; then
      echo "sweep.sh: $1 exited during start; its log:" >&2
      tail -20 "$4" >&2
      exit 1
    fi
    [ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$2" ping 2>/dev/null)" = "PONG" ] && return 0
    sleep 0.1
  done
  echo "sweep.sh: $1 did not answer PING on port $2 within 60 s; its log:" >&2
  tail -20 "$4" >&2
  exit 1
}

start_rckv() {  # sets RCKV_PORT
  local mb
  # values, keys and item overhead, with room for ycsb-t's overwrites
  mb=$(awk -v r="$RECORDS" -v v="$VALUE_SIZE" 'BEGIN { printf "%d", r * (v + 256) * 1.5 / 1048576 + 256 }')
  RCKV_PORT=$(free_port)
  mkdir -p "$TMP/rckv"
  "$RCKV" --port "$RCKV_PORT" --bind 127.0.0.1 --dir "$TMP/rckv" --persistence none \
    --memory "${mb}mb" --loglevel warning >"$TMP/rckv.log" 2>&1 &
  PIDS+=($!)
  wait_ready rckv-server "$RCKV_PORT" "$!" "$TMP/rckv.log"
}

start_redis() {  # sets REDIS_PORT
  REDIS_PORT=$(free_port)
  mkdir -p "$TMP/redis"
  "$REDIS" --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$TMP/redis" --save "" \
    --appendonly no --daemonize no --loglevel warning >"$TMP/redis.log" 2>&1 &
  PIDS+=($!)
  wait_ready redis-server "$REDIS_PORT" "$!" "$TMP/redis.log"
}

# --- one sweep -------------------------------------------------------------

# sweep TARGET_ARGS PARAM VALUES PROTOCOLS WORKLOAD NAME REDIS [extra rckv-bench args]
# TARGET_ARGS is "--port P" or "--cluster FILE" (word-split on purpose).
sweep() {
  local target=$1 param=$2 values=$3 protocols=$4 workload=$5 name=$6 redis=$7
  shift 7
  local jsonl="$OUT/$name.jsonl"
  mkdir -p "$OUT"
  : >"$jsonl"
  echo "== $name: $workload, $param in {$values}, protocols {$protocols}${redis:+, and redis $redis}"
  # shellcheck disable=SC2086
  "$BENCH" $target "$workload" --sweep "cc=$protocols" --sweep "$param=$values" \
    --json "$jsonl.rckv" "$@" | tee "$OUT/$name.txt"
  cat "$jsonl.rckv" >>"$jsonl"
  rm -f "$jsonl.rckv"
  if [ -n "$redis" ]; then
    "$BENCH" --host "${redis%:*}" --port "${redis##*:}" "$workload" --sweep "$param=$values" \
      --json "$jsonl.redis" "$@" | tee -a "$OUT/$name.txt"
    cat "$jsonl.redis" >>"$jsonl"
    rm -f "$jsonl.redis"
  fi
  if command -v gnuplot >/dev/null 2>&1; then
    /usr/bin/python3 "$PLOT" "$jsonl" --x "$param" --out "$OUT/$name"
  else
    echo "sweep.sh: gnuplot not found (scripts/install-deps.sh installs gnuplot-nox); no charts" >&2
  fi
}

# --- the standard run --------------------------------------------------------

standard() {
  local target npt common
  for tool in redis-cli "$REDIS" "$BENCH"; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "$tool" ] || die "$tool not found"
  done
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/rckv-sweep.XXXXXX")
  if [ -n "${RCKV_CLUSTER:-}" ]; then
    [ -f "$RCKV_CLUSTER" ] || die "RCKV_CLUSTER=$RCKV_CLUSTER: no such file"
    target="--cluster $RCKV_CLUSTER"
    npt=2
  else
    [ -x "$RCKV" ] || die "$RCKV not found; build it first with 'make'"
    start_rckv
    target="--port $RCKV_PORT"
    npt=1
  fi
  start_redis
  mkdir -p "$OUT"
  common=(--records "$RECORDS" --value-size "$VALUE_SIZE" --warmup "$WARMUP"
          --threads "$THREADS" --clients "$CLIENTS")
  echo "== ycsb-t: rckv ($target) against redis-server (port $REDIS_PORT)"
  # shellcheck disable=SC2086
  "$BENCH" $target ycsb-t --nodes-per-txn "$npt" --compare "127.0.0.1:$REDIS_PORT" \
    --duration "$DURATION" --json "$OUT/ycsb-t.json" "${common[@]}" | tee "$OUT/ycsb-t.txt"
  echo "== ycsb-a: rckv against redis-server"
  # shellcheck disable=SC2086
  "$BENCH" $target ycsb-a --compare "127.0.0.1:$REDIS_PORT" \
    --duration "$DURATION" --json "$OUT/ycsb-a.json" "${common[@]}" | tee "$OUT/ycsb-a.txt"
  sweep "$target" zipf "$(default_values zipf)" "$PROTOCOLS" ycsb-t sweep-zipf \
    "127.0.0.1:$REDIS_PORT" --nodes-per-txn "$npt" --duration "$SWEEP_DURATION" --quiet \
    "${common[@]}"
  sweep "$target" write-ratio "$(default_values write-ratio)" "$PROTOCOLS" ycsb-t \
    sweep-write-ratio "127.0.0.1:$REDIS_PORT" --nodes-per-txn "$npt" \
    --duration "$SWEEP_DURATION" --quiet "${common[@]}"
  echo "results in $OUT/: ycsb-t.txt ycsb-a.txt sweep-zipf-*.png sweep-write-ratio-*.png (and .json, .jsonl, .svg)"
}

# --- command line ------------------------------------------------------------

if [ $# -eq 0 ]; then
  standard
  exit 0
fi
target="" param=zipf values="" protocols=$PROTOCOLS workload=ycsb-t name="" redis=""
while [ $# -gt 0 ]; do
  case $1 in
    --port) target="--port $2"; shift 2 ;;
    --cluster) target="--cluster $2"; shift 2 ;;
    --param) param=$2; shift 2 ;;
    --values) values=$2; shift 2 ;;
    --protocols) protocols=$2; shift 2 ;;
    --workload) workload=$2; shift 2 ;;
    --redis) redis=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[ -n "$target" ] || die "give --port P or --cluster FILE (or no arguments for the standard run)"
[ -x "$BENCH" ] || die "$BENCH not found; build it first with 'make'"
sweep "$target" "$param" "${values:-$(default_values "$param")}" "$protocols" "$workload" \
  "${name:-sweep-$param}" "$redis" "$@"
