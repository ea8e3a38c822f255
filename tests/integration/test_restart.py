"""Restart on the same directory: every acknowledged write is there, after
a clean SHUTDOWN and after SIGKILL between commands (replies received)."""

import os

import pytest

pytestmark = pytest.mark.rckv_only

OK = b"+OK\r\n"


def value(i, gen=1):
    # Varied lengths and bytes so that item sizes span several classes.
    return (b"v%d:%05d:" % (gen, i)) + bytes([i % 251]) * (i % 300) + b"\x00\r\n"


def load(server, n):
    """Write n keys pipelined, then overwrite, delete, INCR and MULTI some;
    return the expected key -> value map (None: must not exist)."""
    r = server.client()
    expect = {}
    try:
        for base in range(0, n, 1000):
            p = r.pipeline(transaction=False)
            for i in range(base, min(n, base + 1000)):
                k = b"key:%05d" % i
                p.set(k, value(i))
                expect[k] = value(i)
            assert all(x is True for x in p.execute())
        p = r.pipeline(transaction=False)
        for i in range(0, n, 7):          # overwrite: the newest value wins
            k = b"key:%05d" % i
            p.set(k, value(i, 2))
            expect[k] = value(i, 2)
        for i in range(3, n, 50):         # deleted keys stay deleted
            k = b"key:%05d" % i
            p.delete(k)
            expect[k] = None
        for _ in range(500):
            p.incr(b"counter")
        expect[b"counter"] = b"500"
        p.execute()
        for t in range(50):               # MULTI/EXEC writes
            with r.pipeline(transaction=True) as tx:
                tx.set(b"tx:%d:a" % t, b"A%d" % t).set(b"tx:%d:b" % t, b"B%d" % t).incr(b"txcount")
                tx.execute()
            expect[b"tx:%d:a" % t], expect[b"tx:%d:b" % t] = b"A%d" % t, b"B%d" % t
        expect[b"txcount"] = b"50"
    finally:
        r.close()
    return expect


def verify(server, expect):
    r = server.client()
    try:
        keys = list(expect)
        for base in range(0, len(keys), 1000):
            chunk = keys[base:base + 1000]
            got = r.mget(chunk)
            bad = [(k, expect[k], g) for k, g in zip(chunk, got) if g != expect[k]]
            assert not bad, "%d wrong after restart, first: %r" % (len(bad), bad[:3])
        assert r.dbsize() == sum(1 for v in expect.values() if v is not None)
        # The server works normally after recovery.
        assert r.incr(b"counter") == int(expect[b"counter"]) + 1
        assert r.set(b"after", b"restart") is True and r.get(b"after") == b"restart"
    finally:
        r.close()


def shutdown(server):
    with server.raw() as c:
        c.send(b"*1\r\n$8\r\nSHUTDOWN\r\n")
        # Like Redis: no reply, the connection closes and the process exits 0.
        assert c.expect_closed(timeout=15), "SHUTDOWN did not close the connection"
        assert c.buf == b"", c.buf
    assert server.wait_exit(15) == 0, server.log_tail()


@pytest.mark.time_limit(90)
@pytest.mark.parametrize("how", ["shutdown", "kill9"])
def test_restart_keeps_every_key(make_server, how):
    s = make_server(opts={"persistence": "process"})
    expect = load(s, 10000)
    assert os.path.exists(os.path.join(s.dir, "node-1.region")), os.listdir(s.dir)
    if how == "shutdown":
        shutdown(s)
    else:
        s.kill9()
    port = s.port
    s.start()
    assert s.port == port
    verify(s, expect)
    # And a second restart of the recovered region.
    s.restart(kill=True)
    expect[b"counter"] = b"%d" % (int(expect[b"counter"]) + 1)
    expect[b"after"] = b"restart"
    verify(s, expect)


@pytest.mark.time_limit(90)
def test_restart_power_persistence(make_server):
    s = make_server(opts={"persistence": "power"})
    expect = load(s, 1000)
    s.kill9()
    s.start()
    verify(s, expect)


@pytest.mark.time_limit(60)
def test_restart_after_kill_inside_multi(make_server):
    # A transaction that was queued but never EXECed leaves no trace.
    s = make_server()
    with s.raw() as c:
        assert c.call_raw("SET", "a", "1") == OK
        assert c.call_raw("MULTI") == OK
        assert c.call_raw("SET", "a", "2") == b"+QUEUED\r\n"
        assert c.call_raw("SET", "b", "2") == b"+QUEUED\r\n"
        s.kill9()
    s.start()
    with s.raw() as c:
        assert c.call_raw("GET", "a") == b"$1\r\n1\r\n"
        assert c.call_raw("EXISTS", "b") == b":0\r\n"
