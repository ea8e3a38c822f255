"""Scenario tests of the mvcc protocol (RDMA-MVCC, cc/protocols/mvcc.c).

An older transaction is held open with DEBUG SLEEP inside its MULTI: the
sleep runs inside the transaction, on its coroutine, after the transaction
took its timestamp (when EXEC starts running). Younger transactions run
meanwhile. Under mvcc the older one must then read, for every key, the
last version committed before its timestamp, kept in the item's version
slots, even when younger writers committed or hold the key's lock.

Older versions live in the item's block after the newest value, as many as
fit (mvcc.c header): each test first gives its key a long value, so that
the key's block is large enough to keep a few short versions.
"""

import time

import pytest

import rckvtest

pytestmark = pytest.mark.rckv_only

# The older transaction's pause: long enough for the younger ones to run
# in it (the tests wait until the older EXEC has started).
HOLD_S = 0.8
# A writer that must still be in flight when the older reader finishes:
# it holds its lock this much longer than the reader sleeps.
WRITER_HOLD_S = HOLD_S + 2.5


def start(make_server, **opts):
    s = make_server(opts=dict({"cc": "mvcc"}, **opts))
    with s.client() as c:
        assert c.config_get("cc") == {"cc": "mvcc"}
    return s


def make_room(c, k, first):
    """Set k to `first` in a block with room for older versions: a long
    value moves the key to a larger block, which it keeps for short ones."""
    c.set(k, "p" * 200)
    c.set(k, first)


def counters(c):
    """INFO counters the tests look at, as ints."""
    info = c.info()
    proto = info.get("cc_proto_mvcc")
    assert isinstance(proto, dict), "INFO has no cc_proto_mvcc line: %r" % (proto,)
    return {"aborts": int(info["cc_aborts"]),
            "version": int(info["cc_aborts_version"]),
            "ts": int(info["cc_aborts_ts"]),
            "waits": int(info["cc_lock_waits"]),
            "proto_version": int(proto["aborts_version"])}


def start_running(c, commands, server):
    """Start a MULTI on its own connection and return once its EXEC runs
    (CLIENT LIST shows cmd=exec), i.e. once it took its timestamp."""
    m = rckvtest.begin_multi(server, c, commands)
    # Its commands before the sleep take microseconds.
    time.sleep(0.1)
    return m


def test_older_reader_sees_older_version_while_writer_in_flight(make_server, key):
    """R (oldest) sleeps, then reads x. Meanwhile a younger W1 commits x=v1
    and a still younger W2 writes x=v2 and stays in flight, holding x's
    lock. R must read v0, the version before its timestamp: not v1 (newer
    than R, though committed) and without waiting for W2 (younger, so its
    write comes after R whatever it does). W2 then commits."""
    s = start(make_server)
    x = key + "x"
    with s.client() as c:
        make_room(c, x, "v0")
        before = counters(c)

        r = start_running(c, [("DEBUG", "SLEEP", HOLD_S), ("GET", x)], s)
        assert c.set(x, "v1")  # W1: younger than R, commits
        w2 = start_running(c, [("SET", x, "v2"), ("DEBUG", "SLEEP", WRITER_HOLD_S)], s)

        assert r.finish() == [b"OK", b"v0"], \
            "the older reader did not get the version before its timestamp"
        assert w2.is_alive(), "the reader finished only after the younger writer"
        assert w2.finish() == [True, b"OK"]
        assert c.get(x) == b"v2"

        after = counters(c)
        assert after["aborts"] == before["aborts"], "a transaction had to abort"
        assert after["waits"] == before["waits"], "the reader waited for a younger writer"


def test_reader_older_than_every_kept_version_retries(make_server, key):
    """With mvcc-versions 3 an item keeps its newest version and two older
    ones. A reader that began before two younger writes still finds its
    version; one that began before three finds it overwritten: it aborts
    (INFO cc_aborts_version), retries with a new timestamp and reads the
    newest value."""
    s = start(make_server, **{"mvcc-versions": 3})
    x = key + "x"
    with s.client() as c:
        assert c.config_get("mvcc-versions") == {"mvcc-versions": "3"}
        make_room(c, x, "v0")
        before = counters(c)

        r = start_running(c, [("DEBUG", "SLEEP", HOLD_S), ("GET", x)], s)
        for v in ("v1", "v2"):
            assert c.set(x, v)
        assert r.finish() == [b"OK", b"v0"], "two newer versions pushed v0 out"
        mid = counters(c)
        assert mid["version"] == before["version"], "aborted for a version still kept"

        r = start_running(c, [("DEBUG", "SLEEP", HOLD_S), ("GET", x)], s)
        for v in ("v3", "v4", "v5"):
            assert c.set(x, v)
        # Its first attempt finds v2 gone; the retry is younger than v5.
        assert r.finish() == [b"OK", b"v5"]
        after = counters(c)
        assert after["version"] > mid["version"], "no abort with cause version in INFO"
        assert after["proto_version"] > mid["proto_version"], \
            "no aborts_version on the cc_proto_mvcc line"


def test_older_reader_sees_a_key_deleted_after_it_began(make_server, key):
    """A delete is a new version too: a reader older than the DEL still
    reads the value; readers after it find no key."""
    s = start(make_server)
    x = key + "x"
    with s.client() as c:
        make_room(c, x, "v0")
        r = start_running(c, [("DEBUG", "SLEEP", HOLD_S), ("GET", x), ("EXISTS", x)], s)
        assert c.delete(x) == 1
        assert r.finish() == [b"OK", b"v0", 1], "the older reader lost the deleted version"
        assert c.get(x) is None
        assert c.exists(x) == 0
        assert x.encode() not in c.keys(key + "*")


def test_write_after_a_younger_read_is_rejected(make_server, key):
    """T1 (older) reads z, sleeps, then writes x. A younger T2 reads x and
    writes z meanwhile. T1's write of x would come before T2's read of it
    in timestamp order (x's rts is T2's): W1 rejects it, T1 aborts with
    cause ts and its retry, younger than T2, reads T2's z. Without the rule
    each would have read the other's key as it was before (write skew).
    T1 writes with GETSET, which declares x read-write, so that its lock
    is taken after the pause (a plain SET is locked at fetch:
    test_protocol_timestamp.py, test_declared_write_is_locked_before_the_body)."""
    s = start(make_server)
    x, z = key + "x", key + "z"
    with s.client() as c:
        c.mset({x: "x0", z: "z0"})
        before = counters(c)

        t1 = start_running(c, [("GET", z), ("DEBUG", "SLEEP", HOLD_S),
                               ("GETSET", x, "T1")], s)
        p = c.pipeline(transaction=True)
        p.set(z, "T2")
        p.get(x)
        assert p.execute() == [True, b"x0"]

        assert t1.finish() == [b"T2", b"OK", b"x0"], \
            "T1 wrote x after a younger transaction read it (write skew)"
        assert c.mget([x, z]) == [b"T1", b"T2"]
        assert counters(c)["ts"] > before["ts"], "no abort with cause ts in INFO"
