#!/usr/bin/env bash
# run.sh: what `make run` calls after building. Starts build/rckv-server with
# conf/rckv.conf in the foreground (Ctrl-C stops it). Extra arguments are
# passed on, e.g. `scripts/run.sh --port 7000 --cc nowait`.
# Env: RCKV_SERVER (binary, default build/rckv-server), RCKV_CONF (default
# conf/rckv.conf).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${RCKV_SERVER:-build/rckv-server}
CONF=${RCKV_CONF:-conf/rckv.conf}

if [ ! -x "$BIN" ]; then
  echo "run.sh: $BIN not found; build it first with 'make'" >&2
  exit 1
fi
if [ ! -f "$CONF" ]; then
  echo "run.sh: config file $CONF not found" >&2
  exit 1
fi

# The port the server will use: a --port argument wins over the file's last
# "port" line, which wins over the default.
PORT=$(awk 'tolower($1) == "port" { p = $2 } END { print p }' "$CONF")
PORT=${PORT:-6379}
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[$i]}" = "--port" ] && [ $((i + 1)) -lt ${#args[@]} ]; then
    PORT=${args[$((i + 1))]}
  fi
done

# Refuse clearly if something already listens there: otherwise the server
# would fail with a bind error further down its log.
port_taken() {
  if command -v ss >/dev/null 2>&1; then
    [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
  else
    timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
  fi
}
if port_taken "$PORT"; then
  echo "run.sh: port $PORT is already in use (another rckv-server or redis-server?)." >&2
  echo "        Stop it, or choose another port: scripts/run.sh --port 7000" >&2
  exit 1
fi

echo "Starting rckv-server ($BIN $CONF $*)"
echo "connect with: redis-cli -p $PORT"
exec "$BIN" "$CONF" "$@"
