#!/usr/bin/env bash
# calvin.sh: calvin's throughput against the coroutines of each worker, on
# the shm and the tcp fabric (RCC's Figure 17; RCBench Table 4 compares
# Calvin over TCP and RDMA), and with each form of its ACQUIRE broadcast
# (calvin-acquire rpc: a two-sided call; write: a one-sided WRITE into the
# participant's request buffer and a doorbell call, cc/calvin_ring.c). A
# benchmark, not a test: it asserts nothing about the numbers and prints
# what it measured.
#
# For each repeat of CALVIN_REPEATS, each fabric of CALVIN_FABRICS, each
# coroutine count of CALVIN_COROUTINES and each form of CALVIN_ACQUIRES
# (the forms alternate, run next to each other, in reverse order every
# other repeat, so that the machine's drift hits both alike), bench/protocols.sh runs calvin alone on a fresh
# 3-node cluster whose nodes run `--coroutines N` (the transactions a
# worker runs at once) and `--calvin-acquire FORM`, with CALVIN_CLIENTS
# clients, so that the coroutines and not the clients bound what is in
# flight. Then one table, the median of the repeats of each cell: txn/s,
# p50/p99 latency, round trips, RPCs and WRITEs per transaction (the
# coordinators' INFO), the servers' CPU per transaction, and the share of
# ACQUIRE chunks that went by WRITE and their mean payload; and the
# write/rpc ratio of the medians' txn/s per fabric and coroutine count.
#
# Writes bench/results/calvin.txt, and each run's protocols.sh output
# under bench/results/calvin/<fabric>-<form>-co<N>-r<repeat>/.
#
# Env: CALVIN_FABRICS ("shm tcp"), CALVIN_COROUTINES ("1 2 4 8 16"),
# CALVIN_ACQUIRES ("rpc write"), CALVIN_REPEATS (1), CALVIN_CLIENTS (48),
# CALVIN_ZIPF (0.9), CALVIN_EPOCH_US (5000: the option's default),
# CALVIN_RECORDS (10000), CALVIN_DURATION (5), CALVIN_OUT (bench/results),
# CALVIN_ARGS (more rckv-server options for every node, e.g. "--busy-poll-us
# 0"), RCKV_SERVER, RCKV_BENCH (as protocols.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

FABRICS=${CALVIN_FABRICS:-shm tcp}
COROUTINES=${CALVIN_COROUTINES:-1 2 4 8 16}
ACQUIRES=${CALVIN_ACQUIRES:-rpc write}
REPEATS=${CALVIN_REPEATS:-1}
CLIENTS=${CALVIN_CLIENTS:-48}
ZIPF=${CALVIN_ZIPF:-0.9}
EPOCH=${CALVIN_EPOCH_US:-5000}
RECORDS=${CALVIN_RECORDS:-10000}
DURATION=${CALVIN_DURATION:-5}
OUT=${CALVIN_OUT:-bench/results}
mkdir -p "$OUT/calvin"
for acq in $ACQUIRES; do
  case $acq in
    rpc|write) ;;
    *) echo "calvin.sh: CALVIN_ACQUIRES: '$acq' is neither rpc nor write" >&2; exit 2 ;;
  esac
done
case $REPEATS in
  ''|*[!0-9]*|0) echo "calvin.sh: CALVIN_REPEATS must be a positive integer" >&2; exit 2 ;;
esac

for r in $(seq 1 "$REPEATS"); do
  for fab in $FABRICS; do
    for co in $COROUTINES; do
      order=$ACQUIRES  # odd repeats in the given order, even ones reversed (ABBA)
      [ $((r % 2)) -eq 1 ] || order=$(printf '%s\n' $ACQUIRES | tac | tr '\n' ' ')
      for acq in $order; do
        dir="$OUT/calvin/$fab-$acq-co$co-r$r"
        echo "== calvin on $fab, calvin-acquire $acq, --coroutines $co, $CLIENTS clients, repeat $r"
        PROTO_FABRIC=$fab PROTO_PROTOCOLS=calvin PROTO_ZIPFS=$ZIPF PROTO_RECORDS=$RECORDS \
          PROTO_DURATION=$DURATION PROTO_WARMUP=1 PROTO_WARMUP_MAX=5 PROTO_CLIENTS=$CLIENTS \
          PROTO_ARGS="--coroutines $co --calvin-epoch-us $EPOCH --calvin-acquire $acq ${CALVIN_ARGS:-}" \
          PROTO_OUT="$dir" ./bench/protocols.sh > "$dir.log" 2>&1 ||
          { echo "calvin.sh: run failed, see $dir.log" >&2; exit 1; }
        grep -E "^ +[0-9]+ txn/s|^ +p50" "$dir.log" | sed "s/^/  /"
      done
    done
  done
done

/usr/bin/python3 - "$OUT" "$FABRICS" "$COROUTINES" "$ACQUIRES" "$REPEATS" "$CLIENTS" "$ZIPF" \
  "$EPOCH" <<'EOF'
import glob, json, os, statistics, sys
out, fabrics, coroutines, acquires, repeats, clients, zipf, epoch = sys.argv[1:]


def info_of(path):
    d = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        k, _, v = line.strip().partition(":")
        d[k] = v
    return d


def one_run(fab, acq, co, r):
    """The measured run's figures, or None."""
    d = os.path.join(out, "calvin", "%s-%s-co%s-r%s" % (fab, acq, co, r))
    try:
        rows = [json.loads(l) for l in open(os.path.join(d, "protocols.jsonl"), encoding="utf-8")
                if l.strip()]
    except OSError:
        return None
    if not rows:
        return None
    j = rows[-1]
    # The coordinators' WRITEs per committed transaction (INFO cc, over the
    # measured seconds: protocols.sh resets the statistics), weighted by
    # commits; the ACQUIRE counters (since start, warm-up included: only
    # their ratios are used).
    commits = writes = 0.0
    acq_n = {"rpcs": 0, "rpc_bytes": 0, "writes": 0, "write_bytes": 0}
    for p in glob.glob(os.path.join(d, "info", "calvin-*-node*.txt")):
        i = info_of(p)
        c = float(i.get("cc_txn_committed", 0))
        commits += c
        writes += c * float(i.get("cc_writes_per_txn", 0))
        for k in acq_n:
            acq_n[k] += int(i.get("calvin_acquire_" + k, 0))
    chunks = acq_n["rpcs"] + acq_n["writes"]
    return {"tps": j["throughput"], "p50": j["latency_us"]["p50"], "p99": j["latency_us"]["p99"],
            "rt": j["round_trips_per_txn"], "rpc": j["rpcs_per_txn"],
            "wr": writes / commits if commits else 0.0,
            "cpu": j.get("server_cpu_us_per_txn") or 0.0,
            "by_write": 100.0 * acq_n["writes"] / chunks if chunks else 0.0,
            "bytes": (acq_n["rpc_bytes"] + acq_n["write_bytes"]) / chunks if chunks else 0.0}


lines = ["calvin on a 3-node cluster: rckv-bench ycsb-t (10 ops, 20%% writes, 2 nodes per "
         "transaction), zipf %s, %s clients, calvin-epoch-us %s; median of %s alternating "
         "run(s) per cell." % (zipf, clients, epoch, repeats),
         "RT, RPC, WR (one-sided WRITEs) per txn: the coordinators' (INFO), the epoch rounds "
         "shared among an epoch's transactions; cpu us/tx: the 3 servers' CPU per committed "
         "transaction;",
         "by-WRITE: ACQUIRE chunks sent one-sided; B/chunk: their mean payload.",
         "", "%-6s %-6s %4s %8s %8s %8s %7s %7s %7s %9s %8s %7s" % (
             "fabric", "acq", "co", "txn/s", "p50 us", "p99 us", "RT/txn", "RPC/txn",
             "WR/txn", "cpu us/tx", "by-WRITE", "B/chunk"),
         "-" * 98]
med = {}
for fab in fabrics.split():
    for co in coroutines.split():
        for acq in acquires.split():
            runs = [x for x in (one_run(fab, acq, co, r) for r in range(1, int(repeats) + 1)) if x]
            if not runs:
                continue
            m = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
            med[(fab, co, acq)] = m
            lines.append("%-6s %-6s %4s %8.0f %8.0f %8.0f %7.2f %7.2f %7.2f %9.1f %7.0f%% %7.0f" % (
                fab, acq, co, m["tps"], m["p50"], m["p99"], m["rt"], m["rpc"], m["wr"], m["cpu"],
                m["by_write"], m["bytes"]))
ratios = []
for fab in fabrics.split():
    for co in coroutines.split():
        a, b = med.get((fab, co, "rpc")), med.get((fab, co, "write"))
        if a and b and a["tps"]:
            ratios.append("%s co%s %.2fx (cpu %.2fx)" % (fab, co, b["tps"] / a["tps"],
                                                        b["cpu"] / a["cpu"] if a["cpu"] else 0))
if ratios:
    lines += ["", "write / rpc, txn/s of the medians (and CPU per txn): " + "; ".join(ratios),
              "RCBench Table 4: Calvin one-sided 207.78k txn/s, 0.8x its 249.62k over TCP "
              "(two-sided RDMA 261.26k)."]
best = {}
for (fab, co, acq), m in med.items():
    best[fab] = max(best.get(fab, 0), m["tps"])
if "shm" in best and "tcp" in best and best["tcp"]:
    lines.append("best shm / best tcp: %.2fx" % (best["shm"] / best["tcp"]))
text = "\n".join(lines) + "\n"
open(os.path.join(out, "calvin.txt"), "w").write(text)
print(text, end="")
EOF
echo "results: $OUT/calvin.txt"
