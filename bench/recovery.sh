#!/usr/bin/env bash
# recovery.sh: how long a standalone rckv-server takes to come back after a
# kill -9 with a full-size MemStore. A benchmark, not a test: it asserts
# nothing about time and prints what it measured.
#
#  1. starts rckv-server (--memory 1gb, --persistence RECOVERY_PERSISTENCE)
#     in a temp dir;
#  2. loads RECOVERY_KEYS keys (default 1,000,000) with `rckv-bench load`
#     (pipelined MSET of distinct keys, so DBSIZE reaches the count exactly);
#  3. runs a transactional write load (rckv-bench ycsb-t, half the operations
#     SETs) and kill -9s the server after RECOVERY_KILL_AFTER seconds;
#  4. restarts it on the same dir and prints, per round: wall clock from exec
#     to the first PONG; from the log timestamps, "rckv-server starting" to
#     "Ready", and to the recovery line (open and map the region, then
#     recovery); the recovery line's own parts (undo log ms, scan ms, what
#     they settled); DBSIZE after recovery. Under persistence power (or
#     power-everysec) with its write-ahead log, also what the start replayed
#     (the line "write-ahead log: replayed N records (B bytes) from S
#     segments"), which the time to the recovery line includes; the time
#     from the recovery line to "Ready" then includes the checkpoint that
#     a start after a replay writes (the whole region, synchronously).
# Steps 3-4 repeat RECOVERY_ROUNDS times. The region file stays in the page
# cache between runs, so these are warm-cache numbers.
#
# Env: RCKV_SERVER (default build/rckv-server; use a Release build for
# meaningful numbers), RCKV_BENCH (default: rckv-bench next to the server),
# RECOVERY_KEYS (1000000), RECOVERY_VALUE_SIZE (100 bytes), RECOVERY_MEMORY
# (1gb), RECOVERY_KILL_AFTER (3 s), RECOVERY_ROUNDS (1), RECOVERY_PERSISTENCE
# (process; power or power-everysec to measure the write-ahead log's replay),
# RECOVERY_CHECKPOINT_LOG_SIZE (empty: the server's default, 64mb; with
# power, a size above what the run writes, e.g. 1gb, means no checkpoint
# trims the log, so the restart replays all of it).
# Only the processes this script starts are signalled; the temp dir is
# removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

RCKV=${RCKV_SERVER:-build/rckv-server}
BENCH=${RCKV_BENCH:-$(dirname "$RCKV")/rckv-bench}
KEYS=${RECOVERY_KEYS:-1000000}
VSIZE=${RECOVERY_VALUE_SIZE:-100}
MEMORY=${RECOVERY_MEMORY:-1gb}
KILL_AFTER=${RECOVERY_KILL_AFTER:-3}
ROUNDS=${RECOVERY_ROUNDS:-1}
PERSISTENCE=${RECOVERY_PERSISTENCE:-process}
CKPT_SIZE=${RECOVERY_CHECKPOINT_LOG_SIZE:-}
START_TIMEOUT=120   # seconds for a start (a 1gb region's scan takes well under 10)

case "$PERSISTENCE" in
  process|power|power-everysec) ;;
  *) echo "recovery: RECOVERY_PERSISTENCE must be process, power or power-everysec," \
          "not '$PERSISTENCE'" >&2; exit 1 ;;
esac
SERVER_ARGS=(--persistence "$PERSISTENCE")
[ -z "$CKPT_SIZE" ] || SERVER_ARGS+=(--checkpoint-log-size "$CKPT_SIZE")

for tool in redis-cli "$RCKV" "$BENCH"; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "recovery: $tool not found (build first: cmake -S . -B build-release" \
         "-DCMAKE_BUILD_TYPE=Release && cmake --build build-release -j2," \
         "then RCKV_SERVER=build-release/rckv-server $0)" >&2
    exit 1
  }
done
cache="$(dirname "$RCKV")/CMakeCache.txt"
if [ -f "$cache" ] && grep -q '^CMAKE_BUILD_TYPE:[A-Z]*=Debug' "$cache"; then
  echo "recovery: warning: $RCKV is a Debug build; use a Release build for real numbers" >&2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rckv-recovery.XXXXXX")
LOG="$TMP/server.log"
SERVER_PID=""
LOAD_PID=""

# shellcheck source=bench/lib.sh
. bench/lib.sh  # stop_pid (the script cd-ed to the repository above)
cleanup() {
  stop_pid "$LOAD_PID"
  stop_pid "$SERVER_PID"
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

start_server() {  # starts in the background, sets SERVER_PID
  echo "=== start $(date -u '+%H:%M:%S')" >>"$LOG"
  "$RCKV" --port "$PORT" --bind 127.0.0.1 --dir "$TMP/data" --memory "$MEMORY" \
    "${SERVER_ARGS[@]}" --threads 2 --loglevel notice >>"$LOG" 2>&1 &
  SERVER_PID=$!
}

wait_pong() {
  local end=$(( $(now_ms) + START_TIMEOUT * 1000 ))
  while [ "$(now_ms)" -lt "$end" ]; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "recovery: rckv-server exited during start; its log:" >&2
      tail -20 "$LOG" >&2
      exit 1
    fi
    if [ "$(redis-cli -h 127.0.0.1 -p "$PORT" ping 2>/dev/null)" = "PONG" ]; then
      return 0
    fi
    sleep 0.005
  done
  echo "recovery: no PONG within $START_TIMEOUT s; log:" >&2
  tail -20 "$LOG" >&2
  exit 1
}

cli() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }

echo "recovery: $RCKV, $KEYS keys of $VSIZE bytes, memory $MEMORY, persistence $PERSISTENCE" \
     "${CKPT_SIZE:+(checkpoint-log-size $CKPT_SIZE)}, $(nproc) cores"

start_server
wait_pong
t0=$(now_ms)
"$BENCH" --port "$PORT" load --records "$KEYS" --value-size "$VSIZE" --quiet \
  >"$TMP/load.out" 2>&1 || { echo "recovery: load failed:" >&2; tail -5 "$TMP/load.out" >&2; exit 1; }
t1=$(now_ms)
dbsize=$(cli dbsize)
echo "loaded: DBSIZE $dbsize after $(( (t1 - t0) / 1000 )).$(( (t1 - t0) % 1000 / 100 )) s"
if [ "$dbsize" -lt $(( KEYS * 99 / 100 )) ]; then
  echo "recovery: DBSIZE $dbsize, expected about $KEYS" >&2
  exit 1
fi

# The log's lines since the last "=== start" marker, as ms since midnight
# (a run across midnight gets a day added) and text.
since_start() {
  awk '/^=== start/ { n = NR } { line[NR] = $0 } END { for (i = n + 1; i <= NR; i++) print line[i] }' "$LOG"
}
ms_of() {  # a log line -> its time of day in ms
  awk '{ split($2, t, ":"); printf "%d\n", t[1] * 3600000 + t[2] * 60000 + t[3] * 1000 }' <<<"$1"
}
gap() {  # from to (ms of day)
  local d=$(( $2 - $1 ))
  [ "$d" -lt 0 ] && d=$(( d + 86400000 ))
  echo "$d"
}

for round in $(seq "$ROUNDS"); do
  echo "round $round: ycsb-t writes for ${KILL_AFTER} s, kill -9, restart:"
  "$BENCH" --port "$PORT" ycsb-t --records "$KEYS" --value-size "$VSIZE" --nodes-per-txn 1 \
    --write-ratio 0.5 --load never --warmup 0 --duration 600 --threads 1 --clients 16 \
    >"$TMP/write.out" 2>&1 &
  LOAD_PID=$!
  sleep "$KILL_AFTER"
  if ! kill -0 "$LOAD_PID" 2>/dev/null; then
    echo "recovery: the write load stopped before the kill:" >&2
    tail -5 "$TMP/write.out" >&2
    exit 1
  fi
  kill -KILL "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  stop_pid "$LOAD_PID"   # it fails on its own once the server is gone
  LOAD_PID=""
  echo "  write load before the kill (rckv-bench's last progress line):"
  tr '\r' '\n' <"$TMP/write.out" | grep -E '^ycsb-t +[0-9]' | tail -1 | sed 's/^/    /' || true

  s0=$(now_ms)
  start_server
  wait_pong
  s1=$(now_ms)

  lines=$(since_start)
  starting=$(grep -m1 'rckv-server starting' <<<"$lines" || true)
  rec=$(grep -m1 'MemStore was not closed cleanly' <<<"$lines" || true)
  ready=$(grep -m1 'Ready to accept connections' <<<"$lines" || true)
  replay=$(grep -m1 'write-ahead log: replayed' <<<"$lines" || true)
  if [ -z "$starting" ] || [ -z "$rec" ] || [ -z "$ready" ]; then
    echo "recovery: the restart's log lacks a line it should have:" >&2
    echo "$lines" >&2
    exit 1
  fi
  total=$(sed -E 's/.*recovered in ([0-9]+) ms.*/\1/' <<<"$rec")
  undo_ms=$(sed -E 's/.*\(undo log ([0-9]+) ms: .*/\1/' <<<"$rec")
  undo_what=$(sed -E 's/.*\(undo log [0-9]+ ms: ([^;]*);.*/\1/' <<<"$rec")
  scan_ms=$(sed -E 's/.*; scan ([0-9]+) ms: .*/\1/' <<<"$rec")
  scan_what=$(sed -E 's/.*; scan [0-9]+ ms: ([^)]*)\).*/\1/' <<<"$rec")
  keys=$(sed -E 's/.*\), ([0-9]+) keys.*/\1/' <<<"$rec")
  to_rec=$(gap "$(ms_of "$starting")" "$(ms_of "$rec")")
  to_ready=$(gap "$(ms_of "$starting")" "$(ms_of "$ready")")
  map=$(( to_rec - total ))
  [ "$map" -lt 0 ] && map=0   # the two clocks round differently

  printf '  %-44s %8s ms\n' "exec to first PONG (wall clock)" "$(( s1 - s0 ))"
  printf '  %-44s %8s ms\n' "log: starting -> Ready" "$to_ready"
  printf '  %-44s %8s ms\n' "log: starting -> recovery line" "$to_rec"
  if [ "$PERSISTENCE" != process ]; then
    if [ -n "$replay" ]; then
      r_recs=$(sed -E 's/.*replayed ([0-9]+) records.*/\1/' <<<"$replay")
      r_bytes=$(sed -E 's/.*records \(([0-9]+) bytes\).*/\1/' <<<"$replay")
      r_segs=$(sed -E 's/.* from ([0-9]+) segments.*/\1/' <<<"$replay")
      printf '  %-44s %8s ms  (%s records, %s bytes = %s MB, %s segments)\n' \
        "  log: starting -> replayed line" "$(gap "$(ms_of "$starting")" "$(ms_of "$replay")")" \
        "$r_recs" "$r_bytes" "$(( r_bytes / 1048576 ))" "$r_segs"
    else
      printf '  %-44s %8s\n' "  write-ahead log replayed" "nothing (no such line)"
    fi
  fi
  what="open and map the region (the rest)"
  [ "$PERSISTENCE" = process ] || what="open, map, replay the log (the rest)"
  printf '  %-44s %8s ms\n' "  $what" "$map"
  printf '  %-44s %8s ms\n' "  recovery (its line: recovered in)" "$total"
  printf '  %-44s %8s ms  (%s)\n' "    undo log" "$undo_ms" "$undo_what"
  printf '  %-44s %8s ms  (%s)\n' "    scan" "$scan_ms" "$scan_what"
  printf '  %-44s %8s ms\n' "log: recovery line -> Ready" "$(( to_ready - to_rec ))"
  printf '  %-44s %8s\n' "keys found by recovery" "$keys"
  printf '  %-44s %8s\n' "DBSIZE after restart" "$(cli dbsize)"
done

cli shutdown >/dev/null 2>&1 || true
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
