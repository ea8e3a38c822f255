#!/usr/bin/env bash
# failover.sh: how long a dead node's keys stay unwritable with `replicas 2`
# (server/membership.c), the failover benchmark of the replication issue. A
# benchmark, not a test: it asserts nothing about the numbers.
#
# For each fabric of FO_FABRICS, one run of tests/checker/run.py: the bank
# on a 3-node cluster with `replicas 2` while a random node is killed
# (kill -9) FO_KILLS times, evenly spread over FO_DURATION seconds; each
# time the driver waits until another node shows the victim out and a
# write to a key whose primary it was commits through that node, then
# restarts it and waits until it has rejoined and taken its primaries
# back. The checker checks the history as usual. Prints, per fabric, the
# time from the kill to that first write (median and max over the kills),
# the time to "back in place", and the longest any live node's client
# waited for an answer.
#
# Env: FO_FABRICS ("shm tcp"), FO_KILLS (10), FO_DURATION (110),
# FO_PROTOCOL (silo), FO_OUT (bench/results/failover). Writes
# $FO_OUT/failover.txt and each run's output under $FO_OUT/<fabric>/.
set -euo pipefail
cd "$(dirname "$0")/.."

FABRICS=${FO_FABRICS:-shm tcp}
KILLS=${FO_KILLS:-10}
DURATION=${FO_DURATION:-110}
PROTOCOL=${FO_PROTOCOL:-silo}
OUT=${FO_OUT:-bench/results/failover}
mkdir -p "$OUT"
: > "$OUT/failover.txt"

for fabric in $FABRICS; do
  dir="$OUT/$fabric"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "== $fabric: $KILLS kill -9 with failover over $DURATION s ($PROTOCOL, bank, replicas 2)"
  /usr/bin/python3 tests/checker/run.py --topology "${fabric}3" --workload bank \
    --protocol "$PROTOCOL" --replicas 2 --failover "$KILLS" --duration "$DURATION" \
    --out "$dir" > "$dir/run.txt" 2>&1 || true
  python3 - "$dir/run.txt" "$fabric" >> "$OUT/failover.txt" <<'PY'
import re, sys, statistics
text = open(sys.argv[1]).read()
writes = [float(x) for x in re.findall(r"written through another node after ([0-9.]+) s", text)]
backs = [float(x) for x in re.findall(r"back in place after ([0-9.]+) s", text)]
wait = re.findall(r"the longest a live node's client waited: ([0-9.]+) s", text)
verdict = "VALID" if "VALID: no anomaly" in text else "NOT VALID or not finished (see run.txt)"
if not writes:
    print("%s: no failover measured (%s)" % (sys.argv[2], verdict))
else:
    print("%s: %d kills; kill -9 to the first write on its key: median %.2f s, max %.2f s; "
          "back in place: median %.1f s, max %.1f s; longest wait of a live node's client: "
          "%s s; history %s" % (sys.argv[2], len(writes), statistics.median(writes),
                                max(writes), statistics.median(backs), max(backs),
                                wait[0] if wait else "?", verdict))
PY
  tail -1 "$OUT/failover.txt"
done
echo "results: $OUT/failover.txt"
