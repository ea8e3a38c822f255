"""LATENCY LATEST / HISTORY / RESET / DOCTOR / HELP and
latency-monitor-threshold as Redis 7.0 has them; a slow command (a busy
script) is the event both servers have.

Validated against redis-server 7.0 with RCKV_TEST_TARGET=redis.
"""

import time

import pytest

BUSY = "local i=0 while i<3000000 do i=i+1 end return 1"
DISABLED = (b"I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis "
            b"instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" "
            b"in order to enable it. If we weren't in a deep space mission I'd suggest to take a "
            b"look at https://redis.io/topics/latency-monitor.\n")
NO_SPIKE = (b"Dave, no latency spike was observed during the lifetime of this Redis instance, "
            b"not in the slightest bit. I honestly think you ought to sit down calmly, take a "
            b"stress pill, and think things over.\n")


@pytest.fixture
def c(server):
    conn = server.raw()
    try:
        conn.call("LATENCY", "RESET")
        yield conn
    finally:
        conn.call("CONFIG", "SET", "latency-monitor-threshold", "0")
        conn.call("LATENCY", "RESET")
        conn.close()


def test_quiet(c):
    assert c.call_raw("CONFIG", "GET", "latency-monitor-threshold") == (
        b"*2\r\n$25\r\nlatency-monitor-threshold\r\n$1\r\n0\r\n")
    c.call("EVAL", BUSY, "0")  # threshold 0: nothing kept
    assert c.call_raw("LATENCY", "LATEST") == b"*0\r\n"
    assert c.call_raw("LATENCY", "HISTORY", "command") == b"*0\r\n"
    assert c.call_raw("LATENCY", "RESET", "foo") == b":0\r\n"
    assert c.call("LATENCY", "DOCTOR") == DISABLED
    assert c.call_raw("LATENCY", "HISTORY") == (
        b"-ERR wrong number of arguments for 'latency|history' command\r\n")
    assert c.call("LATENCY", "HELP")[0] == (
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    assert c.call_raw("CONFIG", "SET", "latency-monitor-threshold", "-1").startswith(
        b"-ERR CONFIG SET failed (possibly related to argument 'latency-monitor-threshold')")


def test_slow_command_is_an_event(c):
    assert c.call("CONFIG", "SET", "latency-monitor-threshold", "1") == "OK"
    assert c.call("LATENCY", "DOCTOR") == NO_SPIKE
    before = int(time.time())
    assert c.call("EVAL", BUSY, "0") == 1
    # rckv may also have seen a fabric-wait of 1 ms on a loaded machine.
    latest = [e for e in c.call("LATENCY", "LATEST") if e[0] != b"fabric-wait"]
    assert len(latest) == 1
    name, when, last, worst = latest[0]
    assert name == b"command" and when >= before and 1 <= last <= worst
    hist = c.call("LATENCY", "HISTORY", "command")
    assert hist == [[when, last]]
    doc = c.call("LATENCY", "DOCTOR")
    assert doc.startswith(b"Dave, I have observed latency spikes in this Redis instance.")
    assert b"1. command: 1 latency spikes" in doc
    assert c.call_raw("LATENCY", "RESET", "command", "foo") == b":1\r\n"
    assert [e for e in c.call("LATENCY", "LATEST") if e[0] != b"fabric-wait"] == []


def test_histogram(c, key):
    assert c.call("CONFIG", "RESETSTAT") == "OK"
    for _ in range(5):
        c.call("SET", key, "1")
    c.call("CONFIG", "GET", "port")
    got = c.call("LATENCY", "HISTOGRAM", "set", "nosuch")
    assert got[0] == b"set" and len(got) == 2
    entry = dict(zip(got[1][::2], got[1][1::2]))
    assert entry[b"calls"] == 5
    hist = entry[b"histogram_usec"]
    bounds, counts = hist[::2], hist[1::2]
    assert bounds == sorted(bounds) and counts == sorted(counts) and counts[-1] == 5
    # A container's name gives its subcommands.
    got = c.call("LATENCY", "HISTOGRAM", "config")
    assert b"config|get" in got[::2]
    assert c.call("LATENCY", "HISTOGRAM", "nosuch") == []


@pytest.mark.rckv_only
def test_fabric_wait_is_an_event(make_server):
    """A transaction's round trip that waits the threshold or more is the
    `fabric-wait` event (here each round trip is made to take 3 ms with
    fabric-delay-us, as a slow network would); nothing below it."""
    s = make_server(opts={"fabric-delay-us": 3000})
    with s.raw() as c:
        assert c.call("SET", "k", "v") == "OK"
        assert c.call_raw("LATENCY", "LATEST") == b"*0\r\n"  # monitor off: nothing
        assert c.call("CONFIG", "SET", "latency-monitor-threshold", "2") == "OK"
        assert c.call("MSET", "a", "1", "b", "2") == "OK"
        latest = {e[0]: e for e in c.call("LATENCY", "LATEST")}
        assert b"fabric-wait" in latest, latest
        assert 2 <= latest[b"fabric-wait"][2] < 1000, latest
        assert b"fabric-wait" in c.call("LATENCY", "DOCTOR")
        assert c.call("CONFIG", "SET", "latency-monitor-threshold", "50") == "OK"
        assert c.call("LATENCY", "RESET") >= 1
        c.call("MSET", "a", "1", "b", "2")
        assert c.call_raw("LATENCY", "LATEST") == b"*0\r\n"
