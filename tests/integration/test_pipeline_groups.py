"""Pipelined write commands run as one transaction per group
(server/dispatch.c, "Groups"). What a client sees must be exactly what it
sees when it sends the same commands one by one: every reply in order, a
command's own error for that command only, the writes before and after it
kept, reads and MULTI/EXEC in the pipeline in their places; under
contention from other clients, where groups abort and are split into
single commands, no update is lost or applied twice; on a MemStore too
small for all of them each command gets its own outcome. INFO txn_groups /
txn_group_splits show the paths were taken."""

import threading

import pytest
import redis

pytestmark = pytest.mark.rckv_only


def stats(c):
    info = c.info("stats")
    return info["txn_groups"], info["txn_group_splits"]


def script(p):
    """Mixed writes with errors and reads in between; p is a pipeline or
    a client (the same calls either way)."""
    p.set("a", 1)
    p.incr("a")
    p.incrby("a", 5)
    p.append("a", "x")          # "7x"
    p.incr("a")                 # error: not an integer, nothing else undone
    p.append("a", "y")          # "7xy"
    p.get("a")
    p.set("b", "10")
    p.mset({"c1": "1", "c2": "2"})
    p.incr("c1")
    p.delete("b")
    p.incr("b")                 # a deleted key counts from 0
    p.setnx("a", "no")
    p.getset("c2", "3")
    p.incrbyfloat("c2", "0.5")
    p.strlen("a")


def run_script(c, pipelined):
    if pipelined:
        p = c.pipeline(transaction=False)
        script(p)
        return p.execute(raise_on_error=False)
    out = []

    class One:
        def __getattr__(self, name):
            def call(*a, **kw):
                try:
                    out.append(getattr(c, name)(*a, **kw))
                except redis.ResponseError as e:
                    out.append(e)
            return call
    script(One())
    return out


def norm(replies):
    return [("ERR", str(r)) if isinstance(r, Exception) else r for r in replies]


def test_pipeline_replies_equal_one_by_one(server):
    c = server.client()
    try:
        alone = norm(run_script(c, pipelined=False))
        state_alone = {k: c.get(k) for k in ("a", "b", "c1", "c2")}
        c.flushall()
        g0, _ = stats(c)
        grouped = norm(run_script(c, pipelined=True))
        state_grouped = {k: c.get(k) for k in ("a", "b", "c1", "c2")}
        g1, _ = stats(c)
        assert grouped == alone
        assert state_grouped == state_alone
        assert state_grouped["a"] == b"7xy" and state_grouped["b"] == b"1"
        assert g1 > g0, "the pipeline did not run as a group"
    finally:
        c.close()


def test_pipeline_with_reads_and_multi_in_order(server):
    c = server.client()
    try:
        p = c.pipeline(transaction=False)
        p.set("k", "1")
        p.incr("k")
        p.get("k")
        p.execute_command("MULTI")
        p.execute_command("INCR", "k")
        p.execute_command("GET", "k")
        p.execute_command("EXEC")
        p.incr("k")
        p.get("k")
        r = p.execute()
        assert r[:3] == [True, 2, b"2"]
        assert r[3] == b"OK" and r[4] == b"QUEUED" and r[5] == b"QUEUED"
        assert r[6] == [3, b"3"]
        assert r[7:] == [4, b"4"]
    finally:
        c.close()


def test_pipelined_increments_under_contention(make_server):
    # Two workers, 8 clients pipelining INCRs on 3 shared keys, every fabric
    # round trip 100 us (so transactions interleave): groups conflict,
    # abort and are split into single commands; no increment is lost or
    # applied twice.
    s = make_server(opts={"threads": 2, "fabric-delay-us": 100})
    clients, rounds, per = 8, 15, 30
    errors = []

    def work(i):
        c = s.client()
        try:
            for r in range(rounds):
                p = c.pipeline(transaction=False)
                for j in range(per):
                    p.incr("ctr:%d" % ((i + j) % 3))
                for v in p.execute():
                    assert isinstance(v, int) and v > 0
        except Exception as e:  # reported below, not swallowed
            errors.append(e)
        finally:
            c.close()

    ts = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts)
    assert not errors, errors[:3]
    c = s.client()
    try:
        total = sum(int(c.get("ctr:%d" % k)) for k in range(3))
        assert total == clients * rounds * per
        groups, splits = stats(c)
        assert groups > 0 and splits > 0, (groups, splits)
    finally:
        c.close()


def test_group_on_full_memstore_gives_each_command_its_outcome(make_server):
    # 40 pipelined SETs of 256 KB into a 16 MB MemStore: more than fits, so
    # the later ones fail with the MemStore-full error while the earlier
    # ones are stored, exactly as if sent one by one.
    s = make_server(opts={"memory": "16mb"})
    c = s.client()
    try:
        val = b"v" * (256 << 10)
        p = c.pipeline(transaction=False)
        for i in range(40):
            p.set("big:%d" % i, val)
        r = p.execute(raise_on_error=False)
        ok = [i for i, v in enumerate(r) if v is True]
        bad = [i for i, v in enumerate(r) if isinstance(v, Exception)]
        assert ok and bad, r
        assert ok == list(range(len(ok))), "a SET succeeded after one failed for room"
        for i in ok:
            assert c.strlen("big:%d" % i) == len(val)
        for i in bad:
            assert c.exists("big:%d" % i) == 0
    finally:
        c.close()
