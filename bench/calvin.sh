#!/usr/bin/env bash
# calvin.sh: calvin's throughput against the coroutines of each worker, on
# the shm and the tcp fabric (RCC's Figure 17; RCBench Table 4 compares
# Calvin over TCP and RDMA). A benchmark, not a test: it asserts nothing
# about the numbers and prints what it measured.
#
# For each fabric of CALVIN_FABRICS and each coroutine count of
# CALVIN_COROUTINES, bench/protocols.sh runs calvin alone on a fresh
# 3-node cluster whose nodes run `--coroutines N` (the transactions a
# worker runs at once), with CALVIN_CLIENTS clients, so that the
# coroutines and not the clients bound what is in flight. Then one table:
# txn/s, p50/p99 latency, round trips and RPCs per transaction, and the
# servers' CPU per transaction, per fabric and coroutine count.
#
# Writes bench/results/calvin.txt, and each run's protocols.sh output
# under bench/results/calvin/<fabric>-co<N>/.
#
# Env: CALVIN_FABRICS ("shm tcp"), CALVIN_COROUTINES ("1 2 4 8 16"),
# CALVIN_CLIENTS (48), CALVIN_ZIPF (0.9), CALVIN_EPOCH_US (5000: the
# option's default), CALVIN_RECORDS (10000), CALVIN_DURATION (5),
# CALVIN_OUT (bench/results), RCKV_SERVER, RCKV_BENCH (as protocols.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

FABRICS=${CALVIN_FABRICS:-shm tcp}
COROUTINES=${CALVIN_COROUTINES:-1 2 4 8 16}
CLIENTS=${CALVIN_CLIENTS:-48}
ZIPF=${CALVIN_ZIPF:-0.9}
EPOCH=${CALVIN_EPOCH_US:-5000}
RECORDS=${CALVIN_RECORDS:-10000}
DURATION=${CALVIN_DURATION:-5}
OUT=${CALVIN_OUT:-bench/results}
mkdir -p "$OUT/calvin"

for fab in $FABRICS; do
  for co in $COROUTINES; do
    dir="$OUT/calvin/$fab-co$co"
    echo "== calvin on $fab, --coroutines $co, $CLIENTS clients"
    PROTO_FABRIC=$fab PROTO_PROTOCOLS=calvin PROTO_ZIPFS=$ZIPF PROTO_RECORDS=$RECORDS \
      PROTO_DURATION=$DURATION PROTO_WARMUP=1 PROTO_WARMUP_MAX=5 PROTO_CLIENTS=$CLIENTS \
      PROTO_ARGS="--coroutines $co --calvin-epoch-us $EPOCH" PROTO_OUT="$dir" \
      ./bench/protocols.sh > "$dir.log" 2>&1 || { echo "calvin.sh: run failed, see $dir.log" >&2; exit 1; }
    grep -E "^ +[0-9]+ txn/s|^ +p50" "$dir.log" | sed "s/^/  /"
  done
done

python3 - "$OUT" "$FABRICS" "$COROUTINES" "$CLIENTS" "$ZIPF" "$EPOCH" <<'EOF'
import json, os, sys
out, fabrics, coroutines, clients, zipf, epoch = sys.argv[1:]
lines = ["calvin on a 3-node cluster: rckv-bench ycsb-t (10 ops, 20%% writes, 2 nodes per "
         "transaction), zipf %s, %s clients, calvin-epoch-us %s." % (zipf, clients, epoch),
         "RT/txn and RPC/txn: the coordinator's (INFO), the epoch rounds shared among an "
         "epoch's transactions; cpu us/tx: the 3 servers' CPU per committed transaction.",
         "", "%-6s %10s %9s %9s %9s %8s %8s %10s" % ("fabric", "coroutines", "txn/s", "p50 us",
                                                   "p99 us", "RT/txn", "RPC/txn", "cpu us/tx"),
         "-" * 76]
best = {}
for fab in fabrics.split():
    for co in coroutines.split():
        path = os.path.join(out, "calvin", "%s-co%s" % (fab, co), "protocols.jsonl")
        rows = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
        if not rows:
            continue
        r = rows[-1]
        lat = r["latency_us"]
        lines.append("%-6s %10s %9.0f %9.0f %9.0f %8.2f %8.2f %10.1f" % (
            fab, co, r["throughput"], lat["p50"], lat["p99"], r["round_trips_per_txn"],
            r["rpcs_per_txn"], r.get("server_cpu_us_per_txn") or 0))
        best[fab] = max(best.get(fab, 0), r["throughput"])
if "shm" in best and "tcp" in best and best["tcp"]:
    lines.append("")
    lines.append("best shm / best tcp: %.2fx (RCBench Table 4: Calvin one-sided 207.78k txn/s, "
                 "0.8x its 249.62k over TCP)" % (best["shm"] / best["tcp"]))
text = "\n".join(lines) + "\n"
open(os.path.join(out, "calvin.txt"), "w").write(text)
print(text, end="")
EOF
echo "results: $OUT/calvin.txt"
