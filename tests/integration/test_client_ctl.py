"""CLIENT KILL, PAUSE / UNPAUSE and REPLY as Redis 7.0 has them, with
clients on every worker.

Validated against redis-server 7.0 with RCKV_TEST_TARGET=redis.
"""

import re
import time

import pytest

from rckvtest import encode


def info(c, field):
    return re.search(field + r"=(\S*)", c.call("CLIENT", "INFO").decode()).group(1)


def test_kill_errors(raw):
    assert raw.call_raw("CLIENT", "KILL", "1.2.3.4:5") == b"-ERR No such client\r\n"
    assert raw.call_raw("CLIENT", "KILL", "ID", "x") == (
        b"-ERR client-id should be greater than 0\r\n")
    assert raw.call_raw("CLIENT", "KILL", "ID", "-1") == (
        b"-ERR client-id should be greater than 0\r\n")
    assert raw.call_raw("CLIENT", "KILL", "ID", "999999") == b":0\r\n"
    assert raw.call_raw("CLIENT", "KILL", "foo", "bar") == b"-ERR syntax error\r\n"
    assert raw.call_raw("CLIENT", "KILL", "TYPE", "foo") == b"-ERR Unknown client type 'foo'\r\n"
    assert raw.call_raw("CLIENT", "KILL", "USER", "nobody") == b"-ERR No such user 'nobody'\r\n"
    assert raw.call_raw("CLIENT", "KILL", "SKIPME", "maybe") == b"-ERR syntax error\r\n"
    assert raw.call_raw("CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "no") == b":0\r\n"
    assert raw.call_raw("CLIENT", "KILL", "LADDR", "1.1.1.1:1") == b":0\r\n"
    assert raw.call_raw("CLIENT", "KILL", "TYPE", "master") == b":0\r\n"
    assert raw.call_raw("CLIENT", "KILL") == (
        b"-ERR wrong number of arguments for 'client|kill' command\r\n")


def test_kill_by_id_addr_and_type(conns):
    me = conns()
    victims = [conns() for _ in range(4)]  # on both workers
    ids = [info(v, "id") for v in victims]
    assert me.call_raw("CLIENT", "KILL", "ID", ids[0]) == b":1\r\n"
    assert victims[0].expect_closed()
    addr = info(victims[1], "addr")
    assert me.call_raw("CLIENT", "KILL", addr) == b"+OK\r\n"  # the old form
    assert victims[1].expect_closed()
    assert victims[2].call_raw("SUBSCRIBE", "x")
    assert me.call_raw("CLIENT", "KILL", "TYPE", "pubsub") == b":1\r\n"
    assert victims[2].expect_closed()
    assert victims[3].call_raw("PING") == b"+PONG\r\n"
    # USER default, SKIPME yes (the default): everyone else.
    assert me.call_raw("CLIENT", "KILL", "USER", "default") == b":1\r\n"
    assert victims[3].expect_closed()
    assert me.call_raw("PING") == b"+PONG\r\n"
    # SKIPME no: itself too, after the reply.
    assert me.call_raw("CLIENT", "KILL", "ID", info(me, "id"), "SKIPME", "no") == b":1\r\n"
    assert me.expect_closed()


def test_pause_errors(raw):
    assert raw.call_raw("CLIENT", "PAUSE", "x") == (
        b"-ERR timeout is not an integer or out of range\r\n")
    assert raw.call_raw("CLIENT", "PAUSE", "-1") == b"-ERR timeout is negative\r\n"
    assert raw.call_raw("CLIENT", "PAUSE", "10", "foo") == (
        b"-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n")
    assert raw.call_raw("CLIENT", "UNPAUSE") == b"+OK\r\n"


def test_pause_write_holds_writes_only(conns, key):
    ctl, w, r = conns(), conns(), conns()
    assert ctl.call_raw("CLIENT", "PAUSE", "100000", "WRITE") == b"+OK\r\n"
    try:
        w.send(encode("SET", key, "1"))
        assert r.call_raw("GET", key) == b"$-1\r\n"  # reads go on
        time.sleep(0.2)
        w.sock.settimeout(0.2)
        with pytest.raises(OSError):  # the SET waits
            w.read_raw()
        w.sock.settimeout(10)
    finally:
        assert ctl.call_raw("CLIENT", "UNPAUSE") == b"+OK\r\n"
    assert w.read_raw() == b"+OK\r\n"
    assert r.call_raw("GET", key) == b"$1\r\n1\r\n"


def test_pause_all_ends_by_itself(conns, key):
    ctl, c = conns(), conns()
    start = time.monotonic()
    assert ctl.call_raw("CLIENT", "PAUSE", "300") == b"+OK\r\n"
    assert c.call_raw("GET", key) == b"$-1\r\n"
    assert time.monotonic() - start >= 0.25


def test_reply_off_skip_on(raw, key):
    assert raw.call_raw("CLIENT", "REPLY", "foo") == b"-ERR syntax error\r\n"
    raw.send(encode("CLIENT", "REPLY", "SKIP") + encode("SET", key, "1") + encode("PING"))
    assert raw.read_raw() == b"+PONG\r\n"
    raw.send(encode("CLIENT", "REPLY", "OFF") + encode("INCR", key) + encode("SET", key, "x") +
             encode("INCR", key) + encode("CLIENT", "REPLY", "ON"))
    assert raw.read_raw() == b"+OK\r\n"
    assert raw.call_raw("GET", key) == b"$1\r\nx\r\n"


@pytest.mark.rckv_only
def test_tracking_says_so(raw):
    assert raw.call_raw("CLIENT", "TRACKING", "on") == (
        b"-ERR CLIENT TRACKING is not supported by rckv: it has no client-side caching "
        b"invalidation yet\r\n")
