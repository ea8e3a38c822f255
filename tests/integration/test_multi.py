"""MULTI/EXEC/DISCARD/WATCH exactly as Redis 7.0 does them, byte for byte.

Validated against redis-server 7.0 with RCKV_TEST_TARGET=redis.
"""

import pytest

from rckvtest import Error, encode

OK = b"+OK\r\n"
QUEUED = b"+QUEUED\r\n"
NIL = b"$-1\r\n"
NULL_ARRAY = b"*-1\r\n"
EXECABORT = b"-EXECABORT Transaction discarded because of previous errors.\r\n"
NO_MULTI_EXEC = b"-ERR EXEC without MULTI\r\n"
NO_MULTI_DISCARD = b"-ERR DISCARD without MULTI\r\n"
NOT_INT = b"-ERR value is not an integer or out of range\r\n"


def bulk(v):
    v = v.encode() if isinstance(v, str) else v
    return b"$%d\r\n%s\r\n" % (len(v), v)


@pytest.fixture
def other(server):
    c = server.raw()
    try:
        yield c
    finally:
        c.close()


def test_queue_and_exec(raw, other, key):
    k = key + "a"
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", k, "1") == QUEUED
    assert raw.call_raw("incr", k) == QUEUED
    assert raw.call_raw("Get", k) == QUEUED
    assert raw.call_raw("ping") == QUEUED
    assert raw.call_raw("echo", "hi") == QUEUED
    # Nothing is visible before EXEC.
    assert other.call_raw("GET", k) == NIL
    assert raw.call_raw("EXEC") == b"*5\r\n" + OK + b":2\r\n" + bulk("2") + b"+PONG\r\n" + bulk("hi")
    assert other.call_raw("GET", k) == bulk("2")


def test_empty_exec(raw):
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("EXEC") == b"*0\r\n"
    assert raw.call_raw("EXEC") == NO_MULTI_EXEC


def test_without_multi(raw):
    assert raw.call_raw("EXEC") == NO_MULTI_EXEC
    assert raw.call_raw("DISCARD") == NO_MULTI_DISCARD


def test_nested_multi_does_not_abort(raw, key):
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("MULTI") == b"-ERR MULTI calls can not be nested\r\n"
    assert raw.call_raw("INCR", key) == QUEUED
    assert raw.call_raw("EXEC") == b"*1\r\n:1\r\n"


def test_watch_inside_multi_does_not_abort(raw, key):
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("WATCH", key) == b"-ERR WATCH inside MULTI is not allowed\r\n"
    assert raw.call_raw("INCR", key) == QUEUED
    assert raw.call_raw("EXEC") == b"*1\r\n:1\r\n"


@pytest.mark.parametrize("bad,reply", [
    (("foo", "x"), b"-ERR unknown command 'foo', with args beginning with: 'x' \r\n"),
    (("set", "{k}"), b"-ERR wrong number of arguments for 'set' command\r\n"),
    (("get",), b"-ERR wrong number of arguments for 'get' command\r\n"),
], ids=["unknown", "arity-set", "arity-get"])
def test_execabort_on_queue_time_error(raw, other, key, bad, reply):
    k = key + "a"
    bad = tuple(a.replace("{k}", k) for a in bad)
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", k, "1") == QUEUED
    assert raw.call_raw(*bad) == reply
    assert raw.call_raw("SET", k, "2") == QUEUED  # still queueing after the error
    assert raw.call_raw("EXEC") == EXECABORT
    assert raw.call_raw("EXEC") == NO_MULTI_EXEC  # the transaction is gone
    assert other.call_raw("GET", k) == NIL        # and nothing ran


def test_discard_after_queue_time_error(raw, key):
    assert raw.call_raw("MULTI") == OK
    raw.call_raw("foo")
    assert raw.call_raw("DISCARD") == OK
    assert raw.call_raw("MULTI") == OK  # a new transaction starts clean
    assert raw.call_raw("SET", key, "3") == QUEUED
    assert raw.call_raw("EXEC") == b"*1\r\n" + OK


def test_exec_with_arguments_aborts(raw, key):
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", key, "1") == QUEUED
    assert raw.call_raw("EXEC", "x") == (b"-EXECABORT Transaction discarded because of: "
                                         b"wrong number of arguments for 'exec' command\r\n")
    assert raw.call_raw("EXEC") == NO_MULTI_EXEC
    assert raw.call_raw("GET", key) == NIL


def test_runtime_error_inside_exec(raw, key):
    s, a = key + "s", key + "a"
    assert raw.call_raw("SET", s, "abc") == OK
    assert raw.call_raw("MULTI") == OK
    for args in (("SET", a, "1"), ("INCR", s), ("INCR", a), ("GET", s),
                 ("INCRBYFLOAT", s, "1"), ("GET", a)):
        assert raw.call_raw(*args) == QUEUED
    # Runtime errors are elements of the array; the other commands still
    # run (Redis has no rollback).
    assert raw.call_raw("EXEC") == (b"*6\r\n" + OK + NOT_INT + b":2\r\n" + bulk("abc")
                                    + b"-ERR value is not a valid float\r\n" + bulk("2"))
    assert raw.call_raw("GET", a) == bulk("2")


def test_discard(raw, other, key):
    assert raw.call_raw("SET", key, "old") == OK
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", key, "new") == QUEUED
    assert raw.call_raw("DEL", key) == QUEUED
    assert raw.call_raw("DISCARD") == OK
    assert raw.call_raw("DISCARD") == NO_MULTI_DISCARD
    assert raw.call_raw("EXEC") == NO_MULTI_EXEC
    assert other.call_raw("GET", key) == bulk("old")


def test_not_allowed_inside_transaction(make_server):
    # Own server: if SHUTDOWN were queued and run, only this one goes down.
    s = make_server()
    with s.raw() as c:
        assert c.call_raw("MULTI") == OK
        assert c.call_raw("SET", "k", "1") == QUEUED
        assert c.call_raw("SHUTDOWN") == b"-ERR Command not allowed inside a transaction\r\n"
        assert c.call_raw("EXEC") == EXECABORT
        assert c.call_raw("GET", "k") == NIL
    assert s.alive()
    with s.raw() as c:
        assert c.call_raw("PING") == b"+PONG\r\n"


# --- WATCH ---------------------------------------------------------------

def watched_exec(raw, k, between):
    """WATCH k, run `between` (another client's doing), then MULTI/SET/EXEC;
    return EXEC's raw reply."""
    assert raw.call_raw("WATCH", k) == OK
    between()
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", k, "mine") == QUEUED
    return raw.call_raw("EXEC")


def test_watch_conflict_null_array(raw, other, key):
    other.call_raw("SET", key, "0")
    assert watched_exec(raw, key, lambda: other.call_raw("SET", key, "theirs")) == NULL_ARRAY
    assert raw.call_raw("GET", key) == bulk("theirs")


def test_watch_same_value_write_conflicts(raw, other, key):
    # A write is a change even if it writes the same bytes.
    other.call_raw("SET", key, "v")
    assert watched_exec(raw, key, lambda: other.call_raw("SET", key, "v")) == NULL_ARRAY
    assert raw.call_raw("GET", key) == bulk("v")


def test_watch_missing_key_created(raw, other, key):
    assert watched_exec(raw, key, lambda: other.call_raw("SET", key, "x")) == NULL_ARRAY
    assert raw.call_raw("GET", key) == bulk("x")


def test_watch_key_deleted(raw, other, key):
    other.call_raw("SET", key, "x")
    assert watched_exec(raw, key, lambda: other.call_raw("DEL", key)) == NULL_ARRAY
    assert raw.call_raw("GET", key) == NIL


def test_watch_changed_by_other_transaction(raw, other, key):
    def txn():
        assert other.call_raw("MULTI") == OK
        assert other.call_raw("INCR", key) == QUEUED
        assert other.call_raw("EXEC") == b"*1\r\n:1\r\n"
    assert watched_exec(raw, key, txn) == NULL_ARRAY
    assert raw.call_raw("GET", key) == bulk("1")


def test_watch_own_write_conflicts(raw, key):
    # Redis: a watched key modified by the watching client itself before
    # MULTI also fails the EXEC.
    assert watched_exec(raw, key, lambda: raw.call_raw("SET", key, "self")) == NULL_ARRAY
    assert raw.call_raw("GET", key) == bulk("self")


def test_watch_unchanged_succeeds(raw, other, key):
    other.call_raw("SET", key, "0")
    # Reads by others are not changes.
    assert watched_exec(raw, key, lambda: other.call_raw("GET", key)) == b"*1\r\n" + OK
    assert other.call_raw("GET", key) == bulk("mine")


def test_watch_several_keys_one_changes(raw, other, key):
    a, b, c = key + "a", key + "b", key + "c"
    assert raw.call_raw("WATCH", a, b) == OK
    assert raw.call_raw("WATCH", c) == OK  # WATCH accumulates
    other.call_raw("SET", c, "1")
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", a, "1") == QUEUED
    assert raw.call_raw("EXEC") == NULL_ARRAY
    assert raw.call_raw("EXISTS", a) == b":0\r\n"


def test_unwatch(raw, other, key):
    assert raw.call_raw("WATCH", key) == OK
    other.call_raw("SET", key, "x")
    assert raw.call_raw("UNWATCH") == OK
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", key, "y") == QUEUED
    assert raw.call_raw("EXEC") == b"*1\r\n" + OK
    assert other.call_raw("GET", key) == bulk("y")


def test_exec_and_discard_forget_watches(raw, other, key):
    assert watched_exec(raw, key, lambda: other.call_raw("SET", key, "1")) == NULL_ARRAY
    # The failed EXEC unwatched everything: a later change does not matter.
    other.call_raw("SET", key, "2")
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", key, "3") == QUEUED
    assert raw.call_raw("EXEC") == b"*1\r\n" + OK
    # DISCARD unwatches too.
    assert raw.call_raw("WATCH", key) == OK
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("DISCARD") == OK
    other.call_raw("SET", key, "4")
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("GET", key) == QUEUED
    assert raw.call_raw("EXEC") == b"*1\r\n" + bulk("4")


def test_watch_failure_resp3_null(raw, other, key):
    hello = raw.call("HELLO", "3")
    assert isinstance(hello, list) and b"proto" in hello
    assert raw.call_raw("WATCH", key) == OK
    other.call_raw("SET", key, "x")
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("GET", key) == QUEUED
    assert raw.call_raw("EXEC") == b"_\r\n"


def test_pipelined_transaction(raw, key):
    # A client may send the whole block at once; replies come in order.
    k = key + "p"
    raw.send(encode("MULTI") + encode("SET", k, "5") + encode("INCRBY", k, "10")
             + encode("EXEC") + encode("GET", k))
    assert [raw.read_raw() for _ in range(5)] == [OK, QUEUED, QUEUED,
                                                 b"*2\r\n" + OK + b":15\r\n", bulk("15")]


def test_keys_and_dbsize_see_the_blocks_own_writes(make_server):
    """Inside MULTI, KEYS and DBSIZE count what the block wrote before them:
    keys it created, overwrote or deleted, a write that failed (the key
    stays as it was), and nothing committed after a FLUSHDB in the block.
    Against the build before this test, they counted only committed keys."""
    s = make_server()
    c = s.raw()
    try:
        for k in ("k1", "k2", "k3"):
            assert c.call_raw("SET", k, "v") == OK
        block = [
            (("DBSIZE",), 3),
            (("SET", "k4", "v"), "OK"),
            (("DEL", "k1"), 1),
            (("SET", "k2", "w"), "OK"),
            (("INCR", "k5"), 1),
            (("INCR", "k3"), None),  # an error: k3 holds "v"
            (("DEL", "nosuch"), 0),
            (("DBSIZE",), 4),
            (("KEYS", "k*"), {b"k2", b"k3", b"k4", b"k5"}),
            (("KEYS", "k[145]"), {b"k4", b"k5"}),
            (("FLUSHDB",), "OK"),
            (("DBSIZE",), 0),
            (("KEYS", "*"), set()),
            (("SET", "k6", "v"), "OK"),
            (("DBSIZE",), 1),
            (("KEYS", "*"), {b"k6"}),
        ]
        assert c.call_raw("MULTI") == OK
        for cmd, _ in block:
            assert c.call_raw(*cmd) == QUEUED, cmd
        replies = c.call("EXEC")
        assert len(replies) == len(block)
        for (cmd, want), got in zip(block, replies):
            if isinstance(want, set):
                assert set(got) == want and len(got) == len(want), (cmd, got)
            elif want is None:
                assert isinstance(got, Error) and "not an integer" in got, (cmd, got)
            else:
                assert got == want and not isinstance(got, Error), (cmd, got)
        assert c.call("DBSIZE") == 1
        assert c.call("KEYS", "*") == [b"k6"]
    finally:
        c.close()
