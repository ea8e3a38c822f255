"""SLOWLOG, INFO commandstats and INFO latencystats as Redis 7.0 has them.

Validated against redis-server 7.0 with RCKV_TEST_TARGET=redis; the
transaction notes of rckv's entries are checked against rckv only.
"""

import re

import pytest

from rckvtest import REDIS_MODE


@pytest.fixture
def c(server):
    conn = server.raw()
    try:
        yield conn
    finally:
        conn.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
        conn.call("CONFIG", "SET", "slowlog-max-len", "128")
        conn.close()


def log_all(c):
    c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    c.call("SLOWLOG", "RESET")


def entries(c, n=10):
    return c.call("SLOWLOG", "GET", str(n))


def test_errors_and_help(c):
    assert c.call_raw("SLOWLOG", "GET", "x") == b"-ERR count should be greater than or equal to -1\r\n"
    assert c.call_raw("SLOWLOG", "GET", "-2") == b"-ERR count should be greater than or equal to -1\r\n"
    assert c.call_raw("SLOWLOG", "GET", "1", "2") == (
        b"-ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.\r\n")
    assert c.call_raw("SLOWLOG", "LEN", "1") == (
        b"-ERR wrong number of arguments for 'slowlog|len' command\r\n")
    assert c.call_raw("SLOWLOG", "foo") == b"-ERR unknown subcommand 'foo'. Try SLOWLOG HELP.\r\n"
    assert c.call_raw("SLOWLOG") == b"-ERR wrong number of arguments for 'slowlog' command\r\n"
    help_ = c.call("SLOWLOG", "HELP")
    assert len(help_) == 12 and help_[0].startswith("SLOWLOG <subcommand>")
    got = c.call("CONFIG", "GET", "slowlog*")  # in no particular order in Redis
    assert dict(zip(got[::2], got[1::2])) == {b"slowlog-log-slower-than": b"10000",
                                              b"slowlog-max-len": b"128"}
    assert c.call_raw("CONFIG", "SET", "slowlog-max-len", "-1") == (
        b"-ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument "
        b"must be between 0 and 9223372036854775807 inclusive\r\n")
    assert c.call_raw("CONFIG", "SET", "slowlog-log-slower-than", "-5") == (
        b"-ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - "
        b"argument must be between -1 and 9223372036854775807 inclusive\r\n")


def test_entry_format(c, key):
    c.call("CLIENT", "SETNAME", "slowpoke")
    addr = re.search(r"addr=(\S+)", c.call("CLIENT", "INFO").decode()).group(1)
    log_all(c)
    assert c.call("SeT", key, "v") == "OK"
    e = entries(c, 1)[0]
    assert len(e) == 6
    assert isinstance(e[0], int) and isinstance(e[1], int) and e[2] >= 0
    assert e[3] == [b"SeT", key.encode(), b"v"]  # as sent
    assert e[4] == addr.encode() and e[5] == b"slowpoke"
    # Newer entries first, ids increasing.
    c.call("GET", key)
    got = entries(c, 3)
    assert got[0][3][0] == b"GET" and got[0][0] > got[1][0]
    assert c.call("SLOWLOG", "GET", "0") == []
    n = c.call("SLOWLOG", "LEN")
    assert len(c.call("SLOWLOG", "GET", "-1")) == n + 1  # and the LEN itself


def test_trimming(c, key):
    log_all(c)
    keys = [key + str(i) for i in range(39)]
    c.call("DEL", *keys)
    args = entries(c, 1)[0][3]
    assert len(args) == 32
    assert args[:31] == [b"DEL"] + [k.encode() for k in keys[:30]]
    assert args[31] == b"... (9 more arguments)"
    c.call("SET", key, "x" * 200)
    args = entries(c, 1)[0][3]
    assert args[2] == b"x" * 128 + b"... (72 more bytes)"


def test_max_len_and_reset(c, key):
    log_all(c)
    c.call("CONFIG", "SET", "slowlog-max-len", "3")
    for i in range(6):
        c.call("SET", key, str(i))
    assert c.call("SLOWLOG", "LEN") == 3
    k = key.encode()
    assert [e[3] for e in entries(c)] == [[b"SLOWLOG", b"LEN"], [b"SET", k, b"5"],
                                          [b"SET", k, b"4"]]
    assert c.call("SLOWLOG", "RESET") == "OK"
    c.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    c.call("SLOWLOG", "RESET")
    c.call("SET", key, "x")
    assert c.call("SLOWLOG", "LEN") == 0


@pytest.mark.skipif(REDIS_MODE, reason="rckv's transaction note")
def test_transaction_entry_names_protocol(c, key):
    log_all(c)
    c.call("MULTI")
    c.call("SET", key, "1")
    c.call("INCR", key)
    assert c.call("EXEC") == ["OK", 2]
    e = entries(c, 1)[0]
    assert e[3][0] == b"EXEC"
    assert re.fullmatch(rb"\(rckv: cc=\w+ retries=\d+\)", e[3][-1])
    c.call("EVAL", "return redis.call('GET', KEYS[1])", "1", key)
    e = entries(c, 1)[0]
    assert e[3][:2] == [b"EVAL", b"return redis.call('GET', KEYS[1])"]
    assert e[3][-1].startswith(b"(rckv: cc=")
    # A plain command without retries has no note.
    c.call("GET", key)
    assert entries(c, 1)[0][3] == [b"GET", key.encode()]


def stats(c, section):
    out = {}
    for line in c.call("INFO", section).decode().splitlines():
        if ":" in line and not line.startswith("#"):
            name, rest = line.split(":", 1)
            out[name] = dict(kv.split("=") for kv in rest.split(","))
    return out


def test_commandstats(c, key):
    assert c.call("CONFIG", "RESETSTAT") == "OK"
    c.call("SET", key, "1")
    c.call("SET", key, "a")
    c.call("GET", key)
    assert c.call_raw("INCR", key) == b"-ERR value is not an integer or out of range\r\n"
    c.call("GET")  # wrong arity: rejected
    c.call("CONFIG", "GET", "port")
    s = stats(c, "commandstats")
    assert s["cmdstat_set"]["calls"] == "2"
    assert s["cmdstat_get"] == {**s["cmdstat_get"], "calls": "1", "rejected_calls": "1",
                                "failed_calls": "0"}
    assert s["cmdstat_incr"]["failed_calls"] == "1"
    assert "cmdstat_config|get" in s
    for v in s.values():
        assert set(v) == {"calls", "usec", "usec_per_call", "rejected_calls", "failed_calls"}
        assert re.fullmatch(r"\d+\.\d\d", v["usec_per_call"])
    # Not in the default INFO; in INFO all.
    assert b"cmdstat_" not in c.call("INFO")
    assert b"cmdstat_set:" in c.call("INFO", "all")
    assert c.call("CONFIG", "RESETSTAT") == "OK"
    s = stats(c, "commandstats")
    assert "cmdstat_set" not in s


def test_latencystats(c, key):
    assert c.call("CONFIG", "RESETSTAT") == "OK"
    for _ in range(20):
        c.call("SET", key, "1")
    s = stats(c, "latencystats")
    line = s["latency_percentiles_usec_set"]
    assert list(line) == ["p50", "p99", "p99.9"]
    vals = [float(line[p]) for p in ("p50", "p99", "p99.9")]
    assert 0 < vals[0] <= vals[1] <= vals[2]
    assert all(re.fullmatch(r"\d+\.\d{3}", line[p]) for p in line)


def test_commandstats_count_pipelined_writes(c, key):
    # rckv runs a pipeline of writes as one transaction (a group): each
    # command is still one call.
    assert c.call("CONFIG", "RESETSTAT") == "OK"
    c.send(b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\n1\r\n" % (len(key), key.encode())
                    for _ in range(10)))
    for _ in range(10):
        assert c.read_raw() == b"+OK\r\n"
    assert stats(c, "commandstats")["cmdstat_set"]["calls"] == "10"
