"""Keyspace notifications (notify-keyspace-events) as Redis 7.0 sends them
for rckv's commands: Redis's event names, classes and order, only for
what changed, a MULTI's events together after EXEC.

Validated against redis-server 7.0 with RCKV_TEST_TARGET=redis.
"""

import pytest

from rckvtest import encode


@pytest.fixture
def pair(server):
    sub, c = server.raw(), server.raw()
    try:
        assert c.call("CONFIG", "SET", "notify-keyspace-events", "KEA") == "OK"
        sub.send(encode("PSUBSCRIBE", "__key*__:*") + encode("SUBSCRIBE", "end"))
        sub.read_raw(), sub.read_raw()
        yield sub, c
    finally:
        c.call("CONFIG", "SET", "notify-keyspace-events", "")
        sub.close()
        c.close()


def events(sub, c):
    """The events up to the marker c publishes after its commands (one
    publisher: its order holds)."""
    c.call("PUBLISH", "end", "x")
    out = []
    while True:
        m = sub.read()
        if m[0] == b"message":
            return out
        ch, msg = m[2].decode(), m[3].decode()
        if ch.startswith("__keyevent@0__:"):
            out.append(("E", ch[15:], msg))
        else:
            out.append(("K", ch[15:], msg))


def both(key, event):
    return [("K", key, event), ("E", event, key)]


def test_config(raw):
    assert raw.call("CONFIG", "SET", "notify-keyspace-events", "KEA") == "OK"
    assert raw.call("CONFIG", "GET", "notify-keyspace-events") == [b"notify-keyspace-events",
                                                                    b"AKE"]
    assert raw.call("CONFIG", "SET", "notify-keyspace-events", "E$gxmn") == "OK"
    assert raw.call("CONFIG", "GET", "notify-keyspace-events")[1] == b"g$xnEm"
    assert raw.call_raw("CONFIG", "SET", "notify-keyspace-events", "Kq") == (
        b"-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - "
        b"Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n")
    assert raw.call("CONFIG", "SET", "notify-keyspace-events", "") == "OK"
    assert raw.call("CONFIG", "GET", "notify-keyspace-events")[1] == b""


def test_string_and_generic_events(pair, key):
    sub, c = pair
    k, k2 = key + "a", key + "b"
    c.call("SET", k, "1")
    c.call("SET", k, "2", "NX")      # nothing set: no event
    c.call("INCR", k)
    c.call("INCRBY", k, "5")
    c.call("DECR", k)
    c.call("APPEND", k, "x")
    c.call("INCR", k)                # an error: no event
    c.call("SETRANGE", k, "0", "z")
    c.call("SET", k, "v", "EX", "100")
    c.call("PERSIST", k)
    c.call("PERSIST", k)             # no TTL any more: no event
    c.call("EXPIRE", k, "100")
    c.call("RENAME", k, k2)
    c.call("MSET", k, "1", k2, "2")
    c.call("DEL", k, k2, key + "none")
    c.call("DEL", k)                 # absent: no event
    c.call("SETEX", k, "100", "v")
    c.call("EXPIRE", k, "-1")        # in the past: the key goes
    c.call("GET", k)
    assert events(sub, c) == (
        both(k, "set") + both(k, "incrby") + both(k, "incrby") + both(k, "incrby") +
        both(k, "append") + both(k, "setrange") + both(k, "set") + both(k, "expire") +
        both(k, "persist") + both(k, "expire") + both(k, "rename_from") +
        both(k2, "rename_to") + both(k, "set") + both(k2, "set") + both(k, "del") +
        both(k2, "del") + both(k, "set") + both(k, "expire") + both(k, "del"))


def test_multi_events_after_exec(pair, key):
    sub, c = pair
    k, k2 = key + "a", key + "b"
    assert c.call("MULTI") == "OK"
    c.call("SET", k, "1")
    c.call("INCR", k2)
    c.call("DEL", k)
    assert c.call("EXEC") == ["OK", 1, 1]
    assert events(sub, c) == both(k, "set") + both(k2, "incrby") + both(k, "del")


def test_hash_and_set_events(pair, key):
    sub, c = pair
    h, s, s2, d = key + "h", key + "s", key + "t", key + "d"
    c.call("HSET", h, "f", "1", "g", "2")
    c.call("HSETNX", h, "f", "9")    # exists: no event
    c.call("HINCRBY", h, "f", "2")
    c.call("HINCRBYFLOAT", h, "g", "0.5")
    c.call("HDEL", h, "none")        # nothing removed: no event
    c.call("HDEL", h, "f")
    c.call("HDEL", h, "g")           # the last field: the key goes
    c.call("SADD", s, "a", "b")
    c.call("SADD", s, "a")           # already there: no event
    c.call("SREM", s, "a")
    c.call("SMOVE", s, s2, "b")      # the source empties
    c.call("SADD", s, "c")
    c.call("SUNIONSTORE", d, s, s2)
    c.call("SINTERSTORE", d, s, s2)  # empty: the destination goes
    c.call("SPOP", s2)
    assert events(sub, c) == (
        both(h, "hset") + both(h, "hincrby") + both(h, "hincrbyfloat") + both(h, "hdel") +
        both(h, "hdel") + both(h, "del") + both(s, "sadd") + both(s, "srem") +
        both(s, "srem") + both(s, "del") + both(s2, "sadd") + both(s, "sadd") +
        both(d, "sunionstore") + both(d, "del") + both(s2, "spop") + both(s2, "del"))


def test_list_events(pair, key):
    sub, c = pair
    a, b, m = key + "a", key + "b", key + "m"
    c.call("RPUSH", a, "1", "2", "3")
    c.call("LPUSH", a, "0")
    c.call("LPUSHX", key + "none", "x")   # absent: no event
    c.call("RPUSHX", a, "4")
    c.call("LSET", a, "0", "z")
    c.call("LINSERT", a, "BEFORE", "z", "y")
    c.call("LINSERT", a, "BEFORE", "nope", "y")  # no pivot: no event
    c.call("LREM", a, "0", "nope")        # nothing removed: no event
    c.call("LREM", a, "1", "y")
    c.call("LTRIM", a, "0", "-1")         # Redis signals even when nothing goes
    c.call("LPOP", a)
    c.call("RPOP", a, "1")
    c.call("LMOVE", a, b, "LEFT", "RIGHT")
    c.call("RPOPLPUSH", a, b)
    c.call("LMPOP", "2", key + "none", a, "RIGHT", "COUNT", "5")  # a empties
    c.call("RPUSH", m, "x")
    c.call("BLPOP", a, m, "0")            # from m, which empties
    c.call("RPUSH", a, "1", "2")
    c.call("LTRIM", a, "5", "9")          # nothing kept: the key goes
    assert events(sub, c) == (
        both(a, "rpush") + both(a, "lpush") + both(a, "rpush") + both(a, "lset") +
        both(a, "linsert") + both(a, "lrem") + both(a, "ltrim") + both(a, "lpop") +
        both(a, "rpop") + both(b, "rpush") + both(a, "lpop") + both(b, "lpush") +
        both(a, "rpop") + both(a, "rpop") + both(a, "del") + both(m, "rpush") + both(m, "lpop") + both(m, "del") + both(a, "rpush") +
        both(a, "ltrim") + both(a, "del"))
def test_zset_events(pair, key):
    sub, c = pair
    z, z2, d = key + "z", key + "y", key + "d"
    c.call("ZADD", z, "1", "a", "2", "b")
    c.call("ZADD", z, "1", "a")             # the same score: no event
    c.call("ZADD", z, "INCR", "5", "a")
    c.call("ZADD", z, "CH", "3", "incr")    # a member named incr: zadd
    c.call("ZINCRBY", z, "1", "b")
    c.call("ZREM", z, "none")               # nothing removed: no event
    c.call("ZREM", z, "a")
    c.call("ZREMRANGEBYSCORE", z, "0", "100")   # empties it: the key goes
    c.call("ZADD", z2, "0", "p", "0", "q", "0", "r", "0", "s", "0", "t")
    c.call("ZREMRANGEBYRANK", z2, "0", "0")
    c.call("ZREMRANGEBYLEX", z2, "[q", "[q")
    c.call("ZPOPMIN", z2)
    c.call("ZUNIONSTORE", d, "1", z2)
    c.call("ZRANGESTORE", d, z2, "5", "6")  # empty: the destination goes
    c.call("ZINTERSTORE", d, "2", z2, key + "none")   # empty, d absent: nothing
    c.call("ZPOPMAX", z2, "5")
    assert events(sub, c) == (
        both(z, "zadd") + both(z, "zincr") + both(z, "zadd") + both(z, "zincr") +
        both(z, "zrem") + both(z, "zremrangebyscore") + both(z, "del") +
        both(z2, "zadd") + both(z2, "zremrangebyrank") + both(z2, "zremrangebylex") +
        both(z2, "zpopmin") + both(d, "zunionstore") + both(d, "del") +
        both(z2, "zpopmax") + both(z2, "del"))


def test_zmpop_and_bzpop_events(pair, key):
    sub, c = pair
    a, b, none = key + "{t}a", key + "{t}b", key + "{t}none"
    c.call("ZADD", a, "1", "x", "2", "y", "3", "z")
    c.call("ZADD", b, "1", "x")
    c.call("ZMPOP", "2", none, a, "MAX")
    c.call("ZMPOP", "2", none, a, "MIN", "COUNT", "5")   # empties a
    c.call("ZMPOP", "1", none, "MIN")                    # nothing: no event
    c.call("BZPOPMIN", none, b, "0")                     # empties b
    c.call("ZADD", b, "1", "x", "2", "y")
    c.call("BZPOPMAX", a, b, "0")
    c.call("BZMPOP", "0", "2", a, b, "MIN")              # empties b
    assert events(sub, c) == (
        both(a, "zadd") + both(b, "zadd") + both(a, "zpopmax") + both(a, "zpopmin") +
        both(a, "del") + both(b, "zpopmin") + both(b, "del") + both(b, "zadd") +
        both(b, "zpopmax") + both(b, "zpopmin") + both(b, "del"))


def test_classes_filter(pair, key):
    sub, c = pair
    assert c.call("CONFIG", "SET", "notify-keyspace-events", "Eg") == "OK"
    c.call("SET", key, "1")          # a string event: not asked for
    c.call("DEL", key)
    assert events(sub, c) == [("E", "del", key)]


def test_pipelined_writes_and_scripts(pair, key):
    sub, c = pair
    k, k2 = key + "a", key + "b"
    # A pipeline of writes (one transaction in rckv: a group).
    c.send(encode("SET", k, "1") + encode("INCR", k) + encode("SET", k2, "x"))
    for _ in range(3):
        c.read_raw()
    c.call("EVAL", "redis.call('SET', KEYS[1], 'v') return redis.call('DEL', KEYS[2])",
           "2", k, k2)
    assert events(sub, c) == (both(k, "set") + both(k, "incrby") + both(k2, "set") +
                              both(k, "set") + both(k2, "del"))


def test_expired(pair, key):
    sub, c = pair
    c.call("SET", key, "v", "PX", "30")
    m = sub.read()  # set, then expire: keyspace and keyevent each
    got = [m] + [sub.read() for _ in range(3)]
    assert [x[3] for x in got] == [b"set", key.encode(), b"expire", key.encode()]
    # Redis's active expiry and rckv's both find it within seconds.
    sub.sock.settimeout(30)
    assert sub.read() == [b"pmessage", b"__key*__:*", b"__keyspace@0__:" + key.encode(),
                          b"expired"]
    assert sub.read() == [b"pmessage", b"__key*__:*", b"__keyevent@0__:expired",
                          key.encode()]
