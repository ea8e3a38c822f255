"""A 3-node cluster with clients on all three nodes, on the shm and the tcp
fabric: the published layout, MULTI/EXEC blocks that span nodes (exact
replies), WATCH on a key another node owns, and the commands that act on
every node (CONFIG SET cc, DBSIZE, KEYS, SCAN, FLUSHALL), and that an idle
cluster sleeps.

rckv only: Redis has no such cluster (skipped with RCKV_TEST_TARGET=redis).
"""

import os
import time

import pytest

from cluster import cluster, fabric, track_cluster  # noqa: F401 (fixtures)
from rckvtest import encode

pytestmark = pytest.mark.rckv_only

OK = b"+OK\r\n"
QUEUED = b"+QUEUED\r\n"
NIL = b"$-1\r\n"
NULL_ARRAY = b"*-1\r\n"
NOT_INT = b"-ERR value is not an integer or out of range\r\n"
SLOTS = 16384


def bulk(v):
    v = v.encode() if isinstance(v, str) else v
    return b"$%d\r\n%s\r\n" % (len(v), v)


def arr(*items):
    return b"*%d\r\n" % len(items) + b"".join(items)


def crc16(data):
    """CRC16/XMODEM, the checksum Redis Cluster takes for slots."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def slot(key):
    """Redis Cluster's key slot: the first {...} with something inside, if any."""
    k = key.encode()
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    return crc16(k) % SLOTS


@pytest.fixture
def conns(cluster):
    """One raw connection per node: conns[1], conns[2], conns[3]."""
    cs = {nd.id: nd.raw() for nd in cluster.nodes}
    try:
        yield cs
    finally:
        for c in cs.values():
            c.close()


def test_layout_is_published_alike_by_every_node(cluster, conns):
    views = [conns[i].call("RCKV", "NODES") for i in (1, 2, 3)]
    assert views[0] == views[1] == views[2], views
    nodes = views[0]
    assert [n[0] for n in nodes] == [1, 2, 3]
    owner = [None] * SLOTS
    for (nid, host, port, fab, ranges, state), nd in zip(nodes, cluster.nodes):
        assert (host, port, fab) == (b"127.0.0.1", nd.port, b"127.0.0.1:%d" % nd.fabric_port)
        assert state == b"up"
        for lo, hi in ranges:
            for s in range(lo, hi + 1):
                assert owner[s] is None, "slot %d owned twice" % s
                owner[s] = nid
    assert None not in owner, "some slot has no owner"
    counts = [owner.count(i) for i in (1, 2, 3)]
    assert max(counts) - min(counts) <= 1, counts

    # Slots as Redis Cluster computes them, hash tags included; every node
    # names the same owner for a key, the one its slot ranges say.
    keys = ["foo", "123456789", "{user1000}.following", "{user1000}.followers",
            "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}{x}", ""]
    keys += ["k%d" % i for i in range(200)]
    for k in keys:
        for i in (1, 2, 3):
            conns[i].send(encode("RCKV", "KEYSLOT", k) + encode("RCKV", "KEYNODE", k))
        for i in (1, 2, 3):
            got_slot, got_node = conns[i].read(), conns[i].read()
            assert got_slot == slot(k), (k, i)
            assert got_node == owner[slot(k)], (k, i)
    assert slot("foo") == 12182 and slot("123456789") == 12739
    # 200 plain keys land on all three nodes
    assert {owner[slot("k%d" % i)] for i in range(200)} == {1, 2, 3}


def keys_per_node(cluster, prefix):
    """One key owned by each node: {node id: key}."""
    return {i: cluster.key_on(i, "%sn%d:" % (prefix, i)) for i in (1, 2, 3)}


@pytest.mark.parametrize("client_node", [1, 2, 3])
def test_multi_spanning_nodes(cluster, conns, key, client_node):
    k = keys_per_node(cluster, key)
    c = conns[client_node]
    others = [conns[i] for i in (1, 2, 3) if i != client_node]
    assert c.call_raw("SET", k[2], "10") == OK
    assert c.call_raw("SET", k[3], "x") == OK

    assert c.call_raw("MULTI") == OK
    queued = [
        ("SET", k[1], "v1"),
        ("INCRBY", k[2], "5"),
        ("APPEND", k[3], "yz"),
        ("MGET", k[1], k[2], k[3]),
        ("INCR", k[3]),            # not an integer: an error in the array
        ("GETSET", k[1], "w1"),
        ("MSET", k[1], "a", k[2], "b", k[3], "c"),
        ("MGET", k[3], k[2], k[1]),
        ("DEL", k[2], k[3]),
        ("EXISTS", k[1], k[2], k[3]),
    ]
    for q in queued:
        assert c.call_raw(*q) == QUEUED, q
    # Nothing is visible on any node before EXEC.
    for o in others:
        assert o.call_raw("MGET", k[1], k[2], k[3]) == arr(NIL, bulk("10"), bulk("x"))
    assert c.call_raw("EXEC") == arr(
        OK,
        b":15\r\n",
        b":3\r\n",
        arr(bulk("v1"), bulk("15"), bulk("xyz")),
        NOT_INT,
        bulk("v1"),
        OK,
        arr(bulk("c"), bulk("b"), bulk("a")),
        b":2\r\n",
        b":1\r\n")
    # Every node sees the whole transaction.
    for o in [c] + others:
        assert o.call_raw("MGET", k[1], k[2], k[3]) == arr(bulk("a"), NIL, NIL)


def test_interleaved_multi_on_three_nodes(cluster, conns, key):
    """Three clients, one per node, queue increments of the same three keys
    (one per node) at the same time; each EXEC sees the ones before it."""
    k = keys_per_node(cluster, key)
    order = [2, 3, 1]
    for i in order:
        assert conns[i].call_raw("MULTI") == OK
    for kk in (k[1], k[2], k[3]):
        for i in order:
            assert conns[i].call_raw("INCR", kk) == QUEUED
    for i in order:
        assert conns[i].call_raw("MGET", k[3], k[1]) == QUEUED
    for n, i in enumerate(order, 1):
        v = b":%d\r\n" % n
        assert conns[i].call_raw("EXEC") == arr(v, v, v, arr(bulk(str(n)), bulk(str(n))))
    for i in (1, 2, 3):
        assert conns[i].call_raw("MGET", k[1], k[2], k[3]) == arr(bulk("3"), bulk("3"), bulk("3"))


def cpu_seconds(pid):
    """User + system CPU time of a process so far (/proc/<pid>/stat)."""
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_idle_cluster_sleeps(cluster, conns, key):
    """DESIGN.md's "idle means asleep": after a burst of transactions that
    span the three nodes, with busy-poll-us raised to 2 ms (workers poll
    that long after each busy round), the nodes together use under 2% of a
    core once their clients stop sending; spinning workers would use 100%."""
    k = keys_per_node(cluster, key)
    try:
        for i in (1, 2, 3):
            assert conns[i].call_raw("CONFIG", "SET", "busy-poll-us", "2000") == OK
        burst = encode("MULTI") + encode("INCR", k[1]) + encode("INCR", k[2]) + \
            encode("INCR", k[3]) + encode("EXEC")
        for i in (1, 2, 3):
            conns[i].send(burst * 100)
        for i in (1, 2, 3):
            for _ in range(100):
                assert conns[i].read_raw() == OK
                for _ in range(3):
                    assert conns[i].read_raw() == QUEUED
                assert conns[i].read_raw()[:1] == b"*"
        assert conns[1].call_raw("MGET", k[1], k[2], k[3]) == arr(*[bulk("300")] * 3)
        time.sleep(0.2)
        pids = [nd.proc.pid for nd in cluster.nodes]
        before = sum(cpu_seconds(p) for p in pids)
        time.sleep(3)
        used = sum(cpu_seconds(p) for p in pids) - before
        assert used < 0.06, "3 idle nodes used %.2f s of CPU in 3 s" % used
    finally:
        for i in (1, 2, 3):
            conns[i].call("CONFIG", "SET", "busy-poll-us", "30")


ROTATIONS = [(1, 2, 3), (2, 3, 1), (3, 1, 2)]


@pytest.mark.parametrize("watcher,owner,writer", ROTATIONS,
                         ids=["w%d-k%d-c%d" % r for r in ROTATIONS])
@pytest.mark.parametrize("when", ["before-multi", "while-queued"])
def test_watch_remote_key_fails_exec(cluster, conns, key, watcher, owner, writer, when):
    """The watcher's client is on one node, the watched key on a second,
    the client that changes it on the third: EXEC returns a null array and
    the queued writes (on the watcher's and the writer's nodes) are not made."""
    w, other = conns[watcher], conns[writer]
    watched = cluster.key_on(owner, key + "watched:")
    assert cluster.keynode(watched, via=watcher) == owner
    mine = cluster.key_on(watcher, key + "mine:")
    theirs = cluster.key_on(writer, key + "theirs:")
    assert w.call_raw("SET", watched, "1") == OK

    assert w.call_raw("WATCH", watched) == OK
    if when == "before-multi":
        assert other.call_raw("SET", watched, "2") == OK
    assert w.call_raw("MULTI") == OK
    assert w.call_raw("SET", mine, "m") == QUEUED
    assert w.call_raw("SET", theirs, "t") == QUEUED
    assert w.call_raw("GET", watched) == QUEUED
    if when == "while-queued":
        assert other.call_raw("SET", watched, "2") == OK
    assert w.call_raw("EXEC") == NULL_ARRAY
    for c in (w, other):
        assert c.call_raw("MGET", watched, mine, theirs) == arr(bulk("2"), NIL, NIL)

    # Unchanged since WATCH: the same block commits. The writer touching
    # other keys meanwhile does not matter.
    assert w.call_raw("WATCH", watched) == OK
    assert other.call_raw("SET", theirs + "x", "unrelated") == OK
    assert w.call_raw("MULTI") == OK
    assert w.call_raw("SET", mine, "m") == QUEUED
    assert w.call_raw("SET", theirs, "t") == QUEUED
    assert w.call_raw("GET", watched) == QUEUED
    assert w.call_raw("EXEC") == arr(OK, OK, bulk("2"))
    assert other.call_raw("MGET", watched, mine, theirs) == arr(bulk("2"), bulk("m"), bulk("t"))


def test_watch_remote_key_same_value_write_fails_exec(cluster, conns, key):
    """As in Redis, any write of the watched key fails EXEC, even one that
    stores the value it already had."""
    watched = cluster.key_on(2, key + "watched:")
    mine = cluster.key_on(1, key + "mine:")
    assert conns[1].call_raw("SET", watched, "same") == OK
    assert conns[1].call_raw("WATCH", watched) == OK
    assert conns[3].call_raw("SET", watched, "same") == OK
    assert conns[1].call_raw("MULTI") == OK
    assert conns[1].call_raw("SET", mine, "m") == QUEUED
    assert conns[1].call_raw("EXEC") == NULL_ARRAY
    assert conns[2].call_raw("GET", mine) == NIL


def test_config_set_cc_switches_every_node(cluster, conns):
    try:
        for via, name in [(2, "nowait"), (3, "silo"), (1, "nowait")]:
            assert conns[via].call_raw("CONFIG", "SET", "cc", name) == OK
            for i in (1, 2, 3):
                assert conns[i].call("CONFIG", "GET", "cc") == [b"cc", name.encode()], (via, i)
    finally:
        conns[1].call("CONFIG", "SET", "cc", "silo")


def test_keyspace_commands_cover_every_node(cluster, conns, key):
    assert conns[3].call_raw("FLUSHALL") == OK
    keys = []
    for i in (1, 2, 3):
        keys += cluster.keys_on(i, key + "n%d:" % i, 7)
    args = []
    for kk in keys:
        args += [kk, "v"]
    assert conns[1].call_raw("MSET", *args) == OK
    want = sorted(kk.encode() for kk in keys)
    for i in (1, 2, 3):
        assert conns[i].call("DBSIZE") == len(keys), i
        assert sorted(conns[i].call("KEYS", "*")) == want, i
        assert sorted(conns[i].call("KEYS", key + "n2:*")) == \
            sorted(kk.encode() for kk in keys if kk.startswith(key + "n2:")), i
        seen, cursor = [], b"0"
        for _ in range(10000):
            cursor, batch = conns[i].call("SCAN", cursor, "COUNT", "3")
            seen += batch
            if cursor == b"0":
                break
        assert sorted(set(seen)) == want, i


def test_keys_in_multi_see_the_blocks_writes_on_every_node(cluster, conns, key):
    """KEYS and DBSIZE inside MULTI, through node 1, include the keys the
    block created on nodes 2 and 3 and leave out the one it deleted on
    node 2, before any of it is committed."""
    old = cluster.key_on(2, key + "kim:old:")
    new2 = cluster.key_on(2, key + "kim:new2:")
    new3 = cluster.key_on(3, key + "kim:new3:")
    assert conns[2].call_raw("SET", old, "v") == OK
    before = conns[1].call("DBSIZE")
    c = conns[1]
    assert c.call_raw("MULTI") == OK
    for cmd in (("SET", new2, "v"), ("SET", new3, "v"), ("DEL", old), ("KEYS", key + "kim:*"),
                ("DBSIZE",)):
        assert c.call_raw(*cmd) == b"+QUEUED\r\n", cmd
    r = c.call("EXEC")
    assert sorted(r[3]) == sorted([new2.encode(), new3.encode()]), r
    assert r[4] == before + 1, r
    assert sorted(conns[3].call("KEYS", key + "kim:*")) == sorted([new2.encode(), new3.encode()])


def test_flushall_empties_every_node(cluster, conns, key):
    """FLUSHALL through one node removes every node's keys, also for the
    clients that have just read them (their node may have cached where
    the keys live)."""
    keys = []
    for i in (1, 2, 3):
        keys += cluster.keys_on(i, key + "n%d:" % i, 3)
    args = []
    for kk in keys:
        args += [kk, "v"]
    assert conns[1].call_raw("MSET", *args) == OK
    for i in (1, 2, 3):
        assert conns[i].call("MGET", *keys) == [b"v"] * len(keys), i
    assert conns[2].call_raw("FLUSHALL") == OK
    for i in (1, 2, 3):
        assert conns[i].call("DBSIZE") == 0, i
        assert conns[i].call("KEYS", "*") == [], i
        assert conns[i].call("MGET", *keys) == [None] * len(keys), i
    # The keys can be written again, and every node reads the new values.
    args = []
    for n, kk in enumerate(keys):
        args += [kk, "w%d" % n]
    assert conns[3].call_raw("MSET", *args) == OK
    for i in (1, 2, 3):
        assert conns[i].call("MGET", *keys) == [b"w%d" % n for n in range(len(keys))], i
        assert conns[i].call("DBSIZE") == len(keys), i


def test_absent_key_reads_see_other_nodes_writes(cluster, conns, key):
    """A GET of an absent key replies without a transaction (INFO
    absent_key_reads) after a lookup in the owner's index, never from what
    the asking node knew before: a key that node 2 creates on node 3 is
    read by the next GET through node 1, and once node 3 deletes it, node 1
    reads nil again. Over tcp, node 1 has the key's address cached by
    then, so that GET runs a transaction, which finds the block gone and
    forgets the address: the STRLEN after it is again answered without
    one. Over shm, node 1 reads node 3's index as memory and caches no
    address, so both are answered without a transaction."""
    k = cluster.key_on(3, key + "absent:")
    cached = cluster.fabric != "shm"

    def absent_reads(i):
        return int(conns[i].call("INFO", "stats").decode().split(
            "absent_key_reads:")[1].split("\r\n")[0])

    before = absent_reads(1)
    assert conns[1].call_raw("GET", k) == NIL
    assert absent_reads(1) == before + 1
    for i in range(20):
        assert conns[2].call_raw("SET", k, "v%d" % i) == OK
        assert conns[1].call_raw("GET", k) == bulk("v%d" % i), i
        assert conns[1].call("EXISTS", k) == 1, i
        assert conns[3].call("DEL", k) == 1
        assert conns[1].call_raw("GET", k) == NIL, i
        assert conns[1].call("STRLEN", k) == 0, i
    assert absent_reads(1) == before + 1 + 20 * (1 if cached else 2)
