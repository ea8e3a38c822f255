"""Transactions of any size (st.h, "the undo log": records that do not fit
a transaction's undo log slot continue in extents taken from the node's
free memory).

redis-py's default pipeline is a MULTI/EXEC, so a user loading data with
`p = r.pipeline(); 100,000 x p.set(...); p.execute()` sends one
transaction of 100,000 SETs. It used to be refused ("it changes more data
on one node than an undo log slot holds") past about 1,000 SETs of 100
bytes on a 512mb node.

- 100,000 SETs of 100 bytes commit through redis-py's default pipeline on
  one node and on a 3-node shm cluster; so does the same pipeline again
  over the keys it wrote, whose records now carry the old values;
- the extents are given back: on a 64mb node, transactions whose records
  need more than a third of its memory each commit 12 times in a row;
- a power cut (power-sim) in the middle of such a transaction's commit,
  at each of the persists it makes, leaves all of it or none; one after
  its reply leaves all of it; so does kill -9 during such a pipeline.
"""

import random
import threading
import time

import pytest

import rckvtest
from cluster import make_cluster  # noqa: F401 (fixture)

pytestmark = pytest.mark.rckv_only

VALUE = "x" * 100


def pipeline_sets(r, keys, value):
    """One MULTI/EXEC of a SET per key, as redis-py's default pipeline."""
    p = r.pipeline()  # transaction=True: MULTI ... EXEC
    for k in keys:
        p.set(k, value)
    return p.execute()


def values_of(r, keys, chunk=5000):
    out = []
    for i in range(0, len(keys), chunk):
        out += r.mget(keys[i:i + chunk])
    return out


@pytest.mark.time_limit(120)
@pytest.mark.parametrize("persistence", [pytest.param("process", marks=pytest.mark.long), "power",
                                         pytest.param("power-everysec", marks=pytest.mark.long)])
def test_pipeline_of_100000_sets_commits_on_one_node(make_server, persistence):
    """In every persistence mode (power's write-ahead log takes the whole
    transaction as one record of tens of MB), and it is all there after a
    kill -9 once acknowledged."""
    s = make_server(opts={"memory": "512mb", "persistence": persistence})
    r = s.client()
    keys = ["big:%d" % i for i in range(100000)]
    assert pipeline_sets(r, keys, VALUE) == [True] * len(keys)
    assert r.dbsize() == len(keys)
    # Again over the same keys: each record now holds a 100-byte old value.
    assert pipeline_sets(r, keys, "y" * 100) == [True] * len(keys)
    s.kill9()
    s.start()
    r = s.client()
    assert r.dbsize() == len(keys)
    assert set(values_of(r, keys)) == {b"y" * 100}


@pytest.mark.time_limit(180)
@pytest.mark.parametrize("persistence", [pytest.param("process", marks=pytest.mark.long), "power"])
def test_pipeline_of_100000_sets_commits_on_shm3(make_cluster, persistence):
    """Under power, each node of the cluster logs what the transaction
    wrote there, through its journal ring (README "Durability"): the
    notes of one transaction outgrow the 32 MB ring, and writers wait for
    the node's log to drain it."""
    cl = make_cluster("shm", opts={"memory": "256mb", "persistence": persistence})
    r = cl.client(1)
    keys = ["big:%d" % i for i in range(100000)]
    assert pipeline_sets(r, keys, VALUE) == [True] * len(keys)
    assert pipeline_sets(r, keys, "z" * 100) == [True] * len(keys)
    for node in (1, 2, 3):  # every node's share, read through any node
        other = cl.client(node)
        assert set(values_of(other, keys[node::7])) == {b"z" * 100}
    assert sum(cl.client(i).dbsize() for i in (1, 2, 3)) in (len(keys), 3 * len(keys))


@pytest.mark.time_limit(120)
def test_extents_are_given_back(make_server):
    """On a 64mb node (32 KB undo log slots) 20,000 overwrites of 100
    bytes log 3.7 MB each time; leaked, twelve of them would need 44 MB
    more than the node has after its keys."""
    s = make_server(opts={"memory": "64mb"})
    r = s.client()
    keys = ["ext:%d" % i for i in range(20000)]
    for n in range(12):
        assert pipeline_sets(r, keys, ("%02d" % n) * 50) == [True] * len(keys), n
    assert set(values_of(r, keys)) == {b"11" * 50}


def persists(c):
    info = c.call("INFO", "persistence").decode()
    return int(info.split("power_sim_persists:")[1].split("\r\n")[0])


@pytest.mark.time_limit(240)
@pytest.mark.parametrize("path", ["log", "pages"])
def test_power_cut_in_the_middle_of_a_big_commit_leaves_all_or_none(make_server, path):
    """persistence power with power-sim: 20,000 keys hold "a"; one
    transaction sets them all to "b". A first run counts the persists a
    start makes and the persists that transaction makes; then the power is
    cut (power-sim-crash-after) at each of the latter, and at the first
    persist after its reply, each time from the same clean state. After
    each restart the keys hold all "a" (cut before the commit point: rolled
    back from the records, most of them in extents) or all "b" (after it),
    never a mix; after the reply, all "b". With the write-ahead log the
    whole transaction is one record, one persist (a cut there tears it);
    with page flushes, at least three."""
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    print("seed", seed)
    opts = {"persistence": "power", "power-sim": "yes", "testing": "yes", "memory": "64mb",
            "power-log": "yes" if path == "log" else "no"}
    s = make_server(opts=opts)
    keys = ["pc:%d" % i for i in range(20000)]
    r = s.client()
    assert pipeline_sets(r, keys, "a") == [True] * len(keys)
    assert s.stop() == 0, s.log_tail()
    s.start()
    with s.raw() as c:
        at_start = persists(c)
    r = s.client()
    assert pipeline_sets(r, keys, "b") == [True] * len(keys)
    with s.raw() as c:
        span = persists(c) - at_start
    assert pipeline_sets(s.client(), keys, "a") == [True] * len(keys)
    assert s.stop() == 0, s.log_tail()
    print("a start makes %d persists, the transaction %d" % (at_start, span))
    # Pages: records, installs, commit point, at least a round each. Log:
    # one record for all of it.
    assert span >= (3 if path == "pages" else 1), span

    # Every persist of the transaction, and the first one after its reply
    # (a later SET's): the last must find it all there.
    points = list(range(1, span + 1))
    if len(points) > 6:
        points = sorted(rng.sample(points, 6))
    outcomes = []
    for k in points + [span + 1]:
        s.opts.update({"power-sim-crash-after": at_start + k})
        s.start()
        try:
            pipeline_sets(s.client(), keys, "b")
            s.client().set("after", "1")
        except Exception:  # the server died under it: no reply
            pass
        assert s.wait_exit(), "the cut at persist %d was not reached" % (at_start + k)
        s.opts.update({"power-sim-crash-after": 0})
        s.start()
        got = set(values_of(s.client(), keys))
        assert got in ({b"a"}, {b"b"}), (k, sorted(got)[:4])
        outcomes.append((k, "all" if got == {b"b"} else "none"))
        if got == {b"b"}:  # back to the clean state
            assert pipeline_sets(s.client(), keys, "a") == [True] * len(keys)
        assert s.stop() == 0, s.log_tail()
    print("cuts at the transaction's persists: %s" % outcomes)
    assert outcomes[-1] == (span + 1, "all"), outcomes  # acknowledged: it is there


@pytest.mark.time_limit(180)
def test_kill9_during_a_big_commit_leaves_all_or_none(make_server):
    """persistence process: 50,000 keys hold "a"; a pipeline sets them all
    to "b" while the server is killed with -9 at a random moment of the
    later two thirds of the time it takes (three times). After each
    restart: all "a" or all "b", and all "b" if the reply came. (The
    commit's own window is short next to the client's sending and the
    fetch, so most kills land before or after it; the power-cut test
    above cuts inside it at each persist.)"""
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    print("seed", seed)
    s = make_server(opts={"memory": "128mb"})
    keys = ["k9:%d" % i for i in range(50000)]
    assert pipeline_sets(s.client(), keys, "a") == [True] * len(keys)
    t0 = time.monotonic()
    assert pipeline_sets(s.client(), keys, "a") == [True] * len(keys)
    took = time.monotonic() - t0  # the commit is its last part: aim there
    outcomes = []
    for _ in range(3):
        done = []

        def writer():
            try:
                done.append(pipeline_sets(s.client(), keys, "b"))
            except Exception:  # killed under it
                pass

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        time.sleep(rng.uniform(0.3, 1.0) * took)
        s.kill9()
        t.join(timeout=30)
        s.start()
        got = set(values_of(s.client(), keys))
        assert got in ({b"a"}, {b"b"}), sorted(got)[:4]
        if done:
            assert got == {b"b"}  # acknowledged: it is there
        undone = s.client().info("persistence")["recovered_records_undone"]
        outcomes.append(("all" if got == {b"b"} else "none", undone))
        if got == {b"b"}:
            assert pipeline_sets(s.client(), keys, "a") == [True] * len(keys)
    print("kills (outcome, records undone): %s" % outcomes)


@pytest.mark.time_limit(240)
def test_every_protocol_commits_a_big_pipeline(make_server):
    """20,000 SETs of 100 bytes in one pipeline on a 64mb node (32 KB undo
    log slots: most records in extents), under every protocol the server
    offers in turn (and nowait's shared mode), switched online; each time
    every key reads back the value just written."""
    s = make_server(opts={"memory": "64mb"})
    r = s.client()
    with s.raw() as c:
        err = c.call("CONFIG", "SET", "cc", "no-such-protocol")
    names = str(err).split("one of:")[1].strip().rstrip(")").replace(",", " ").split()
    assert "silo" in names and len(names) >= 10, names
    keys = ["pp:%d" % i for i in range(20000)]
    for p in names + ["nowait-shared"]:
        if p == "nowait-shared":
            assert r.execute_command("CONFIG", "SET", "cc", "nowait", "cc-lock-mode", "shared")
        else:
            assert r.config_set("cc", p)
        value = (p * 100)[:100]
        assert pipeline_sets(r, keys, value) == [True] * len(keys), p
        assert set(values_of(r, keys)) == {value.encode()}, p
