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
