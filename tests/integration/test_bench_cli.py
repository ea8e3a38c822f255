"""rckv-bench end to end: short runs against real servers.

The runs are small (a few thousand records, about a second each) because
these tests check what rckv-bench reports and refuses, not performance
(tests never assert on time). Against rckv they check the rckv-only
figures (INFO commits, verbs and round trips per transaction, the slot
map); with RCKV_TEST_TARGET=redis the same runs go to redis-server, which
rckv-bench treats as a standalone server.
"""

import json
import os
import shutil
import subprocess

import pytest

import rckvtest
from rckvtest import HOST, REDIS_MODE, REPO


def bench_binary():
    build = os.environ.get("RCKV_BUILD") or os.path.join(REPO, "build")
    path = os.path.join(build, "rckv-bench")
    if not os.access(path, os.X_OK):
        pytest.skip("rckv-bench not built (%s)" % path)
    return path


def bench(*args, timeout=60):
    return rckvtest.run([bench_binary()] + [str(a) for a in args], timeout=timeout)


SMALL = ["--records", 2000, "--value-size", 100, "--warmup", 0.3, "--duration", 1,
         "--threads", 1, "--clients", 4, "--seed", 7]

CONFIG_KEYS = {"workload", "host", "port", "cluster", "compare", "threads", "clients",
               "pipeline", "ops", "write_ratio", "zipf", "zipf_head", "records",
               "value_size", "nodes_per_txn", "scan_max", "warmup_s", "duration_s",
               "operations", "seed", "rounds", "cc", "load", "batch", "load_pipeline",
               "timeout_ms"}
LATENCY_KEYS = {"p50", "p90", "p99", "p999", "max"}


def check_figures(d, txn=True):
    assert d["throughput"] > 0
    lat = d["latency_us"]
    assert LATENCY_KEYS <= set(lat)
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert lat["count"] == d["operations"] > 0
    assert d["commits"] > 0 and d["aborts"] >= 0
    assert d["errors"] == 0, d["first_error"]
    if REDIS_MODE:
        assert d["commits_source"] == "client"
        assert d["verbs_per_txn"] is None and d["round_trips_per_txn"] is None
        assert d["protocol"] == "redis"
    else:
        assert d["commits_source"] == "info"
        assert d["verbs_per_txn"] > 0 and d["round_trips_per_txn"] > 0
        assert d["protocol"] == d["target"]["cc"]
    assert d["server_cpu"]["seconds"] is not None and d["server_cpu"]["seconds"] >= 0


@pytest.mark.time_limit(60)
def test_ycsb_t_json_has_every_field(make_server, tmp_path):
    s = make_server()
    out = tmp_path / "t.json"
    p = bench("--port", s.port, "ycsb-t", "--nodes-per-txn", 1, "--json", out, *SMALL)
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())
    for key in ("config", "throughput", "latency_us", "commits", "aborts", "verbs_per_txn",
                "round_trips_per_txn"):
        assert key in d, key
    assert CONFIG_KEYS <= set(d["config"])
    assert d["config"]["workload"] == "ycsb-t" and d["config"]["seed"] == 7
    assert d["config"]["port"] == s.port and d["config"]["records"] == 2000
    assert d["unit"] == "txn" and d["nodes_per_txn"] == 1
    check_figures(d)
    # the table went to stdout, progress lines (not a terminal) to stderr
    assert "throughput (txn/s)" in p.stdout and "latency p99.9 (us)" in p.stdout
    progress = [ln for ln in p.stderr.splitlines() if "txn/s" in ln]
    assert progress and not any("\r" in ln for ln in progress)
    # the keyspace was loaded with the requested value size
    r = s.client()
    assert r.strlen("user0000000000") == 100 and r.strlen("user0000001999") == 100
    r.close()


@pytest.mark.rckv_only
@pytest.mark.time_limit(60)
def test_nodes_per_txn_defaults_to_what_the_target_has(make_server):
    s = make_server()
    # no --nodes-per-txn against one node: 1, said on stderr, and the run works
    p = bench("--port", s.port, "ycsb-t", *SMALL)
    assert p.returncode == 0, p.stderr
    assert "--nodes-per-txn 1 (the default for a target of 1 node)" in p.stderr, p.stderr
    assert "throughput (txn/s)" in p.stdout
    r = s.client()
    r.flushall()
    r.close()


@pytest.mark.rckv_only
@pytest.mark.time_limit(60)
def test_nodes_per_txn_beyond_the_map_fails_clearly(make_server):
    s = make_server()
    # an explicit 2 on a one-node map cannot give two nodes
    p = bench("--port", s.port, "ycsb-t", "--nodes-per-txn", 2, *SMALL)
    assert p.returncode == 1
    assert "--nodes-per-txn 2" in p.stderr and "1 node" in p.stderr, p.stderr
    # refused before loading anything, and with no table
    r = s.client()
    assert r.dbsize() == 0
    r.close()
    assert "throughput" not in p.stdout


@pytest.mark.time_limit(60)
def test_load_populates_the_keyspace(make_server, tmp_path):
    s = make_server()
    out = tmp_path / "load.json"
    p = bench("--port", s.port, "load", "--records", 5000, "--value-size", 64, "--batch", 100,
              "--json", out)
    assert p.returncode == 0, p.stderr
    assert "keys/s" in p.stdout
    d = json.loads(out.read_text())
    assert d["keys"] == 5000 and d["operations"] == 50 and d["unit"] == "mset"
    r = s.client()
    assert r.dbsize() == 5000
    assert r.strlen("user0000004999") == 64 and r.exists("user0000005000") == 0
    r.close()


@pytest.mark.time_limit(90)
def test_compare_alternates_and_reports_ratios(make_server, tmp_path):
    a = make_server(name="a")
    b = make_server(name="b")
    out = tmp_path / "cmp.json"
    p = bench("--port", a.port, "ycsb-a", "--compare", "%s:%d" % (HOST, b.port),
              "--rounds", 2, "--json", out, *SMALL)
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())
    check_figures(d, txn=False)
    check_figures(d["compare"], txn=False)
    assert d["runs"] == 2 and d["compare"]["runs"] == 2
    assert d["ratio"]["throughput"] == pytest.approx(
        d["throughput"] / d["compare"]["throughput"], rel=1e-6)
    assert "A/B" in p.stdout
    # both rounds of both servers ran, in alternating order
    order = [ln.split()[0] + ln.split()[1] for ln in p.stderr.splitlines()
             if ln.startswith(("A r", "B r"))]
    firsts = []
    for tag in order:
        if not firsts or firsts[-1] != tag:
            firsts.append(tag)
    assert firsts[:4] == ["Ar1", "Br1", "Br2", "Ar2"], firsts
    for s in (a, b):
        r = s.client()
        assert r.strlen("user0000001999") == 100
        r.close()


@pytest.mark.time_limit(60)
def test_operations_mode_counts_exactly(make_server, tmp_path):
    s = make_server()
    out = tmp_path / "n.json"
    p = bench("--port", s.port, "ycsb-b", "-n", 3000, "--warmup", 0, "--json", out,
              "--records", 2000, "--value-size", 100, "--pipeline", 4)
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())
    assert d["operations"] == 3000 and d["latency_us"]["count"] == 3000
    assert d["mix"]["reads"] + d["mix"]["updates"] == 3000
    assert d["mix"]["updates"] > 0


@pytest.mark.time_limit(90)
def test_core_workloads_run_without_errors(make_server, tmp_path):
    s = make_server()
    for w in ("ycsb-c", "ycsb-d", "ycsb-e", "ycsb-f"):
        out = tmp_path / ("%s.json" % w)
        p = bench("--port", s.port, w, "--json", out, "--duration", 0.5, "--warmup", 0.2,
                  "--records", 2000, "--value-size", 100, "--quiet")
        assert p.returncode == 0, (w, p.stderr)
        d = json.loads(out.read_text())
        assert d["errors"] == 0, (w, d["first_error"])
        mix = d["mix"]
        if w == "ycsb-c":
            assert mix["updates"] == mix["inserts"] == 0 and mix["reads"] > 0
        elif w == "ycsb-d":
            assert mix["reads"] > 0 and mix["inserts"] > 0
        elif w == "ycsb-e":
            assert mix["scans"] > 0 and mix["inserts"] > 0
        else:
            assert mix["reads"] > 0 and mix["read_modify_writes"] > 0
    r = s.client()
    assert r.dbsize() > 2000  # ycsb-d and ycsb-e inserted new records
    r.close()


@pytest.mark.rckv_only
@pytest.mark.time_limit(120)
def test_sweep_writes_lines_and_plot_draws_them(make_server, tmp_path):
    s = make_server()
    out = tmp_path / "sweep.jsonl"
    p = bench("--port", s.port, "ycsb-t", "--nodes-per-txn", 1, "--json", out,
              "--sweep", "cc=nowait,silo", "--sweep", "zipf=0,0.9",
              "--records", 2000, "--value-size", 100, "--warmup", 0.2, "--duration", 0.5,
              "--quiet", timeout=90)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert [(d["sweep"]["cc"], d["sweep"]["zipf"]) for d in lines] == [
        ("nowait", "0"), ("nowait", "0.9"), ("silo", "0"), ("silo", "0.9")]
    for d in lines:
        assert d["protocol"] == d["sweep"]["cc"] == d["target"]["cc"] == d["config"]["cc"]
        assert d["config"]["zipf"] == float(d["sweep"]["zipf"])
        check_figures(d)
    if not shutil.which("gnuplot"):
        pytest.skip("gnuplot not installed")
    prefix = tmp_path / "charts" / "zipf"
    q = rckvtest.run(["/usr/bin/python3", os.path.join(REPO, "bench", "plot"), str(out),
                      "--out", str(prefix)], timeout=60)
    assert q.returncode == 0, q.stderr
    for kind in ("throughput", "aborts"):
        for ext in ("png", "svg"):
            f = tmp_path / "charts" / ("zipf-%s.%s" % (kind, ext))
            assert f.stat().st_size > 1000, f
    data = (tmp_path / "charts" / "zipf.dat").read_text()
    assert "# nowait" in data and "# silo" in data


@pytest.mark.rckv_only
@pytest.mark.time_limit(90)
def test_stage_sweep_reports_the_breakdown_and_ranks_the_hybrids(make_server, tmp_path):
    """--sweep cc-stages with RCC's bit codes: each point runs with its
    stages (CONFIG SET cc-stages), its JSON line carries the stage
    breakdown (the lock stage by RPC sends RPCs and no verb there; pure
    one-sided sends no RPC), and the table ends with the points ranked by
    throughput against both pure modes."""
    s = make_server(opts={"cc": "nowait"})
    out = tmp_path / "stages.jsonl"
    p = bench("--port", s.port, "ycsb-t", "--nodes-per-txn", 1, "--json", out,
              "--sweep", "cc-stages=000000,010000,111111", "--records", 2000,
              "--value-size", 100, "--warmup", 0.2, "--duration", 0.5, "--quiet", timeout=90)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert [d["sweep"]["cc-stages"] for d in lines] == ["000000", "010000", "111111"]
    assert [d["cc_stages"] for d in lines] == ["onesided", "lock=rpc", "rpc"]
    one, lock, rpc = (d["stages"] for d in lines)
    assert set(one) == {"read", "lock", "validate", "log", "commit", "release"}
    assert all(v["rpcs_per_txn"] == 0 for v in one.values()), one
    assert one["lock"]["verbs_per_txn"] > 0 and one["lock"]["usec_per_txn"] > 0
    assert lock["lock"]["verbs_per_txn"] == 0 and lock["lock"]["rpcs_per_txn"] > 0, lock
    assert all(v["rpcs_per_txn"] == 0 for k, v in lock.items() if k != "lock"), lock
    assert all(v["verbs_per_txn"] == 0 for v in rpc.values()), rpc
    assert rpc["read"]["rpcs_per_txn"] > 0 and lines[2]["rpcs_per_txn"] > 0
    for d in lines[:2]:  # pure RPC has no verbs per txn, only RPCs
        check_figures(d)
    ranked = p.stdout.split("== cc-stages ranked by throughput")[1].splitlines()
    rows = [ln.split() for ln in ranked if ln.strip()[:1].isdigit()]
    assert sorted(r[1] for r in rows) == ["000000", "010000", "111111"], ranked
    assert [int(r[0]) for r in rows] == [1, 2, 3]
    tput = [float(r[2]) for r in rows]
    assert tput == sorted(tput, reverse=True)
    for r in rows:  # each against the pure modes: 0% against itself
        if r[1] == "000000":
            assert r[4] == "+0.0%"
        if r[1] == "111111":
            assert r[5] == "+0.0%"
    # a list the server refuses fails the run with its reason
    q = bench("--port", s.port, "ycsb-t", "--nodes-per-txn", 1, "--cc-stages", "fetch=rpc",
              "--records", 2000, "--duration", 0.2, "--quiet")
    assert q.returncode == 1 and "bad cc-stages item 'fetch=rpc'" in q.stderr, q.stderr


@pytest.mark.rckv_only
@pytest.mark.time_limit(60)
def test_cluster_file_and_slot_map(make_server, tmp_path):
    s = make_server()
    conf = tmp_path / "one.conf"
    conf.write_text("# a one-node cluster\ncluster-node 1 %s:%d shm\nfabric shm\n"
                    % (HOST, s.port))
    out = tmp_path / "c.json"
    p = bench("--cluster", conf, "ycsb-t", "--nodes-per-txn", 1, "--json", out, *SMALL)
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())
    assert d["config"]["cluster"] == str(conf) and d["target"]["nodes"] == 1
    check_figures(d)
    # a map of one node still refuses two nodes per transaction
    p = bench("--cluster", conf, "ycsb-t", "--nodes-per-txn", 2, *SMALL)
    assert p.returncode == 1 and "--nodes-per-txn 2" in p.stderr
    # a malformed cluster file names its line
    conf.write_text("cluster-node 1 %s:%d shm\ncluster-node 2 nowhere\n" % (HOST, s.port))
    p = bench("--cluster", conf, "ycsb-t", *SMALL)
    assert p.returncode == 1 and "one.conf:2:" in p.stderr, p.stderr


@pytest.mark.time_limit(60)
def test_bank_keeps_its_total_and_says_when_it_does_not(make_server, tmp_path):
    """bank: transfers (MULTI, DECRBY, INCRBY, EXEC) between accounts
    loaded with 1000 each; the total is summed before and after the run.
    A client that adds money to an account meanwhile makes the run fail."""
    s = make_server()
    out = tmp_path / "b.json"
    small = [a for a in SMALL if a not in ("--value-size", 100)]
    p = bench("--port", s.port, "bank", "--nodes-per-txn", 1, "--json", out, *small)
    assert p.returncode == 0, p.stderr
    assert "the 2000 accounts hold 2000000 before and 2000000 after\n" in p.stdout, p.stdout
    d = json.loads(out.read_text())
    assert d["config"]["workload"] == "bank" and d["unit"] == "txn"
    assert d["config"]["ops"] == 2 and d["config"]["value_size"] == 4
    check_figures(d)
    with s.client() as c:
        balances = [int(v) for v in c.mget(["user%010d" % i for i in range(2000)])]
    assert sum(balances) == 2000000 and any(b != 1000 for b in balances)

    import threading
    done = threading.Event()

    def thief():
        with s.client() as c:
            while not done.is_set():
                c.incrby("user0000000000", 1)
    t = threading.Thread(target=thief)
    t.start()
    try:
        p = bench("--port", s.port, "bank", "--nodes-per-txn", 1, *small)
    finally:
        done.set()
        t.join()
    assert p.returncode == 1, p.stdout
    assert "MONEY CREATED OR LOST" in p.stdout and "the bank's total changed" in p.stderr


def test_bad_command_lines_exit_2():
    for args in (["ycsb-q"], [], ["ycsb-t", "--zipf", "1.5"], ["ycsb-t", "--nope"],
                 ["ycsb-t", "--sweep", "records=1,2"], ["bank", "--ops", "3"],
                 ["ycsb-t", "--sweep", "cc-stages=0101"], ["ycsb-t", "--cc-stages", "12"],
                 ["bank", "--value-size", "8"], ["bank", "--sweep", "write-ratio=0.1,0.2"],
                 ["tpcc", "--warehouses", "0"], ["tpcc", "--items", "10"],
                 ["smallbank", "--hot-pct", "101"], ["tatp", "--subscribers", "0"]):
        p = bench(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert p.stderr.startswith("rckv-bench: "), p.stderr
    p = bench("--help")
    assert p.returncode == 0 and "ycsb-t" in p.stdout


def test_unreachable_server_fails_clearly():
    port = rckvtest.free_port()
    p = bench("--port", port, "ycsb-a", "--timeout", 2000)
    assert p.returncode == 1
    assert str(port) in p.stderr and "rckv-bench:" in p.stderr
