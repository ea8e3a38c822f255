#!/usr/bin/env python3
"""bench/pubsub.py: Pub/Sub numbers (a benchmark, not a test).

1. PUBLISH throughput on one node, rckv-server against redis-server 7, side
   by side: redis-benchmark sends `PUBLISH bench <16 bytes>` (-c 50 -P 16)
   while SUBS subscribers (raw sockets drained by threads) receive every
   message. Runs alternate between the servers; each server's median of
   REPS runs is shown, with the delivered messages per second.
2. Cross-node delivery latency on a local 3-node cluster (shm and tcp): a
   publisher on node 1 sends timestamped messages, one at a time, and a
   subscriber on each of nodes 2 and 3 notes when each arrives; p50/p99 of
   (arrival - send) in microseconds.

Usage: /usr/bin/python3 bench/pubsub.py  (env: RCKV_SERVER, REPS=3, SUBS=2,
N=200000 publishes per throughput run, LAT_N=2000 messages per latency run)
"""

import os
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
os.environ.setdefault("RCKV_SERVER", os.path.join(HERE, "..", "build", "rckv-server"))

import rckvtest  # noqa: E402
from cluster import Cluster  # noqa: E402

REPS = int(os.environ.get("REPS", "3"))
SUBS = int(os.environ.get("SUBS", "2"))
N = int(os.environ.get("N", "200000"))
LAT_N = int(os.environ.get("LAT_N", "2000"))


def drain(sock, counter, stop):
    sock.settimeout(0.2)
    while not stop.is_set():
        try:
            b = sock.recv(1 << 20)
        except socket.timeout:
            continue
        except OSError:
            return
        if not b:
            return
        counter[0] += b.count(b"$7\r\nmessage\r\n")


def throughput(port):
    subs, counters, stop = [], [], threading.Event()
    for _ in range(SUBS):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(rckvtest.encode("SUBSCRIBE", "bench"))
        s.recv(100)
        c = [0]
        t = threading.Thread(target=drain, args=(s, c, stop), daemon=True)
        t.start()
        subs.append((s, t))
        counters.append(c)
    start = time.monotonic()
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-n", str(N), "-c", "50", "-P",
                          "16", "-q", "PUBLISH", "bench", "0123456789abcdef"],
                         capture_output=True, text=True, timeout=300).stdout
    rps = float(out.replace("\r", "\n").split("requests per second")[0].split()[-1])
    end = time.monotonic() + 10
    while sum(c[0] for c in counters) < SUBS * N and time.monotonic() < end:
        time.sleep(0.05)
    delivered = sum(c[0] for c in counters) / (time.monotonic() - start)
    stop.set()
    for s, t in subs:
        s.close()
        t.join()
    return rps, delivered


def run_throughput():
    rows = {"rckv": [], "redis": []}
    for rep in range(REPS):
        for target in (("rckv", "redis") if rep % 2 == 0 else ("redis", "rckv")):
            rckvtest.REDIS_MODE = target == "redis"
            s = rckvtest.Server(name="bench-" + target)
            try:
                s.start()
                rows[target].append(throughput(s.port))
            finally:
                s.cleanup()
    rckvtest.REDIS_MODE = False
    print("PUBLISH -c 50 -P 16, %d subscribers, median of %d:" % (SUBS, REPS))
    for target in ("rckv", "redis"):
        rps = statistics.median(r for r, _ in rows[target])
        dl = statistics.median(d for _, d in rows[target])
        print("  %-6s %10.0f publishes/s %10.0f deliveries/s  (runs: %s)" % (
            target, rps, dl, ", ".join("%.0f" % r for r, _ in rows[target])))
    ratio = statistics.median(r for r, _ in rows["rckv"]) / statistics.median(
        r for r, _ in rows["redis"])
    print("  rckv/redis publishes: %.2f" % ratio)


def run_latency(fabric):
    with Cluster(n=3, fabric=fabric) as cl:
        cl.start()
        got = {2: {}, 3: {}}
        subs = []
        for node in (2, 3):
            c = cl.raw(node)
            c.call("SUBSCRIBE", "lat")
            subs.append((node, c))

        def reader(node, c):
            for _ in range(LAT_N):
                m = c.read()
                got[node][int(m[2])] = time.perf_counter_ns()

        ts = [threading.Thread(target=reader, args=sc) for sc in subs]
        for t in ts:
            t.start()
        sent = {}
        with cl.raw(1) as p:
            for i in range(LAT_N):
                sent[i] = time.perf_counter_ns()
                p.call("PUBLISH", "lat", str(i))
        for t in ts:
            t.join(60)
        lat = sorted((got[node][i] - sent[i]) / 1000 for node in (2, 3) for i in got[node])
        for _, c in subs:
            c.close()
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]
    print("  %-4s p50 %7.1f us  p99 %7.1f us  (%d deliveries)" % (fabric, q(0.5), q(0.99),
                                                                 len(lat)))


def main():
    run_throughput()
    print("Cross-node delivery latency, publisher on node 1, subscribers on nodes 2 and 3:")
    for fabric in ("shm", "tcp"):
        run_latency(fabric)


if __name__ == "__main__":
    main()
