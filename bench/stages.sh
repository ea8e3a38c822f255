#!/usr/bin/env bash
# stages.sh: RCC's stage-wise study (../shared/papers/notes-rcc.md sections
# 4 to 6) on rckv, the part of `make bench` that compares one-sided and RPC
# stages (CONFIG SET cc-stages). A benchmark, not a test: it asserts
# nothing about the numbers and prints what it measured.
#
#  1. Figure 13's equivalent, the latency breakdown: for each protocol of
#     STAGES_PROTOCOLS, ycsb-t with one client (one transaction at a time,
#     RCC's 1 co-routine) at zipf 0.2 and 0.9, all stages one-sided and
#     all by RPC; per stage, the time its round trips took and the verbs
#     or RPCs it issued per committed transaction (INFO cc_stage_<stage>,
#     summed over the nodes). On each fabric of STAGES_FABRICS: a 3-node
#     tcp cluster (loopback), and shm with fabric-delay-us 5 (a round trip
#     priced like a network's).
#  2. Figure 14's equivalent: for each protocol of STAGES_HYBRID_PROTOCOLS,
#     every stage-wise hybrid (rckv-bench --sweep cc-stages=all: the 64 bit
#     codes, RCC's enumeration) with STAGES_CLIENTS clients (RCC's 10
#     co-routines), ranked by throughput against both pure modes, on
#     STAGES_HYBRID_FABRIC at zipf STAGES_HYBRID_ZIPF.
#
# Writes, under STAGES_OUT (bench/results): stages-breakdown.txt and
# .jsonl, stages-breakdown-<fabric>.png/.svg (stacked bars of the stages'
# time per transaction); stages-hybrids.txt (rckv-bench's ranked tables)
# and .jsonl, stages-hybrids.png/.svg (each protocol's hybrids sorted by
# throughput, with its two pure modes as lines). Charts need gnuplot.
#
# Env: RCKV_SERVER (build/rckv-server; a Release build), RCKV_BENCH
# (rckv-bench next to it), STAGES_PROTOCOLS ("nowait waitdie woundwait
# timestamp mvcc silo occ sundial cicada maat"), STAGES_FABRICS ("tcp
# shm"), STAGES_HYBRID_PROTOCOLS ("mvcc sundial silo nowait": RCC's Figure
# 14 has four protocols, and its winning hybrids were mvcc's and
# sundial's), STAGES_HYBRID_FABRIC (shm), STAGES_HYBRID_ZIPF (0.9),
# STAGES_RECORDS (20000), STAGES_WARM (3: an unmeasured run of each
# protocol, one-sided, before its points), STAGES_WARMUP (0.5: before
# each point), STAGES_DURATION (1.5 for
# the breakdown, 1 per hybrid), STAGES_CLIENTS (10), STAGES_DELAY_US (5:
# shm's fabric-delay-us), STAGES_OUT. The short defaults take about ten
# minutes; RCC-length runs: STAGES_DURATION=10.
set -euo pipefail
cd "$(dirname "$0")/.."

RCKV=${RCKV_SERVER:-build/rckv-server}
BENCH=${RCKV_BENCH:-$(dirname "$RCKV")/rckv-bench}
PROTOCOLS=${STAGES_PROTOCOLS:-nowait waitdie woundwait timestamp mvcc silo occ sundial cicada maat}
FABRICS=${STAGES_FABRICS:-tcp shm}
HYBRID_PROTOCOLS=${STAGES_HYBRID_PROTOCOLS:-mvcc sundial silo nowait}
HYBRID_FABRIC=${STAGES_HYBRID_FABRIC:-shm}
HYBRID_ZIPF=${STAGES_HYBRID_ZIPF:-0.9}
RECORDS=${STAGES_RECORDS:-20000}
WARMUP=${STAGES_WARMUP:-0.5}
DURATION=${STAGES_DURATION:-1.5}
HYBRID_DURATION=${STAGES_DURATION:-1}
CLIENTS=${STAGES_CLIENTS:-10}
DELAY_US=${STAGES_DELAY_US:-5}
WARM=${STAGES_WARM:-3}
OUT=${STAGES_OUT:-bench/results}
NODES=3

die() { echo "stages.sh: $*" >&2; exit 1; }
for tool in redis-cli /usr/bin/python3 "$RCKV" "$BENCH"; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "$tool" ] || die "$tool not found (build first: make)"
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rckv-stages.XXXXXX")
PIDS=()
# shellcheck source=bench/lib.sh
. bench/lib.sh  # stop_pid, start_cluster
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  PIDS=()
  return 0
}
trap 'cleanup; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT"
BREAKDOWN="$OUT/stages-breakdown.jsonl"
HYBRIDS="$OUT/stages-hybrids.jsonl"
: >"$BREAKDOWN"
: >"$HYBRIDS"

cluster() {  # FABRIC: a fresh 3-node cluster, loaded
  local fabric=$1 delay=0
  cleanup
  rm -rf "$TMP/c"
  mkdir -p "$TMP/c"
  [ "$fabric" = shm ] && delay=$DELAY_US
  start_cluster "$TMP/c" "$NODES" "$fabric" "memory 256mb" "persistence none" \
    "fabric-delay-us $delay" "loglevel warning"
  "$BENCH" --cluster "$CONF" ycsb-t --records "$RECORDS" --load always --warmup 0 -n 1 \
    --quiet >"$TMP/load.out" 2>&1 || { tail -5 "$TMP/load.out" >&2; die "load failed"; }
}

warm() {  # PROTOCOL [rckv-bench options]: an unmeasured run under it, all one-sided
  local p=$1
  shift
  # A switch starts the address caches over and the new protocol reshapes
  # items (mvcc's version room): the first point after it would pay that.
  "$BENCH" --cluster "$CONF" ycsb-t --cc "$p" --cc-stages onesided --records "$RECORDS" \
    --threads 1 --warmup 0 --duration "$WARM" --load never --quiet "$@" >"$TMP/warm.out" 2>&1 ||
    { tail -5 "$TMP/warm.out" >&2; die "the warm-up of $p failed"; }
}

t0=$(date +%s)
echo "stages.sh: 3-node clusters, ycsb-t over $RECORDS records, $(nproc) cores"
for fabric in $FABRICS; do
  cluster "$fabric"
  echo "== breakdown on $fabric$([ "$fabric" = shm ] && echo " (fabric-delay-us $DELAY_US)"):" \
       "1 client, ${WARMUP}+${DURATION} s per run"
  for p in $PROTOCOLS; do
    warm "$p" --clients 1
    "$BENCH" --cluster "$CONF" ycsb-t --cc "$p" --records "$RECORDS" --threads 1 --clients 1 \
      --warmup "$WARMUP" --duration "$DURATION" --load never --quiet \
      --sweep zipf=0.2,0.9 --sweep cc-stages=onesided,rpc --json "$TMP/one.jsonl" \
      >"$TMP/one.out" 2>&1 || { tail -5 "$TMP/one.out" >&2; die "$p on $fabric failed"; }
    sed "s/^{/{\"fabric\":\"$fabric\",/" "$TMP/one.jsonl" >>"$BREAKDOWN"
    echo "  $p done"
  done
done

cluster "$HYBRID_FABRIC"
echo "== every hybrid on $HYBRID_FABRIC, zipf $HYBRID_ZIPF, $CLIENTS clients," \
     "${WARMUP}+${HYBRID_DURATION} s per hybrid"
: >"$OUT/stages-hybrids.txt"
for p in $HYBRID_PROTOCOLS; do
  warm "$p" --clients "$CLIENTS" --zipf "$HYBRID_ZIPF"
  "$BENCH" --cluster "$CONF" ycsb-t --cc "$p" --records "$RECORDS" --threads 1 \
    --clients "$CLIENTS" --zipf "$HYBRID_ZIPF" --warmup "$WARMUP" --duration "$HYBRID_DURATION" \
    --load never --quiet --sweep cc-stages=all --json "$TMP/hy.jsonl" >"$TMP/hy.out" 2>&1 ||
    { tail -5 "$TMP/hy.out" >&2; die "the hybrids of $p failed"; }
  sed "s/^{/{\"fabric\":\"$HYBRID_FABRIC\",/" "$TMP/hy.jsonl" >>"$HYBRIDS"
  { echo "# $p on $HYBRID_FABRIC, zipf $HYBRID_ZIPF, $CLIENTS clients"
    sed -n '/== cc-stages ranked/,$p' "$TMP/hy.out"; echo; } >>"$OUT/stages-hybrids.txt"
  # the header, the best three, and the pure modes wherever they ranked
  sed -n '/== cc-stages ranked/,$p' "$TMP/hy.out" |
    awk -v p="$p" 'NR == 2 || (NR > 2 && ($1 <= 3 || $2 == "000000" || $2 == "111111")) {
      print "  " p ": " $0 }'
done
cleanup

/usr/bin/python3 - "$OUT" "$BREAKDOWN" "$HYBRIDS" <<'PY'
"""The tables and charts of stages.sh (its header says what they show)."""
import json, os, shutil, subprocess, sys

out, breakdown, hybrids = sys.argv[1:4]
STAGES = ["read", "lock", "validate", "log", "commit", "release"]


def lines(path):
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


rows = lines(breakdown)
with open(os.path.join(out, "stages-breakdown.txt"), "w") as t:
    t.write("RCC Figure 13's equivalent: per stage, us of round trips / ops (verbs or RPCs)\n"
            "per committed transaction; 1 client, ycsb-t 10 ops, 3 nodes\n\n")
    head = "%-6s %-10s %-5s %-9s %9s %8s  " % ("fabric", "protocol", "zipf", "stages",
                                             "txn/s", "p50 us")
    head += " ".join("%13s" % s for s in STAGES)
    t.write(head + "\n")
    for r in rows:
        st = r.get("stages") or {}
        cells = " ".join("%6.1f/%-6.2f" % (st[s]["usec_per_txn"] or 0,
                                          (st[s]["verbs_per_txn"] or 0) +
                                          (st[s]["rpcs_per_txn"] or 0)) if s in st else
                         "%13s" % "-" for s in STAGES)
        t.write("%-6s %-10s %-5s %-9s %9.0f %8.1f  %s\n" % (
            r["fabric"], r["protocol"], r["sweep"]["zipf"], r["sweep"]["cc-stages"],
            r["throughput"], r["latency_us"]["p50"], cells))
print(open(os.path.join(out, "stages-breakdown.txt")).read())

hy = lines(hybrids)
best = {}
for r in hy:
    p = r["protocol"]
    best.setdefault(p, []).append((r["throughput"], r["sweep"]["cc-stages"]))
with open(os.path.join(out, "stages-hybrids-summary.txt"), "w") as t:
    t.write("RCC Figure 14's equivalent: the best hybrid per protocol against both pure modes\n")
    for p, pts in best.items():
        d = dict((c, x) for x, c in pts)
        top = max(pts)
        one, rpc = d.get("000000"), d.get("111111")
        better = max(one or 0, rpc or 0)
        t.write("%-8s best %s %.0f txn/s; one-sided %.0f, rpc %.0f: %+.1f%% over the better "
                "pure mode\n" % (p, top[1], top[0], one or 0, rpc or 0,
                                 100.0 * (top[0] / better - 1) if better else float("nan")))
print(open(os.path.join(out, "stages-hybrids-summary.txt")).read())

if not shutil.which("gnuplot"):
    print("stages.sh: gnuplot not installed: no charts")
    sys.exit(0)
for fabric in sorted(set(r["fabric"] for r in rows)):
    base = os.path.join(out, "stages-breakdown-%s" % fabric)
    with open(base + ".dat", "w") as d:
        d.write("label " + " ".join(STAGES) + "\n")
        for r in rows:
            if r["fabric"] != fabric or not r.get("stages"):
                continue
            label = "%s/%s/z%s" % (r["protocol"], "rpc" if r["sweep"]["cc-stages"] == "rpc"
                                   else "1s", r["sweep"]["zipf"])
            d.write(label + " " + " ".join("%.2f" % (r["stages"][s]["usec_per_txn"] or 0)
                                           for s in STAGES) + "\n")
    for ext, term in (("png", "pngcairo size 1400,600"), ("svg", "svg size 1400,600")):
        gp = ("set terminal %s\nset output '%s.%s'\nset style data histograms\n"
              "set style histogram rowstacked\nset style fill solid 0.8 border -1\n"
              "set key autotitle columnhead outside\nset xtics rotate by -60 font ',8'\n"
              "set ylabel 'us per committed txn (round trips)'\n"
              "set title 'stage breakdown on %s: one-sided (1s) against RPC, 1 client'\n"
              "plot for [i=2:%d] '%s.dat' using i:xtic(1)\n"
              % (term, base, ext, fabric, len(STAGES) + 1, base))
        subprocess.run(["gnuplot"], input=gp.encode(), check=True)
base = os.path.join(out, "stages-hybrids")
with open(base + ".dat", "w") as d:
    for p, pts in best.items():
        d.write("# %s\n" % p)
        dd = dict((c, x) for x, c in pts)
        for i, (x, c) in enumerate(sorted(pts, reverse=True)):
            d.write("%d %.1f %.1f %.1f %s\n" % (i + 1, x, dd.get("000000", 0),
                                                dd.get("111111", 0), c))
        d.write("\n\n")
for ext, term in (("png", "pngcairo size 1000,600"), ("svg", "svg size 1000,600")):
    plots = []
    for i, p in enumerate(best):
        # one color per protocol: its hybrids, and its pure modes dashed
        plots.append("'%s.dat' index %d using 1:2 with linespoints lc %d title '%s hybrids'"
                     % (base, i, i + 1, p))
        plots.append("'%s.dat' index %d using 1:3 with lines dt 2 lc %d title '%s one-sided'"
                     % (base, i, i + 1, p))
        plots.append("'%s.dat' index %d using 1:4 with lines dt 3 lc %d title '%s rpc'"
                     % (base, i, i + 1, p))
    gp = ("set terminal %s\nset output '%s.%s'\nset xlabel 'hybrid, ranked'\n"
          "set ylabel 'txn/s'\nset key outside\n"
          "set title 'every stage-wise hybrid against the pure modes'\nplot %s\n"
          % (term, base, ext, ", ".join(plots)))
    subprocess.run(["gnuplot"], input=gp.encode(), check=True)
print("charts: %s-breakdown-*.png, %s.png" % (os.path.join(out, "stages"), base))
PY
echo "stages.sh: done in $(($(date +%s) - t0)) s; results in $OUT/stages-*"
