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
