"""Key expiry as Redis 7.0 has it: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT
(NX, XX, GT, LT), TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST, SET's EX, PX,
EXAT, PXAT and KEEPTTL, GETEX, SETEX, PSETEX; which commands keep a TTL and
which drop it; a key past its time absent to every read, to KEYS and SCAN,
and removed in the background (INFO expired_keys); WATCH of a key that
expires fails EXEC. Every reply here passes against redis-server 7.0
(RCKV_TEST_TARGET=redis) as against rckv.

rckv-only: an expiry on a 3-node cluster, inside MULTI over keys of every
node, the TTL carried by RENAME across nodes, and active expiry on each.
"""

import time

import pytest

from cluster import running_cluster
from rckvtest import REDIS_MODE, Error

OK = b"+OK\r\n"
QUEUED = b"+QUEUED\r\n"
NOT_INT = "ERR value is not an integer or out of range"
SYNTAX = "ERR syntax error"


def is_err(reply, text):
    return isinstance(reply, Error) and reply == text


def now_ms():
    return int(time.time() * 1000)


def wait_until(what, fn, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if fn():
            return
        time.sleep(0.05)
    raise AssertionError("%s: not within %.0f s" % (what, timeout))


# ---- EXPIRE and friends ----

def test_expire_sets_a_ttl_and_the_key_goes(raw, key):
    k = key + "a"
    assert raw.call("SET", k, "v") == "OK"
    assert raw.call("TTL", k) == -1
    assert raw.call("PTTL", k) == -1
    assert raw.call("EXPIRE", k, 100) == 1
    assert 99 <= raw.call("TTL", k) <= 100
    assert 98000 < raw.call("PTTL", k) <= 100000
    assert raw.call("PEXPIRE", k, 300) == 1
    assert 0 < raw.call("PTTL", k) <= 300
    time.sleep(0.4)
    assert raw.call("GET", k) is None
    assert raw.call("EXISTS", k) == 0
    assert raw.call("TTL", k) == -2
    assert raw.call("PTTL", k) == -2
    assert raw.call("EXPIRE", k, 100) == 0  # no such key


def test_expireat_and_expiretime(raw, key):
    k = key + "a"
    raw.call("SET", k, "v")
    at = int(time.time()) + 1000
    assert raw.call("EXPIREAT", k, at) == 1
    assert raw.call("EXPIRETIME", k) == at
    assert raw.call("PEXPIRETIME", k) == at * 1000
    assert raw.call("PEXPIREAT", k, at * 1000 + 123) == 1
    assert raw.call("PEXPIRETIME", k) == at * 1000 + 123
    assert raw.call("EXPIRETIME", k) == at
    assert raw.call("EXPIRETIME", key + "none") == -2
    raw.call("SET", key + "p", "v")
    assert raw.call("EXPIRETIME", key + "p") == -1
    assert raw.call("PEXPIRETIME", key + "p") == -1


def test_expire_in_the_past_deletes_at_once(raw, key):
    k = key + "a"
    raw.call("SET", k, "v")
    assert raw.call("EXPIRE", k, -1) == 1
    assert raw.call("EXISTS", k) == 0
    raw.call("SET", k, "v")
    assert raw.call("PEXPIREAT", k, 1) == 1
    assert raw.call("EXISTS", k) == 0
    raw.call("SET", k, "v")
    assert raw.call("EXPIREAT", k, 0) == 1
    assert raw.call("EXISTS", k) == 0


def test_expire_nx_xx_gt_lt(raw, key):
    k = key + "a"
    raw.call("SET", k, "v")
    assert raw.call("EXPIRE", k, 100, "XX") == 0   # no TTL yet
    assert raw.call("EXPIRE", k, 100, "GT") == 0   # none counts as infinite
    assert raw.call("EXPIRE", k, 100, "NX") == 1
    assert raw.call("EXPIRE", k, 200, "NX") == 0
    assert raw.call("EXPIRE", k, 50, "GT") == 0
    assert raw.call("EXPIRE", k, 200, "GT") == 1
    assert raw.call("EXPIRE", k, 300, "LT") == 0
    assert raw.call("EXPIRE", k, 150, "lt") == 1
    assert 149 <= raw.call("TTL", k) <= 150
    assert raw.call("EXPIRE", k, 120, "XX", "LT") == 1
    raw.call("PERSIST", k)
    assert raw.call("EXPIRE", k, 100, "LT") == 1   # any TTL is less than none


@pytest.mark.parametrize("args,err", [
    (["NX", "XX"], "ERR NX and XX, GT or LT options at the same time are not compatible"),
    (["NX", "GT"], "ERR NX and XX, GT or LT options at the same time are not compatible"),
    (["GT", "LT"], "ERR GT and LT options at the same time are not compatible"),
    (["XX", "foo"], "ERR Unsupported option foo"),
])
def test_expire_option_errors(raw, key, args, err):
    raw.call("SET", key, "v")
    assert is_err(raw.call("EXPIRE", key, 10, *args), err)
    assert raw.call("TTL", key) == -1


def test_expire_time_errors(raw, key):
    raw.call("SET", key, "v")
    assert is_err(raw.call("EXPIRE", key, "x"), NOT_INT)
    assert is_err(raw.call("EXPIRE", key, "1.5"), NOT_INT)
    assert is_err(raw.call("EXPIRE", key, 9223372036854775807),
                  "ERR invalid expire time in 'expire' command")
    assert is_err(raw.call("PEXPIRE", key, 9223372036854775807),
                  "ERR invalid expire time in 'pexpire' command")
    assert is_err(raw.call("EXPIREAT", key, -9223372036854775807),
                  "ERR invalid expire time in 'expireat' command")
    assert is_err(raw.call("EXPIRE", key), "ERR wrong number of arguments for 'expire' command")
    assert raw.call("TTL", key) == -1


def test_persist(raw, key):
    k = key + "a"
    assert raw.call("PERSIST", k) == 0
    raw.call("SET", k, "v")
    assert raw.call("PERSIST", k) == 0
    raw.call("EXPIRE", k, 100)
    assert raw.call("PERSIST", k) == 1
    assert raw.call("TTL", k) == -1
    assert raw.call("GET", k) == b"v"


# ---- SET's options, SETEX, PSETEX, GETEX ----

def test_set_ex_px_exat_pxat(raw, key):
    assert raw.call("SET", key + "1", "v", "EX", 100) == "OK"
    assert 99 <= raw.call("TTL", key + "1") <= 100
    assert raw.call("SET", key + "2", "v", "PX", 100000) == "OK"
    assert 99000 < raw.call("PTTL", key + "2") <= 100000
    at = int(time.time()) + 500
    assert raw.call("SET", key + "3", "v", "EXAT", at) == "OK"
    assert raw.call("EXPIRETIME", key + "3") == at
    assert raw.call("SET", key + "4", "v", "PXAT", at * 1000 + 7) == "OK"
    assert raw.call("PEXPIRETIME", key + "4") == at * 1000 + 7
    # In the past: set and gone at once.
    assert raw.call("SET", key + "5", "v", "PXAT", 1) == "OK"
    assert raw.call("EXISTS", key + "5") == 0


def test_set_drops_the_ttl_unless_keepttl(raw, key):
    k = key + "a"
    raw.call("SET", k, "v", "EX", 100)
    assert raw.call("SET", k, "w", "KEEPTTL") == "OK"
    assert 99 <= raw.call("TTL", k) <= 100
    assert raw.call("GET", k) == b"w"
    assert raw.call("SET", k, "x") == "OK"
    assert raw.call("TTL", k) == -1
    raw.call("SET", k, "v", "EX", 100)
    assert raw.call("SET", k, "y", "GET") == b"v"
    assert raw.call("TTL", k) == -1
    raw.call("SET", k, "v", "EX", 100)
    assert raw.call("GETSET", k, "z") == b"v"
    assert raw.call("TTL", k) == -1


@pytest.mark.parametrize("args", [["EX", 10, "PX", 10], ["EX", 10, "KEEPTTL"],
                                  ["KEEPTTL", "PXAT", 10], ["EX"], ["EXAT", 1, "EXAT"]])
def test_set_expiry_syntax_errors(raw, key, args):
    assert is_err(raw.call("SET", key, "v", *args), SYNTAX)
    assert raw.call("EXISTS", key) == 0


@pytest.mark.parametrize("opt", ["EX", "PX", "EXAT", "PXAT"])
@pytest.mark.parametrize("val", [0, -5])
def test_set_expiry_must_be_positive(raw, key, opt, val):
    assert is_err(raw.call("SET", key, "v", opt, val), "ERR invalid expire time in 'set' command")
    assert raw.call("EXISTS", key) == 0


def test_commands_that_change_a_value_in_place_keep_its_ttl(raw, key):
    raw.call("SET", key + "n", "1", "EX", 100)
    raw.call("INCR", key + "n")
    raw.call("INCRBY", key + "n", 5)
    raw.call("DECR", key + "n")
    raw.call("INCRBYFLOAT", key + "n", "0.5")
    assert raw.call("GET", key + "n") == b"6.5"
    raw.call("SET", key + "s", "ab", "EX", 100)
    raw.call("APPEND", key + "s", "cd")
    raw.call("SETRANGE", key + "s", 1, "X")
    raw.call("SETBIT", key + "s", 0, 1)
    assert raw.call("GET", key + "s") == b"\xe1Xcd"
    for k in (key + "n", key + "s"):
        assert 99 <= raw.call("TTL", k) <= 100, k


def test_setex_and_psetex(raw, key):
    assert raw.call("SETEX", key + "a", 100, "v") == "OK"
    assert 99 <= raw.call("TTL", key + "a") <= 100
    assert raw.call("GET", key + "a") == b"v"
    assert raw.call("PSETEX", key + "b", 100000, "v") == "OK"
    assert 99000 < raw.call("PTTL", key + "b") <= 100000
    assert is_err(raw.call("SETEX", key + "c", 0, "v"),
                  "ERR invalid expire time in 'setex' command")
    assert is_err(raw.call("PSETEX", key + "c", -1, "v"),
                  "ERR invalid expire time in 'psetex' command")
    assert is_err(raw.call("SETEX", key + "c", "x", "v"), NOT_INT)
    assert raw.call("EXISTS", key + "c") == 0


def test_getex(raw, key):
    k = key + "a"
    assert raw.call("GETEX", k) is None
    assert raw.call("GETEX", k, "EX", 10) is None
    assert raw.call("EXISTS", k) == 0
    raw.call("SET", k, "v")
    assert raw.call("GETEX", k) == b"v"
    assert raw.call("TTL", k) == -1
    assert raw.call("GETEX", k, "EX", 100) == b"v"
    assert 99 <= raw.call("TTL", k) <= 100
    assert raw.call("GETEX", k, "PX", 50000) == b"v"
    assert 49000 < raw.call("PTTL", k) <= 50000
    at = int(time.time()) + 300
    assert raw.call("GETEX", k, "EXAT", at) == b"v"
    assert raw.call("EXPIRETIME", k) == at
    assert raw.call("GETEX", k, "PERSIST") == b"v"
    assert raw.call("TTL", k) == -1
    assert raw.call("GETEX", k, "PXAT", 1) == b"v"   # past: the value, then gone
    assert raw.call("EXISTS", k) == 0


@pytest.mark.parametrize("args,err", [
    (["EX"], SYNTAX), (["EX", 1, "PX", 1], SYNTAX), (["PERSIST", "EX", 1], SYNTAX),
    (["FOO"], SYNTAX), (["EX", "x"], NOT_INT),
    (["EX", 0], "ERR invalid expire time in 'getex' command"),
    (["PX", -1], "ERR invalid expire time in 'getex' command"),
])
def test_getex_errors(raw, key, args, err):
    raw.call("SET", key, "v")
    assert is_err(raw.call("GETEX", key, *args), err)
    assert raw.call("TTL", key) == -1


# ---- what sees an expired key ----

def test_expired_key_is_absent_to_every_read(raw, key):
    k = key + "a"
    raw.call("SET", k, "5", "PX", 100)
    raw.call("SET", key + "keep", "x")
    time.sleep(0.25)
    assert raw.call("GET", k) is None
    assert raw.call("MGET", k, key + "keep") == [None, b"x"]
    assert raw.call("STRLEN", k) == 0
    assert raw.call("TYPE", k) == "none"
    assert raw.call("EXISTS", k, key + "keep") == 1
    assert raw.call("KEYS", key + "*") == [(key + "keep").encode()]
    cur, found = b"0", []
    while True:
        cur, part = raw.call("SCAN", cur, "MATCH", key + "*", "COUNT", 1000)
        found += part
        if cur == b"0":
            break
    assert found == [(key + "keep").encode()]
    assert raw.call("INCR", k) == 1            # a new key, without the old TTL
    assert raw.call("TTL", k) == -1
    raw.call("SET", k, "v", "PX", 100)
    time.sleep(0.25)
    assert raw.call("SETNX", k, "new") == 1
    assert raw.call("GET", k) == b"new"
    raw.call("SET", k, "v", "PX", 100)
    time.sleep(0.25)
    assert raw.call("DEL", k) == 0
    assert is_err(raw.call("RENAME", k, key + "b"), "ERR no such key")
    assert raw.call("EXISTS", key + "b") == 0


def test_active_expiry_removes_keys_nobody_reads(server, raw, key):
    before = int(raw.call("INFO", "stats").decode().split("expired_keys:")[1].split()[0])
    for i in range(20):
        raw.call("SET", "%s%d" % (key, i), "v", "PX", 50)
    raw.call("SET", key + "stays", "v", "EX", 1000)

    def expired():
        info = raw.call("INFO", "stats").decode()
        return int(info.split("expired_keys:")[1].split()[0]) - before >= 20
    wait_until("20 keys expired in the background", expired)
    assert raw.call("TTL", key + "stays") > 990


def test_watch_of_a_key_that_expires_fails_exec(server, raw, key):
    k = key + "w"
    raw.call("SET", k, "v", "PX", 100)
    assert raw.call_raw("WATCH", k) == OK
    time.sleep(0.25)
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", key + "other", "x") == QUEUED
    assert raw.call("EXEC") is None
    assert raw.call("EXISTS", key + "other") == 0
    # A key already gone at WATCH does not fail it.
    assert raw.call_raw("WATCH", k) == OK
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", key + "other", "x") == QUEUED
    assert raw.call("EXEC") == ["OK"]


def test_expire_inside_multi(raw, key):
    k = key + "m"
    raw.call("SET", k, "v")
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("EXPIRE", k, 100) == QUEUED
    assert raw.call_raw("TTL", k) == QUEUED
    assert raw.call_raw("PERSIST", k) == QUEUED
    assert raw.call_raw("TTL", k) == QUEUED
    res = raw.call("EXEC")
    assert res[0] == 1 and 99 <= res[1] <= 100 and res[2:] == [1, -1]


def test_ttl_goes_with_rename_copy_and_restore(raw, key):
    raw.call("SET", key + "a", "v", "EX", 100)
    assert raw.call("RENAME", key + "a", key + "b") == "OK"
    assert 99 <= raw.call("TTL", key + "b") <= 100
    assert raw.call("COPY", key + "b", key + "c") == 1
    assert 99 <= raw.call("TTL", key + "c") <= 100
    dump = raw.call("DUMP", key + "c")
    assert raw.call("RESTORE", key + "d", 50000, dump) == "OK"
    assert 49000 < raw.call("PTTL", key + "d") <= 50000
    at = now_ms() + 70000
    assert raw.call("RESTORE", key + "e", at, dump, "ABSTTL") == "OK"
    assert raw.call("PEXPIRETIME", key + "e") == at


# ---- a cluster (rckv only) ----

@pytest.fixture(scope="module")
def cluster3():
    if REDIS_MODE:
        pytest.skip("rckv only: a 3-node cluster")
    with running_cluster("tcp") as cl:
        yield cl


def keys_on_every_node(conn, prefix, n=3):
    """One key per node (RCKV KEYNODE), node id order."""
    got, i = {}, 0
    while len(got) < n:
        k = "%s%d" % (prefix, i)
        node = int(conn.execute_command("RCKV", "KEYNODE", k))
        got.setdefault(node, k)
        i += 1
    return [got[nd] for nd in sorted(got)]


@pytest.mark.rckv_only
def test_cluster_expiry_in_multi_and_across_nodes(cluster3, key):
    c1 = cluster3.node(1).client()
    c3 = cluster3.node(3).client()
    ks = keys_on_every_node(c1, key)
    pipe = c1.pipeline(transaction=True)
    for k in ks:
        pipe.set(k, "v", px=300)
    pipe.set(ks[0] + "x", "v", ex=100)
    pipe.execute()
    # Every node sees every TTL, whichever node holds the key.
    for k in ks:
        assert 0 < c3.pttl(k) <= 300
    assert c1.rename(ks[0] + "x", ks[2] + "y")
    assert 99 <= c3.ttl(ks[2] + "y") <= 100
    time.sleep(0.5)
    assert c3.mget(ks) == [None, None, None]
    assert c1.exists(*ks) == 0

    def reaped():
        return sum(int(cluster3.node(i).client().info("stats")["expired_keys"])
                   for i in (1, 2, 3)) >= 3
    wait_until("each node's key reaped by its own active expiry", reaped)


# ---- expiry under load (rckv only): no read returns a key past its time ----

# A write's expiry is its server time plus its TTL, and the server's time
# lies between the client's send and its reply (one clock: loopback). A
# read that returns the value of write w was evaluated after the read was
# sent; it is late if sent after w's reply + TTL + MARGIN_MS. The margin
# covers expiry's millisecond resolution (one ms each side) and nothing
# else.
MARGIN_MS = 2
LOAD_SECONDS = 3.0
LOAD_CLIENTS = 8


def _expiry_load(conns, prefix, nkeys=8):
    """LOAD_CLIENTS threads over conns (round robin): SET k v PX ttl with a
    unique v, GET k, MGET of two keys, INCR-free; returns (writes, reads,
    late reads)."""
    import random
    import threading
    writes = {}
    lock = threading.Lock()
    reads = []
    stop = time.monotonic() + LOAD_SECONDS

    def client(i):
        rnd = random.Random(i)
        c = conns[i % len(conns)]()
        n = 0
        while time.monotonic() < stop:
            k = "%s%d" % (prefix, rnd.randrange(nkeys))
            if rnd.random() < 0.4:
                v = "%d:%d" % (i, n)
                n += 1
                ttl = rnd.randrange(5, 60)
                t0 = time.time()
                c.set(k, v, px=ttl)
                t1 = time.time()
                with lock:
                    writes[v.encode()] = (t0, t1, ttl)
            else:
                t0 = time.time()
                got = c.get(k)
                if got is not None:
                    reads.append((got, t0))
    ts = [threading.Thread(target=client, args=(i,)) for i in range(LOAD_CLIENTS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    late = []
    for got, t0 in reads:
        w = writes.get(got)
        assert w is not None, "a read returned %r, which no client wrote" % got
        if t0 * 1000 > w[1] * 1000 + w[2] + MARGIN_MS:
            late.append((got, round(t0 * 1000 - (w[1] * 1000 + w[2]), 1)))
    return len(writes), len(reads), late


@pytest.mark.rckv_only
@pytest.mark.time_limit(60)
def test_no_read_returns_a_key_past_its_time(server, key):
    if REDIS_MODE:
        pytest.skip("rckv only")
    nw, nr, late = _expiry_load([server.client], key)
    assert nw > 100 and nr > 100, (nw, nr)
    assert not late, "%d of %d reads returned a value past its expiry (ms late): %s" % (
        len(late), nr, late[:10])


@pytest.mark.rckv_only
@pytest.mark.time_limit(120)
@pytest.mark.parametrize("proto", ["silo", "mvcc", "calvin"])
def test_no_read_returns_a_key_past_its_time_on_a_cluster(cluster3, key, proto):
    c = cluster3.node(1).client()
    c.config_set("cc", proto)
    try:
        nw, nr, late = _expiry_load([nd.client for nd in cluster3.nodes], key + proto)
    finally:
        c.config_set("cc", "silo")
    assert nw > 50 and nr > 50, (nw, nr)
    assert not late, "%s: %d of %d reads returned a value past its expiry (ms late): %s" % (
        proto, len(late), nr, late[:10])


PROTOCOLS = ["nowait", "waitdie", "woundwait", "timestamp", "mvcc", "silo", "occ", "sundial",
             "cicada", "maat", "calvin"]


@pytest.mark.rckv_only
@pytest.mark.parametrize("proto", PROTOCOLS)
def test_every_protocol_keeps_the_expiry_with_the_value(server, raw, key, proto):
    """The expiry lives in the item's vflags and value bytes: every
    protocol's install, and mvcc's and cicada's older versions, carry it."""
    if REDIS_MODE:
        pytest.skip("rckv only")
    assert raw.call("CONFIG", "SET", "cc", proto) == "OK"
    try:
        k = key + "a"
        assert raw.call("SET", k, "1", "PX", 400) == "OK"
        for _ in range(5):                       # versions pile up (mvcc)
            raw.call("INCR", k)
        assert raw.call("GET", k) == b"6"
        assert 0 < raw.call("PTTL", k) <= 400
        raw.call("SET", key + "b", "x", "EX", 100)
        raw.call("SET", key + "b", "y")           # drops it
        assert raw.call("TTL", key + "b") == -1
        time.sleep(0.5)
        assert raw.call("GET", k) is None
        assert raw.call("EXISTS", k) == 0
        assert raw.call("GET", key + "b") == b"y"
    finally:
        raw.call("CONFIG", "SET", "cc", "silo")
