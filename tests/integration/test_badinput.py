"""Bad input: malformed RESP, huge lengths, binary data, over-limit keys and
values. Each gets a clear error reply (a protocol error also closes that
one connection, as Redis does), the server stays up, and clients that were
connected before - idle, inside MULTI, or WATCHing - keep working.

Protocol error texts are Redis 7.0's (validated with RCKV_TEST_TARGET=redis).
"""

import re
import socket
import time

import pytest

from rckvtest import encode

OK = b"+OK\r\n"
PONG = b"+PONG\r\n"


class Bystanders:
    """Connections opened before the bad input, in three states."""

    def __init__(self, server, key):
        self.server, self.key = server, key + "bystander"
        self.idle = server.raw()
        self.multi = server.raw()
        self.watch = server.raw()
        assert self.idle.call_raw("SET", self.key, "0") == OK
        assert self.multi.call_raw("MULTI") == OK
        assert self.multi.call_raw("INCR", self.key) == b"+QUEUED\r\n"
        assert self.watch.call_raw("WATCH", self.key + ":w") == OK

    def check(self):
        assert self.server.alive(), "server died\n" + self.server.log_tail()
        assert self.idle.call_raw("PING") == PONG
        assert self.multi.call_raw("EXEC") == b"*1\r\n:1\r\n"
        assert self.watch.call_raw("MULTI") == OK
        assert self.watch.call_raw("GET", self.key) == b"+QUEUED\r\n"
        assert self.watch.call_raw("EXEC") == b"*1\r\n$1\r\n1\r\n"
        with self.server.raw() as fresh:  # and new clients can connect
            assert fresh.call_raw("INCR", self.key) == b":2\r\n"

    def close(self):
        for c in (self.idle, self.multi, self.watch):
            c.close()


@pytest.fixture
def bystanders(server, key):
    b = Bystanders(server, key)
    try:
        yield b
    finally:
        b.close()


def protocol_error(raw, data, reply):
    """Send data; expect exactly `reply` and then the connection closed
    promptly, without the server waiting for more bytes."""
    raw.send(data)
    assert raw.read_raw() == reply
    # Generous for sanitizer builds; a server that waits for the rest of a
    # declared length never closes at all.
    assert raw.expect_closed(timeout=5.0), "connection not closed after a protocol error"
    assert raw.buf == b""


@pytest.mark.parametrize("data,reply", [
    (b"*1\r\n$abc\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*1\r\n$-1\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*1\r\n$99999999999\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*1\r\n$536870913\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*99999999999\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*2\r\n*1\r\n$1\r\na\r\n", b"-ERR Protocol error: expected '$', got '*'\r\n"),
    (b"*1\r\n:1\r\n", b"-ERR Protocol error: expected '$', got ':'\r\n"),
    (b'set a "abc\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    (b"a" * 66000, b"-ERR Protocol error: too big inline request\r\n"),
    (b"*" + b"1" * 66000, b"-ERR Protocol error: too big mbulk count string\r\n"),
    (b"*1\r\n$" + b"1" * 66000, b"-ERR Protocol error: too big bulk count string\r\n"),
], ids=["bulk-len-text", "bulk-len-negative", "bulk-len-huge", "bulk-len-over-512mb",
        "multibulk-len-text", "multibulk-len-huge", "nested-array", "integer-in-array",
        "unbalanced-quotes", "inline-too-big", "mbulk-count-too-big", "bulk-count-too-big"])
def test_protocol_error(server, raw, bystanders, data, reply):
    protocol_error(raw, data, reply)
    bystanders.check()


def test_commands_before_protocol_error_are_answered(server, raw, bystanders, key):
    # Replies to the good commands in the same packet come first.
    raw.send(encode("SET", key, "1") + encode("INCR", key) + b"*1\r\n$x\r\n")
    assert raw.read_raw() == OK
    assert raw.read_raw() == b":2\r\n"
    assert raw.read_raw() == b"-ERR Protocol error: invalid bulk length\r\n"
    assert raw.expect_closed(timeout=5.0)
    bystanders.check()
    with server.raw() as c:
        assert c.call_raw("GET", key) == b"$1\r\n2\r\n"


def test_huge_bulk_does_not_wait_for_data(server, raw, bystanders):
    # The declared 99,999,999,999 bytes never come; the server must reply
    # and close at once instead of buffering or waiting for them. The
    # socket stays open on our side, so only the server can end it.
    protocol_error(raw, b"*1\r\n$99999999999\r\n",
                   b"-ERR Protocol error: invalid bulk length\r\n")
    bystanders.check()


def test_inline_and_empty_requests(raw, bystanders, key):
    raw.send(b"\r\n  \r\nPING\r\n set  %s  \"b c\" \r\nget %s\n*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n"
             % (key.encode(), key.encode()))
    assert [raw.read_raw() for _ in range(4)] == [PONG, OK, b"$3\r\nb c\r\n", PONG]
    assert raw.call_raw("") == b"-ERR unknown command '', with args beginning with: \r\n"
    assert raw.call_raw("PING") == PONG
    bystanders.check()


def test_request_split_into_single_bytes(raw, bystanders, key):
    # The parser must resume anywhere, even inside "\r\n" and length fields.
    raw.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = encode("SET", key, "x" * 20) + encode("GET", key)
    for i in range(len(data)):
        raw.send(data[i:i + 1])
        if i % 8 == 0:
            time.sleep(0.002)
    assert raw.read_raw() == OK
    assert raw.read_raw() == b"$20\r\n" + b"x" * 20 + b"\r\n"
    bystanders.check()


def test_many_pipelined_commands(raw, bystanders, key):
    n = 5000
    raw.send(b"".join(encode("INCR", key) for _ in range(n)))
    assert [raw.read_raw() for _ in range(n)] == [b":%d\r\n" % i for i in range(1, n + 1)]
    bystanders.check()


def test_disconnect_mid_request(server, bystanders, key):
    for partial in (b"*3\r\n$3\r\nSET\r\n$3\r\nab", b"*2\r\n", b"SET a", b"*1\r\n$1000\r\nxx"):
        with server.raw() as c:
            c.send(partial)
    # A client that disconnects inside MULTI leaves nothing behind.
    with server.raw() as c:
        assert c.call_raw("MULTI") == OK
        assert c.call_raw("SET", key + "ghost", "1") == b"+QUEUED\r\n"
    with server.raw() as c:
        assert c.call_raw("GET", key + "ghost") == b"$-1\r\n"
    bystanders.check()


def test_unknown_command_keeps_connection(raw, bystanders):
    assert raw.call_raw("nosuchcommand", "a") == \
        b"-ERR unknown command 'nosuchcommand', with args beginning with: 'a' \r\n"
    assert raw.call_raw("PING") == PONG
    bystanders.check()


BINARY_KEYS = [b"a\x00b", b"\r\n", b"key\r\nwith\nnewlines\r", b"\x00", b"\xff\xfe\x80",
               b" spaced key ", b"*1\r\n$4\r\nPING\r\n"]


def test_binary_roundtrip(server, raw, bystanders, key):
    values = [bytes(range(256)) * 4, b"", b"\x00", b"\r\n", b"$-1\r\n", b"\n" * 100,
              b"-ERR not an error\r\n"]
    pre = key.encode()
    for i, (k, v) in enumerate(zip(BINARY_KEYS, values)):
        assert raw.call_raw("SET", pre + k, v) == OK
        assert raw.call_raw("GET", pre + k) == b"$%d\r\n%s\r\n" % (len(v), v), (k, v)
        assert raw.call_raw("STRLEN", pre + k) == b":%d\r\n" % len(v)
        assert raw.call_raw("APPEND", pre + k, b"\x00\r\n") == b":%d\r\n" % (len(v) + 3)
    r = server.client()
    try:
        keys = [pre + k for k in BINARY_KEYS]
        assert r.mset({k: k[::-1] + b"\x00" for k in keys})
        assert r.mget(keys) == [k[::-1] + b"\x00" for k in keys]
        assert r.exists(*keys) == len(keys)
        assert r.delete(*keys) == len(keys)
        assert r.mget(keys) == [None] * len(keys)
    finally:
        r.close()
    bystanders.check()


# --- rckv's key and value limits ----------------------------------------------

KEY_ERR = re.compile(rb"^-ERR [^\r\n]*max-key-bytes[^\r\n]*\r\n$")
VALUE_ERR = re.compile(rb"^-ERR [^\r\n]*max-value-bytes[^\r\n]*\r\n$")


@pytest.mark.rckv_only
def test_key_and_value_limits(make_server):
    s = make_server(opts={"max-key-bytes": 64, "max-value-bytes": 1024})
    by = Bystanders(s, "limits:")
    c = s.raw()
    try:
        k64, k65 = b"k" * 64, b"k" * 65
        v1024, v1025 = b"v" * 1024, b"v" * 1025
        dbsize = c.call("DBSIZE")
        # At the limit: fine.
        assert c.call_raw("SET", k64, "x") == OK
        assert c.call_raw("SET", "val", v1024) == OK
        dbsize += 2
        # Over it: a clear error, nothing written, the connection usable.
        for args, pat in [(("SET", k65, "x"), KEY_ERR),
                          (("SET", "new", v1025), VALUE_ERR),
                          (("SET", "val", v1025), VALUE_ERR),
                          (("MSET", "m1", "1", "m2", v1025), VALUE_ERR),
                          (("MSET", "m1", "1", k65, "1"), KEY_ERR),
                          (("APPEND", "val", "x"), VALUE_ERR),
                          (("SETRANGE", "val", "1024", "x"), VALUE_ERR),
                          (("INCR", k65), KEY_ERR)]:
            reply = c.call_raw(*args)
            assert pat.match(reply), (args[0], reply)
            assert c.call_raw("PING") == PONG
        assert c.call("DBSIZE") == dbsize
        assert c.call_raw("GET", "val") == b"$1024\r\n" + v1024 + b"\r\n"
        for k in ("new", "m1", "m2"):
            assert c.call_raw("EXISTS", k) == b":0\r\n", k
        # Inside MULTI: either refused at queue time (EXECABORT) or an error
        # in its slot of the EXEC array; the big value is never stored.
        assert c.call_raw("MULTI") == OK
        assert c.call_raw("SET", "t1", "1") == b"+QUEUED\r\n"
        q = c.call_raw("SET", "t2", v1025)
        ex = c.call("EXEC")
        if q == b"+QUEUED\r\n":
            assert isinstance(ex, list) and len(ex) == 2 and ex[0] == "OK", ex
            assert VALUE_ERR.match(b"-" + ex[1].encode() + b"\r\n"), ex
        else:
            assert VALUE_ERR.match(q), q
            assert ex.startswith("EXECABORT"), ex
        assert c.call_raw("EXISTS", "t2") == b":0\r\n"
        assert c.call_raw("PING") == PONG
        by.check()
    finally:
        c.close()
        by.close()
