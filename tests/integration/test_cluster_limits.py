"""Limits on a 3-node cluster, on the shm and the tcp fabric: a key or a
value over its limit, or a write to a node whose MemStore is full, sent
through another node, gets a clear error and writes nothing of itself.

Every node has the smallest MemStore (16mb), so that a few values near
max-value-bytes (1mb) fill it.

As in Redis, a command that fails inside EXEC does not undo the block's
other commands; it alone leaves nothing. MSET is one command: it fails as
a whole, even when its keys live on different nodes.

rckv only (skipped with RCKV_TEST_TARGET=redis).
"""

import pytest

from cluster import fabric, running_cluster, track_cluster  # noqa: F401 (fixtures)

pytestmark = pytest.mark.rckv_only

OK = b"+OK\r\n"
QUEUED = b"+QUEUED\r\n"
NIL = b"$-1\r\n"
# A full MemStore's refusal: Redis's OOM code, its own text (maxmemory's is
# "OOM command not allowed when used memory > 'maxmemory'.", test_memory.py).
OOM = (b"-OOM command not allowed: the MemStore is full (the region's 'memory' holds no "
       b"free block for it)\r\n")
KEY_TOO_BIG = b"-ERR string exceeds maximum allowed size (max-key-bytes)\r\n"
VALUE_TOO_BIG = b"-ERR string exceeds maximum allowed size (max-value-bytes)\r\n"
MAX_KEY = 64 * 1024
MAX_VALUE = 1024 * 1024
FILL_VALUE = 1000 * 1000      # under max-value-bytes: a few fill 16mb
FILL_MAX = 64                 # 64 mb of such values cannot fit in 16


def bulk(v):
    v = v.encode() if isinstance(v, str) else v
    return b"$%d\r\n%s\r\n" % (len(v), v)


def arr(*items):
    return b"*%d\r\n" % len(items) + b"".join(items)


@pytest.fixture(scope="module")
def cluster(fabric):
    with running_cluster(fabric, opts={"memory": "16mb"}) as cl:
        yield cl


def test_key_or_value_too_large_on_remote_node(cluster, key):
    """Through node 1, keys owned by nodes 2 and 3."""
    k2 = cluster.key_on(2, key + "a:")
    k3 = cluster.key_on(3, key + "b:")
    with cluster.raw(1, timeout=30) as c, cluster.raw(3, timeout=30) as other:
        assert c.call_raw("SET", k3, "old") == OK
        assert c.call_raw("SET", k3, b"v" * (MAX_VALUE + 1)) == VALUE_TOO_BIG
        assert c.call_raw("SET", k2, b"v" * (MAX_VALUE + 1)) == VALUE_TOO_BIG
        # The largest value allowed is fine.
        big_ok = b"w" * MAX_VALUE
        assert c.call_raw("SET", k2, big_ok) == OK
        assert other.call_raw("GET", k2) == bulk(big_ok)
        assert c.call_raw("APPEND", k2, "x") == VALUE_TOO_BIG
        assert other.call_raw("STRLEN", k2) == b":%d\r\n" % MAX_VALUE
        assert other.call_raw("GET", k3) == bulk("old")

        # A key over max-key-bytes, wherever its slot lives: hash tags put
        # it on node 2 and on node 3.
        for tagged in (k2, k3):
            long_key = "{%s}" % tagged + "k" * MAX_KEY
            assert cluster.keynode(long_key) == cluster.keynode(tagged)
            assert c.call_raw("SET", long_key, "v") == KEY_TOO_BIG
            assert other.call_raw("EXISTS", long_key) == b":0\r\n"

        # MSET over two nodes, one value too large: nothing written.
        k2b = cluster.key_on(2, key + "c:")
        assert c.call_raw("MSET", k2b, "small", k3, b"v" * (MAX_VALUE + 1)) == VALUE_TOO_BIG
        assert other.call_raw("MGET", k2b, k3) == arr(NIL, bulk("old"))
        assert c.call_raw("MSET", k2b, "small", "{%s}" % k3 + "k" * MAX_KEY, "v") == KEY_TOO_BIG
        assert other.call_raw("MGET", k2b, k3) == arr(NIL, bulk("old"))

        # Inside MULTI: the failing SET alone writes nothing.
        assert c.call_raw("MULTI") == OK
        assert c.call_raw("SET", k2b, "small") == QUEUED
        assert c.call_raw("SET", k3, b"v" * (MAX_VALUE + 1)) == QUEUED
        assert c.call_raw("INCR", k3 + "n") == QUEUED
        assert c.call_raw("EXEC") == arr(OK, VALUE_TOO_BIG, b":1\r\n")
        assert other.call_raw("MGET", k2b, k3) == arr(bulk("small"), bulk("old"))


@pytest.mark.time_limit(90)
def test_full_memstore_on_remote_node(cluster, key):
    """Fill node 3's MemStore through node 1 until SET fails, then check
    the error, the data already there, the other nodes, and that failing
    writes (alone, in MSET, in MULTI) leave nothing of themselves."""
    tag = cluster.key_on(3, key + "tag")

    def full(i):
        """A key on node 3 (its hash tag's slot)."""
        return "{%s}:%s" % (tag, i)

    k1, k1x = cluster.keys_on(1, key + "n1:", 2)
    k2, k2m, k2x = cluster.keys_on(2, key + "n2:", 3)
    assert cluster.keynode(full(0)) == 3
    values = []
    with cluster.raw(1, timeout=30) as c, cluster.raw(2, timeout=30) as other:
        assert c.call_raw("SET", full("small"), "before") == OK
        reply = None
        for i in range(FILL_MAX):
            v = (b"%08d" % i) * (FILL_VALUE // 8)
            reply = c.call_raw("SET", full(i), v)
            if reply != OK:
                break
            values.append(v)
        assert reply == OOM, "after %d values of %d bytes: %r" % (len(values), FILL_VALUE, reply)
        assert len(values) >= 4, "node 3 full after only %d values" % len(values)

        # The same error through the other nodes, for a new key and for
        # overwriting a small value with a large one.
        big = b"z" * FILL_VALUE
        assert other.call_raw("SET", full("new"), big) == OOM
        assert other.call_raw("SET", full("small"), big) == OOM

        # Everything written before is intact, read through every node.
        for via in (1, 2, 3):
            with cluster.raw(via, timeout=30) as r:
                for i, v in enumerate(values):
                    assert r.call_raw("GET", full(i)) == bulk(v), (via, i)
                assert r.call_raw("GET", full("small")) == bulk("before")
                assert r.call_raw("EXISTS", full("new")) == b":0\r\n"

        # The other nodes still take writes, through any node.
        assert c.call_raw("SET", k1, "one") == OK
        assert other.call_raw("SET", k2, "two") == OK

        # MSET is one command: one key on node 2, one on the full node 3.
        assert c.call_raw("MSET", k2m, "small", full("m"), big) == OOM
        assert other.call_raw("MGET", k2m, full("m")) == arr(NIL, NIL)
        assert c.call_raw("MSET", k2, "changed", full("small"), big) == OOM
        assert other.call_raw("MGET", k2, full("small")) == arr(bulk("two"), bulk("before"))

        # MULTI: the failing write alone leaves nothing; the others commit.
        assert c.call_raw("MULTI") == OK
        assert c.call_raw("SET", k2x, "small") == QUEUED
        assert c.call_raw("SET", full("x"), big) == QUEUED
        assert c.call_raw("INCR", k1x) == QUEUED
        assert c.call_raw("EXEC") == arr(OK, OOM, b":1\r\n")
        assert other.call_raw("MGET", k2x, full("x"), k1x) == \
            arr(bulk("small"), NIL, bulk("1"))

        # No node died or froze: each still answers.
        for via in (1, 2, 3):
            with cluster.raw(via) as r:
                assert r.call_raw("PING") == b"+PONG\r\n"


@pytest.mark.time_limit(90)
def test_reads_of_absent_keys_on_full_node(cluster, key):
    """Reading a key that does not exist never fails because the node that
    would own it is full (Redis refuses only commands that may add data
    under maxmemory; GET, MGET, EXISTS and DEL are not among them). Keys of
    several lengths: they need blocks of different size classes."""
    tag = cluster.key_on(3, key + "tag")
    with cluster.raw(1, timeout=30) as c:
        reply = None
        for i in range(FILL_MAX):
            reply = c.call_raw("SET", "{%s}:%d" % (tag, i), b"v" * FILL_VALUE)
            if reply != OK:
                break
        assert reply == OOM
    absent = ["{%s}:%s" % (tag, "a" * n) for n in (1, 8, 16, 24, 40, 64, 100, 200, 1000)]
    bad = []
    for via in (1, 2, 3):
        with cluster.raw(via, timeout=30) as r:
            for k in absent:
                for cmd, want in (("GET", NIL), ("EXISTS", b":0\r\n"), ("MGET", arr(NIL)),
                                  ("STRLEN", b":0\r\n"), ("DEL", b":0\r\n")):
                    got = r.call_raw(cmd, k)
                    if got != want:
                        bad.append("via node %d: %s <key of %d bytes> -> %r"
                                   % (via, cmd, len(k), got))
    assert not bad, "%d of %d reads failed:\n%s" % (len(bad), 3 * len(absent) * 5,
                                                    "\n".join(bad[:12]))
