"""Scenario tests of the timestamp protocol (RDMA-T/O, cc/protocols/timestamp.c).

Each scenario holds an older transaction open with DEBUG SLEEP inside its
MULTI (the sleep runs inside the transaction, on its coroutine, after the
transaction took its begin timestamp) while a younger transaction runs to
its end. Without the rule under test the two would form a cycle that both
EXEC replies show (each saw the other's key as it was before the other's
write): the write-skew anomaly that serializability forbids. With it, the
EXEC replies and the final values are those of one serial order.
"""

import time

import pytest

import rckvtest

pytestmark = pytest.mark.rckv_only

# The older transaction's pause: long enough for the younger one to run
# whole in it (the test waits until the older EXEC has started).
HOLD_S = 0.8


def late_set(x, value):
    """A write of x whose lock is taken where the body reaches it, after
    the pause: GETSET reads x too, so the MULTI declares x read-write and
    its fetch stage only reads x. A plain SET declares x write-only,
    and the fetch locks it before the body runs (cc/fetch.c, write_post):
    a younger reader of x then waits for the older writer instead
    (test_declared_write_is_locked_before_the_body)."""
    return ("GETSET", x, value)


def start(make_server):
    s = make_server(opts={"cc": "timestamp"})
    with s.client() as c:
        assert c.config_get("cc") == {"cc": "timestamp"}
    return s


def ts_counters(c):
    """(cc_aborts_ts, aborts_ts of the cc_proto_timestamp line, cc_lock_waits)."""
    info = c.info()
    proto = info.get("cc_proto_timestamp")
    assert isinstance(proto, dict), "INFO has no cc_proto_timestamp line: %r" % (proto,)
    return int(info["cc_aborts_ts"]), int(proto["aborts_ts"]), int(info["cc_lock_waits"])


def run_older_then_younger(server, older_cmds, younger_cmds):
    """Start the older MULTI, wait until its EXEC runs (CLIENT LIST shows
    cmd=exec for its connection), then run the younger MULTI to its end
    during the older one's DEBUG SLEEP. Returns (older reply, younger reply)."""
    with server.client() as c:
        older = rckvtest.begin_multi(server, c, older_cmds)
        # Its commands before the sleep take microseconds; the sleep lasts HOLD_S.
        time.sleep(0.1)
        p = c.pipeline(transaction=True)
        for cmd in younger_cmds:
            p.execute_command(*cmd)
        younger = p.execute()
        return older.finish(), younger


@pytest.mark.parametrize("x_exists", [True, False], ids=["x-present", "x-absent"])
def test_late_write_is_rejected(make_server, key, x_exists):
    """T1 (older) reads z and then, after a younger T2 read x, writes x.
    T2 also writes z. T1's write of x comes too late in timestamp order
    (x's rts is T2's timestamp): it is rejected, T1 aborts with cause ts
    and its retry, younger than T2, reads T2's z. Without the rule T1
    would commit having read the old z while T2 read the old x.
    x-absent: T2 reads x while it does not exist; the absent key must keep
    its rts (it is not reaped at T2's commit) for T1's write to be late."""
    s = start(make_server)
    x, z = key + "x", key + "z"
    with s.client() as c:
        c.set(z, "z0")
        if x_exists:
            c.set(x, "x0")
        ts0, proto_ts0, _ = ts_counters(c)

        t1, t2 = run_older_then_younger(
            s,
            [("GET", z), ("DEBUG", "SLEEP", HOLD_S), late_set(x, "T1")],
            [("SET", z, "T2"), ("GET", x)])

        assert t2 == [True, b"x0" if x_exists else None]
        # T1 ran again after T2: it saw T2's z (serial order T2, T1).
        assert t1 == [b"T2", b"OK", b"x0" if x_exists else None], \
            "T1 committed its write of x after T2 read x, on the old z (write skew)"
        assert c.mget([x, z]) == [b"T1", b"T2"]
        ts1, proto_ts1, _ = ts_counters(c)
        assert ts1 - ts0 >= 1, "no abort with cause ts in INFO cc_aborts_ts"
        assert proto_ts1 - proto_ts0 >= 1, "no aborts_ts on the cc_proto_timestamp line"


def test_reader_waits_for_older_pending_write(make_server, key):
    """T1 (older) reads y and writes x, and keeps its write pending (the
    sleep). A younger T2 reads x: it must wait for T1 and see its x (T1
    precedes it in timestamp order), not read the old x past T1's pending
    write; T2 also writes y, which T1 read before. Without the wait both
    would see the other's key as it was before (write skew)."""
    s = start(make_server)
    x, y = key + "x", key + "y"
    with s.client() as c:
        c.mset({x: "x0", y: "y0"})
        ts0, _, waits0 = ts_counters(c)

        t1, t2 = run_older_then_younger(
            s,
            [("GET", y), ("SET", x, "T1"), ("DEBUG", "SLEEP", HOLD_S)],
            [("GET", x), ("SET", y, "T2")])

        assert t1 == [b"y0", True, b"OK"]
        assert t2 == [b"T1", True], "T2 read x past the older T1's pending write"
        assert c.mget([x, y]) == [b"T1", b"T2"]
        ts1, _, waits1 = ts_counters(c)
        assert waits1 > waits0, "T2 never waited (INFO cc_lock_waits)"
        assert ts1 == ts0, "neither transaction had to abort"


@pytest.mark.parametrize("cc", ["timestamp", "mvcc"])
def test_declared_write_is_locked_before_the_body(make_server, key, cc):
    """The scenario of test_late_write_is_rejected with a plain SET of x,
    which the MULTI declares write-only: the fetch stage locks x before
    T1's body runs (its pause included), so the younger T2's read of x
    finds T1's pending write, waits for it (timestamp; mvcc's R2) and
    reads T1's x. One serial order, T1 then T2: T1 read the old z and
    commits without a retry."""
    s = make_server(opts={"cc": cc})
    x, z = key + "x", key + "z"
    with s.client() as c:
        c.mset({x: "x0", z: "z0"})
        t1, t2 = run_older_then_younger(
            s,
            [("GET", z), ("DEBUG", "SLEEP", HOLD_S), ("SET", x, "T1")],
            [("SET", z, "T2"), ("GET", x)])
        assert t1 == [b"z0", b"OK", True]
        assert t2 == [True, b"T1"], "T2 read x past the older T1's pending write"
        assert c.mget([x, z]) == [b"T1", b"T2"]


@pytest.mark.parametrize("cc", ["timestamp", "mvcc"])
@pytest.mark.parametrize("x_exists", [True, False], ids=["x-present", "x-absent"])
def test_plain_get_marks_its_read_in_real_time(make_server, key, cc, x_exists):
    """As above, but x is read by a plain GET (no MULTI) sent after the
    younger T2 has finished. T1 (older) read z before T2 wrote it; the GET
    of x must leave its read timestamp on x (a placeholder if x is absent,
    cc.h reads_mark), so T1's later write of x is too late and T1 runs
    again after T2. Without that mark T1 commits on the old z: T2 before
    the GET (real time), the GET before T1 (it missed T1's x), T1 before T2
    (it missed T2's z), a cycle the checker reports as G2-realtime."""
    s = make_server(opts={"cc": cc})
    x, z = key + "x", key + "z"
    with s.client() as c:
        c.set(z, "z0")
        if x_exists:
            c.set(x, "x0")
        t1 = rckvtest.begin_multi(s, c, [("GET", z), ("DEBUG", "SLEEP", HOLD_S),
                                         late_set(x, "T1")])
        time.sleep(0.1)
        assert c.set(z, "T2")
        assert c.get(x) == (b"x0" if x_exists else None)
        assert t1.finish() == [b"T2", b"OK", b"x0" if x_exists else None], \
            "T1 committed its write of x after a finished GET missed it, on the old z"
        assert c.mget([x, z]) == [b"T1", b"T2"]
