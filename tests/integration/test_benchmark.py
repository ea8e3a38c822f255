"""redis-benchmark as a smoke load: it must run to the end with no error
lines and report a nonzero rate for every test, plain and pipelined; and
`make bench`'s comparison script must run. This asserts correctness of the
protocol under load and that the benchmark works, never speed."""

import json
import os
import re
import subprocess

import pytest

from rckvtest import HOST, REPO, run, server_binary

TESTS = "get,set,incr,mset,ping"
# redis-benchmark's names for what -t get,set,incr,mset,ping runs.
EXPECTED = {"PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET (10 keys)"}
RESULT = re.compile(r"^(?P<name>[A-Z_]+(?: \(\d+ keys\))?): (?P<rps>[0-9.]+) requests per second")
BAD = re.compile(r"error|err\b|could not|warning|refused|reset|timeout", re.I)


def bench(server, *extra):
    p = run(["redis-benchmark", "-h", HOST, "-p", str(server.port), "-t", TESTS,
             "-n", "20000", "-c", "20", "-q"] + list(extra), timeout=40)
    # -q overwrites a progress line with \r; the final line of a test
    # follows the last \r.
    lines = [seg.strip() for seg in re.split(r"[\r\n]", p.stdout + "\n" + p.stderr)]
    lines = [ln for ln in lines if ln]
    bad = [ln for ln in lines if BAD.search(ln)]
    assert p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert not bad, bad
    rps = {}
    for ln in lines:
        m = RESULT.match(ln)
        if m:
            rps[m.group("name")] = float(m.group("rps"))
    assert set(rps) == EXPECTED, (rps, lines[-20:])
    assert all(v > 0 for v in rps.values()), rps
    return rps


COUNTER = "counter:__rand_int__"  # without -r, INCR hits this one key


def counter(server):
    with server.raw() as c:
        v = c.call("GET", COUNTER)
    return int(v) if v is not None else 0


@pytest.mark.time_limit(50)
@pytest.mark.parametrize("pipeline", [1, 16])
def test_benchmark(server, pipeline):
    before = counter(server)
    bench(server, "-P", str(pipeline))
    with server.raw() as c:
        # The server still answers, SET and MSET wrote their 3-byte values
        # (-d 3 is the default), and not one of the increments was lost.
        assert c.call_raw("PING") == b"+PONG\r\n"
        assert len(c.call("GET", "key:__rand_int__")) == 3
    assert counter(server) == before + 20000


@pytest.mark.rckv_only
def test_redis_compare_script(tmp_path):
    # `make bench`'s comparison, tiny: it must start both servers, fill
    # every row with two rates, a ratio and each server's CPU time per
    # request, and leave no server behind.
    out = tmp_path / "table.txt"
    env = dict(os.environ, RCKV_SERVER=server_binary(), BENCH_N1="2000", BENCH_N16="8000",
               BENCH_REPS="1", BENCH_CLIENTS="10", BENCH_OUT=str(out), TMPDIR=str(tmp_path),
               RCKV_ARGS="--busy-poll-us 0 --coroutines 8")
    p = subprocess.run(["bash", os.path.join(REPO, "bench", "redis-compare.sh")], env=env,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    text = out.read_text()
    assert "rckv: %s --busy-poll-us 0 --coroutines 8" % server_binary() in text, text
    rows = [ln.split() for ln in text.splitlines() if not ln.startswith(("#", "test"))]
    assert [(r[0], r[1]) for r in rows] == [(t, pl) for t in ("GET", "SET", "INCR", "MSET")
                                            for pl in ("1", "16")], rows
    for r in rows:
        assert len(r) == 7, r
        assert float(r[2]) > 0 and float(r[3]) > 0 and float(r[4]) > 0, r
        assert float(r[5]) >= 0 and float(r[6]) >= 0, r
    assert not list(tmp_path.glob("rckv-bench.*")), "temp dir left behind"
    # One row, by name.
    one = dict(env, BENCH_TESTS="INCR", BENCH_PIPES="16")
    p = subprocess.run(["bash", os.path.join(REPO, "bench", "redis-compare.sh")], env=one,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rows = [ln.split() for ln in out.read_text().splitlines()
            if not ln.startswith(("#", "test"))]
    assert [(r[0], r[1]) for r in rows] == [("INCR", "16")], rows
    # A row it does not know is refused before any server starts.
    for bad, msg in ((dict(BENCH_TESTS="GET LPUSH"), "unknown test 'LPUSH'"),
                     (dict(BENCH_PIPES="16 x"), "'x' is not a pipeline depth")):
        p = subprocess.run(["bash", os.path.join(REPO, "bench", "redis-compare.sh")],
                           env=dict(env, **bad), capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and msg in p.stderr, p.stderr[-2000:]
    # RCKV_ARGS reach the server: a bad one stops the script with the server's reason.
    env["RCKV_ARGS"] = "--busy-poll-us nope"
    p = subprocess.run(["bash", os.path.join(REPO, "bench", "redis-compare.sh")], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0, p.stdout[-2000:]
    assert "option 'busy-poll-us': argument couldn't be parsed into an integer" in p.stderr, \
        p.stderr[-2000:]
    assert not list(tmp_path.glob("rckv-bench.*")), "temp dir left behind"


@pytest.mark.time_limit(150)
def test_protocols_script(tmp_path):
    # `make bench`'s protocol comparison, tiny: a 3-node cluster on the tcp
    # fabric (make bench's own runs are on shm, the default), two
    # protocols, one skew; every row commits with no errors, and the INFO
    # sums, the latencies and the servers' CPU time per transaction reach
    # the table. No node and no temp dir is left behind.
    out = tmp_path / "results"
    env = dict(os.environ, RCKV_SERVER=server_binary(), PROTO_PROTOCOLS="nowait-shared silo",
               PROTO_FABRIC="tcp",
               PROTO_ZIPFS="0.9", PROTO_RECORDS="300", PROTO_VALUE_SIZE="100",
               PROTO_WARMUP="1", PROTO_WARMUP_MAX="5", PROTO_DURATION="1", PROTO_CLIENTS="4", PROTO_MEMORY="64mb",
               PROTO_ARGS="--coroutines 8", PROTO_OUT=str(out), TMPDIR=str(tmp_path))
    p = subprocess.run(["bash", os.path.join(REPO, "bench", "protocols.sh")], env=env,
                       capture_output=True, text=True, timeout=140)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rows = {}
    for ln in (out / "protocols.txt").read_text().splitlines():
        f = ln.split()
        if f and f[0] in ("nowait-shared", "silo"):
            rows[f[0]] = f
    assert set(rows) == {"nowait-shared", "silo"}, p.stdout[-2000:]
    assert "(fabric tcp, threads auto --coroutines 8)" in (out / "protocols.txt").read_text()
    for name, f in rows.items():
        # protocol zipf txn/s p50 p99 aborts cpu-us/txn verbs/txn RT/txn sigma AR errors ...
        assert f[1] == "0.9" and float(f[2]) > 0, f
        assert 0 < float(f[3]) <= float(f[4]), f  # p50 and p99 of a transaction
        assert float(f[6]) > 0, f  # the servers' CPU time was read
        assert float(f[7]) > 0 and float(f[8]) > 0, f  # INFO cc_proto_<id> was read
        assert f[11] == "0", f
    runs = [json.loads(ln) for ln in (out / "protocols.jsonl").read_text().splitlines()]
    assert [r["protocol_variant"] for r in runs] == ["nowait-shared", "silo"], runs
    assert all(r["info"]["commits"] > 0 and r["info"]["errors"] == 0 for r in runs), runs
    assert all(r["server_cpu_us_per_txn"] > 0 and r["server_sleeps_per_txn"] >= 0
               for r in runs), runs
    # The warm-up ran at least PROTO_WARMUP and stopped by PROTO_WARMUP_MAX.
    assert all(1 <= r["warmup_s_spent"] <= 5 for r in runs), runs
    assert not list(tmp_path.glob("rckv-protocols.*")), "temp dir left behind"
    # A protocol the server does not know stops the script with the server's error.
    p = subprocess.run(["bash", os.path.join(REPO, "bench", "protocols.sh")],
                       env=dict(env, PROTO_PROTOCOLS="2pl"), capture_output=True, text=True,
                       timeout=100)
    assert p.returncode != 0 and "CONFIG SET cc 2pl" in p.stderr, p.stderr[-2000:]
    assert not list(tmp_path.glob("rckv-protocols.*")), "temp dir left behind"
