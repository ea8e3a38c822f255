"""Failover with `replicas` 2 or more (server/membership.h): the cluster's
configuration in a Raft group, a dead node taken out and its slots served
by their backups, a restarted node copying its slots back, RCKV NODES and
INFO cluster showing it all, and a cluster without a majority refusing
with a clear error. (Serializability under kill -9 and SIGSTOP with load
is the checker's: tests/checker/test_replicas.py.)

rckv only (skipped with RCKV_TEST_TARGET=redis).
"""

import os
import signal
import threading
import time

import pytest
import redis

from cluster import fabric, make_cluster  # noqa: F401 (fixtures)

pytestmark = pytest.mark.rckv_only

# A dead node is out about 2 s after its last lease renewal; a test waits
# at most this for what a failover, a rejoin or an election should take.
WAIT = 30.0


def node_states(conn):
    """{node id: state} from RCKV NODES."""
    return {int(r[0]): r[5].decode() for r in conn.execute_command("RCKV", "NODES")}


def wait_for(what, fn, timeout=WAIT):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = fn()
            if last:
                return last
        except redis.exceptions.RedisError as e:
            last = e
        time.sleep(0.05)
    raise AssertionError("%s: not within %.0f s (last: %r)" % (what, timeout, last))


def keys_of(conn, node, n, prefix="k"):
    """n keys whose primary is `node` now (RCKV KEYNODE)."""
    out, i = [], 0
    while len(out) < n:
        k = "%s%d" % (prefix, i)
        if int(conn.execute_command("RCKV", "KEYNODE", k)) == node:
            out.append(k)
        i += 1
    return out


@pytest.mark.time_limit(120)
def test_dead_node_is_replaced_and_rejoins(make_cluster, fabric):
    """kill -9 a node: the others take it out and its keys stay readable
    and writable through them; restarted, it empties its region, copies its
    slots back while the others serve, and its primaries return to it."""
    cl = make_cluster(fabric, file_opts={"replicas": 2})
    c1 = cl.node(1).client()
    mine = keys_of(c1, 3, 20)
    for k in mine:
        c1.set(k, "before")
    assert node_states(c1) == {1: "up", 2: "up", 3: "up"}
    info = c1.info("cluster")
    assert info["rckv_raft_role"] in ("leader", "follower")
    assert int(info["rckv_raft_leader"]) in (1, 2, 3)
    assert int(info["rckv_lease_ms"]) > 0

    cl.node(3).kill9()
    wait_for("node 3 out", lambda: node_states(c1)[3] == "out")
    # Its slots' first live backup serves them: node 1 (sets [3, 1]).
    assert all(int(c1.execute_command("RCKV", "KEYNODE", k)) == 1 for k in mine)
    for k in mine:
        assert c1.get(k) == b"before"
        c1.set(k, "during")
    info = c1.info("cluster")
    assert info["rckv_node3"]["state"] == "out"
    assert int(info["rckv_epoch"]) >= 2

    cl.node(3).start()
    c3 = cl.node(3).client()
    wait_for("node 3 back in place", lambda: node_states(c1)[3] == node_states(c3)[3] == "up")
    assert all(int(c3.execute_command("RCKV", "KEYNODE", k)) == 3 for k in mine)
    for k in mine:
        assert c3.get(k) == b"during"
        got = c1.execute_command("RCKV", "COPIES", k)
        assert [int(g[0]) for g in got] == [3, 1] and got[0][1:] == got[1][1:], got
    assert int(c3.info("cluster")["rckv_rejoin_copied_keys"]) >= len(mine)


@pytest.mark.time_limit(120)
@pytest.mark.parametrize("who", ["leader", "follower"])
def test_clean_shutdown_hands_its_slots_over_before_it_exits(make_cluster, who):
    """SIGTERM (or SHUTDOWN) of a node with replicas: it stops serving and
    asks the leader to take it out before it exits (a leader hands its
    leadership to another node first), so by the time its process is gone
    the others serve its keys already, rather than a lease later.
    Restarted, it rejoins. All nodes stopped together: the last copy of a
    slot stays in the configuration, so nothing is emptied at the restart."""
    cl = make_cluster("tcp", file_opts={"replicas": 2})
    c = cl.node(1).client()
    leader = int(c.info("cluster")["rckv_raft_leader"])
    victim = leader if who == "leader" else leader % 3 + 1
    via = cl.node(victim % 3 + 1).client()
    mine = keys_of(via, victim, 20)
    for k in mine:
        via.set(k, "before")

    cl.stop([victim])
    assert node_states(via)[victim] == "out"
    assert "slots handed over to the other nodes" in cl.node(victim).log_text()
    for k in mine:
        assert wait_for("a write to %s" % k, lambda: via.set(k, "during"))
    if who == "leader":
        assert int(via.info("cluster")["rckv_raft_leader"]) != victim

    cl.node(victim).start()
    wait_for("node %d back in place" % victim, lambda: set(node_states(via).values()) == {"up"})
    # Everyone at once: one node may leave, the others hold their slots'
    # last copies and stay; every key is back after the restart.
    cl.stop()
    cl.start()
    for nd in cl.nodes:
        conn = nd.client()
        wait_for("node %d serves" % nd.id, lambda: conn.get(mine[0]) == b"during")
        assert conn.mget(mine) == [b"during"] * len(mine), nd.id
    wait_for("every node back in place", lambda: set(node_states(via).values()) == {"up"})


@pytest.mark.time_limit(120)
def test_rebalance_waits_for_the_operator(make_cluster):
    """auto-rebalance no: a rejoined node stays a backup ("late") until RCKV
    REBALANCE, asked of any node, moves its primaries back."""
    cl = make_cluster("shm", file_opts={"replicas": 2, "auto-rebalance": "no"})
    c1 = cl.node(1).client()
    k = keys_of(c1, 2, 1)[0]
    c1.set(k, "v")
    cl.node(2).kill9()
    wait_for("node 2 out", lambda: node_states(c1)[2] == "out")
    cl.node(2).start()
    wait_for("node 2 copied", lambda: node_states(c1)[2] == "late")
    assert int(c1.execute_command("RCKV", "KEYNODE", k)) == 3
    time.sleep(1.0)
    assert node_states(c1)[2] == "late"
    c2 = cl.node(2).client()
    assert c2.execute_command("RCKV", "REBALANCE") == b"OK"
    wait_for("node 2 back in place", lambda: node_states(c1)[2] == node_states(c2)[2] == "up")
    assert int(c1.execute_command("RCKV", "KEYNODE", k)) == 2
    assert cl.node(2).client().get(k) == b"v"
    assert c1.execute_command("RCKV", "REBALANCE") == b"OK nothing to move back"


@pytest.mark.time_limit(120)
def test_three_replicas_one_down_writes_go_on_two_down_refused(make_cluster):
    """replicas 3 on 3 nodes: one node down, writes go on; two down, the
    last one has no majority and refuses with a clear error; nothing
    acknowledged is ever lost."""
    cl = make_cluster("tcp", file_opts={"replicas": 3})
    c1 = cl.node(1).client()
    acked = {}
    for i in range(30):
        c1.set("a%d" % i, "1")
        acked["a%d" % i] = b"1"
    cl.node(3).kill9()
    wait_for("node 3 out", lambda: node_states(c1)[3] == "out")
    for i in range(30):
        c1.set("a%d" % i, "2")
        acked["a%d" % i] = b"2"
    cl.node(2).kill9()
    # Without a majority node 1 gets no lease: it refuses, and says why.
    err = wait_for("a refusal", lambda: _refusal(c1, "a0"))
    assert "CLUSTERDOWN" in err and "majority" in err, err
    with pytest.raises(redis.exceptions.ResponseError, match="CLUSTERDOWN"):
        c1.get("a1")
    # Back to a majority: everything acknowledged is there.
    cl.node(2).start()
    wait_for("writes again", lambda: c1.set("a0", "2"))
    cl.node(3).start()
    wait_for("all three up", lambda: set(node_states(c1).values()) == {"up"})
    for nd in cl.nodes:
        c = nd.client()
        for k, v in acked.items():
            assert c.get(k) == v, (nd.id, k)


@pytest.mark.time_limit(120)
def test_silent_node_with_the_last_copy_stays_in(make_cluster):
    """replicas 2 on 5 nodes (so that Raft keeps its majority with two
    down): kill -9 a node, then the backup that now holds the only live
    copy of some of its slots. The second is never taken out: the slots
    wait for it, and when it restarts it brings them back with everything
    written to them; the first then rejoins and copies them again."""
    cl = make_cluster("shm", n=5, file_opts={"replicas": 2})
    c = cl.node(1).client()
    first = 3
    mine = keys_of(c, first, 20)
    for k in mine:
        c.set(k, "before")
    cl.node(first).kill9()
    wait_for("node %d out" % first, lambda: node_states(c)[first] == "out")
    backup = int(c.execute_command("RCKV", "KEYNODE", mine[0]))
    assert backup != first
    via = next(i for i in (1, 2, 4, 5) if i != backup)
    c = cl.node(via).client()
    for k in mine:
        assert int(c.execute_command("RCKV", "KEYNODE", k)) == backup
        c.set(k, "during")
    cl.node(backup).kill9()
    wait_for("the leader keeps node %d in" % backup,
             lambda: any("node %d silent" % backup in nd.log_text() and
                         "holds the last live copy" in nd.log_text()
                         for nd in cl.nodes if nd.id not in (first, backup)))
    assert node_states(c)[backup] != "out"
    cl.node(backup).start()
    wait_for("its keys back", lambda: all(c.get(k) == b"during" for k in mine))
    cl.node(first).start()
    wait_for("all five up", lambda: set(node_states(c).values()) == {"up"})
    for nd in cl.nodes:
        cn = nd.client()
        assert all(cn.get(k) == b"during" for k in mine), nd.id
    c.set(mine[0], "after")
    assert cl.node(first).client().get(mine[0]) == b"after"


def _refusal(conn, key):
    try:
        conn.set(key, "x")
    except redis.exceptions.ResponseError as e:
        return str(e)
    return None


@pytest.mark.time_limit(120)
def test_full_restart_keeps_configuration_and_data(make_cluster):
    """Every node stopped at once and started again: the configuration (a
    node out, in the Raft log) and the data come back, and the node that
    was out rejoins."""
    cl = make_cluster("shm", file_opts={"replicas": 2, "persistence": "process"})
    c1 = cl.node(1).client()
    for i in range(50):
        c1.set("r%d" % i, str(i))
    cl.node(2).kill9()
    wait_for("node 2 out", lambda: node_states(c1)[2] == "out")
    for i in range(50):
        c1.incr("r%d" % i)
    epoch = int(c1.info("cluster")["rckv_config_applied"])
    cl.stop()
    cl.start()
    c1 = cl.node(1).client()
    assert int(c1.info("cluster")["rckv_config_applied"]) >= epoch
    wait_for("node 2 back in place", lambda: set(node_states(c1).values()) == {"up"})
    for nd in cl.nodes:
        c = nd.client()
        for i in range(50):
            assert c.get("r%d" % i) == str(i + 1).encode(), (nd.id, i)


@pytest.mark.time_limit(150)
def test_leader_hung_right_after_a_change_is_taken_out(make_cluster):
    """SIGSTOP the leader the moment it has applied a configuration change
    (RCKV REBALANCE), under writes through the others to its keys: the
    followers learn of the change only from the next leader, and adopting
    it waits for their transactions in flight to the hung node. The new
    leader must still take the hung node out (the fence that ends those
    waits comes with that change), and its keys must be written through
    another node within a failover's time, not once it wakes."""
    cl = make_cluster("tcp", file_opts={"replicas": 2, "auto-rebalance": "no"})
    c = cl.node(1).client()
    leader = int(c.info("cluster")["rckv_raft_leader"])
    late = leader % 3 + 1
    via = late % 3 + 1
    cv = cl.node(via).client()
    # A rejoined node left "late": the change to come moves it back.
    cl.node(late).kill9()
    wait_for("node %d out" % late, lambda: node_states(cv)[late] == "out")
    cl.node(late).start()
    wait_for("node %d copied" % late, lambda: node_states(cv)[late] == "late")
    mine = keys_of(cv, leader, 16, prefix="h")

    stop = threading.Event()

    def writer(node_id, seed):
        conn = cl.node(node_id).client()
        i = seed
        while not stop.is_set():
            try:
                conn.set(mine[1 + i % (len(mine) - 1)], i)  # mine[0]: the probe's
            except redis.exceptions.RedisError:
                time.sleep(0.01)
            i += 1

    threads = [threading.Thread(target=writer, args=(nd, i), daemon=True)
               for i, nd in enumerate([via, late] * 4)]
    for t in threads:
        t.start()
    lc = cl.node(leader).client()
    pid = cl.node(leader).proc.pid
    stopped = False
    try:
        time.sleep(0.5)
        before = int(lc.info("cluster")["rckv_config_applied"])
        assert lc.execute_command("RCKV", "REBALANCE") == b"OK"
        wait_for("the leader applies the change",
                 lambda: int(lc.info("cluster")["rckv_config_applied"]) > before, timeout=10)
        os.killpg(pid, signal.SIGSTOP)
        stopped = True
        t0 = time.monotonic()
        wait_for("node %d out" % leader, lambda: node_states(cv)[leader] == "out")
        probe = cl.node(via).client(socket_timeout=5)
        wait_for("a write to %s through node %d" % (mine[0], via),
                 lambda: probe.set(mine[0], "after"))
        took = time.monotonic() - t0
        assert took < 15, "the hung leader's keys were served again only after %.1f s" % took
    finally:
        stop.set()
        if stopped:
            os.killpg(pid, signal.SIGCONT)
        for t in threads:
            t.join(timeout=10)
    wait_for("node %d rejoins" % leader, lambda: node_states(cv)[leader] in ("late", "up"),
             timeout=60)
    assert cv.get(mine[0]) == b"after"
