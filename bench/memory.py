#!/usr/bin/python3
"""memory.py: what `make bench` calls for memory (issue 21, "Memory, as Redis
reports it and as Redis spends it"). Not a test: it reports, it asserts nothing.

For each value size, starts a fresh rckv-server and a fresh redis-server 7
(--save "" --appendonly no) on free loopback ports, loads the same N keys
into each (key:%012d, 16 bytes, SET in pipelines of 1000), and reports
each process's RSS (VmRSS of /proc/PID/status) after the load, the ratio
rckv / redis, and where rckv's RSS is: its region's resident pages (the
data blocks, the index, the rest of the region) as INFO memory reports them,
and the rest of the process (heap, stacks, code). The region is a pre-sized
file mapping: only the pages a write touched count in RSS, which is what
the columns show. Both servers are stopped on exit, whatever happens.

Env / options: RCKV_SERVER (build/rckv-server), REDIS_SERVER (redis-server),
--n keys per size (200000), --sizes value sizes (1024 1000 100), --memory
rckv's region size per size as SIZE=MEM (default: the smallest power of two
>= 1.5x the data, at least 64mb: what a user sizing `memory` for this data
would pick), --out the table's file (bench/results/memory.txt).
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rss_kb(pid):
    """VmRSS and its parts (RssAnon, RssFile, RssShmem) in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[k] = int(v.split()[0])
    return out


def mb(kb):
    return kb / 1024.0


class Server:
    def __init__(self, name, argv, port, log):
        self.name = name
        self.port = port
        self.log = log
        with open(log, "wb") as lf:
            self.proc = subprocess.Popen(argv, stdout=lf, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.time() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited during start; log {log}:\n" + self.tail())
            try:
                c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
                if c.ping():
                    self.client = c
                    return
            except redis.exceptions.RedisError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"{name} did not answer PING in 30 s; log:\n" + self.tail())
            time.sleep(0.1)

    def tail(self):
        with open(self.log, errors="replace") as f:
            return "".join(f.readlines()[-20:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def load(c, n, size):
    """n SETs of key:%012d -> size bytes (distinct per key, incompressible
    enough), pipelined 1000 at a time."""
    base = (b"0123456789abcdefghijklmnopqrstuvwxyz" * (size // 36 + 2))
    for start in range(0, n, 1000):
        p = c.pipeline(transaction=False)
        for i in range(start, min(n, start + 1000)):
            k = b"key:%012d" % i
            v = (k + base)[:size]
            p.set(k, v)
        p.execute()
    got = c.dbsize()
    if got != n:
        raise RuntimeError(f"loaded {n} keys, DBSIZE says {got}")


def info_mem(c):
    return c.info("memory")


def default_memory(n, size):
    need = int(n * (size + 16 + 64) * 1.5)
    m = 64 << 20
    while m < need:
        m *= 2
    return m


def run_size(args, tmp, size, memory):
    row = {"size": size, "memory": memory}
    servers = []
    try:
        d = os.path.join(tmp, f"rckv-{size}")
        os.makedirs(d)
        port = free_port()
        rk = Server("rckv-server", [args.rckv, "--port", str(port), "--bind", "127.0.0.1",
                                    "--dir", d, "--persistence", "none", "--memory", str(memory),
                                    "--loglevel", "warning"], port,
                    os.path.join(tmp, f"rckv-{size}.log"))
        servers.append(rk)
        d = os.path.join(tmp, f"redis-{size}")
        os.makedirs(d)
        port = free_port()
        rd = Server("redis-server", [args.redis, "--port", str(port), "--bind", "127.0.0.1",
                                     "--dir", d, "--save", "", "--appendonly", "no",
                                     "--daemonize", "no", "--loglevel", "warning"], port,
                    os.path.join(tmp, f"redis-{size}.log"))
        servers.append(rd)
        row["rckv_rss0"] = rss_kb(rk.proc.pid)["VmRSS"]
        row["redis_rss0"] = rss_kb(rd.proc.pid)["VmRSS"]
        t = time.time()
        load(rk.client, args.n, size)
        row["rckv_load_s"] = time.time() - t
        t = time.time()
        load(rd.client, args.n, size)
        row["redis_load_s"] = time.time() - t
        time.sleep(1)  # let both settle (redis's incremental rehash, rckv's idle)
        row["rckv_rss"] = rss_kb(rk.proc.pid)
        row["redis_rss"] = rss_kb(rd.proc.pid)
        row["rckv_info"] = info_mem(rk.client)
        row["redis_info"] = info_mem(rd.client)
    finally:
        for s in servers:
            s.stop()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 1000, 100])
    ap.add_argument("--memory", nargs="*", default=[], help="SIZE=BYTES, per value size")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/memory.txt"))
    args = ap.parse_args()
    args.rckv = os.environ.get("RCKV_SERVER", os.path.join(ROOT, "build/rckv-server"))
    args.redis = os.environ.get("REDIS_SERVER", "redis-server")
    if not os.access(args.rckv, os.X_OK):
        sys.exit(f"memory.py: {args.rckv} not found; build it first with 'make'")
    if not shutil.which(args.redis):
        sys.exit(f"memory.py: {args.redis} not found")
    mems = {}
    for m in args.memory:
        s, _, v = m.partition("=")
        mems[int(s)] = int(v)

    tmp = tempfile.mkdtemp(prefix="rckv-memory.")
    rows = []
    try:
        for size in args.sizes:
            rows.append(run_size(args, tmp, size, mems.get(size, default_memory(args.n, size))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    lines = [f"# bench/memory.py: {args.n} keys (16 bytes) per value size, RSS after the load",
             "# (MB = MiB). rckv's RSS split: region pages resident (data blocks, index,",
             "# rest of the region: header, slab table, bitmaps, undo log) and the process",
             "# outside the region (heap, stacks, code).",
             f"{'value':>6} {'memory':>7} {'rckv RSS':>9} {'redis RSS':>9} {'ratio':>6} "
             f"{'blocks':>7} {'index':>7} {'idx%':>5} {'region-':>7} {'process':>7} "
             f"{'used_mem':>9} {'r.used_mem':>10}"]
    for r in rows:
        ri = r["rckv_info"]
        rss = r["rckv_rss"]["VmRSS"]
        red = r["redis_rss"]["VmRSS"]
        blocks = ri.get("rckv_blocks_resident", 0) / 1024
        index = ri.get("rckv_index_resident", 0) / 1024
        region = ri.get("rckv_region_resident", 0) / 1024
        rest = region - blocks - index
        proc = rss - region
        lines.append(
            f"{r['size']:>6} {r['memory'] >> 20:>5}mb {mb(rss):>7.1f}MB {mb(red):>7.1f}MB "
            f"{rss / red:>6.3f} {mb(blocks):>5.1f}MB {mb(index):>5.1f}MB "
            f"{100.0 * index / rss:>4.1f}% {mb(rest):>5.1f}MB {mb(proc):>5.1f}MB "
            f"{ri.get('used_memory', 0) / 2**20:>7.1f}MB "
            f"{r['redis_info'].get('used_memory', 0) / 2**20:>8.1f}MB")
    for r in rows:
        lines.append(f"# value {r['size']}: load {r['rckv_load_s']:.1f} s rckv, "
                     f"{r['redis_load_s']:.1f} s redis; RSS before the load "
                     f"{mb(r['rckv_rss0']):.1f}MB rckv, {mb(r['redis_rss0']):.1f}MB redis; rckv "
                     + ", ".join(f"{k} {mb(v):.1f}MB" for k, v in r["rckv_rss"].items()))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
