"""persistence power on a tcp cluster: a node's restart replays its
write-ahead log, which its NIC thread fed with every write its peers made
there, their lock words included. The log is synced at commit points
(a remote flush), and a lock's release comes after its commit point, so
a kill -9 right after a commit loses the release from the log but keeps
the lock: the restarted node must not keep a live peer's lock word that
the replay brought back (server/recovery.c), or every later transaction
on that key aborts until txn-timeout."""

import pytest
import redis

from cluster import make_cluster  # noqa: F401 (fixture)

pytestmark = pytest.mark.rckv_only


def test_restart_drops_peer_locks_the_log_replayed(make_cluster):
    cl = make_cluster("tcp", n=2, opts={"memory": "16mb", "persistence": "power",
                                        "txn-timeout": 1000})
    k = cl.key_on(2, "relock:")
    r1 = cl.client(1)
    # Node 1 locks k on node 2 (its NIC logs the lock CAS), commits (the
    # remote flush syncs node 2's log) and releases it (logged, not synced).
    r1.set(k, "a")
    node2 = cl.node(2)
    node2.kill9()
    node2.start()
    assert "replayed" in node2.log_text(), node2.log_tail()
    assert cl.client(2).execute_command("RCKV", "LOCKS") == []
    r1 = cl.client(1)
    try:
        r1.set(k, "b")
    except redis.ResponseError as e:
        pytest.fail("a write of %s after node 2's restart: %s; locks held there: %r"
                    % (k, e, cl.client(2).execute_command("RCKV", "LOCKS")))
    assert r1.get(k) == b"b"
