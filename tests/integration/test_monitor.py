"""MONITOR as Redis 7.0 shows commands: after they ran, admin commands
hidden, AUTH and HELLO secrets redacted, a MULTI's commands at EXEC, with
Redis's quoting. Monitors and clients on different workers.

Validated against redis-server 7.0 with RCKV_TEST_TARGET=redis.
"""

import re

LINE = re.compile(rb"^\+(\d+)\.(\d{6}) \[0 ([0-9.]+:\d+|lua)\] (.*)\r\n$")


def addr_of(c):
    return re.search(r"addr=(\S+)", c.call("CLIENT", "INFO").decode()).group(1).encode()


def lines(mon, n):
    out = []
    for _ in range(n):
        m = LINE.match(mon.read_raw())
        assert m, out
        out.append((m.group(3), m.group(4)))
    return out


def test_monitor_lines(conns, key):
    mon, c = conns(), conns()
    addr = addr_of(c)
    assert mon.call_raw("MONITOR") == b"+OK\r\n"
    k = key.encode()
    cmds = [("SET", key, 'a b"\n\x01\\'), ("CONFIG", "GET", "port"), ("AUTH", "pw"),
            ("HELLO", "2", "AUTH", "default", "pw"), ("MULTI",), ("INCR", key + "n"),
            ("GET", key), ("EXEC",), ("NOSUCH",), ("GET",), ("SLOWLOG", "LEN"), ("PING",)]
    for cmd in cmds:
        c.call(*cmd)
    got = lines(mon, 8)
    assert all(a == addr for a, _ in got)
    assert [l for _, l in got] == [
        b'"SET" "' + k + b'" "a b\\"\\n\\x01\\\\"',
        b'"AUTH" "(redacted)"',
        b'"HELLO" "2" "AUTH" "(redacted)" "(redacted)"',
        b'"MULTI"',
        b'"INCR" "' + k + b'n"',
        b'"GET" "' + k + b'"',
        b'"EXEC"',
        b'"PING"',
    ]


def test_monitor_shows_a_scripts_commands(conns, key):
    """EVAL's line first, then each redis.call from "lua", as Redis 7.0."""
    mon, c = conns(), conns()
    addr = addr_of(c)
    assert mon.call_raw("MONITOR") == b"+OK\r\n"
    body = "redis.call('SET', KEYS[1], 'v') return redis.call('GET', KEYS[1])"
    assert c.call("EVAL", body, "1", key) == b"v"
    k = key.encode()
    assert lines(mon, 3) == [(addr, b'"EVAL" "' + body.encode() + b'" "1" "' + k + b'"'),
                             (b"lua", b'"SET" "' + k + b'" "v"'),
                             (b"lua", b'"GET" "' + k + b'"')]


def test_monitor_sees_every_worker_and_reset_ends_it(conns, key):
    mon = conns()
    clients = [conns() for _ in range(4)]  # spread over the workers
    assert mon.call_raw("MONITOR") == b"+OK\r\n"
    for i, c in enumerate(clients):
        c.call("SET", key, str(i))
    got = sorted(l for _, l in lines(mon, 4))
    assert got == [b'"SET" "%s" "%d"' % (key.encode(), i) for i in range(4)]
    assert mon.call_raw("RESET") == b"+RESET\r\n"
    clients[0].call("SET", key, "after")
    assert mon.call_raw("PING") == b"+PONG\r\n"  # and no line before it


def test_monitor_in_multi(raw):
    assert raw.call_raw("MULTI") == b"+OK\r\n"
    assert raw.call_raw("MONITOR") == b"+QUEUED\r\n"
    assert raw.call_raw("EXEC") == (
        b"*1\r\n-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n")
    line = [l for l in raw.call("CLIENT", "LIST").decode().splitlines()
            if "cmd=client|list" in l][0]
    assert "flags=N" in line
