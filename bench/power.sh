#!/usr/bin/env bash
# power.sh: what `persistence power` (a durable commit before every reply)
# and power-everysec cost, next to Redis's append-only file (issue 24). A
# benchmark, not a test: it asserts nothing about the numbers and prints
# what it measured. Three parts (POWER_PARTS):
#
#  redis     redis-benchmark SET and INCR, -r 100000, at -c 50 and 200 with
#            -P 1 and 16, in two pairings, each on servers started fresh:
#              always    rckv --persistence power           against
#                        redis-server --appendonly yes --appendfsync always
#              everysec  rckv --persistence power-everysec  against
#                        redis-server --appendonly yes --appendfsync everysec
#            Per row, calibration runs per server (also its warm-up: runs
#            until one lasts a second) set that server's -n so that a run
#            lasts about POWER_SECS (plus a 20% margin); then POWER_REPS runs
#            per server, alternating which goes first. The row shows each
#            server's median rate and median
#            p50 (redis-benchmark --csv), as the ratio the median of the
#            ratios of back-to-back runs (as redis-compare.sh: both saw the
#            same machine), rckv's commits per fsync (median over its runs of
#            the change of INFO persistence_group_commits / log_fsyncs across
#            the run), and the shortest run in seconds. After every rckv run
#            it prints INFO's own log_commits_per_fsync, which counts from
#            the server's start (calibration runs included). INFO counts
#            commit points, not requests: at -P 16 a worker commits several
#            of a connection's pipelined writes at one point (160,000 SETs
#            at -c 50 -P 16 counted 13,300 commits), so the requests an
#            fsync covers are that many times c/fsync.
#  ycsb      rckv-bench ycsb-t on one node (MULTI of 10 GET/SET, 20% SETs,
#            --nodes-per-txn 1, as bench/sweep.sh drives it): one server per
#            mode of POWER_YCSB_MODES (process power), all loaded with the
#            same records, then POWER_REPS runs per server, alternating.
#            Median txn/s and p50/p99, the ratio to the first mode (median
#            of back-to-back ratios) and the commits per fsync of each run.
#  recovery  bench/recovery.sh with RECOVERY_PERSISTENCE=power and
#            RECOVERY_CHECKPOINT_LOG_SIZE=POWER_RECOVERY_CHECKPOINT: load
#            1,000,000 keys, write for 3 s, kill -9, restart; prints what the
#            log replay took (records, bytes) and the time to the first PONG.
#            Loading writes about 750 MB of log, so the default 4gb keeps
#            every checkpoint from trimming it: the restart replays it all.
#
# Server options: rckv's defaults except port, bind, dir, persistence and
# loglevel, so memory is 512mb and threads is auto, as redis-compare.sh
# leaves it: auto is one worker per core but one (1 on 2 cores), leaving a
# core to redis-benchmark and the kernel; redis-server too answers from one
# thread (io-threads 1). recovery.sh keeps its own options (1gb, 2 threads).
# The machine's disk sets the fsync cost: compare rows of one run only.
#
# Env: RCKV_SERVER (build/rckv-server; use a Release build), RCKV_BENCH
# (rckv-bench next to the server), REDIS_SERVER (redis-server), POWER_PARTS
# ("redis ycsb recovery"), POWER_PAIRS ("always everysec"), POWER_TESTS
# ("SET INCR"), POWER_CLIENTS ("50 200"), POWER_PIPES ("1 16"), POWER_SECS
# (3), POWER_REPS (3), POWER_YCSB_MODES ("process power"; power-everysec
# too if named), POWER_YCSB_RECORDS (100000), POWER_YCSB_VALUE_SIZE (1000),
# POWER_YCSB_CLIENTS (8), POWER_YCSB_WARMUP (1), POWER_YCSB_DURATION (5),
# POWER_RECOVERY_CHECKPOINT (4gb), POWER_OUT (bench/results/power.txt: the
# tables and recovery.sh's output).
# Only the processes this script starts are signalled; the temp dir is
# removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

RCKV=${RCKV_SERVER:-build/rckv-server}
BENCH=${RCKV_BENCH:-$(dirname "$RCKV")/rckv-bench}
REDIS=${REDIS_SERVER:-redis-server}
PARTS=${POWER_PARTS:-redis ycsb recovery}
PAIRS=${POWER_PAIRS:-always everysec}
TESTS=${POWER_TESTS:-SET INCR}
CLIENTS=${POWER_CLIENTS:-50 200}
PIPES=${POWER_PIPES:-1 16}
SECS=${POWER_SECS:-3}
REPS=${POWER_REPS:-3}
YCSB_MODES=${POWER_YCSB_MODES:-process power}
YCSB_RECORDS=${POWER_YCSB_RECORDS:-100000}
YCSB_VSIZE=${POWER_YCSB_VALUE_SIZE:-1000}
YCSB_CLIENTS=${POWER_YCSB_CLIENTS:-8}
YCSB_WARMUP=${POWER_YCSB_WARMUP:-1}
YCSB_DURATION=${POWER_YCSB_DURATION:-5}
RECOVERY_CKPT=${POWER_RECOVERY_CHECKPOINT:-4gb}
OUT=${POWER_OUT:-bench/results/power.txt}
KEYSPACE=100000   # redis-benchmark -r
RUN_TIMEOUT=300   # seconds per redis-benchmark run; a hung server fails the row

die() { echo "power.sh: $*" >&2; exit 1; }

for p in $PARTS; do
  case "$p" in redis|ycsb|recovery) ;; *) die "POWER_PARTS: unknown part '$p'" ;; esac
done
for p in $PAIRS; do
  case "$p" in always|everysec) ;; *) die "POWER_PAIRS: unknown pairing '$p'" ;; esac
done
for t in $TESTS; do
  case "$t" in SET|INCR) ;; *) die "POWER_TESTS: '$t' is not SET or INCR" ;; esac
done
for m in $YCSB_MODES; do
  case "$m" in process|power|power-everysec) ;; *) die "POWER_YCSB_MODES: unknown mode '$m'" ;; esac
done
for v in $CLIENTS $PIPES $SECS $REPS; do
  [[ $v =~ ^[1-9][0-9]{0,4}$ ]] || die "'$v' is not a positive count"
done
for tool in redis-benchmark redis-cli /usr/bin/python3 "$REDIS" "$RCKV" "$BENCH"; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "$tool" ] || die "$tool not found (build first: make)"
done
cache="$(dirname "$RCKV")/CMakeCache.txt"
if [ -f "$cache" ] && grep -q '^CMAKE_BUILD_TYPE:[A-Z]*=Debug' "$cache"; then
  echo "power.sh: warning: $RCKV is a Debug build; use a Release build for real numbers" >&2
fi

# --- processes we start (only these are ever signalled) ---------------------

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rckv-power.XXXXXX")
PIDS=()          # servers
RECOVERY_PID=""  # bench/recovery.sh, which stops its own server on exit
# shellcheck source=bench/lib.sh
. bench/lib.sh  # stop_pid, free_port (the script cd-ed to the repository above)
cleanup() {
  local pid
  stop_pid "$RECOVERY_PID"
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  rm -rf "$TMP"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_ready() {  # name port pid log
  for _ in $(seq 300); do
    kill -0 "$3" 2>/dev/null || { tail -20 "$4" >&2; die "$1 exited during start (log above)"; }
    [ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$2" ping 2>/dev/null)" = PONG ] && return 0
    sleep 0.1
  done
  tail -20 "$4" >&2
  die "$1 did not answer PING on port $2 within 30 s (log above)"
}

# start_rckv NAME PERSISTENCE: a fresh rckv-server in $TMP/NAME; sets PORT, PID.
start_rckv() {
  PORT=$(free_port)
  mkdir -p "$TMP/$1"
  "$RCKV" --port "$PORT" --bind 127.0.0.1 --dir "$TMP/$1" --persistence "$2" \
    --loglevel warning >"$TMP/$1.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  wait_ready "rckv-server ($2)" "$PORT" "$PID" "$TMP/$1.log"
}

# start_redis NAME FSYNC: a fresh redis-server with an append-only file
# synced FSYNC (always or everysec) in $TMP/NAME; sets PORT, PID.
start_redis() {
  PORT=$(free_port)
  mkdir -p "$TMP/$1"
  "$REDIS" --port "$PORT" --bind 127.0.0.1 --dir "$TMP/$1" --save "" --appendonly yes \
    --appendfsync "$2" --daemonize no --loglevel warning >"$TMP/$1.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  wait_ready "redis-server (appendfsync $2)" "$PORT" "$PID" "$TMP/$1.log"
}

stop_server() {  # PID: stop one server of PIDS and forget it
  local pid keep=()
  stop_pid "$1"
  for pid in "${PIDS[@]}"; do [ "$pid" = "$1" ] || keep+=("$pid"); done
  PIDS=("${keep[@]}")
}

info_field() {  # port field: one field of INFO persistence ("" if absent)
  redis-cli -h 127.0.0.1 -p "$1" INFO persistence | tr -d '\r' |
    awk -F: -v k="$2" '$1 == k { print $2 }'
}

# The commits the durable path served and the fsyncs of the log so far
# ("commits fsyncs"); commits_per_fsync turns two of these into the ratio
# over the time between them.
durable_counts() {
  echo "$(info_field "$1" persistence_group_commits) $(info_field "$1" log_fsyncs)"
}
commits_per_fsync() {  # "c0 f0" "c1 f1"
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ");
    if (y[2] - x[2] > 0) printf "%.1f", (y[1] - x[1]) / (y[2] - x[2]); else print "-" }'
}

median() {  # values...: the median of the numeric ones, "-" if there are none
  printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g |
    awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2];
      else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
ratio() {  # a b: a / b to 2 decimals, "-" unless both are numbers
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.4f", a / b; else print "-" }'
}
fmt2() { [[ $1 =~ ^[0-9.]+$ ]] && printf '%.2f' "$1" || echo "$1"; }

TABLE="$TMP/table"
: >"$TABLE"
say() { echo "$*" | tee -a "$TABLE"; }  # a line of the results (also kept for POWER_OUT)
RUNS="$TMP/runs"
: >"$RUNS"
run_line() { echo "$*" | tee -a "$RUNS"; }  # one run's line (kept after the tables)

say "# power.sh $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, $RCKV," \
    "$("$REDIS" --version | awk '{print $3}'), redis-benchmark $(redis-benchmark --version | awk '{print $2}')"

# --- part 1: redis-benchmark against redis-server's append-only file ---------

# rb PORT TEST CLIENTS PIPELINE N: one redis-benchmark run; prints "rps p50_ms"
# ("-" for a p50 an old redis-benchmark's --csv lacks), or "error".
rb() {
  local out
  if ! out=$(timeout "$RUN_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "$1" -t "${2,,}" -c "$3" \
      -P "$4" -n "$5" -r "$KEYSPACE" --csv 2>&1 | tr '\r' '\n'); then
    echo "power.sh: redis-benchmark -t $2 -c $3 -P $4 on port $1 failed or timed out" >&2
    echo error
    return
  fi
  if grep -qiE 'error|could not' <<<"$out"; then
    echo "power.sh: errors from redis-benchmark -t $2 -c $3 -P $4 on port $1:" >&2
    grep -iE 'error|could not' <<<"$out" | sort | uniq -c | head -5 >&2
    echo error
    return
  fi
  awk -F'","' -v t="$2" '
    /"rps"/ { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); col[$i] = i } next }
    $1 == "\"" t {
      r = $col["rps"]; gsub(/"/, "", r)
      p = "-"
      if (col["p50_latency_ms"]) { p = $col["p50_latency_ms"]; gsub(/"/, "", p) }
    }
    END { if (r != "") print r, p; else print "error" }' <<<"$out"
}

# timed_run PORT TEST CLIENTS PIPELINE N: one measured run of N requests.
# One that lasted under 80% of SECS (the machine got faster, or the
# calibration caught a slow moment) is run again, once, with -n scaled to
# SECS plus 20%; only the second counts. Sets RUN_RES ("rps p50"), RUN_N
# (the -n it used, for the next runs too), RUN_SECS, RUN_NOTE (what was
# rerun) and RUN_CF (the server's commits per log fsync over the counted
# run, "-" without a log).
timed_run() {
  local n=$5 c0 c1 first=""
  RUN_NOTE=""
  for _ in 1 2; do
    c0=$(durable_counts "$1")
    RUN_RES=$(rb "$1" "$2" "$3" "$4" "$n")
    c1=$(durable_counts "$1")
    [ "$RUN_RES" != error ] || die "a run failed ($2 -c $3 -P $4 on port $1)"
    RUN_SECS=$(awk -v n="$n" -v r="${RUN_RES% *}" 'BEGIN { printf "%.1f", n / r }')
    [ -z "$first" ] || RUN_NOTE=", rerun: the first lasted $first s"
    awk -v s="$RUN_SECS" -v t="$SECS" 'BEGIN { exit !(s >= 0.8 * t) }' && break
    [ -z "$first" ] || break
    first=$RUN_SECS
    n=$(awk -v r="${RUN_RES% *}" -v s="$SECS" 'BEGIN { print int(r * s * 1.2 / 10000 + 1) * 10000 }')
  done
  RUN_N=$n
  RUN_CF=$(commits_per_fsync "$c0" "$c1")
}

# calibrate PORT TEST CLIENTS PIPELINE: the -n for runs of about SECS on
# this server. Runs until one lasts at least a second (a shorter one's rate
# is mostly connection set-up, or one checkpoint), at most 4 runs, then
# takes that rate with a 20% margin, as the rate of a shared machine moves.
calibrate() {
  local n=$((10000 * ($4 > 1 ? 5 : 1))) res rate
  for _ in 1 2 3 4; do
    res=$(rb "$1" "$2" "$3" "$4" "$n")
    [ "$res" != error ] || die "a calibration run failed ($2 -c $3 -P $4 on port $1)"
    rate=${res% *}
    awk -v n="$n" -v r="$rate" 'BEGIN { exit !(r > 0 && n / r >= 1) }' && break
    n=$(awk -v r="$rate" -v p="$4" 'BEGIN { n = int(r * 1.5 / 1000 + 1) * 1000;
      if (n < 1000 * p) n = 1000 * p; print n }')
  done
  awk -v r="$rate" -v s="$SECS" 'BEGIN { print int(r * s * 1.2 / 10000 + 1) * 10000 }'
}

redis_pair() {  # always|everysec
  local pair=$1 rmode rckv_port rckv_pid redis_port redis_pid row=0
  rmode=power
  [ "$pair" = always ] || rmode=power-everysec
  start_rckv "rckv-$pair" "$rmode"
  rckv_port=$PORT rckv_pid=$PID
  start_redis "redis-$pair" "$pair"
  redis_port=$PORT redis_pid=$PID
  say ""
  say "## rckv --persistence $rmode against redis-server --appendonly yes --appendfsync $pair"
  say "## redis-benchmark -r $KEYSPACE --csv; $REPS runs per server and row, alternating, about $SECS s each"
  say "## rps, p50 (ms): medians; ratio: median of rckv/redis of back-to-back runs;"
  say "## c/fsync: rckv's commits per log fsync over each run (INFO), median; min s: shortest run"
  [ "$pair" = always ] ||
    say "## (with one fsync a second, c/fsync is about the commits of a second)"
  run_line "rckv --persistence $rmode against redis-server --appendfsync $pair:"
  local hdr
  hdr=$(printf '%-5s %4s %3s %11s %11s %6s %9s %9s %8s %5s' test c P "rckv rps" "redis rps" \
    ratio "rckv p50" "redis p50" "c/fsync" "min s")
  echo "$hdr" >"$TMP/rows"
  for t in $TESTS; do
    for c in $CLIENTS; do
      for p in $PIPES; do
        local rn dn res
        rn=$(calibrate "$rckv_port" "$t" "$c" "$p")
        dn=$(calibrate "$redis_port" "$t" "$c" "$p")
        local rr=() dr=() rp=() dp=() cf=() pairs=() mins=() rep which
        for ((rep = 0; rep < REPS; rep++)); do
          local order=(rckv redis)
          [ $(((row + rep) % 2)) -eq 0 ] || order=(redis rckv)
          for which in "${order[@]}"; do
            if [ "$which" = rckv ]; then
              timed_run "$rckv_port" "$t" "$c" "$p" "$rn"
              rn=$RUN_N
              rr[rep]=${RUN_RES% *} rp[rep]=${RUN_RES#* } cf[rep]=$RUN_CF
              run_line "$(printf '  %-4s -c %-3s -P %-2s run %d: rckv  %10s rps p50 %6s ms (-n %s, %s s%s);' \
                "$t" "$c" "$p" $((rep + 1)) "${rr[rep]}" "${rp[rep]}" "$rn" "$RUN_SECS" "$RUN_NOTE")" \
                "$(printf 'commits/fsync %s this run, INFO log_commits_per_fsync %s' \
                "${cf[rep]}" "$(info_field "$rckv_port" log_commits_per_fsync)")"
            else
              timed_run "$redis_port" "$t" "$c" "$p" "$dn"
              dn=$RUN_N
              dr[rep]=${RUN_RES% *} dp[rep]=${RUN_RES#* }
              run_line "$(printf '  %-4s -c %-3s -P %-2s run %d: redis %10s rps p50 %6s ms (-n %s, %s s%s)' \
                "$t" "$c" "$p" $((rep + 1)) "${dr[rep]}" "${dp[rep]}" "$dn" "$RUN_SECS" "$RUN_NOTE")"
            fi
            mins+=("$RUN_SECS")
          done
          pairs+=("$(ratio "${rr[rep]}" "${dr[rep]}")")
        done
        local line
        line=$(printf '%-5s %4s %3s %11s %11s %6s %9s %9s %8s %5s' "$t" "$c" "$p" \
          "$(median "${rr[@]}")" "$(median "${dr[@]}")" "$(fmt2 "$(median "${pairs[@]}")")" \
          "$(median "${rp[@]}")" "$(median "${dp[@]}")" "$(median "${cf[@]}")" \
          "$(printf '%s\n' "${mins[@]}" | grep -E '^[0-9.]+$' | sort -g | head -1)")
        echo "$line" >>"$TMP/rows"
        echo "$hdr"
        echo "$line"
        row=$((row + 1))
      done
    done
  done
  cat "$TMP/rows" >>"$TABLE"
  echo "== $pair: the table"
  cat "$TMP/rows"
  stop_server "$rckv_pid"
  stop_server "$redis_pid"
}

# --- part 2: ycsb-t on one node, power against process ------------------------

ycsb_part() {
  local m ports=() i rep
  declare -A port pid
  for m in $YCSB_MODES; do
    start_rckv "ycsb-$m" "$m"
    port[$m]=$PORT
    pid[$m]=$PID
    ports+=("$m")
    "$BENCH" --port "$PORT" load --records "$YCSB_RECORDS" --value-size "$YCSB_VSIZE" --quiet \
      >"$TMP/load-$m.out" 2>&1 || { tail -5 "$TMP/load-$m.out" >&2; die "load failed ($m)"; }
  done
  local common=(ycsb-t --records "$YCSB_RECORDS" --value-size "$YCSB_VSIZE" --nodes-per-txn 1
                --threads 1 --clients "$YCSB_CLIENTS" --warmup "$YCSB_WARMUP"
                --duration "$YCSB_DURATION" --load never --quiet)
  declare -A tps p50 p99 cf
  run_line "ycsb-t, persistence $YCSB_MODES:"
  local n=${#ports[@]}
  for ((rep = 0; rep < REPS; rep++)); do
    for ((i = 0; i < n; i++)); do
      m=${ports[$(((i + rep) % n))]}  # a different mode goes first each time
      local c0 c1 res
      c0=$(durable_counts "${port[$m]}")
      "$BENCH" --port "${port[$m]}" "${common[@]}" --json "$TMP/run.json" >"$TMP/run.out" 2>&1 ||
        { tail -5 "$TMP/run.out" >&2; die "rckv-bench ycsb-t failed ($m)"; }
      c1=$(durable_counts "${port[$m]}")
      res=$(/usr/bin/python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
lat = r.get("latency_us") or {}
print("%.0f %.0f %.0f" % (r.get("throughput") or 0, lat.get("p50") or 0, lat.get("p99") or 0))' \
        "$TMP/run.json")
      local x y z
      read -r x y z <<<"$res"
      tps[$m,$rep]=$x p50[$m,$rep]=$y p99[$m,$rep]=$z
      cf[$m,$rep]=$(commits_per_fsync "$c0" "$c1")
      run_line "$(printf '  ycsb-t run %d: %-15s %8s txn/s p50 %6s us p99 %7s us; commits/fsync %s this run' \
        $((rep + 1)) "$m" "${tps[$m,$rep]}" "${p50[$m,$rep]}" "${p99[$m,$rep]}" "${cf[$m,$rep]}")"
    done
  done
  say ""
  say "## rckv-bench ycsb-t on one node: $YCSB_RECORDS records of $YCSB_VSIZE bytes, 10 ops, 20% SETs,"
  say "## --nodes-per-txn 1, 1 thread x $YCSB_CLIENTS clients, ${YCSB_WARMUP}+${YCSB_DURATION} s; $REPS runs per mode, alternating;"
  say "## medians; ratio: median of this mode / ${ports[0]} over runs of one round; c/fsync as above"
  say "$(printf '%-15s %9s %7s %8s %8s %8s' persistence "txn/s" ratio "p50 us" "p99 us" "c/fsync")"
  local first=${ports[0]}
  for m in "${ports[@]}"; do
    local t=() a=() b=() f=() r=()
    for ((rep = 0; rep < REPS; rep++)); do
      t+=("${tps[$m,$rep]}") a+=("${p50[$m,$rep]}") b+=("${p99[$m,$rep]}") f+=("${cf[$m,$rep]}")
      r+=("$(ratio "${tps[$m,$rep]}" "${tps[$first,$rep]}")")
    done
    say "$(printf '%-15s %9s %7s %8s %8s %8s' "$m" "$(median "${t[@]}")" \
      "$(fmt2 "$(median "${r[@]}")")" "$(median "${a[@]}")" "$(median "${b[@]}")" \
      "$(median "${f[@]}")")"
  done
  for m in "${ports[@]}"; do stop_server "${pid[$m]}"; done
}

# --- part 3: recovery after kill -9 with a long log -------------------------

recovery_part() {
  say ""
  say "## bench/recovery.sh, RECOVERY_PERSISTENCE=power RECOVERY_CHECKPOINT_LOG_SIZE=$RECOVERY_CKPT"
  RECOVERY_PERSISTENCE=power RECOVERY_CHECKPOINT_LOG_SIZE=$RECOVERY_CKPT \
    RCKV_SERVER=$RCKV RCKV_BENCH=$BENCH bench/recovery.sh >"$TMP/recovery.out" 2>&1 &
  RECOVERY_PID=$!
  local rc=0
  wait "$RECOVERY_PID" || rc=$?
  RECOVERY_PID=""
  tee -a "$TABLE" <"$TMP/recovery.out"
  [ "$rc" -eq 0 ] || die "bench/recovery.sh failed (exit $rc)"
}

for part in $PARTS; do
  case "$part" in
    redis) for pair in $PAIRS; do redis_pair "$pair"; done ;;
    ycsb) ycsb_part ;;
    recovery) recovery_part ;;
  esac
done

mkdir -p "$(dirname "$OUT")"
{
  cat "$TABLE"
  echo
  echo "## every run (the tables' medians are over these)"
  cat "$RUNS"
} >"$OUT"
echo
echo "== the tables (written to $OUT, with every run's line after them)"
cat "$TABLE"
