"""calvin (cc/protocols/calvin.c, cc/calvin.c): deterministic transactions
in epochs, on one node and on 3-node clusters over shm and tcp.

What a user would notice, each asserted:
- `CONFIG SET cc calvin` switches online and back; calvin-epoch-us is a
  mutable option with a range;
- no transaction aborts for a conflict: many clients incrementing the same
  keys across nodes lose no increment, and INFO counts no abort at all;
- every node queues the transactions it shares with another in the same
  order (INFO calvin_order_digest, and the calvin-trace log lines);
- WATCH fails EXEC when a watched key changed, as in Redis;
- a script that reaches keys it did not declare runs (OLLP: the attempt
  that found the key aborts with cause ollp and the next declares it),
  even when its keys depend on values other clients change meanwhile;
- an idle calvin cluster uses no CPU and closes no epoch;
- with a node killed, the other nodes serve what does not touch it, and a
  transaction that does gets an error, never a hang.

The serializability checker runs calvin like every protocol
(tests/checker/test_serializable.py: list-append, bank, kill -9, switches).
"""

import os
import re
import threading
import time

import pytest
import redis

from cluster import fabric, make_cluster, track_cluster  # noqa: F401 (fixtures)

pytestmark = pytest.mark.rckv_only

CPU_IDLE_MAX = 0.06  # seconds of CPU for 3 nodes in 3 s (test_cluster.py's bound)


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def calvin_info(c):
    info = c.info("cc")
    return {k: v for k, v in info.items() if k.startswith("calvin_") or k.startswith("cc_aborts")}


def keys_on_each(cl, prefix):
    return {i: cl.key_on(i, "%s%d:" % (prefix, i)) for i in (1, 2, 3)}


# ------------------------------------------------------------ one node

def test_switch_online_and_options(make_server, key):
    s = make_server(opts={"cc": "silo"})
    with s.client() as c:
        c.set(key + "a", 1)
        assert c.config_set("cc", "calvin")
        assert c.config_get("cc") == {"cc": "calvin"}
        assert c.incr(key + "a") == 2
        p = c.pipeline(transaction=True)
        p.incr(key + "a")
        p.set(key + "b", "x")
        p.get(key + "b")
        assert p.execute() == [3, True, b"x"]
        assert c.info("cc")["calvin_txns_sequenced"] >= 2
        assert c.config_get("calvin-epoch-us") == {"calvin-epoch-us": "5000"}
        assert c.config_set("calvin-epoch-us", 1000)
        assert c.config_get("calvin-epoch-us") == {"calvin-epoch-us": "1000"}
        for bad in ("0", "50", "1000001", "abc"):
            with pytest.raises(redis.ResponseError, match="calvin-epoch-us"):
                c.config_set("calvin-epoch-us", bad)
        assert c.incr(key + "a") == 4
        assert c.config_set("cc", "silo")
        assert c.incr(key + "a") == 5


def test_single_node_no_conflict_aborts(make_server, key):
    """16 clients, every transaction increments the same 3 keys: under
    calvin none aborts (silo or nowait abort many here), and none is lost."""
    s = make_server(opts={"cc": "calvin", "calvin-epoch-us": 1000})
    keys = [key + x for x in "abc"]
    n, per = 16, 40

    def work():
        with s.client() as c:
            for _ in range(per):
                p = c.pipeline(transaction=True)
                for k in keys:
                    p.incr(k)
                p.execute()

    th = [threading.Thread(target=work) for _ in range(n)]
    [t.start() for t in th]
    [t.join() for t in th]
    with s.client() as c:
        assert [int(v) for v in c.mget(keys)] == [n * per] * 3
        info = c.info("cc")
        assert info["cc_aborts"] == 0, calvin_info(c)
        assert info["calvin_lock_waits"] > 0  # they did queue behind each other


def test_ollp_scripts(make_server, key):
    """A script increments a key whose name it reads from another key, not
    declared; meanwhile other clients change that name. Every increment
    lands on the key named at the script's own moment: the total over all
    candidates is the number of scripts."""
    s = make_server(opts={"cc": "calvin", "calvin-epoch-us": 500})
    script = ("local t = redis.call('GET', KEYS[1]) "
              "return redis.call('INCR', t)")
    ptr = key + "ptr"
    cands = [key + "c%d" % i for i in range(3)]
    with s.client() as c:
        c.set(ptr, cands[0])
    stop = threading.Event()

    def mover():
        with s.client() as c:
            i = 0
            while not stop.is_set():
                i += 1
                c.set(ptr, cands[i % 3])

    def runner(out):
        with s.client() as c:
            for _ in range(30):
                out.append(c.eval(script, 1, ptr))

    m = threading.Thread(target=mover)
    m.start()
    outs = [[] for _ in range(4)]
    th = [threading.Thread(target=runner, args=(o,)) for o in outs]
    [t.start() for t in th]
    [t.join() for t in th]
    stop.set()
    m.join()
    with s.client() as c:
        total = sum(int(c.get(k) or 0) for k in cands)
        assert total == 4 * 30
        info = c.info("cc")
        assert info["cc_aborts_ollp"] >= 1  # the first run of each found its key
        conflict = {k: v for k, v in info.items()
                    if k.startswith("cc_aborts_") and k != "cc_aborts_ollp" and v}
        assert conflict == {}


# ------------------------------------------------------------ clusters

@pytest.fixture
def calvin3(make_cluster, fabric):
    return make_cluster(fabric, opts={"cc": "calvin", "calvin-epoch-us": 2000})


def test_cluster_contention_no_aborts(calvin3, key):
    """Clients on every node increment one key per node in each MULTI:
    every increment lands and no node counts an abort."""
    cl = calvin3
    k = keys_on_each(cl, key)
    n, per = 9, 25

    def work(i):
        with cl.client(1 + i % 3) as c:
            for _ in range(per):
                p = c.pipeline(transaction=True)
                for j in (1, 2, 3):
                    p.incr(k[j])
                p.execute()

    th = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    [t.start() for t in th]
    [t.join() for t in th]
    with cl.client(2) as c:
        assert [int(v) for v in c.mget([k[1], k[2], k[3]])] == [n * per] * 3
    for i in (1, 2, 3):
        with cl.client(i) as c:
            info = c.info("cc")
            assert info["cc_aborts"] == 0, (i, calvin_info(c))


def test_cluster_same_order_everywhere(make_cluster, fabric, key):
    """Every transaction spans the three nodes, sent to all three at once:
    each node queues all of them, and in the same order, so their order
    digests are equal (a node that queued one more, or two swapped, would
    differ), and the calvin-trace lines of an epoch are identical. Then one
    transaction on node 1 alone: its digest moves and the others' do not,
    which shows the digest sees what a node queued."""
    cl = make_cluster(fabric, opts={"cc": "silo", "calvin-epoch-us": 2000,
                                    "calvin-trace": "yes"})
    k = keys_on_each(cl, key)
    with cl.client(1) as c:
        assert c.config_set("cc", "calvin")

    def work(i):
        with cl.client(1 + i % 3) as c:
            for j in range(20):
                p = c.pipeline(transaction=True)
                p.incr(k[1])
                p.set(k[2], "%d-%d" % (i, j))
                p.get(k[3])
                p.execute()

    th = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    [t.start() for t in th]
    [t.join() for t in th]
    infos = {}
    for i in (1, 2, 3):
        with cl.client(i) as c:
            infos[i] = c.info("cc")
    assert {infos[i]["calvin_txns_scheduled"] for i in (1, 2, 3)} == {120}
    assert len({infos[i]["calvin_order_digest"] for i in (1, 2, 3)}) == 1, infos
    # The trace: each epoch's order line, by epoch, the same on every node.
    orders = []
    for nd in cl.nodes:
        lines = re.findall(r"calvin: epoch (\d+) order ((?:\d+\.\d+ ?)+)", nd.log_text())
        orders.append({e: o.split() for e, o in lines})
    assert orders[0] and orders[0] == orders[1] == orders[2]
    with cl.client(1) as c:
        c.incr(k[1])
    after = {}
    for i in (1, 2, 3):
        with cl.client(i) as c:
            after[i] = c.info("cc")["calvin_order_digest"]
    assert after[1] != infos[1]["calvin_order_digest"]
    assert after[2] == infos[2]["calvin_order_digest"] == after[3]


def proto_line(c):
    return c.info("cc")["cc_proto_calvin"]


def test_cluster_value_forwarding(calvin3, key):
    """Value forwarding: a MULTI through node 1 on keys of nodes 2 and 3
    gets their values with the grants (each participant reads its own
    items and sends them), so its fetch stage has nothing left to read:
    INFO counts the items forwarded and adopted, and no fetch round trip.
    A key too long to forward (over 1 KiB) is fetched as before, and every
    value read and written is right either way."""
    cl = calvin3
    k = keys_on_each(cl, key)
    long2 = cl.key_on(2, key + "L" * 1500 + ":")
    with cl.client(2) as c:
        c.set(k[2], 100)
        c.set(long2, "far")
    with cl.client(1) as c:
        before = c.info("cc")
        for i in range(10):
            p = c.pipeline(transaction=True)
            p.incr(k[2])
            p.get(k[2])
            p.set(k[3], "v%d" % i)
            assert p.execute() == [101 + i, str(101 + i).encode(), True]
        after = c.info("cc")
        assert after["calvin_values_adopted"] - before["calvin_values_adopted"] == 20
        assert proto_line(c)["fetch_round_trips_per_txn"] == 0, proto_line(c)
        p = c.pipeline(transaction=True)
        p.incr(k[2])
        p.get(long2)
        p.set(k[3], "last")
        assert p.execute() == [111, b"far", True]
        assert c.info("cc")["calvin_values_adopted"] - after["calvin_values_adopted"] == 2
        assert proto_line(c)["fetch_round_trips_per_txn"] > 0
        assert c.get(k[3]) == b"last"
    for i in (2, 3):
        with cl.client(i) as c:
            assert c.info("cc")["calvin_values_forwarded"] >= 10
            assert c.info("cc")["cc_aborts"] == 0


def test_cluster_watch(calvin3, key):
    """WATCH of a key on another node: unchanged, EXEC runs; changed by
    another client (through a third node) in between, EXEC returns null."""
    cl = calvin3
    k = keys_on_each(cl, key)
    with cl.client(1) as a, cl.client(3) as b:
        a.set(k[2], "v0")
        p = a.pipeline(transaction=True)
        p.watch(k[2])
        assert p.get(k[2]) == b"v0"
        p.multi()
        p.set(k[3], "ran")
        assert p.execute() == [True]
        p = a.pipeline(transaction=True)
        p.watch(k[2])
        p.get(k[2])
        b.set(k[2], "changed")
        p.multi()
        p.set(k[3], "must-not-run")
        with pytest.raises(redis.WatchError):
            p.execute()
        assert a.get(k[3]) == b"ran"


def test_idle_cluster_sleeps(calvin3, key):
    """After a burst of cross-node transactions, the three idle nodes use
    under 2% of a core, and close no epoch while idle: an empty epoch costs
    nothing (DESIGN.md principle 6)."""
    cl = calvin3
    k = keys_on_each(cl, key)
    for i in (1, 2, 3):
        with cl.client(i) as c:
            for _ in range(20):
                p = c.pipeline(transaction=True)
                for j in (1, 2, 3):
                    p.incr(k[j])
                p.execute()
    time.sleep(0.3)
    epochs = []
    for i in (1, 2, 3):
        with cl.client(i) as c:
            epochs.append(c.info("cc")["calvin_epoch"])
    pids = [nd.proc.pid for nd in cl.nodes]
    before = sum(cpu_seconds(p) for p in pids)
    time.sleep(3)
    used = sum(cpu_seconds(p) for p in pids) - before
    assert used < CPU_IDLE_MAX, "3 idle calvin nodes used %.2f s of CPU in 3 s" % used
    for i in (1, 2, 3):
        with cl.client(i) as c:
            assert c.info("cc")["calvin_epoch"] == epochs[i - 1]


def test_node_killed(calvin3, key):
    """kill -9 of node 3 under load: transactions between nodes 1 and 2 go
    on (within seconds, not forever), one that touches node 3 gets an error,
    and once node 3 is back everything commits again."""
    cl = calvin3
    k = keys_on_each(cl, key)
    stop = threading.Event()
    errors = []

    def load(i):
        with cl.client(1 + i % 2, socket_timeout=20) as c:
            while not stop.is_set():
                p = c.pipeline(transaction=True)
                for j in (1, 2, 3):
                    p.incr(k[j])
                try:
                    p.execute()
                except redis.RedisError as e:
                    errors.append(e)
                except OSError as e:
                    errors.append(e)

    th = [threading.Thread(target=load, args=(i,)) for i in range(4)]
    [t.start() for t in th]
    time.sleep(1.0)
    cl.node(3).kill9()
    time.sleep(0.5)
    try:
        with cl.client(1, socket_timeout=20) as c:
            t0 = time.time()
            p = c.pipeline(transaction=True)
            p.incr(k[1])
            p.incr(k[2])
            p.execute()  # nodes 1 and 2 only: it commits
            with pytest.raises(redis.RedisError):
                p = c.pipeline(transaction=True)
                p.incr(k[1])
                p.incr(k[3])
                p.execute()
            assert time.time() - t0 < 15
    finally:
        stop.set()
        [t.join() for t in th]
    cl.node(3).start()
    with cl.client(2) as c:
        deadline = time.time() + 20
        while True:
            try:
                p = c.pipeline(transaction=True)
                for j in (1, 2, 3):
                    p.incr(k[j])
                p.execute()
                break
            except redis.RedisError:
                assert time.time() < deadline
                time.sleep(0.2)


def test_coordinator_killed(calvin3, key):
    """kill -9 of a node while it coordinates transactions on the other
    nodes' keys. Nodes 1 and 2 go on: a transaction between them on other
    keys commits at once. The keys node 3 had locked stay locked (its
    transactions' outcome is known only to its log) until it is back,
    as under every protocol; then they commit at once, and each of node
    3's transactions is on both keys or on neither."""
    cl = calvin3
    k = keys_on_each(cl, key)
    other = keys_on_each(cl, key + "other")
    stop = threading.Event()

    def load(node):
        with cl.client(node, socket_timeout=10) as c:
            while not stop.is_set():
                p = c.pipeline(transaction=True)
                p.incr(k[1])
                p.incr(k[2])
                try:
                    p.execute()
                except (redis.RedisError, OSError):
                    return  # its node died, or the error of a dead coordinator

    th = [threading.Thread(target=load, args=(3,)) for _ in range(6)]
    [t.start() for t in th]
    time.sleep(1.5)
    cl.node(3).kill9()
    stop.set()
    [t.join() for t in th]

    def both(via, keys, bound):
        incr_pair(cl, via, keys, bound)
    both(1, other, 3)
    both(2, other, 3)
    cl.node(3).start()
    deadline = time.time() + 20
    while True:  # node 3 settles its transactions as it comes back
        try:
            both(1, k, 30)
            break
        except redis.RedisError:
            assert time.time() < deadline
            time.sleep(0.2)
    both(2, k, 3)


def incr_pair(cl, via, keys, bound):
    """MULTI INCR keys[1] INCR keys[2] EXEC through node `via`, which
    commits within `bound` seconds and finds both equal."""
    with cl.client(via, socket_timeout=30) as c:
        t0 = time.time()
        p = c.pipeline(transaction=True)
        p.incr(keys[1])
        p.incr(keys[2])
        a, b = p.execute()
        assert a == b, (a, b)
        assert time.time() - t0 < bound


def test_initiator_killed_between_delivers(make_cluster, fabric, key):
    """kill -9 of a node while it closes an epoch, after its DELIVER
    reached node 1 and before it reached node 2 (DEBUG
    CALVIN-STALL-DELIVER holds the round there). Node 1 queues the epoch;
    node 2 closed it but never learns its counts, so it queues nothing
    after it. A transaction of node 1 between nodes 1 and 2, in a later
    epoch, has that epoch closed again for node 2 and commits at once,
    rather than wait for node 2's grant until txn-timeout (the CI failure
    of test_coordinator_killed[shm])."""
    cl = make_cluster(fabric, opts={"cc": "calvin", "calvin-epoch-us": 2000,
                                    "testing": "yes"})
    k = keys_on_each(cl, key)
    other = keys_on_each(cl, key + "other")
    with cl.client(3) as c:
        assert c.execute_command("DEBUG", "CALVIN-STALL-DELIVER") == b"OK"

    def stalled():  # node 3 initiates its epoch, and dies in the round
        with cl.client(3, socket_timeout=60) as c:
            p = c.pipeline(transaction=True)
            p.incr(k[1])
            p.incr(k[2])
            try:
                p.execute()
            except (redis.RedisError, OSError):
                pass

    th = threading.Thread(target=stalled)
    th.start()
    deadline = time.time() + 10
    while "delivered to node 1 only" not in cl.node(3).log_text():
        assert time.time() < deadline, "node 3 did not stall its round"
        time.sleep(0.05)
    cl.node(3).kill9()
    th.join()
    incr_pair(cl, 1, other, 3)
    incr_pair(cl, 2, other, 3)
    cl.node(3).start()
    deadline = time.time() + 20
    while True:  # node 3 comes back (it settles nothing: it acquired nothing)
        try:
            incr_pair(cl, 1, k, 30)
            break
        except redis.RedisError:
            assert time.time() < deadline
            time.sleep(0.2)
    incr_pair(cl, 2, k, 3)


def test_debug_calvin_stall_deliver_needs_testing(make_server):
    """The fault is refused without `testing yes`, and named clearly."""
    with make_server(opts={"cc": "calvin"}).client() as c:
        with pytest.raises(redis.ResponseError, match="needs 'testing yes'"):
            c.execute_command("DEBUG", "CALVIN-STALL-DELIVER")
