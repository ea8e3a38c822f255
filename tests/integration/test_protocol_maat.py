"""Scenario tests of the maat protocol (RCBench's RDMA-MaaT, section 6.2.3,
cc/protocols/maat.c).

T1 is held open with DEBUG SLEEP inside its MULTI (the sleep runs inside
the transaction, on its coroutine, after its fetch read and registered
every key it reads) while other clients write and read its keys. Under
maat every transaction has an interval [lb, ub] of commit timestamps in
its transaction record; a writer that commits while T1 is listed as a
reader of its item shrinks T1's interval below its own (T1 must come
first: it read what the writer replaced), and T1 commits iff its interval
is still not empty when it decides. So a reader that was overwritten
meanwhile still commits, ordered before the writer, where an OCC protocol
(silo here) validates the version it read and aborts it; and when a
third transaction closes a cycle through T1, T1's interval is empty and
T1 aborts (cause interval) rather than commit out of order.
"""

import time

import pytest

import rckvtest

pytestmark = pytest.mark.rckv_only

# T1's pause: long enough for the other clients' commands to run whole in
# it, with margins for a loaded machine.
HOLD_S = 1.0


def line(c, proto):
    """The cc_proto_<proto> line of INFO, with the total of its aborts."""
    ln = c.info("cc").get("cc_proto_" + proto)
    assert isinstance(ln, dict), "INFO has no cc_proto_%s line" % proto
    ln = {k: int(v) for k, v in ln.items() if k == "commits" or k.startswith("aborts_")}
    ln["aborts"] = sum(v for k, v in ln.items() if k.startswith("aborts_"))
    return ln


def start(make_server, cc):
    s = make_server(opts={"cc": cc})
    with s.client() as c:
        assert c.config_get("cc") == {"cc": cc}
    return s


@pytest.mark.parametrize("cc", ["maat", "silo"])
def test_crossing_reads_and_writes_both_commit(make_server, key, cc):
    """T1 reads x and sleeps; T2 writes x and commits while T1 sleeps; T1
    then writes y and commits. The reads and writes cross (T1 read the x
    that T2 replaced, so T1 must come first, though T2 finished first).
    maat orders T1 before T2 by their intervals and commits both, T1 on
    its first attempt with the x it read (x0): no abort at all. silo
    validates x's version at T1's commit, finds T2's, and aborts T1
    (cause validate); its retry reads T2's x."""
    s = start(make_server, cc)
    x, y = key + "x", key + "y"
    with s.client() as c:
        c.mset({x: "x0", y: "y0"})
        before = line(c, cc)
        t1 = rckvtest.begin_multi(s, c, [("GET", x), ("DEBUG", "SLEEP", HOLD_S),
                                         ("SET", y, "T1")])
        time.sleep(0.1)
        assert c.set(x, "T2")  # T2: commits while T1 sleeps
        t2_done = time.monotonic()
        assert t1.is_alive(), "T1 finished before T2 wrote x"
        reply = t1.finish()
        after = line(c, cc)
        assert c.mget([x, y]) == [b"T2", b"T1"]
        assert t1.done_at > t2_done

    if cc == "silo":
        assert reply == [b"T2", b"OK", True], reply
        assert after["aborts_validate"] - before["aborts_validate"] >= 1, \
            "silo committed a read of x that T2 had replaced"
        return
    assert reply == [b"x0", b"OK", True], (
        "T1 did not commit with the x it read, ordered before T2: %r" % (reply,))
    assert after["aborts"] - before["aborts"] == 0, \
        "a transaction aborted: %r -> %r" % (before, after)
    assert after["commits"] - before["commits"] >= 2  # T2, T1


def test_interval_shrunk_by_a_writer_aborts_a_cycle(make_server, key):
    """The same T1 (reads x, sleeps, writes y) and T2 (writes x), and a
    third, T3, that reads x after T2 (T3 follows T2) and y before T1
    writes it (T3 precedes T1): T1 -> T2 -> T3 -> T1 is a cycle. T2's
    commit shrank T1's interval below T2's lb (T1 is in x's reader list);
    T3's read of y raised y's rts past T2's commit; so T1's interval is
    empty when it decides: it aborts (cause interval) and its retry reads
    T2's x. Without the shrinking (Eq. 2 of RCBench's Algorithm 10) T1
    would commit with x0: a history no serial order explains."""
    s = start(make_server, "maat")
    x, y = key + "x", key + "y"
    with s.client() as c:
        c.mset({x: "x0", y: "y0"})
        before = line(c, "maat")
        t1 = rckvtest.begin_multi(s, c, [("GET", x), ("DEBUG", "SLEEP", HOLD_S),
                                         ("SET", y, "T1")])
        time.sleep(0.1)
        assert c.set(x, "T2")
        p = c.pipeline(transaction=True)  # T3
        p.get(x)
        p.get(y)
        assert p.execute() == [b"T2", b"y0"]
        assert t1.is_alive(), "T1 finished before T2 and T3 ran"
        reply = t1.finish()
        after = line(c, "maat")
        assert c.mget([x, y]) == [b"T2", b"T1"]

    assert reply == [b"T2", b"OK", True], (
        "T1 committed with the x it read before T2, after T3 had read T2's x and "
        "the y T1 replaced (a cycle): %r" % (reply,))
    assert after["aborts_interval"] - before["aborts_interval"] >= 1, \
        "T1's first attempt did not abort with cause interval"


def test_full_list_aborts_with_its_own_cause(make_server, key):
    """maat-list-slots 1: an item lists one running reader and one running
    writer. T1 reads x and sleeps, listed as x's reader; a GET of x then
    finds the reader list full and its transaction aborts (cause
    list_full, INFO cc_aborts_list_full) rather than read x unlisted; it
    is retried until T1 has left the list, and then reads x. Back at 2
    slots (CONFIG SET, online), x's lists keep the size they were set up
    with until x moves to a new block: the GET meets a full list again."""
    s = make_server(opts={"cc": "maat", "maat-list-slots": "1"})
    x = key + "x"
    with s.client() as c:
        assert c.config_get("maat-list-slots") == {"maat-list-slots": "1"}
        c.set(x, "x0")

        def reader_meets_reader():
            before = line(c, "maat")
            t1 = rckvtest.begin_multi(s, c, [("GET", x), ("DEBUG", "SLEEP", HOLD_S)])
            time.sleep(0.1)
            t0 = time.monotonic()
            assert c.get(x) == b"x0"
            took = time.monotonic() - t0
            assert t1.finish() == [b"x0", b"OK"]
            after = line(c, "maat")
            return took, after["aborts_list_full"] - before["aborts_list_full"]

        took, full = reader_meets_reader()
        assert full >= 1, "no transaction aborted on the full reader list"
        assert took > 0.5, "the GET read x while T1 filled x's reader list"

        assert c.config_set("maat-list-slots", "2")
        assert c.config_get("maat-list-slots") == {"maat-list-slots": "2"}
        took, full = reader_meets_reader()
        assert full >= 1 and took > 0.5, "x's lists changed size without moving"
        with pytest.raises(Exception, match="maat-list-slots"):
            c.config_set("maat-list-slots", "17")
