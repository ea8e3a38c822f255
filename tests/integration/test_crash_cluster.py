"""kill -9 of cluster nodes under the bank load (issue 7, crash atomicity).

A 3-node cluster on the shm fabric. 24 accounts spread over the nodes, six
clients spread over the nodes. Every transfer is one MULTI:
    DECRBY a x / INCRBY b x / SET receipt:<id> "a b x" / EXEC
where the receipt lives on whatever node its id hashes to, so most
transfers span two or three nodes. Meanwhile a killer kill -9s a random node
every 0.5 to 1 second and restarts it, 10 times (thousands of transfers
run between two kills: every kill lands among transfers in flight).

Each client keeps what it learned of every transfer: acknowledged (EXEC
replied with its array), failed (an error reply that says nothing was
written), or unknown (the link broke, or rckv replied "outcome unknown").
After every restart the sum of the balances, read in one transaction, is
the opening total. At the end:
  - every acknowledged transfer's receipt exists (nothing acknowledged is
    lost), and no failed transfer's receipt does;
  - every balance is exactly its opening balance plus the transfers whose
    receipts exist (nothing partial: a receipt without its two balance
    changes, or one balance change without the other, shows here).

The checker's view of the same kind of run (its bank and list-append
workloads with kill -9 on shm3/tcp3) is in tests/checker/test_serializable.py.
"""

import random
import threading
import time

import pytest
import redis

from cluster import make_cluster, track_cluster  # noqa: F401 (fixtures)

pytestmark = pytest.mark.rckv_only

ACCOUNTS = 24
BALANCE = 1000
CLIENTS = 6
KILLS = 10
SOCKET_TIMEOUT = 20.0


class Client(threading.Thread):
    def __init__(self, cid, cluster, names, stop):
        super().__init__(daemon=True)
        self.cid, self.cl, self.names, self.stop = cid, cluster, names, stop
        self.acked, self.failed, self.unknown = {}, {}, {}
        self.error = None

    def _connect(self, node_id):
        nd = self.cl.node(node_id)
        return redis.Redis(host="127.0.0.1", port=nd.port, socket_timeout=SOCKET_TIMEOUT,
                           socket_connect_timeout=2.0)

    def run(self):
        rnd = random.Random(self.cid)
        seq = 0
        conn = None
        node_id = 1 + self.cid % 3
        try:
            while not self.stop.is_set():
                if conn is None:
                    conn = self._connect(node_id)
                a, b = rnd.sample(self.names, 2)
                x = rnd.randint(1, 50)
                seq += 1
                tid = "%d:%d" % (self.cid, seq)
                p = conn.pipeline(transaction=True)
                p.decrby(a, x).incrby(b, x).set("receipt:" + tid, "%s %s %d" % (a, b, x))
                try:
                    p.execute()
                    self.acked[tid] = (a, b, x)
                except redis.ResponseError as e:
                    if "outcome unknown" in str(e):
                        self.unknown[tid] = (a, b, x)
                    else:
                        self.failed[tid] = (a, b, x)
                except (redis.ConnectionError, redis.TimeoutError):
                    self.unknown[tid] = (a, b, x)
                    conn = None
                    node_id = 1 + rnd.randrange(3)  # come back through any node
                    time.sleep(0.05)
        except Exception as e:  # a bug in the test must not pass silently
            self.error = repr(e)


def balances(cluster, names, via):
    """Every balance, read in one transaction through node `via`."""
    c = cluster.client(via, socket_timeout=SOCKET_TIMEOUT)
    try:
        p = c.pipeline(transaction=True)
        for n in names:
            p.get(n)
        return [int(v) for v in p.execute()]
    finally:
        c.close()


@pytest.mark.time_limit(150)
@pytest.mark.parametrize("protocol", ["nowait", "silo", "cicada", "maat"])
def test_kill9_random_nodes_under_bank_load(make_cluster, protocol):
    cl = make_cluster("shm", opts={"cc": protocol, "memory": "32mb"})
    names = []
    for nid in (1, 2, 3):
        names += cl.keys_on(nid, "acct%d:" % nid, ACCOUNTS // 3)
    c = cl.client(1)
    c.mset({n: BALANCE for n in names})
    c.close()
    total = BALANCE * len(names)

    stop = threading.Event()
    clients = [Client(i, cl, names, stop) for i in range(CLIENTS)]
    for t in clients:
        t.start()
    rnd = random.Random()
    killed = []
    try:
        for k in range(KILLS):
            time.sleep(rnd.uniform(0.5, 1.0))
            victim = rnd.choice(cl.nodes)
            victim.kill9()
            victim.start()
            killed.append(victim.id)
            # The invariant right after each restart, read through the node
            # that just came back.
            got = balances(cl, names, victim.id)
            assert sum(got) == total, "after restart %d of node %d: total %d, expected %d" % (
                k + 1, victim.id, sum(got), total)
            assert "recovered in" in victim.log_text(), victim.log_tail(20)
        time.sleep(0.5)
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=SOCKET_TIMEOUT + 5)
    for t in clients:
        assert t.error is None, "client %d: %s" % (t.cid, t.error)

    acked, failed, unknown = {}, {}, {}
    for t in clients:
        acked.update(t.acked)
        failed.update(t.failed)
        unknown.update(t.unknown)
    assert len(acked) > 100, "too few transfers committed: %d" % len(acked)

    c = cl.client(2, socket_timeout=SOCKET_TIMEOUT)
    try:
        ids = list(acked) + list(failed) + list(unknown)
        present = {}
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            for tid, v in zip(part, c.mget(["receipt:" + t for t in part])):
                present[tid] = v is not None
    finally:
        c.close()
    lost = [t for t in acked if not present[t]]
    assert not lost, "%d acknowledged transfers lost, e.g. %s" % (len(lost), lost[:5])
    ghosts = [t for t in failed if present[t]]
    assert not ghosts, "%d transfers that replied 'nothing was written' took effect: %s" % (
        len(ghosts), ghosts[:5])

    expect = {n: BALANCE for n in names}
    for tid, (a, b, x) in list(acked.items()) + list(unknown.items()):
        if present[tid]:
            expect[a] -= x
            expect[b] += x
    final = balances(cl, names, 3)
    wrong = [(n, g, expect[n]) for n, g in zip(names, final) if g != expect[n]]
    assert not wrong, "balances differ from the committed transfers (partial effects): %s" % (
        wrong[:5],)
    assert sum(final) == total
    print("%s: %d kills (nodes %s), %d acknowledged, %d failed, %d unknown (%d committed)" % (
        protocol, len(killed), killed, len(acked), len(failed), len(unknown),
        sum(1 for t in unknown if present[t])))


@pytest.mark.time_limit(120)
@pytest.mark.parametrize("protocol", ["silo", "nowait", "waitdie", "cicada", "maat"])
def test_dead_node_leaves_no_lock_on_live_nodes(make_cluster, protocol):
    """A MULTI sent to node 1 that writes a key on node 2 and one on node 3
    while node 3 is dead (kill -9, not restarted yet) fails with the node
    error and writes nothing, and the lock it took on node 2's key is gone:
    that key takes a write at once, through any node.

    silo locks both keys at commit in one batch. Its part for node 2 runs
    even though node 3's fails; before this was handled, the lock won on
    node 2 was noted nowhere, so nothing released it and every later
    transaction on that key aborted until txn-timeout. (nowait and
    wait-die lock at each command, in order: the same check, another
    path; cicada latches both keys at validation in one batch, as silo;
    maat latches each key at its write, to list itself as a writer: the
    abort must take it off node 2's key's list, or the key's next writers
    would find a writer that never ends.)"""
    cl = make_cluster("tcp", opts={"cc": protocol, "txn-timeout": 2000})
    k2 = cl.key_on(2, "live:")
    k3 = cl.key_on(3, "dead:")
    c = cl.client(1, socket_timeout=SOCKET_TIMEOUT)
    # On this connection's worker: the keys' addresses are cached, so the
    # MULTI below reaches node 3 first with its lock, not with a lookup.
    assert c.set(k2, "old2") and c.set(k3, "old3")
    cl.node(3).kill9()
    for i in range(3):
        p = c.pipeline(transaction=True)
        p.set(k2, "multi%d" % i)
        p.set(k3, "multi%d" % i)
        with pytest.raises(redis.ResponseError, match="node did not answer"):
            p.execute()
        for via in (1, 2):
            w = cl.client(via, socket_timeout=SOCKET_TIMEOUT)
            try:
                assert w.set(k2, "after%d-%d" % (i, via)), "SET of node 2's key via node %d" % via
                assert w.get(k2) == ("after%d-%d" % (i, via)).encode()
            finally:
                w.close()
    c.close()
    cl.node(3).start()
    c = cl.client(1, socket_timeout=SOCKET_TIMEOUT)
    try:
        assert c.mget(k2, k3) == [b"after2-2", b"old3"]
        p = c.pipeline(transaction=True)
        p.set(k2, "both")
        p.set(k3, "both")
        assert p.execute() == [True, True]
    finally:
        c.close()


@pytest.mark.time_limit(120)
@pytest.mark.parametrize("protocol", ["nowait", "silo", "cicada", "maat"])
def test_lost_reply_lock_is_released_without_a_restart(make_cluster, protocol):
    """A SET sent to node 1 of a key on node 3 whose lock request ran on
    node 3 but whose reply was lost (DEBUG FABRIC-LOSE-REPLY: as when the
    connection breaks right after the request left) fails with the node
    error and writes nothing. The lock it may have won is released by node 3
    soon after, although node 3 never restarts: node 1 hands node 3 the
    transaction (the settler's retry), and node 3 releases every lock word
    naming it. Before, such a lock stayed until the next restart of node 3,
    and every later write of the key timed out."""
    cl = make_cluster("tcp", opts={"cc": protocol, "txn-timeout": 3000, "testing": "yes"})
    k3 = cl.key_on(3, "lost:")
    c1 = cl.client(1, socket_timeout=SOCKET_TIMEOUT)
    c2 = cl.client(2, socket_timeout=SOCKET_TIMEOUT)
    try:
        assert c1.set(k3, "v0")
        assert c1.execute_command("DEBUG", "FABRIC-LOSE-REPLY", 3, 1) == b"OK"
        with pytest.raises(redis.ResponseError, match="node did not answer"):
            c1.set(k3, "v1")
        assert c2.set(k3, "v2"), "node 3's key stays locked by the failed SET"
        assert c1.get(k3) == b"v2"
        end = time.monotonic() + 5
        while "locks released" not in cl.node(3).log_text() and time.monotonic() < end:
            time.sleep(0.05)
        assert "1 locks released" in cl.node(3).log_text(), cl.node(3).log_tail(10)
        assert "node 3 settled what our failed transactions left there" in \
            cl.node(1).log_text(), cl.node(1).log_tail(10)
    finally:
        c1.close()
        c2.close()


@pytest.mark.time_limit(120)
def test_lost_reply_bucket_lock_is_released_without_a_restart(make_cluster):
    """A SET of a new key on node 3, sent to node 1, inserts the key on
    node 3 under its bucket's lock. When a reply is lost while the insert
    holds that lock (DEBUG FABRIC-LOSE-REPLY 3 1 <after>, for each of the
    insert's first requests in turn), the SET fails with the node error, and
    the bucket lock, which carries the transaction's owner word, is released
    by node 3 when node 1 hands it the failed transaction, as an item lock
    is. Before, bucket locks carried a per-thread word that nothing
    settled: the lock stayed until node 3 restarted, and every insert into
    that bucket failed (RCKV LOCKS showed it after kill -9 runs of the
    checker)."""
    cl = make_cluster("tcp", opts={"cc": "nowait", "txn-timeout": 3000, "testing": "yes"})
    c1 = cl.client(1, socket_timeout=SOCKET_TIMEOUT)
    c2 = cl.client(2, socket_timeout=SOCKET_TIMEOUT)
    a3 = cl.client(3, socket_timeout=SOCKET_TIMEOUT)
    def soon(fn, *args):
        # Node 1's connection to node 3 broke with the lost reply: its
        # worker connects again within the retry interval.
        end = time.monotonic() + 5
        while True:
            try:
                return fn(*args)
            except redis.ResponseError as e:
                if "did not answer" not in str(e) or time.monotonic() > end:
                    raise
                time.sleep(0.05)

    try:
        assert c1.set(cl.key_on(3, "warm:"), "w")  # a first insert takes a slab too
        bucket_lock_left = 0
        for after in range(0, 6):
            k3 = cl.key_on(3, "fresh%d:" % after)
            soon(c1.get, cl.key_on(3, "probe%d:" % after))  # node 1 reaches node 3 again
            assert c1.execute_command("DEBUG", "FABRIC-LOSE-REPLY", 3, 1, after) == b"OK"
            try:
                c1.set(k3, "v1")
            except redis.ResponseError as e:
                assert "node" in str(e), e  # did not answer / failed while it committed
            held = a3.execute_command("RCKV", "LOCKS")
            bucket_lock_left += any(h.startswith(b"bucket") for h in held)
            end = time.monotonic() + 5
            while held and time.monotonic() < end:
                time.sleep(0.05)
                held = a3.execute_command("RCKV", "LOCKS")
            assert held == [], "after %d requests: a lock stays held on node 3" % after
            assert c2.set(k3, "v2")
            assert soon(c1.get, k3) == b"v2"
        assert bucket_lock_left, "no lost reply left a bucket lock: the faults missed the insert"
    finally:
        c1.close()
        c2.close()
        a3.close()


def test_debug_fabric_lose_reply_needs_testing(make_cluster):
    """The fault is refused without `testing yes`, and named clearly."""
    cl = make_cluster("tcp")
    c = cl.client(1)
    try:
        with pytest.raises(redis.ResponseError, match="needs 'testing yes'"):
            c.execute_command("DEBUG", "FABRIC-LOSE-REPLY", 3)
    finally:
        c.close()


@pytest.mark.time_limit(60)
def test_read_of_a_dead_nodes_key_is_an_error_not_absent(make_cluster):
    """GET and its kind of an absent key reply without a transaction once
    the owner's index says the key is not there. When the owner cannot be
    asked (killed), that is no answer: the read runs as a transaction and
    replies with the node error, for a key never read before and for one
    whose address node 1 has cached. Once the owner is back, both read as
    they are."""
    cl = make_cluster("tcp")
    fresh = cl.key_on(3, "never:")
    known = cl.key_on(3, "known:")
    c = cl.client(1, socket_timeout=SOCKET_TIMEOUT)
    try:
        assert c.set(known, "v")
        cl.node(3).kill9()
        for cmd in (("GET", fresh), ("STRLEN", fresh), ("TYPE", fresh), ("EXISTS", fresh),
                    ("GET", known), ("EXISTS", known)):
            with pytest.raises(redis.ResponseError, match="node did not answer"):
                c.execute_command(*cmd)
        cl.node(3).start()
        assert c.get(fresh) is None
        assert c.get(known) == b"v"
    finally:
        c.close()
