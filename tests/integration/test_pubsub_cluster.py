"""Pub/Sub across a 3-node cluster, on shm and tcp: a PUBLISH on any node
reaches the subscribers on every node, each publisher's messages in its
order; PUBLISH answers the receivers of the whole cluster; PUBSUB NUMSUB
and CHANNELS answer for the node asked, as Redis Cluster's do.
"""

import threading
import time

import pytest

from cluster import cluster, fabric, track_cluster  # noqa: F401 (fixtures)
from rckvtest import encode

pytestmark = pytest.mark.rckv_only


def wait_numsub(c, ch, n):
    end = time.monotonic() + 5
    while True:
        got = c.call("PUBSUB", "NUMSUB", ch)[1]
        if got == n or time.monotonic() > end:
            return got
        time.sleep(0.01)


def test_publish_reaches_every_node_in_order(cluster):
    ch = "news"
    subs = []
    try:
        # Two subscribers per node (on its two workers, connections being
        # spread round-robin), one of them by pattern.
        for node in (1, 2, 3):
            for kind in ("SUBSCRIBE", "PSUBSCRIBE"):
                c = cluster.raw(node)
                arg = ch if kind == "SUBSCRIBE" else "ne*"
                c.call(kind, arg)
                subs.append((node, kind, c))
        for node in (1, 2, 3):
            with cluster.raw(node) as q:
                assert wait_numsub(q, ch, 1) == 1  # per node, as Redis Cluster
                assert q.call("PUBSUB", "NUMPAT") == 1
                assert q.call("PUBSUB", "CHANNELS") == [b"news"]

        n = 300

        def publish(node):
            with cluster.raw(node) as p:
                p.send(b"".join(encode("PUBLISH", ch, "%d:%d" % (node, j)) for j in range(n)))
                for _ in range(n):
                    assert p.read() == 6  # every subscriber of the cluster

        ts = [threading.Thread(target=publish, args=(node,)) for node in (1, 2, 3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for node, kind, c in subs:
            seen = {1: [], 2: [], 3: []}
            for _ in range(3 * n):
                m = c.read()
                if kind == "SUBSCRIBE":
                    assert m[0] == b"message" and m[1] == b"news"
                else:
                    assert m[0] == b"pmessage" and m[1] == b"ne*" and m[2] == b"news"
                p, j = m[-1].decode().split(":")
                seen[int(p)].append(int(j))
            for p in (1, 2, 3):
                assert seen[p] == list(range(n)), (node, kind, p)
    finally:
        for _, _, c in subs:
            c.close()


def test_spublish_and_multi_across_nodes(cluster):
    with cluster.raw(3) as s, cluster.raw(1) as p:
        s.call("SSUBSCRIBE", "shard")
        with cluster.raw(3) as q:
            for _ in range(100):
                if q.call("PUBSUB", "SHARDNUMSUB", "shard")[1] == 1:
                    break
                time.sleep(0.01)
        assert p.call("SPUBLISH", "shard", "a") == 1
        assert p.call("PUBLISH", "shard", "not-shard") == 0
        assert s.read() == [b"smessage", b"shard", b"a"]
        # In MULTI: sent once the block committed, then on every node.
        assert p.call("MULTI") == "OK"
        p.call("SET", "k", "1")
        p.call("SPUBLISH", "shard", "b")
        assert p.call("EXEC") == ["OK", 0]  # this node's receivers
        assert s.read() == [b"smessage", b"shard", b"b"]
        # One RPC carries a message: a larger one is refused, clearly.
        big = "x" * (70 * 1024)
        err = p.call("PUBLISH", "shard", big)
        assert "too large to publish across the cluster" in str(err)


def test_keyspace_events_of_a_cross_node_multi(cluster):
    """A MULTI/EXEC over keys on all three nodes: subscribers on every node
    get each key's event once, after EXEC committed, in the block's order."""
    keys = [cluster.key_on(node, "kn") for node in (1, 2, 3)]
    subs = []
    try:
        with cluster.raw(1) as c:
            assert c.call("CONFIG", "SET", "notify-keyspace-events", "E$") == "OK"
        for node in (2, 3):  # CONFIG SET is per node, as in Redis
            with cluster.raw(node) as c:
                c.call("CONFIG", "SET", "notify-keyspace-events", "E$")
        for node in (1, 2, 3):
            s = cluster.raw(node)
            s.call("SUBSCRIBE", "__keyevent@0__:set")
            subs.append(s)
        with cluster.raw(2) as c:
            assert c.call("MULTI") == "OK"
            for k in keys:
                c.call("SET", k, "v")
            # Nothing before EXEC: the events wait for the commit.
            for s in subs:
                s.sock.settimeout(0.3)
                with pytest.raises(OSError):
                    s.read()
                s.sock.settimeout(10)
            assert c.call("EXEC") == ["OK", "OK", "OK"]
            c.call("PUBLISH", "__keyevent@0__:set", "end")
        for s in subs:
            got = []
            while True:
                m = s.read()
                if m[2] == b"end":
                    break
                got.append(m[2].decode())
            assert got == keys  # once each, in the block's order
    finally:
        for s in subs:
            s.close()
        for node in (1, 2, 3):
            with cluster.raw(node) as c:
                c.call("CONFIG", "SET", "notify-keyspace-events", "")


def test_slow_subscriber_on_another_node_is_cut_off(cluster):
    """A subscriber on node 3 that reads nothing is disconnected by node 3's
    client-output-buffer-limit; the publisher on node 1 goes on at its pace."""
    with cluster.raw(3) as c3, cluster.raw(3) as slow, cluster.raw(1) as pub:
        assert c3.call("CONFIG", "SET", "client-output-buffer-limit",
                       "pubsub 1mb 512kb 0") == "OK"
        slow.call("SUBSCRIBE", "slow")
        assert wait_numsub(c3, "slow", 1) == 1
        payload = "x" * 50000  # under one RPC (64 KB)
        start = time.monotonic()
        for _ in range(8):
            pub.send(b"".join(encode("PUBLISH", "slow", payload) for _ in range(100)))
            for _ in range(100):
                pub.read()
        assert time.monotonic() - start < 60
        assert wait_numsub(c3, "slow", 0) == 0
        assert slow.expect_closed(timeout=10)
        assert c3.call("CONFIG", "SET", "client-output-buffer-limit",
                       "pubsub 32mb 8mb 60") == "OK"
