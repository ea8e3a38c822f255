#!/usr/bin/env bash
# replicas.sh: what `replicas N` costs a 3-node cluster (cc/repl.c), the
# benchmark of the replication issue. A benchmark, not a test: it asserts
# nothing about the numbers and prints what it measured.
#
# For each workload of REPL_WORKLOADS, each fabric of REPL_FABRICS and each
# round of REPL_ROUNDS, it runs bench/protocols.sh (its own cluster, load,
# warm-up until the address caches are warm, INFO cc summed over the nodes)
# once per value of REPL_REPLICAS, in that order, so the values alternate
# round by round and share the host's noise. The workloads: ycsb-t (MULTI
# of 10 GET/SET, 20% SETs, 2 nodes per transaction, zipf REPL_ZIPF) and
# bank (rckv-bench bank: transfers, MULTI DECRBY INCRBY EXEC between
# accounts on 2 nodes, zipf REPL_ZIPF; each run checks the total). Then
# one table: per workload, fabric, replica count and protocol, the median
# over the rounds of txn/s, the p50, the servers' CPU per transaction, and
# verbs and round trips per committed transaction (INFO: figures that
# noise does not move), with the ratio of txn/s to replicas 1 of the same
# round.
#
# Every node's workers get REPL_CACHE address-cache entries (1048576; the
# server's default is 262144): a node caches a written key's block on
# each replica, so with replicas 3 and 100,000 keys all written (bank) the
# default holds too few, and the run would measure the cache's misses
# (31% of bank's lookups at replicas 3 in session 23), not replication.
#
# Env: REPL_WORKLOADS ("ycsb-t bank"), REPL_CACHE, REPL_FABRICS ("shm tcp"),
# REPL_REPLICAS ("1 2 3"), REPL_PROTOCOLS ("silo nowait"), REPL_ZIPF (0.2),
# REPL_ROUNDS (2), REPL_DURATION (5), REPL_OUT (bench/results/replicas),
# and every PROTO_* of protocols.sh (PROTO_RECORDS, PROTO_CLIENTS, ...).
# Writes $REPL_OUT/replicas.txt and each run's protocols.sh output under
# $REPL_OUT/<workload>-<fabric>-r<N>-<round>/.
set -euo pipefail
cd "$(dirname "$0")/.."

WORKLOADS=${REPL_WORKLOADS:-ycsb-t bank}
CACHE=${REPL_CACHE:-1048576}
FABRICS=${REPL_FABRICS:-shm tcp}
REPLICAS=${REPL_REPLICAS:-1 2 3}
PROTOCOLS=${REPL_PROTOCOLS:-silo nowait}
ZIPF=${REPL_ZIPF:-0.2}
ROUNDS=${REPL_ROUNDS:-2}
DURATION=${REPL_DURATION:-5}
OUT=${REPL_OUT:-bench/results/replicas}
mkdir -p "$OUT"

for workload in $WORKLOADS; do
  for fabric in $FABRICS; do
    for round in $(seq 1 "$ROUNDS"); do
      for n in $REPLICAS; do
        dir="$OUT/$workload-$fabric-r$n-$round"
        echo "== $workload, $fabric, replicas $n, round $round"
        PROTO_WORKLOAD=$workload PROTO_FABRIC=$fabric PROTO_PROTOCOLS=$PROTOCOLS \
          PROTO_ZIPFS=$ZIPF PROTO_DURATION=$DURATION PROTO_OUT=$dir \
          PROTO_ARGS="${PROTO_ARGS:-} --replicas $n --addr-cache-entries $CACHE" \
          bench/protocols.sh > "$dir.log" 2>&1 ||
          { echo "protocols.sh failed: $dir.log"; tail -20 "$dir.log"; exit 1; }
      done
    done
  done
done

/usr/bin/python3 - "$OUT" "$WORKLOADS" "$FABRICS" "$REPLICAS" "$ROUNDS" "$ZIPF" <<'EOF'
import itertools, json, os, statistics, sys
out, workloads, fabrics, replicas, rounds, zipf = sys.argv[1:]
rounds = int(rounds)
def runs(workload, fabric, n, rnd):
    path = os.path.join(out, "%s-%s-r%s-%d" % (workload, fabric, n, rnd), "protocols.jsonl")
    return {r["protocol_variant"]: r for r in map(json.loads, open(path, encoding="utf-8"))}
lines = ["replicas N on a 3-node cluster, zipf %s, medians of %d alternating rounds:" % (
             zipf, rounds),
         "ycsb-t: rckv-bench ycsb-t, 10 ops, 20% SETs, 2 nodes per transaction; bank: "
         "rckv-bench bank, MULTI DECRBY INCRBY EXEC on 2 nodes.",
         "ratio: txn/s against replicas 1 in the same round, median. cpu: the 3 servers' CPU "
         "per committed txn. verbs, RT: INFO cc per committed txn.", ""]
hdr = "%-8s %-6s %8s %-8s %10s %7s %8s %9s %8s %7s" % (
    "workload", "fabric", "replicas", "protocol", "txn/s", "ratio", "p50 us", "cpu us/tx",
    "verbs", "RT")
lines += [hdr, "-" * len(hdr)]
for workload, fabric in itertools.product(workloads.split(), fabrics.split()):
    base = {rnd: runs(workload, fabric, replicas.split()[0], rnd)
            for rnd in range(1, rounds + 1)}
    for n in replicas.split():
        per = {rnd: runs(workload, fabric, n, rnd) for rnd in range(1, rounds + 1)}
        for proto in per[1]:
            rs = [per[rnd][proto] for rnd in per]
            med = lambda f: statistics.median(f(r) for r in rs)
            ratio = statistics.median(per[rnd][proto]["throughput"] /
                                      base[rnd][proto]["throughput"] for rnd in per)
            lines.append("%-8s %-6s %8s %-8s %10.0f %6.2fx %8.0f %9.1f %8.1f %7.1f" % (
                workload, fabric, n, proto, med(lambda r: r["throughput"]), ratio,
                med(lambda r: r["latency_us"]["p50"]), med(lambda r: r["server_cpu_us_per_txn"]),
                med(lambda r: r["info"]["verbs_per_txn"]),
                med(lambda r: r["info"]["round_trips_per_txn"])))
text = "\n".join(lines) + "\n"
open(os.path.join(out, "replicas.txt"), "w", encoding="utf-8").write(text)
print(text, end="")
EOF
