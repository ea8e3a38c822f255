#!/usr/bin/env bash
# redis-compare.sh: what `make bench` calls. Runs redis-benchmark against
# rckv-server (build/rckv-server, persistence process, in a temp dir) and
# redis-server 7 (--save "" --appendonly no) in the same run, on free loopback
# ports, for GET, SET, INCR and MSET with -P 1 and -P 16, alternating which
# server goes first on each row so neither always gets the warmer machine.
# Prints a table (test, pipeline, rckv rps, redis rps, ratio, and each
# server's CPU time per request) and writes it to bench/results/redis-compare.txt.
# Both servers are stopped on exit.
#
# The CPU columns are there because at -P 1 the rate is set by redis-benchmark,
# a single thread that spends a whole core on its own syscalls: the rates of
# two servers then differ by little more than noise, while the server CPU each
# request cost (utime + stime from /proc, over all the row's runs) still shows
# which server does less work.
#
# Env: RCKV_SERVER (default build/rckv-server), REDIS_SERVER (default
# redis-server), BENCH_N1 / BENCH_N16 requests per run for -P 1 / deeper pipelines
# (default 200000 / 1000000), BENCH_CLIENTS (default 50), BENCH_REPS runs of
# each row per server (default 7): the table shows each server's median, and
# as the ratio the median of the runs' pairwise ratios (each rckv run over the
# redis run right before or after it, so both saw the same machine), because
# two runs a second apart on a shared 2-core machine differ by up to 30%.
# BENCH_OUT: where the table goes (default above). RCKV_ARGS: more rckv-server
# options, e.g. RCKV_ARGS="--busy-poll-us 0" to measure without polling.
# BENCH_TESTS (default "GET SET INCR MSET") and BENCH_PIPES (default "1 16"):
# the rows to run, e.g. BENCH_TESTS=GET BENCH_PIPES=16 BENCH_REPS=9 to look
# at one row closely.
set -euo pipefail
cd "$(dirname "$0")/.."

RCKV=${RCKV_SERVER:-build/rckv-server}
RCKV_ARGS=${RCKV_ARGS:-}
REDIS=${REDIS_SERVER:-redis-server}
N1=${BENCH_N1:-200000}
N16=${BENCH_N16:-1000000}
CLIENTS=${BENCH_CLIENTS:-50}
REPS=${BENCH_REPS:-7}
OUT=${BENCH_OUT:-bench/results/redis-compare.txt}
TESTS=${BENCH_TESTS:-GET SET INCR MSET}
PIPES=${BENCH_PIPES:-1 16}
RUN_TIMEOUT=120  # seconds per redis-benchmark run; a hung server fails the row
CLK_TCK=$(getconf CLK_TCK)

for tool in redis-benchmark redis-cli "$REDIS"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "redis-compare: $tool not found" >&2; exit 1; }
done
for t in $TESTS; do
  case "$t" in
    GET|SET|INCR|MSET) ;;
    *) echo "redis-compare: BENCH_TESTS: unknown test '$t' (GET, SET, INCR or MSET)" >&2; exit 1 ;;
  esac
done
for p in $PIPES; do
  [[ $p =~ ^[1-9][0-9]{0,3}$ ]] ||
    { echo "redis-compare: BENCH_PIPES: '$p' is not a pipeline depth (1 to 9999)" >&2; exit 1; }
done
[ -n "${TESTS// /}" ] && [ -n "${PIPES// /}" ] ||
  { echo "redis-compare: BENCH_TESTS and BENCH_PIPES must not be empty" >&2; exit 1; }
if [ ! -x "$RCKV" ]; then
  echo "redis-compare: $RCKV not found; build it first with 'make'" >&2
  exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rckv-bench.XXXXXX")
RCKV_PID=""
REDIS_PID=""

# shellcheck source=bench/lib.sh
. bench/lib.sh  # stop_pid (the script cd-ed to the repository above)
cleanup() {
  stop_pid "$RCKV_PID"
  stop_pid "$REDIS_PID"
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  local py
  for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null 2>&1; then
      "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
      return
    fi
  done
  # No python: probe from a random high port upwards.
  local p=$((20000 + RANDOM % 20000))
  while timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" 2>/dev/null; do p=$((p + 1)); done
  echo "$p"
}

wait_ready() {  # name port pid log
  for _ in $(seq 300); do
    if ! kill -0 "$3" 2>/dev/null; then
      echo "redis-compare: $1 exited during start; its log:" >&2
      tail -20 "$4" >&2
      exit 1
    fi
    if [ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$2" ping 2>/dev/null)" = "PONG" ]; then
      return 0
    fi
    sleep 0.1
  done
  echo "redis-compare: $1 did not answer PING on port $2 within 30 s; its log:" >&2
  tail -20 "$4" >&2
  exit 1
}

RCKV_PORT=$(free_port)
mkdir -p "$TMP/rckv" "$TMP/redis"
# shellcheck disable=SC2086 # RCKV_ARGS is a list of options
"$RCKV" --port "$RCKV_PORT" --bind 127.0.0.1 --dir "$TMP/rckv" --persistence process \
  --memory 256mb --loglevel warning $RCKV_ARGS >"$TMP/rckv.log" 2>&1 &
RCKV_PID=$!
wait_ready rckv-server "$RCKV_PORT" "$RCKV_PID" "$TMP/rckv.log"

REDIS_PORT=$(free_port)
"$REDIS" --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$TMP/redis" --save "" --appendonly no \
  --daemonize no --loglevel warning >"$TMP/redis.log" 2>&1 &
REDIS_PID=$!
wait_ready redis-server "$REDIS_PORT" "$REDIS_PID" "$TMP/redis.log"

# cpu_ticks PID: the process's user + system CPU time so far, in clock ticks.
# The fields after the command name (which could hold spaces) are read.
cpu_ticks() {
  local stat
  stat=$(cat "/proc/$1/stat")
  stat=${stat##*) }
  awk '{ print $12 + $13 }' <<<"$stat"
}

# One redis-benchmark run; prints its requests per second, or "error".
bench() {  # port test pipeline n
  local out rps
  if ! out=$(timeout "$RUN_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "$1" -t "$2" \
      -c "$CLIENTS" -n "$4" -P "$3" -q 2>&1 | tr '\r' '\n'); then
    echo "redis-compare: redis-benchmark -t $2 -P $3 on port $1 failed or timed out" >&2
    echo error
    return
  fi
  if grep -qiE 'error|could not' <<<"$out"; then
    echo "redis-compare: errors from redis-benchmark -t $2 -P $3 on port $1:" >&2
    grep -iE 'error|could not' <<<"$out" | sort | uniq -c | head -5 >&2
    echo error
    return
  fi
  rps=$(grep 'requests per second' <<<"$out" | tail -1 |
        sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
  echo "${rps:-error}"
}

{
  echo "# rckv-server vs redis-server, redis-benchmark -c $CLIENTS -q; -n $N1 at -P 1, -n $N16 pipelined;"
  echo "# rates: median of $REPS runs per server and row, the servers alternating;"
  echo "# ratio: median of the $REPS ratios of back-to-back rckv and redis runs"
  echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, $("$REDIS" --version | awk '{print $3}'), rckv: $RCKV $RCKV_ARGS"
  echo "# cpu: server CPU microseconds per request (user + system), over the row's runs"
  printf '%-6s %8s %14s %14s %7s %9s %9s\n' test pipeline "rckv rps" "redis rps" ratio \
    "rckv cpu" "redis cpu"
} >"$TMP/table"
cat "$TMP/table"

median() {  # values...: the median, or "error" if any run failed
  local v
  for v in "$@"; do
    [[ $v =~ ^[0-9.]+$ ]] || { echo error; return; }
  done
  printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END {
    if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

row=0
for t in $TESTS; do
  for p in $PIPES; do
    n=$N1
    [ "$p" -gt 1 ] && n=$N16
    lt=${t,,}
    rs=()
    ds=()
    rt=0  # server CPU ticks over the row's runs
    dt=0
    for ((rep = 0; rep < REPS; rep++)); do
      # Alternate which server goes first, by row and by repetition.
      order=(rckv redis)
      [ $(((row + rep) % 2)) -eq 0 ] || order=(redis rckv)
      for which in "${order[@]}"; do
        if [ "$which" = rckv ]; then
          t0=$(cpu_ticks "$RCKV_PID")
          rs+=("$(bench "$RCKV_PORT" "$lt" "$p" "$n")")
          rt=$((rt + $(cpu_ticks "$RCKV_PID") - t0))
        else
          t0=$(cpu_ticks "$REDIS_PID")
          ds+=("$(bench "$REDIS_PORT" "$lt" "$p" "$n")")
          dt=$((dt + $(cpu_ticks "$REDIS_PID") - t0))
        fi
      done
    done
    r=$(median "${rs[@]}")
    d=$(median "${ds[@]}")
    pairs=()
    for ((rep = 0; rep < REPS; rep++)); do
      pairs+=("$(awk -v a="${rs[rep]}" -v b="${ds[rep]}" 'BEGIN {
        if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.4f", a / b; else print "-" }')")
    done
    ratio=$(median "${pairs[@]}")
    [ "$ratio" = error ] && ratio=- || ratio=$(printf '%.2f' "$ratio")
    rc=$(awk -v t="$rt" -v k="$CLK_TCK" -v q=$((REPS * n)) 'BEGIN { printf "%.2f", t * 1e6 / k / q }')
    dc=$(awk -v t="$dt" -v k="$CLK_TCK" -v q=$((REPS * n)) 'BEGIN { printf "%.2f", t * 1e6 / k / q }')
    printf '%-6s %8s %14s %14s %7s %9s %9s\n' "$t" "$p" "$r" "$d" "$ratio" "$rc" "$dc" |
      tee -a "$TMP/table"
    row=$((row + 1))
  done
done

mkdir -p "$(dirname "$OUT")"
cp "$TMP/table" "$OUT"
echo "written to $OUT"
