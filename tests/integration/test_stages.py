"""Stages over RPC (CONFIG SET cc-stages; cc/stages.c, RCC 5): every stage
of a transaction reaches other nodes' memory either by one-sided verbs or
by an RPC that a worker of the target runs on the same words.

What a user would notice, counted rather than timed (INFO cc's
cc_stage_<stage> lines count each stage's verbs and RPCs per transaction):
  - `lock=rpc` sends the lock stage's ops by RPC, and not one lock CAS as
    a verb, while the other stages stay one-sided;
  - `onesided` (the default) sends no RPC at all;
  - CONFIG SET on one node sets every node of the cluster, CONFIG GET and
    INFO say what is in use, and a bad value is refused with the reason,
    changing nothing;
  - whatever the mix, the data is the data: a bank's total holds while the
    stages change under load.

rckv only (skipped with RCKV_TEST_TARGET=redis).
"""

import threading

import pytest
import redis

from cluster import make_cluster  # noqa: F401 (fixture)

pytestmark = pytest.mark.rckv_only

STAGES = ("read", "lock", "validate", "log", "commit", "release")


def stage_lines(conn):
    """INFO cc's cc_stage_<stage> fields, by stage."""
    info = conn.call("INFO", "cc").decode()
    out = {}
    for ln in info.split("\r\n"):
        if ln.startswith("cc_stage_"):
            name, fields = ln[len("cc_stage_"):].split(":", 1)
            out[name] = {k: (v if k == "mode" else float(v))
                         for k, v in (kv.split("=") for kv in fields.split(","))}
    return out


def info_field(conn, section, field):
    info = conn.call("INFO", section).decode()
    return [ln.split(":", 1)[1] for ln in info.split("\r\n") if ln.startswith(field + ":")][0]


def transfers(cl, keys, rounds):
    """MULTI blocks that move 1 between keys on different nodes, from
    every node."""
    for r in range(rounds):
        via = 1 + r % 3
        a, b = keys[r % len(keys)], keys[(r + 1) % len(keys)]
        with cl.raw(via) as c:
            c.call("MULTI")
            c.call("DECRBY", a, "1")
            c.call("INCRBY", b, "1")
            assert len(c.call("EXEC")) == 2


@pytest.mark.parametrize("fabric", ["shm", "tcp"])
def test_lock_by_rpc_sends_rpcs_and_no_lock_verb(make_cluster, fabric):
    """nowait on 3 nodes: with `lock=rpc` set through node 2, every node
    says so, and transactions spanning the nodes lock by RPC: the lock
    stage issues RPCs and no verb (its CAS and the READ behind it travel
    in the RPC); the other stages stay one-sided, and send no RPC. With
    `onesided` (the default, and again after the change back), no stage
    sends an RPC."""
    cl = make_cluster(fabric, opts={"cc": "nowait"})
    keys = cl.keys_on(1, "s1:", 2) + cl.keys_on(2, "s2:", 2) + cl.keys_on(3, "s3:", 2)
    with cl.raw(1) as c:
        for k in keys:
            assert c.call("SET", k, "100") == "OK"
    transfers(cl, keys, 30)
    for nid in (1, 2, 3):
        with cl.raw(nid) as c:
            assert c.call("CONFIG", "GET", "cc-stages") == [b"cc-stages", b"onesided"]
            st = stage_lines(c)
            assert set(st) == set(STAGES)
            for s in STAGES:
                assert st[s]["rpcs_per_txn"] == 0, (nid, s, st[s])
                assert st[s]["mode"] == "onesided"
            assert st["lock"]["verbs_per_txn"] > 0, st["lock"]

    with cl.raw(2) as c:
        assert c.call("CONFIG", "SET", "cc-stages", "lock=rpc,release=onesided") == "OK"
    for nid in (1, 2, 3):
        with cl.raw(nid) as c:
            assert c.call("CONFIG", "GET", "cc-stages") == [b"cc-stages", b"lock=rpc"]
            assert info_field(c, "cc", "cc_stages") == "lock=rpc"
            assert c.call("CONFIG", "RESETSTAT") == "OK"
    transfers(cl, keys, 60)
    rpcs = 0
    for nid in (1, 2, 3):
        with cl.raw(nid) as c:
            st = stage_lines(c)
            assert st["lock"]["mode"] == "rpc"
            assert st["lock"]["verbs_per_txn"] == 0, (nid, st["lock"])
            assert st["lock"]["rpcs_per_txn"] >= 1, (nid, st["lock"])
            rpcs += st["lock"]["rpcs_per_txn"]
            for s in STAGES:
                if s != "lock":
                    assert st[s]["rpcs_per_txn"] == 0, (nid, s, st[s])
            assert float(info_field(c, "cc", "cc_rpcs_per_txn")) > 0
    assert rpcs > 0
    with cl.raw(3) as c:
        total = sum(int(c.call("GET", k)) for k in keys)
    assert total == 600

    # Back to one-sided, through node 3: no RPC from then on.
    with cl.raw(3) as c:
        assert c.call("CONFIG", "SET", "cc-stages", "onesided") == "OK"
    for nid in (1, 2, 3):
        with cl.raw(nid) as c:
            assert c.call("CONFIG", "RESETSTAT") == "OK"
    transfers(cl, keys, 30)
    for nid in (1, 2, 3):
        with cl.raw(nid) as c:
            assert c.call("CONFIG", "GET", "cc-stages") == [b"cc-stages", b"onesided"]
            assert all(v["rpcs_per_txn"] == 0 for v in stage_lines(c).values())


def test_bad_values_are_refused_and_change_nothing(make_cluster):
    """A value that is not onesided, rpc or a list of <stage>=<mode> is
    refused with the reason, on every node as it was."""
    cl = make_cluster("shm", opts={"cc-stages": "commit=rpc"})
    r = cl.client(1)
    for bad in ("fetch=rpc", "lock", "lock=maybe", "", "lock=rpc,"):
        with pytest.raises(redis.ResponseError, match="bad cc-stages item"):
            r.config_set("cc-stages", bad)
    for nid in (1, 2, 3):
        with cl.raw(nid) as c:
            assert c.call("CONFIG", "GET", "cc-stages") == [b"cc-stages", b"commit=rpc"]


def test_bank_holds_while_stages_change_under_load(make_cluster):
    """Transfers from every node while cc-stages cycles through pure RPC,
    hybrids and one-sided, set through a different node each time: no
    transfer fails and the total stays."""
    cl = make_cluster("shm", opts={"cc": "silo"})
    keys = cl.keys_on(1, "b1:", 3) + cl.keys_on(2, "b2:", 3) + cl.keys_on(3, "b3:", 3)
    with cl.raw(1) as c:
        for k in keys:
            assert c.call("SET", k, "100") == "OK"
    stop = threading.Event()
    errors = []

    def client(i):
        try:
            r = cl.client(1 + i % 3)
            n = 0
            while not stop.is_set():
                a, b = keys[(i + n) % len(keys)], keys[(i + 3 * n + 1) % len(keys)]
                if a != b:
                    p = r.pipeline(transaction=True)
                    p.decrby(a, 1)
                    p.incrby(b, 1)
                    p.execute()
                n += 1
        except Exception as e:  # noqa: BLE001 (any error fails the test)
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    try:
        for i, mode in enumerate(["rpc", "lock=rpc,commit=rpc", "read=rpc,validate=rpc",
                                  "log=rpc,release=rpc", "onesided", "rpc"]):
            with cl.raw(1 + i % 3) as c:
                assert c.call("CONFIG", "SET", "cc-stages", mode) == "OK"
            stop.wait(0.4)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors[:5]
    with cl.raw(2) as c:
        assert sum(int(c.call("GET", k)) for k in keys) == 900
