"""MEMORY (USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP), ROLE and WAIT with
Redis 7.0's replies and errors.

Validated against redis-server 7.0 with RCKV_TEST_TARGET=redis (MEMORY
USAGE's and STATS's figures are each server's own: only their shape is
compared).
"""


def test_memory_usage(raw, key):
    assert raw.call_raw("SET", key, "v" * 100) == b"+OK\r\n"
    n = raw.call("MEMORY", "USAGE", key)
    assert isinstance(n, int) and 100 + len(key) <= n < 400
    assert raw.call("MEMORY", "USAGE", key, "SAMPLES", "5") == n
    assert raw.call_raw("MEMORY", "USAGE", key + "none") == b"$-1\r\n"
    assert raw.call_raw("MEMORY", "USAGE", key, "foo") == b"-ERR syntax error\r\n"
    assert raw.call_raw("MEMORY", "USAGE", key, "SAMPLES", "x") == (
        b"-ERR value is not an integer or out of range\r\n")
    assert raw.call_raw("MEMORY", "USAGE") == (
        b"-ERR wrong number of arguments for 'memory|usage' command\r\n")
    # Bigger values take more.
    raw.call("SET", key + "big", "v" * 5000)
    assert raw.call("MEMORY", "USAGE", key + "big") > n


def test_memory_usage_of_big_hashes_and_sets(raw, key):
    """A collection's usage counts its elements, not only its root: 3000
    fields take over 40 KB (Redis: about 100 KB), sampled or counted."""
    h, s = key + "h", key + "s"
    for i in range(0, 3000, 500):
        raw.call("HSET", h, *[x for j in range(i, i + 500) for x in (f"f{j}", f"v{j}")])
        raw.call("SADD", s, *[f"m{j}" for j in range(i, i + 500)])
    for k in (h, s):
        every = raw.call("MEMORY", "USAGE", k, "SAMPLES", "0")
        sampled = raw.call("MEMORY", "USAGE", k)
        assert every > 20000 and every / 2 < sampled < every * 2, (k, every, sampled)
    assert raw.call_raw("MEMORY", "USAGE", h, "SAMPLES", "-1") == b"-ERR syntax error\r\n"


def test_memory_other(raw):
    assert raw.call_raw("MEMORY", "PURGE") == b"+OK\r\n"
    assert isinstance(raw.call("MEMORY", "DOCTOR"), bytes)
    assert isinstance(raw.call("MEMORY", "MALLOC-STATS"), bytes)
    help_ = raw.call("MEMORY", "HELP")
    assert len(help_) == 14 and help_[0] == (
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    assert raw.call_raw("MEMORY", "foo") == b"-ERR unknown subcommand 'foo'. Try MEMORY HELP.\r\n"


def test_memory_stats(raw, key):
    """Redis 7.0's fields in its order (db.0 once a key exists), with
    figures that add up: the dataset within the total, the peak at least
    the total, a key count that grows with the keys."""
    raw.call("SET", key, "v" * 1000)
    st = raw.call("MEMORY", "STATS")
    names = st[0::2]
    assert names[:11] == [b"peak.allocated", b"total.allocated", b"startup.allocated",
                          b"replication.backlog", b"clients.slaves", b"clients.normal",
                          b"cluster.links", b"aof.buffer", b"lua.caches",
                          b"functions.caches", b"db.0"]
    assert names[11:] == [b"overhead.total", b"keys.count", b"keys.bytes-per-key",
                          b"dataset.bytes", b"dataset.percentage", b"peak.percentage",
                          b"allocator.allocated", b"allocator.active", b"allocator.resident",
                          b"allocator-fragmentation.ratio", b"allocator-fragmentation.bytes",
                          b"allocator-rss.ratio", b"allocator-rss.bytes",
                          b"rss-overhead.ratio", b"rss-overhead.bytes", b"fragmentation",
                          b"fragmentation.bytes"]
    d = dict(zip(names, st[1::2]))
    assert d[b"db.0"][0] == b"overhead.hashtable.main"
    assert 0 < d[b"dataset.bytes"] <= d[b"total.allocated"] <= d[b"peak.allocated"]
    assert d[b"keys.count"] >= 1
    assert 0 < float(d[b"dataset.percentage"]) <= 100
    assert raw.call_raw("MEMORY", "STATS", "x") == (
        b"-ERR wrong number of arguments for 'memory|stats' command\r\n")


def test_role_and_wait(raw, key):
    assert raw.call_raw("ROLE") == b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"
    raw.call("SET", key, "1")
    assert raw.call_raw("WAIT", "0", "0") == b":0\r\n"
    assert raw.call_raw("WAIT", "1", "10") == b":0\r\n"
    assert raw.call_raw("WAIT", "x", "0") == b"-ERR value is not an integer or out of range\r\n"
    assert raw.call_raw("WAIT", "0", "x") == b"-ERR timeout is not an integer or out of range\r\n"
    assert raw.call_raw("WAIT", "0", "-1") == b"-ERR timeout is negative\r\n"
    assert raw.call_raw("MULTI") == b"+OK\r\n"
    assert raw.call_raw("WAIT", "0", "0") == b"+QUEUED\r\n"
    assert raw.call_raw("EXEC") == b"*1\r\n:0\r\n"
