"""rckv-bench's OLTP workloads (smallbank, tpcc, tatp: Lua scripts run with
EVALSHA) end to end, and their consistency checks.

On a 3-node cluster, on the shm and the tcp fabric: a SmallBank run (the
sum of the balances against the deltas the committed transactions
replied) and a TPC-C run over 3 warehouses, one per node, so that 1% of
NewOrder lines and 15% of Payments cross nodes (TPC-C's conditions 1-5
and the Payments against W_YTD), each a couple of seconds.

On one server (rckv, or redis-server with RCKV_TEST_TARGET=redis: the
scripts are plain Redis Lua): each workload runs and passes, and each
check is shown able to fail: a client that adds money meanwhile fails
SmallBank's, a deleted order line fails TPC-C's condition 4, and a server
that dies mid-run makes the check say it is inconclusive.

The runs are small (a few hundred accounts; 100 to 500 items and 10 to 30
customers per district) and short: these tests check the checks, not performance.
"""

import json
import os
import threading
import time

import pytest

import rckvtest
from cluster import cluster, fabric, track_cluster  # noqa: F401 (fixtures)
from rckvtest import REPO

SHORT = ["--warmup", 0.2, "--duration", 1, "--threads", 1, "--clients", 6, "--quiet",
         "--seed", 5]
# on a cluster, shorter: 3 nodes of 2 workers share this machine's cores
SHORT_CLUSTER = ["--warmup", 0.2, "--duration", 1, "--threads", 1, "--clients", 6, "--quiet",
                 "--seed", 5]
TPCC_SMALL = ["--items", 500, "--customers", 30]
# smaller on a cluster: the tcp fabric loads about 2,000 keys a second
TPCC_CLUSTER = ["--items", 100, "--customers", 10]


def bench_binary():
    build = os.environ.get("RCKV_BUILD") or os.path.join(REPO, "build")
    path = os.path.join(build, "rckv-bench")
    if not os.access(path, os.X_OK):
        pytest.skip("rckv-bench not built (%s)" % path)
    return path


def bench(*args, timeout=60):
    return rckvtest.run([bench_binary()] + [str(a) for a in args], timeout=timeout)


def passed(p, workload):
    assert p.returncode == 0, p.stdout + p.stderr
    assert "%s: " % workload in p.stdout
    assert "consistency check passed" in p.stdout, p.stdout
    assert "FAILED" not in p.stdout, p.stdout


def check_json(path, types):
    """Every type ran and committed; those that cannot roll themselves back
    got no error. (Whether a user abort is told from an error is
    test_user_aborts_are_not_errors' business.)"""
    d = json.loads(path.read_text())
    tx = d["transactions"]
    assert list(tx) == types
    for name in types:
        assert tx[name]["txns"] > 0, (name, tx)
        assert tx[name]["commits"] > 0, (name, tx)
        if name not in USER_ABORTS:
            assert tx[name]["errors"] == 0, (name, tx[name]["first_error"])
    assert d["unit"] == "txn" and d["throughput"] > 0
    return d


SMALLBANK_TYPES = ["Amalgamate", "Balance", "DepositChecking", "SendPayment",
                   "TransactSavings", "WriteCheck"]
TPCC_TYPES = ["NewOrder", "Payment", "OrderStatus", "Delivery", "StockLevel"]
TATP_TYPES = ["GetSubscriberData", "GetNewDestination", "GetAccessData",
              "UpdateSubscriberData", "UpdateLocation", "InsertCallForwarding",
              "DeleteCallForwarding"]
# the types whose script may reply USERABORT (oltp.h)
USER_ABORTS = {"SendPayment", "NewOrder", "UpdateSubscriberData", "InsertCallForwarding",
               "DeleteCallForwarding"}


# --- a 3-node cluster, shm and tcp --------------------------------------------


@pytest.mark.rckv_only
@pytest.mark.time_limit(60)
def test_smallbank_on_three_nodes(cluster, tmp_path):
    out = tmp_path / "sb.json"
    p = bench("--cluster", cluster.conf, "smallbank", "--accounts", 600, "--json", out,
              *SHORT_CLUSTER)
    passed(p, "smallbank")
    d = check_json(out, SMALLBANK_TYPES)
    assert d["target"]["nodes"] == 3
    # money moved: the check compared something
    assert d["delta"] != 0


@pytest.mark.rckv_only
@pytest.mark.time_limit(60)
def test_tpcc_on_three_nodes(cluster, tmp_path):
    out = tmp_path / "tpcc.json"
    p = bench("--cluster", cluster.conf, "tpcc", "--warehouses", 3, "--json", out,
              *TPCC_CLUSTER, *SHORT_CLUSTER)
    passed(p, "tpcc")
    assert "conditions 1-5 over 3 warehouses and 30 districts: 0 failures" in p.stdout
    check_json(out, TPCC_TYPES)
    # one warehouse per node: the remote lines and payments cross nodes
    with cluster.raw(1) as c:
        nodes = set()
        for w in (1, 2, 3):
            c.send(rckvtest.encode("RCKV", "KEYNODE", "{w%d}:w" % w))
            nodes.add(c.read())
    assert len(nodes) == 3, nodes


# --- one server: rckv or redis-server ------------------------------------------


@pytest.mark.time_limit(60)
def test_each_workload_passes_its_check_on_one_server(make_server, tmp_path):
    s, s2 = make_server(), make_server()
    for workload, extra, types in (
            ("smallbank", ["--accounts", 300], SMALLBANK_TYPES),
            ("tpcc", TPCC_SMALL, TPCC_TYPES),
            ("tatp", ["--subscribers", 300], TATP_TYPES)):
        out = tmp_path / (workload + ".json")
        # smallbank side by side with a second server (--compare): each
        # server's check counts its own transactions
        compare = (["--compare", "127.0.0.1:%d" % s2.port, "--rounds", 1]
                   if workload == "smallbank" else [])
        p = bench("--port", s.port, workload, "--json", out, *compare, *extra, *SHORT)
        passed(p, workload)
        d = check_json(out, types)
        if compare:
            assert p.stdout.count("consistency check passed") == 2, p.stdout
            assert "per transaction (B):" in p.stdout
            b = d["compare"]
            assert list(b["transactions"]) == types and b["operations"] > 0


@pytest.mark.time_limit(60)
def test_user_aborts_are_not_errors(make_server, tmp_path):
    """A script's redis.error_reply('USERABORT ...') (SendPayment without
    funds, TATP's missing rows) reaches the client as -USERABORT, as Redis
    7 sends it, so rckv-bench counts a user abort and no error."""
    s = make_server()
    for workload, extra in (("smallbank", ["--accounts", 300]),
                            ("tatp", ["--subscribers", 300])):
        out = tmp_path / (workload + ".json")
        p = bench("--port", s.port, workload, "--json", out, *extra, *SHORT)
        passed(p, workload)
        d = json.loads(out.read_text())
        assert d["errors"] == 0, d["first_error"]
        assert d["user_aborts"] > 0
        for name, t in d["transactions"].items():
            assert t["errors"] == 0, (name, t["first_error"])
            assert (t["user_aborts"] > 0) == (name in USER_ABORTS), (name, t)


@pytest.mark.time_limit(60)
def test_smallbank_check_fails_when_money_appears(make_server):
    s = make_server()
    args = ["--port", s.port, "smallbank", "--accounts", 300] + SHORT
    p = bench(*args)
    passed(p, "smallbank")
    done = threading.Event()

    def thief():
        with s.client() as c:
            while not done.is_set():
                c.incrby("{a0}:c", 1)
                time.sleep(0.01)
    t = threading.Thread(target=thief)
    t.start()
    try:
        p = bench(*args)
    finally:
        done.set()
        t.join()
    assert p.returncode == 1, p.stdout
    assert "MONEY CREATED OR LOST" in p.stdout and "consistency check FAILED" in p.stdout
    assert "smallbank consistency check failed" in p.stderr


@pytest.mark.time_limit(60)
def test_tpcc_check_fails_on_a_lost_order_line(make_server):
    s = make_server()
    args = ["--port", s.port, "tpcc"] + TPCC_SMALL + SHORT
    passed(bench(*args), "tpcc")
    # the database stays loaded (its marker matches): lose one line of an
    # initial order, then run again
    with s.client() as c:
        assert c.delete("{w1}:ol:4:1:1") == 1
    p = bench(*args)
    assert p.returncode == 1, p.stdout
    assert "condition 4 FAILED at {w1} district 4" in p.stdout, p.stdout
    assert "consistency check FAILED" in p.stdout


@pytest.mark.time_limit(60)
def test_a_lost_server_makes_the_check_inconclusive(make_server):
    s = make_server()
    args = ["--port", s.port, "smallbank", "--accounts", 300, "--warmup", 0, "--duration", 20,
            "--quiet", "--timeout", 2000]
    killer = threading.Timer(1.5, s.kill9)
    killer.start()
    try:
        p = bench(*args)
    finally:
        killer.cancel()
    assert p.returncode == 1, p.stdout
    assert "consistency check INCONCLUSIVE" in p.stdout, p.stdout + p.stderr
    assert "passed" not in p.stdout
