"""Pub/Sub on one node as Redis 7.0 does it, byte for byte: SUBSCRIBE,
PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBEs, PUBLISH, SPUBLISH, PUBSUB,
the RESP2 subscribed context, RESP3 push replies, per-publisher order with
subscribers on every worker, and client-output-buffer-limit pubsub.

Validated against redis-server 7.0 with RCKV_TEST_TARGET=redis.
"""

import threading
import time

import pytest

from rckvtest import Closed, encode


def bulk(v):
    v = v.encode() if isinstance(v, str) else v
    return b"$%d\r\n%s\r\n" % (len(v), v)


def push(*items, proto=2):
    head = b"*" if proto == 2 else b">"
    out = [head + b"%d\r\n" % len(items)]
    for it in items:
        if isinstance(it, int):
            out.append(b":%d\r\n" % it)
        elif it is None:
            out.append(b"$-1\r\n" if proto == 2 else b"_\r\n")
        else:
            out.append(bulk(it))
    return b"".join(out)


CTX_ERR = (b"-ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
           b"QUIT / RESET are allowed in this context\r\n")


def wait_numsub(c, ch, n, kind="NUMSUB"):
    # Subscriptions are registered when their confirmation is sent; this
    # only guards a slow CI machine against reading too early.
    end = time.monotonic() + 5
    while True:
        got = c.call("PUBSUB", kind, ch)
        if got[1] == n or time.monotonic() > end:
            return got[1]
        time.sleep(0.01)


def test_confirmations(raw, key):
    a, b = key + "a", key + "b"
    assert raw.call_raw("UNSUBSCRIBE") == push("unsubscribe", None, 0)
    assert raw.call_raw("PUNSUBSCRIBE") == push("punsubscribe", None, 0)
    assert raw.call_raw("SUNSUBSCRIBE") == push("sunsubscribe", None, 0)
    raw.send(encode("SUBSCRIBE", a, b, a))
    assert raw.read_raw() == push("subscribe", a, 1)
    assert raw.read_raw() == push("subscribe", b, 2)
    assert raw.read_raw() == push("subscribe", a, 2)
    assert raw.call_raw("PSUBSCRIBE", key + "*") == push("psubscribe", key + "*", 3)
    assert raw.call_raw("SSUBSCRIBE", key + "s") == push("ssubscribe", key + "s", 1)
    raw.send(encode("UNSUBSCRIBE", b, "never"))
    assert raw.read_raw() == push("unsubscribe", b, 2)
    assert raw.read_raw() == push("unsubscribe", "never", 2)
    assert raw.call_raw("PUNSUBSCRIBE") == push("punsubscribe", key + "*", 1)
    assert raw.call_raw("UNSUBSCRIBE") == push("unsubscribe", a, 0)
    # Still subscribed to a shard channel: still the Pub/Sub context.
    assert raw.call_raw("PING") == b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
    assert raw.call_raw("SUNSUBSCRIBE", "x") == push("sunsubscribe", "x", 1)
    assert raw.call_raw("SUNSUBSCRIBE", key + "s") == push("sunsubscribe", key + "s", 0)
    assert raw.call_raw("PING") == b"+PONG\r\n"
    assert raw.call_raw("GET", key) == b"$-1\r\n"


def test_resp2_context(raw, key):
    assert raw.call_raw("SUBSCRIBE", key) == push("subscribe", key, 1)
    assert raw.call_raw("PING") == b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
    assert raw.call_raw("PING", "x") == b"*2\r\n$4\r\npong\r\n$1\r\nx\r\n"
    assert raw.call_raw("GET", key) == CTX_ERR % b"get"
    assert raw.call_raw("SET", key, "1") == CTX_ERR % b"set"
    assert raw.call_raw("CONFIG", "GET", "x") == CTX_ERR % b"config|get"
    assert raw.call_raw("PUBLISH", key, "x") == CTX_ERR % b"publish"
    # A pipeline of writes is refused one by one too (no group runs it).
    raw.send(encode("SET", key, "1") + encode("INCR", key))
    assert raw.read_raw() == CTX_ERR % b"set"
    assert raw.read_raw() == CTX_ERR % b"incr"
    assert raw.call_raw("RESET") == b"+RESET\r\n"
    assert raw.call_raw("GET", key) == b"$-1\r\n"
    assert raw.call_raw("QUIT") == b"+OK\r\n"


def test_resp3_push(conns, key):
    sub, pub = conns(), conns()
    sub.call("HELLO", "3")
    assert sub.call_raw("SUBSCRIBE", key) == push("subscribe", key, 1, proto=3)
    assert sub.call_raw("PING") == b"+PONG\r\n"
    assert sub.call_raw("GET", key) == b"_\r\n"
    wait_numsub(pub, key, 1)
    assert pub.call_raw("PUBLISH", key, "hi") == b":1\r\n"
    assert sub.read_raw() == push("message", key, "hi", proto=3)
    assert sub.call_raw("UNSUBSCRIBE") == push("unsubscribe", key, 0, proto=3)
    assert sub.call_raw("UNSUBSCRIBE") == push("unsubscribe", None, 0, proto=3)


def test_publish_reaches_every_kind(conns, key):
    ch = key + "news"
    s1, s2, p1, s3, pub = conns(), conns(), conns(), conns(), conns()
    assert s1.call_raw("SUBSCRIBE", ch) == push("subscribe", ch, 1)
    assert s2.call_raw("SUBSCRIBE", ch) == push("subscribe", ch, 1)
    assert p1.call_raw("PSUBSCRIBE", key + "n*") == push("psubscribe", key + "n*", 1)
    assert s3.call_raw("SSUBSCRIBE", ch) == push("ssubscribe", ch, 1)
    assert wait_numsub(pub, ch, 2) == 2
    assert pub.call_raw("PUBLISH", ch, "m1") == b":3\r\n"
    assert pub.call_raw("PUBLISH", key + "nothing", "m2") == b":1\r\n"
    assert pub.call_raw("PUBLISH", key + "other", "m3") == b":0\r\n"
    assert pub.call_raw("SPUBLISH", ch, "m4") == b":1\r\n"
    assert s1.read_raw() == push("message", ch, "m1")
    assert s2.read_raw() == push("message", ch, "m1")
    assert p1.read_raw() == push("pmessage", key + "n*", ch, "m1")
    assert p1.read_raw() == push("pmessage", key + "n*", key + "nothing", "m2")
    assert s3.read_raw() == push("smessage", ch, "m4")
    # Closing a subscriber unsubscribes it.
    s2.close()
    assert wait_numsub(pub, ch, 1) == 1
    assert pub.call_raw("PUBLISH", ch, "m5") == b":2\r\n"
    assert s1.read_raw() == push("message", ch, "m5")


def test_pubsub_introspection(conns, key):
    a, b, s = key + "a", key + "b", key + "s"
    sub1, sub2, q = conns(), conns(), conns()
    sub1.send(encode("SUBSCRIBE", a, b))
    sub1.read_raw(), sub1.read_raw()
    assert sub2.call_raw("SUBSCRIBE", a) == push("subscribe", a, 1)
    sub2.send(encode("PSUBSCRIBE", key + "*", key + "*", key + "?"))
    for _ in range(3):
        sub2.read_raw()
    assert sub2.call_raw("SSUBSCRIBE", s) == push("ssubscribe", s, 1)
    wait_numsub(q, a, 2)
    assert q.call_raw("PUBSUB", "NUMSUB", a, b, key + "none") == (
        b"*6\r\n" + bulk(a) + b":2\r\n" + bulk(b) + b":1\r\n" + bulk(key + "none") + b":0\r\n")
    assert q.call_raw("PUBSUB", "NUMSUB") == b"*0\r\n"
    assert sorted(q.call("PUBSUB", "CHANNELS", key + "*")) == [a.encode(), b.encode()]
    assert q.call("PUBSUB", "CHANNELS", key + "a") == [a.encode()]
    assert q.call("PUBSUB", "SHARDCHANNELS", key + "*") == [s.encode()]
    assert q.call_raw("PUBSUB", "SHARDNUMSUB", s) == b"*2\r\n" + bulk(s) + b":1\r\n"
    assert q.call_raw("PUBSUB", "NUMPAT") == b":2\r\n"
    assert q.call_raw("PUBSUB", "CHANNELS", "a", "b") == (
        b"-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. "
        b"Try PUBSUB HELP.\r\n")
    assert q.call_raw("PUBSUB", "NUMPAT", "x") == (
        b"-ERR wrong number of arguments for 'pubsub|numpat' command\r\n")
    assert q.call_raw("PUBSUB", "foo") == b"-ERR unknown subcommand 'foo'. Try PUBSUB HELP.\r\n"
    assert q.call("PUBSUB", "HELP")[0] == "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert q.call_raw("PUBLISH", a) == b"-ERR wrong number of arguments for 'publish' command\r\n"
    assert q.call_raw("SUBSCRIBE") == b"-ERR wrong number of arguments for 'subscribe' command\r\n"
    line = [l for l in q.call("CLIENT", "LIST").decode().splitlines()
            if "psub=2" in l]
    assert len(line) == 1 and " sub=1 " in line[0] and "ssub=1" in line[0]
    assert "flags=P" in line[0]


def test_order_per_publisher(conns, key):
    """Subscribers on every worker (connections are spread round-robin) get
    every message of each of two concurrent publishers, in its order."""
    ch = key + "ord"
    subs = [conns() for _ in range(4)]
    for s in subs:
        assert s.call_raw("SUBSCRIBE", ch) == push("subscribe", ch, 1)
    pubs = [conns() for _ in range(2)]
    assert wait_numsub(pubs[0], ch, 4) == 4
    n = 2000

    def publish(i):
        batch = b"".join(encode("PUBLISH", ch, "p%d:%d" % (i, j)) for j in range(n))
        pubs[i].send(batch)
        for _ in range(n):
            assert pubs[i].read_raw() == b":4\r\n"

    ts = [threading.Thread(target=publish, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for s in subs:
        seen = {0: [], 1: []}
        for _ in range(2 * n):
            kind, c, msg = s.read()
            assert kind == b"message" and c == ch.encode()
            p, j = msg.decode()[1:].split(":")
            seen[int(p)].append(int(j))
        assert seen[0] == list(range(n)) and seen[1] == list(range(n))


def test_multi_publish_and_subscribe(conns, key):
    ch = key + "m"
    sub, c = conns(), conns()
    assert sub.call_raw("SUBSCRIBE", ch) == push("subscribe", ch, 1)
    wait_numsub(c, ch, 1)
    assert c.call_raw("MULTI") == b"+OK\r\n"
    assert c.call_raw("PUBLISH", ch, "x") == b"+QUEUED\r\n"
    assert c.call_raw("EXEC") == b"*1\r\n:1\r\n"
    assert sub.read_raw() == push("message", ch, "x")


def test_output_buffer_limit_config(raw):
    got = raw.call("CONFIG", "GET", "client-output-buffer-limit")
    assert got == [b"client-output-buffer-limit",
                   b"normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"]
    pre = b"-ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - "
    assert raw.call_raw("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1 2") == (
        pre + b"Wrong number of arguments in buffer limit configuration.\r\n")
    assert raw.call_raw("CONFIG", "SET", "client-output-buffer-limit", "foo 1 2 3") == (
        pre + b"Invalid client class specified in buffer limit configuration.\r\n")
    assert raw.call_raw("CONFIG", "SET", "client-output-buffer-limit", "pubsub a 2 3") == (
        pre + b"Error in hard, soft or soft_seconds setting in buffer limit configuration.\r\n")
    assert raw.call_raw("CONFIG", "SET", "client-output-buffer-limit",
                        "pubsub 1mb 2k 3") == b"+OK\r\n"
    got = raw.call("CONFIG", "GET", "client-output-buffer-limit")
    assert got[1] == b"normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 2000 3"
    assert raw.call_raw("CONFIG", "SET", "client-output-buffer-limit",
                        "pubsub 32mb 8mb 60") == b"+OK\r\n"


def test_slow_subscriber_is_cut_off(make_server):
    s = make_server()
    with s.raw() as c, s.raw() as sub, s.raw() as pub:
        assert c.call_raw("CONFIG", "SET", "client-output-buffer-limit",
                          "pubsub 1mb 512kb 0") == b"+OK\r\n"
        assert sub.call_raw("SUBSCRIBE", "slow") == push("subscribe", "slow", 1)
        wait_numsub(c, "slow", 1)
        # The subscriber reads nothing; 40 MB is more than the kernel's
        # socket buffers take, so its replies pile up past 1 MB.
        payload = "x" * 100000
        start = time.monotonic()
        for _ in range(4):
            pub.send(b"".join(encode("PUBLISH", "slow", payload) for _ in range(100)))
            for _ in range(100):
                pub.read_raw()
        assert time.monotonic() - start < 30  # the publisher was never held up
        assert wait_numsub(c, "slow", 0) == 0
        got = 0
        with pytest.raises(Closed):
            while True:
                sub.read_raw()
                got += 1
        assert got < 400


def test_script_publish_once_committed(conns, key):
    ch = key + "s"
    sub, c = conns(), conns()
    assert sub.call_raw("SUBSCRIBE", ch) == push("subscribe", ch, 1)
    wait_numsub(c, ch, 1)
    assert c.call_raw("EVAL", "return redis.call('PUBLISH', KEYS[1], 'one')", "1",
                      ch) == b":1\r\n"
    assert sub.read_raw() == push("message", ch, "one")
    assert c.call_raw("EVAL", "redis.call('PUBLISH', KEYS[1], 'two') "
                      "return redis.call('SPUBLISH', KEYS[1], 'three')", "1", ch) == b":0\r\n"
    assert sub.read_raw() == push("message", ch, "two")
    assert c.call_raw("PUBLISH", ch, "three") == b":1\r\n"
    assert sub.read_raw() == push("message", ch, "three")


@pytest.mark.rckv_only
def test_failed_script_publishes_nothing(conns, key):
    # rckv undoes everything of a script that ends in an error, its
    # messages too (Redis would have sent them).
    ch = key + "f"
    sub, c = conns(), conns()
    assert sub.call_raw("SUBSCRIBE", ch) == push("subscribe", ch, 1)
    wait_numsub(c, ch, 1)
    c.call("SET", key + "str", "abc")
    got = c.call_raw("EVAL", "redis.call('PUBLISH', KEYS[1], 'lost') "
                     "return redis.call('INCR', KEYS[2])", "2", ch, key + "str")
    assert got.startswith(b"-ERR value is not an integer")
    assert c.call_raw("PUBLISH", ch, "kept") == b":1\r\n"
    assert sub.read_raw() == push("message", ch, "kept")


def test_close_with_many_subscriptions(conns, key):
    # Closing drops every subscription (this freed a name still in use
    # before: caught by the ASan build).
    chans = [key + "c%d" % i for i in range(50)]
    s, q = conns(), conns()
    s.send(encode("SUBSCRIBE", *chans) + encode("PSUBSCRIBE", key + "p*", key + "q*") +
           encode("SSUBSCRIBE", key + "s"))
    for _ in range(53):
        s.read_raw()
    assert wait_numsub(q, chans[-1], 1) == 1
    s.close()
    assert wait_numsub(q, chans[0], 0) == 0
    end = time.monotonic() + 5
    while q.call("PUBSUB", "NUMPAT") and time.monotonic() < end:
        time.sleep(0.01)
    got = q.call("PUBSUB", "NUMSUB", *chans)
    assert got[1::2] == [0] * 50 and q.call("PUBSUB", "SHARDCHANNELS", key + "*") == []
