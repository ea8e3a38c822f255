"""calvin's ACQUIRE by one-sided WRITE (`calvin-acquire write`,
cc/calvin_ring.c) on 3-node clusters over shm and tcp.

What a user would notice, each asserted:
- `calvin-acquire` is a mutable option, rpc by default, rpc or write, and
  anything else is refused with an error that names it;
- under `write`, transactions across nodes commit exactly as under rpc
  (concurrent increments of keys on every node all land, no abort), and
  INFO shows the one-sided path carried them (calvin_acquire_writes and
  the participants' calvin_acquire_doorbells), not the RPC;
- a part bigger than a request slot still commits (it goes by RPC);
- switching the option back and forth on every node under load loses no
  increment;
- FLUSHALL (which frees the request buffers with everything else) is
  followed by new buffers, and nothing is lost;
- an idle cluster that used the write form sleeps (no polling of the
  request buffers: the doorbell wakes the participant).
"""

import os
import threading
import time

import pytest

from cluster import fabric, running_cluster, track_cluster  # noqa: F401 (fixtures)

pytestmark = pytest.mark.rckv_only

CPU_IDLE_MAX = 0.06  # seconds of CPU for 3 nodes in 3 s (test_protocol_calvin.py's bound)
NODES = (1, 2, 3)


@pytest.fixture(scope="module")
def cluster(fabric):
    with running_cluster(fabric, opts={"cc": "calvin", "calvin-epoch-us": 2000,
                                       "calvin-acquire": "write"}) as cl:
        yield cl


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def acq(cl):
    """The calvin_acquire_* counters, summed over the nodes, and the aborts."""
    tot = {}
    for i in NODES:
        with cl.client(i) as c:
            info = c.info("cc")
        for k, v in info.items():
            if k.startswith("calvin_acquire_") or k == "cc_aborts":
                tot[k] = tot.get(k, 0) + int(v)
    return tot


def delta(a, b):
    return {k: b[k] - a.get(k, 0) for k in b}


def set_all(cl, value):
    for i in NODES:
        with cl.client(i) as c:
            assert c.config_set("calvin-acquire", value)


def keys_on_each(cl, prefix):
    return {i: cl.key_on(i, "%s%d:" % (prefix, i)) for i in NODES}


def increments(cl, k, threads, per, stop=None):
    """`threads` clients spread over the nodes, each running `per` MULTIs
    that increment every key of k (or until stop is set): returns how
    many MULTIs ran."""
    done = [0] * threads

    def work(t):
        with cl.client(1 + t % 3) as c:
            for _ in range(per):
                if stop is not None and stop.is_set():
                    break
                p = c.pipeline(transaction=True)
                for j in NODES:
                    p.incr(k[j])
                p.execute()
                done[t] += 1

    th = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    [t.start() for t in th]
    return th, done


def test_option(cluster):
    with cluster.client(1) as c:
        assert c.config_get("calvin-acquire") == {"calvin-acquire": "write"}
        for bad in ("", "rdma", "writes", "1"):
            with pytest.raises(Exception, match="calvin-acquire"):
                c.config_set("calvin-acquire", bad)
        assert c.config_get("calvin-acquire") == {"calvin-acquire": "write"}
        assert c.config_set("calvin-acquire", "RPC")
        assert c.config_get("calvin-acquire") == {"calvin-acquire": "rpc"}
        assert c.config_set("calvin-acquire", "write")


def test_write_form_commits_exactly(cluster, key):
    cl = cluster
    k = keys_on_each(cl, key)
    # One MULTI from each node first: its coordinator learns the others'
    # buffers (the transactions that run while it asks go by RPC).
    for i in NODES:
        with cl.client(i) as c:
            c.delete(*k.values())
    before = acq(cl)
    th, done = increments(cl, k, threads=6, per=20)
    [t.join() for t in th]
    with cl.client(2) as c:
        assert [int(v) for v in c.mget([k[1], k[2], k[3]])] == [sum(done)] * 3 == [120] * 3
    d = delta(before, acq(cl))
    # Every MULTI sends an ACQUIRE to the two other nodes: by WRITE, each
    # taken by a doorbell on its participant, none refused, none by RPC.
    assert d["calvin_acquire_writes"] >= 2 * 120, d
    assert d["calvin_acquire_doorbells"] == d["calvin_acquire_writes"], d
    assert d["calvin_acquire_write_bytes"] > 0, d
    assert d["calvin_acquire_rpcs"] == 0 and d["calvin_acquire_refused"] == 0, d
    assert d["cc_aborts"] == 0, d
    # Each node learned each other node's buffer once (module-wide).
    tot = acq(cl)
    assert tot["calvin_acquire_buffers"] == 6, tot


def test_part_bigger_than_a_slot_goes_by_rpc(cluster, key):
    """A MULTI with 150 keys on node 2 (about 1.4 KB of locks, more than a
    1 KiB slot) from node 1: its part goes by RPC and commits."""
    cl = cluster
    ks = cl.keys_on(2, key + "big:", count=150)
    before = acq(cl)
    with cl.client(1) as c:
        p = c.pipeline(transaction=True)
        for x in ks:
            p.incr(x)
        assert p.execute() == [1] * 150
        assert [int(v) for v in c.mget(ks)] == [1] * 150
    d = delta(before, acq(cl))
    assert d["calvin_acquire_rpcs"] >= 1 and d["calvin_acquire_rpc_bytes"] > 1024, d


def test_switch_online_under_load(cluster, key):
    """Clients increment across nodes while every node switches
    calvin-acquire rpc <-> write several times: nothing is lost, and both
    forms carried parts."""
    cl = cluster
    k = keys_on_each(cl, key)
    before = acq(cl)
    stop = threading.Event()
    th, done = increments(cl, k, threads=6, per=10 ** 6, stop=stop)
    try:
        for value in ("rpc", "write", "rpc", "write", "rpc", "write"):
            time.sleep(0.4)
            set_all(cl, value)
        time.sleep(0.4)
    finally:
        stop.set()
        [t.join() for t in th]
    n = sum(done)
    assert n > 0
    with cl.client(3) as c:
        assert [int(v) for v in c.mget([k[1], k[2], k[3]])] == [n] * 3
    d = delta(before, acq(cl))
    assert d["calvin_acquire_rpcs"] > 0 and d["calvin_acquire_writes"] > 0, d
    assert d["calvin_acquire_refused"] == 0 and d["cc_aborts"] == 0, d


def test_flushall_gives_new_buffers(cluster, key):
    """FLUSHALL frees every block, the request buffers included: each
    coordinator asks each participant again, which finds its buffer freed
    and adopts a new one (or finds it still held: an allocation that
    picked the freed block left it alone, its lock word being held), and
    transactions go on by WRITE, exactly, no doorbell refused."""
    cl = cluster
    set_all(cl, "write")
    k = keys_on_each(cl, key)
    th, _ = increments(cl, k, threads=3, per=5)
    [t.join() for t in th]
    before = acq(cl)
    with cl.client(1) as c:
        assert c.flushall()
        assert c.dbsize() == 0
    th, done = increments(cl, k, threads=6, per=10)
    [t.join() for t in th]
    with cl.client(2) as c:
        assert [int(v) for v in c.mget([k[1], k[2], k[3]])] == [60] * 3
    d = delta(before, acq(cl))
    # The first HELLO each participant gets after the flush finds its buffer freed.
    assert d["calvin_acquire_hellos"] >= 6 and 3 <= d["calvin_acquire_buffers"] <= 6, d
    assert d["calvin_acquire_writes"] > 0 and d["calvin_acquire_refused"] == 0, d
    assert d["cc_aborts"] == 0, d


def test_idle_after_writes_sleeps(cluster, key):
    cl = cluster
    set_all(cl, "write")
    k = keys_on_each(cl, key)
    th, _ = increments(cl, k, threads=3, per=10)
    [t.join() for t in th]
    time.sleep(0.3)
    pids = [nd.proc.pid for nd in cl.nodes]
    before = sum(cpu_seconds(p) for p in pids)
    time.sleep(3)
    used = sum(cpu_seconds(p) for p in pids) - before
    assert used < CPU_IDLE_MAX, "3 idle nodes used %.2f s of CPU in 3 s" % used
