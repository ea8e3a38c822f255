#!/usr/bin/env bash
# oltp.sh: the OLTP workloads of the papers (SmallBank, TPC-C with 1 and 3
# warehouses, TATP), run by rckv-bench as Lua scripts, and the part of
# `make bench` that measures them. A benchmark, not a test: it asserts
# nothing about the numbers; it does stop when a workload's consistency
# check fails, since numbers from a wrong execution mean nothing.
#
#   1. One node: rckv-server (persistence none) against redis-server 7
#      (--save "" --appendonly no) side by side, rckv-bench --compare, the
#      runs alternating which server goes first (2 rounds each).
#   2. A 3-node cluster on the shm fabric: every protocol the server
#      offers (the list CONFIG SET cc names when it refuses a bad one),
#      one rckv-bench --sweep cc=... per workload; with 3 warehouses each
#      warehouse sits on its own node (tpcc.c), so 1% of NewOrder lines and
#      15% of Payments cross nodes; SmallBank's accounts and TATP's
#      subscribers spread over the nodes by CRC16.
# Every point: OLTP_WARMUP s unmeasured, OLTP_DURATION s measured, then the
# workload's check (SmallBank: the balances against the committed deltas;
# TPC-C: conditions 1-5; TATP: the call-forwarding rows).
#
# Writes bench/results/oltp.txt (the summary tables: throughput, abort
# rate, user aborts, p50/p99 per server or protocol), oltp-<part>.out
# (rckv-bench's full tables, per transaction type too) and
# oltp-<part>.json/.jsonl (its JSON).
#
# Env: RCKV_SERVER (default build/rckv-server, a Release build for real
# numbers), RCKV_BENCH (default: rckv-bench next to it), REDIS_SERVER
# (redis-server), OLTP_WARMUP (1), OLTP_DURATION (3), OLTP_CLIENTS (12
# connections, one client thread), OLTP_PROTOCOLS (default: all the server
# has), OLTP_ACCOUNTS (smallbank, 100000), OLTP_ITEMS (tpcc, 10000),
# OLTP_CUSTOMERS (tpcc, per district, 300), OLTP_SUBSCRIBERS (tatp, 10000),
# OLTP_MEMORY (per rckv node, 512mb), OLTP_OUT (bench/results), OLTP_PARTS
# ("single cluster"). Only the processes this script starts are
# signalled; its temporary directory is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

RCKV=${RCKV_SERVER:-build/rckv-server}
BENCH=${RCKV_BENCH:-$(dirname "$RCKV")/rckv-bench}
REDIS=${REDIS_SERVER:-redis-server}
WARMUP=${OLTP_WARMUP:-1}
DURATION=${OLTP_DURATION:-3}
CLIENTS=${OLTP_CLIENTS:-12}
ACCOUNTS=${OLTP_ACCOUNTS:-100000}
ITEMS=${OLTP_ITEMS:-10000}
CUSTOMERS=${OLTP_CUSTOMERS:-300}
SUBSCRIBERS=${OLTP_SUBSCRIBERS:-10000}
MEMORY=${OLTP_MEMORY:-512mb}
OUT=${OLTP_OUT:-bench/results}
PARTS=${OLTP_PARTS:-single cluster}

die() { echo "oltp.sh: $*" >&2; exit 1; }
for tool in redis-cli /usr/bin/python3 "$REDIS" "$RCKV" "$BENCH"; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "$tool" ] || die "$tool not found (build first: make)"
done
cache="$(dirname "$RCKV")/CMakeCache.txt"
if [ -f "$cache" ] && grep -q '^CMAKE_BUILD_TYPE:[A-Z]*=Debug' "$cache"; then
  echo "oltp.sh: warning: $RCKV is a Debug build; use a Release build for real numbers" >&2
fi
mkdir -p "$OUT"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rckv-oltp.XXXXXX")
PIDS=()
# shellcheck source=bench/lib.sh
. bench/lib.sh  # stop_pid, free_port, start_cluster
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  rm -rf "$TMP"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_ping() {  # name port pid log
  for _ in $(seq 300); do
    kill -0 "$3" 2>/dev/null || { tail -20 "$4" >&2; die "$1 exited during start"; }
    [ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$2" ping 2>/dev/null)" = PONG ] && return 0
    sleep 0.1
  done
  tail -20 "$4" >&2
  die "$1 did not answer PING on port $2"
}

# The workloads: name and rckv-bench arguments.
WORKLOADS=(
  "smallbank|smallbank --accounts $ACCOUNTS"
  "tpcc-1|tpcc --warehouses 1 --items $ITEMS --customers $CUSTOMERS"
  "tpcc-3|tpcc --warehouses 3 --items $ITEMS --customers $CUSTOMERS"
  "tatp|tatp --subscribers $SUBSCRIBERS"
)
COMMON=(--warmup "$WARMUP" --duration "$DURATION" --threads 1 --clients "$CLIENTS" --quiet)

# summarize FILE...: one row per JSON result (a --json file or sweep lines)
summarize() {
  /usr/bin/python3 - "$@" <<'PY'
import json, sys

def rows(path):
    text = open(path).read().strip()
    if not text:
        return []
    try:
        return [json.loads(text)]
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]

def fmt(d):
    c = d["config"]
    wl = c["workload"] + ("-%d" % c["warehouses"] if c["workload"] == "tpcc" else "")
    t = d["target"]
    who = "redis" if t["kind"] == "redis" else "rckv %s" % t["cc"]
    ops = max(d["operations"], 1)
    return "%-12s %-16s %5d %11.1f %8.2f %8.2f %10.1f %10.1f" % (
        wl, who, t["nodes"], d["throughput"], 100 * d["abort_rate"],
        100.0 * d.get("user_aborts", 0) / ops, d["latency_us"]["p50"], d["latency_us"]["p99"])

print("%-12s %-16s %5s %11s %8s %8s %10s %10s" % (
    "workload", "server", "nodes", "txn/s", "abort%", "user%", "p50 (us)", "p99 (us)"))
for path in sys.argv[1:]:
    for d in rows(path):
        print(fmt(d))
        if d.get("compare"):
            b = dict(d["compare"])
            b["config"] = d["config"]
            print(fmt(b))
PY
}

SUMMARY="$TMP/summary.txt"
{
  echo "# rckv-bench OLTP workloads, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
  echo "# ${WARMUP} s warm-up + ${DURATION} s measured per point, 1 thread x $CLIENTS connections;"
  echo "# smallbank $ACCOUNTS accounts; tpcc $ITEMS items, $CUSTOMERS customers per district;"
  echo "# tatp $SUBSCRIBERS subscribers. abort% is CC aborts over attempts (rckv: INFO;"
  echo "# redis: error replies); user% the transactions that rolled themselves back"
  echo "# (SendPayment short of funds, TPC-C's unused item, TATP's missing rows)."
} >"$SUMMARY"

single() {
  local port rport pid name args first=${#PIDS[@]}
  port=$(free_port)
  mkdir -p "$TMP/rckv" "$TMP/redis"
  "$RCKV" --port "$port" --bind 127.0.0.1 --dir "$TMP/rckv" --persistence none \
    --memory "$MEMORY" --loglevel warning >"$TMP/rckv.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_ping rckv-server "$port" "$pid" "$TMP/rckv.log"
  rport=$(free_port)
  "$REDIS" --port "$rport" --bind 127.0.0.1 --dir "$TMP/redis" --save "" --appendonly no \
    --daemonize no --loglevel warning >"$TMP/redis.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_ping redis-server "$rport" "$pid" "$TMP/redis.log"
  local files=()
  for w in "${WORKLOADS[@]}"; do
    name=${w%%|*}
    args=${w#*|}
    echo "== one node: $name, rckv (A) against redis-server (B)" >&2
    # shellcheck disable=SC2086 # args is a list of options
    "$BENCH" --port "$port" $args --compare "127.0.0.1:$rport" "${COMMON[@]}" \
      --json "$OUT/oltp-single-$name.json" >"$OUT/oltp-single-$name.out" ||
      { cat "$OUT/oltp-single-$name.out"; die "one node, $name failed"; }
    grep -E "consistency|throughput|abort rate" "$OUT/oltp-single-$name.out" >&2
    files+=("$OUT/oltp-single-$name.json")
  done
  { echo; echo "## one node: rckv-server against redis-server"; summarize "${files[@]}"; } >>"$SUMMARY"
  # the cluster gets the machine to itself
  for pid in "${PIDS[@]:$first}"; do stop_pid "$pid"; done
  PIDS=("${PIDS[@]:0:$first}")
}

cluster() {
  local protocols name args
  mkdir -p "$TMP/cl"
  start_cluster "$TMP/cl" 3 shm "memory $MEMORY" "persistence none" "threads auto" \
    "coroutines 32" "cc silo" "loglevel warning"
  protocols=${OLTP_PROTOCOLS:-$(redis-cli -h 127.0.0.1 -p "${PORTS[0]}" config set cc '?' 2>&1 |
    sed -n 's/.*(one of: \(.*\)).*/\1/p' | tr -d ' ')}
  protocols=${protocols// /,}
  [ -n "$protocols" ] || die "no protocol list from CONFIG SET cc"
  local files=()
  for w in "${WORKLOADS[@]}"; do
    name=${w%%|*}
    args=${w#*|}
    echo "== 3-node shm cluster: $name under $protocols" >&2
    # shellcheck disable=SC2086 # args is a list of options
    "$BENCH" --cluster "$CONF" $args --sweep "cc=$protocols" "${COMMON[@]}" \
      --json "$OUT/oltp-cluster-$name.jsonl" >"$OUT/oltp-cluster-$name.out" ||
      { cat "$OUT/oltp-cluster-$name.out"; die "3-node cluster, $name failed"; }
    grep -E "sweep point|consistency|throughput" "$OUT/oltp-cluster-$name.out" >&2
    files+=("$OUT/oltp-cluster-$name.jsonl")
  done
  { echo; echo "## 3-node cluster, fabric shm, every protocol"; summarize "${files[@]}"; } >>"$SUMMARY"
}

for part in $PARTS; do
  case $part in
    single) single ;;
    cluster) cluster ;;
    *) die "OLTP_PARTS: 'single' and/or 'cluster', not '$part'" ;;
  esac
done
cp "$SUMMARY" "$OUT/oltp.txt"
cat "$OUT/oltp.txt"
