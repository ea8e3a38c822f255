"""Sorted sets as Redis 7.0 has them: ZADD (NX XX GT LT CH INCR), ZINCRBY,
ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT, ZRANGE
(BYSCORE BYLEX REV LIMIT WITHSCORES) and its legacy forms, ZRANGESTORE,
ZREMRANGEBY*, ZPOPMIN/ZPOPMAX, ZMPOP, ZRANDMEMBER, ZSCAN, ZUNION/ZINTER/
ZDIFF and their STORE forms (WEIGHTS, AGGREGATE), ZINTERCARD, the
non-blocking answers of BZPOPMIN/BZPOPMAX/BZMPOP; score formatting in
RESP2 and RESP3; TYPE, OBJECT ENCODING (listpack, skiplist), WRONGTYPE,
expiry, RENAME/COPY. Every reply here passes against redis-server 7.0
(RCKV_TEST_TARGET=redis) as against rckv.

rckv-only: BZPOPMIN's error when it would block; ZUNIONSTORE over zsets on
three cluster nodes in one MULTI under several protocols; concurrent
ZINCRBYs under several protocols.
"""

import random
import threading

import pytest

from cluster import running_cluster
from rckvtest import REDIS_MODE, Error

OK = b"+OK\r\n"
QUEUED = b"+QUEUED\r\n"
NOT_INT = "ERR value is not an integer or out of range"
NOT_FLOAT = "ERR value is not a valid float"
SYNTAX = "ERR syntax error"
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
RANGE_FLOAT = "ERR min or max is not a float"
RANGE_LEX = "ERR min or max not valid string range item"


def is_err(reply, text):
    return isinstance(reply, Error) and reply == text


def pairs(flat):
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]


def test_zadd_zscore_zcard_zrem(raw, key):
    k = key + "z"
    assert raw.call("ZADD", k, 1, "a", 2, "b", 3, "c") == 3
    assert raw.call("ZADD", k, 5, "a", 4, "d") == 1
    assert raw.call("ZCARD", k) == 4
    assert raw.call("ZCARD", key + "missing") == 0
    assert raw.call("ZSCORE", k, "a") == b"5"
    assert raw.call("ZSCORE", k, "zz") is None
    assert raw.call("ZSCORE", key + "missing", "a") is None
    assert raw.call("ZMSCORE", k, "a", "zz", "b") == [b"5", None, b"2"]
    assert raw.call("ZMSCORE", key + "missing", "a", "b") == [None, None]
    assert raw.call("ZRANGE", k, 0, -1, "WITHSCORES") == [
        b"b", b"2", b"c", b"3", b"d", b"4", b"a", b"5"]
    assert raw.call("ZREM", k, "a", "zz", "a") == 1
    assert raw.call("ZREM", key + "missing", "a") == 0
    assert raw.call("TYPE", k) == "zset"
    assert raw.call("ZREM", k, "b", "c", "d") == 3
    assert raw.call("EXISTS", k) == 0                  # empty: deleted


def test_zadd_options(raw, key):
    k = key + "z"
    assert raw.call("ZADD", k, "XX", 1, "a") == 0
    assert raw.call("EXISTS", k) == 0
    assert raw.call("ZADD", k, "XX", "INCR", 1, "a") is None
    assert raw.call("ZADD", k, "NX", 1, "a", 2, "b") == 2
    assert raw.call("ZADD", k, "NX", 10, "a", 3, "c") == 1
    assert raw.call("ZSCORE", k, "a") == b"1"
    assert raw.call("ZADD", k, "XX", "CH", 10, "a", 3, "zz") == 1
    assert raw.call("ZADD", k, "GT", "CH", 5, "a", 20, "b") == 1   # a stays 10
    assert raw.call("ZMSCORE", k, "a", "b") == [b"10", b"20"]
    assert raw.call("ZADD", k, "LT", "CH", 5, "a", 30, "b", 1, "n") == 2
    assert raw.call("ZMSCORE", k, "a", "b", "n") == [b"5", b"20", b"1"]
    assert raw.call("ZADD", k, "CH", 5, "a", 6, "b") == 1
    assert raw.call("ZADD", k, "INCR", "2.5", "a") == b"7.5"
    assert raw.call("ZADD", k, "GT", "INCR", -1, "a") is None
    assert raw.call("ZADD", k, "NX", "INCR", 1, "a") is None
    assert raw.call("ZINCRBY", k, "-0.5", "a") == b"7"
    assert raw.call("ZINCRBY", k, 3, "new") == b"3"
    # errors, in Redis's order
    assert is_err(raw.call("ZADD", k, 1), "ERR wrong number of arguments for 'zadd' command")
    assert is_err(raw.call("ZADD", k, "NX", 1), SYNTAX)
    assert is_err(raw.call("ZADD", k, 1, "a", 2), SYNTAX)
    assert is_err(raw.call("ZADD", k, "NX", "XX", 1, "a"),
                  "ERR XX and NX options at the same time are not compatible")
    assert is_err(raw.call("ZADD", k, "GT", "LT", 1, "a"),
                  "ERR GT, LT, and/or NX options at the same time are not compatible")
    assert is_err(raw.call("ZADD", k, "NX", "GT", 1, "a"),
                  "ERR GT, LT, and/or NX options at the same time are not compatible")
    assert is_err(raw.call("ZADD", k, "INCR", 1, "a", 2, "b"),
                  "ERR INCR option supports a single increment-element pair")
    assert is_err(raw.call("ZADD", k, "x", "a"), NOT_FLOAT)
    assert is_err(raw.call("ZADD", k, 1, "a", "nan", "b"), NOT_FLOAT)
    assert is_err(raw.call("ZADD", k, " 1", "a"), NOT_FLOAT)
    assert is_err(raw.call("ZINCRBY", k, "abc", "a"), NOT_FLOAT)
    assert raw.call("ZADD", k, "inf", "i") == 1
    assert is_err(raw.call("ZINCRBY", k, "-inf", "i"),
                  "ERR resulting score is not a number (NaN)")
    assert is_err(raw.call("ZINCRBY", k, 1), "ERR wrong number of arguments for 'zincrby' command")
    assert raw.call("ZSCORE", k, "i") == b"inf"


def test_score_formatting_resp2_and_resp3(raw, key):
    k = key + "z"
    assert raw.call("ZADD", k, "inf", "pinf", "-inf", "ninf", "1e300", "big",
                    "0.1", "tenth", "-0", "negzero", "1.5e-7", "tiny", "12345678901234567890",
                    "huge") == 7
    assert raw.call("ZINCRBY", k, "0.2", "tenth") == b"0.30000000000000004"
    assert raw.call_raw("ZSCORE", k, "pinf") == b"$3\r\ninf\r\n"
    assert raw.call_raw("ZSCORE", k, "ninf") == b"$4\r\n-inf\r\n"
    assert raw.call("ZSCORE", k, "big") == b"1.0000000000000001e+300"
    assert raw.call("ZSCORE", k, "tiny") == b"1.4999999999999999e-07"
    assert raw.call("ZSCORE", k, "huge") == b"1.2345678901234567e+19"
    assert raw.call("ZSCORE", k, "negzero") == b"0"    # a listpack keeps no -0
    assert raw.call("ZRANGE", k, 0, 1, "WITHSCORES") == [b"ninf", b"-inf", b"negzero", b"0"]
    assert raw.call_raw("HELLO", 3).startswith(b"%")
    assert raw.call_raw("ZSCORE", k, "tenth") == b",0.30000000000000004\r\n"
    assert raw.call_raw("ZSCORE", k, "pinf") == b",inf\r\n"
    assert raw.call_raw("ZSCORE", k, "ninf") == b",-inf\r\n"
    assert raw.call_raw("ZSCORE", k, "nope") == b"_\r\n"
    assert raw.call_raw("ZINCRBY", k, 1, "tiny") == b",1.00000015\r\n"
    assert raw.call_raw("ZMSCORE", k, "big", "nope") == b"*2\r\n,1.0000000000000001e+300\r\n_\r\n"
    # RESP3: WITHSCORES as [member, score] pairs
    assert raw.call_raw("ZRANGE", k, 0, 1, "WITHSCORES") == (
        b"*2\r\n*2\r\n$4\r\nninf\r\n,-inf\r\n*2\r\n$7\r\nnegzero\r\n,0\r\n")
    assert raw.call_raw("ZRANGE", k, 0, 1) == b"*2\r\n$4\r\nninf\r\n$7\r\nnegzero\r\n"
    assert raw.call_raw("ZPOPMAX", k) == b"*2\r\n$4\r\npinf\r\n,inf\r\n"
    assert raw.call_raw("ZPOPMAX", k, 1) == b"*1\r\n*2\r\n$3\r\nbig\r\n,1.0000000000000001e+300\r\n"
    assert raw.call_raw("ZSCAN", k, 0, "MATCH", "ninf") == (
        b"*2\r\n$1\r\n0\r\n*2\r\n$4\r\nninf\r\n$4\r\n-inf\r\n")


def test_zrank_zcount_zlexcount(raw, key):
    k = key + "z"
    raw.call("ZADD", k, 1, "a", 2, "b", 2, "c", 3, "d", 4, "e")
    assert raw.call("ZRANK", k, "a") == 0
    assert raw.call("ZRANK", k, "c") == 2
    assert raw.call("ZREVRANK", k, "c") == 2
    assert raw.call("ZREVRANK", k, "a") == 4
    assert raw.call("ZRANK", k, "zz") is None
    assert raw.call("ZRANK", key + "missing", "a") is None
    assert raw.call("ZCOUNT", k, "-inf", "+inf") == 5
    assert raw.call("ZCOUNT", k, 2, 3) == 3
    assert raw.call("ZCOUNT", k, "(2", 3) == 1
    assert raw.call("ZCOUNT", k, "(2", "(2") == 0
    assert raw.call("ZCOUNT", k, 3, 2) == 0
    assert raw.call("ZCOUNT", key + "missing", 0, 1) == 0
    assert is_err(raw.call("ZCOUNT", k, "x", 1), RANGE_FLOAT)
    assert is_err(raw.call("ZCOUNT", k, "(nan", 1), RANGE_FLOAT)
    z = key + "lex"
    raw.call("ZADD", z, 0, "a", 0, "b", 0, "c", 0, "d", 0, "e")
    assert raw.call("ZLEXCOUNT", z, "-", "+") == 5
    assert raw.call("ZLEXCOUNT", z, "[b", "(d") == 2
    assert raw.call("ZLEXCOUNT", z, "(b", "[d") == 2
    assert raw.call("ZLEXCOUNT", z, "+", "-") == 0
    assert raw.call("ZLEXCOUNT", z, "[c", "[c") == 1
    assert is_err(raw.call("ZLEXCOUNT", z, "b", "d"), RANGE_LEX)
    assert is_err(raw.call("ZLEXCOUNT", z, "[a", "+x"), RANGE_LEX)


def test_zrange_forms(raw, key):
    k = key + "z"
    raw.call("ZADD", k, 1, "a", 2, "b", 3, "c", 4, "d", 5, "e")
    assert raw.call("ZRANGE", k, 0, 1) == [b"a", b"b"]
    assert raw.call("ZRANGE", k, -2, -1) == [b"d", b"e"]
    assert raw.call("ZRANGE", k, 3, 100) == [b"d", b"e"]
    assert raw.call("ZRANGE", k, 4, 2) == []
    assert raw.call("ZRANGE", k, 0, 0, "REV") == [b"e"]
    assert raw.call("ZREVRANGE", k, 0, 1, "WITHSCORES") == [b"e", b"5", b"d", b"4"]
    assert raw.call("ZRANGE", k, 2, 4, "BYSCORE") == [b"b", b"c", b"d"]
    assert raw.call("ZRANGE", k, "(2", "+inf", "BYSCORE", "LIMIT", 1, 2) == [b"d", b"e"]
    assert raw.call("ZRANGE", k, "+inf", "(2", "BYSCORE", "REV", "LIMIT", 0, 2) == [b"e", b"d"]
    assert raw.call("ZRANGE", k, 0, 10, "BYSCORE", "LIMIT", -1, 2) == []
    assert raw.call("ZRANGE", k, 0, 10, "BYSCORE", "LIMIT", 1, -1) == [b"b", b"c", b"d", b"e"]
    assert raw.call("ZRANGE", k, 0, 10, "BYSCORE", "LIMIT", 10, 1) == []
    assert raw.call("ZRANGEBYSCORE", k, "-inf", 2, "WITHSCORES") == [b"a", b"1", b"b", b"2"]
    assert raw.call("ZREVRANGEBYSCORE", k, 4, "(1", "LIMIT", 1, 1) == [b"c"]
    assert raw.call("ZRANGE", key + "missing", 0, -1) == []
    assert is_err(raw.call("ZRANGE", k, 0, 1, "LIMIT", 0, 1),
                  "ERR syntax error, LIMIT is only supported in combination with either "
                  "BYSCORE or BYLEX")
    assert is_err(raw.call("ZRANGE", k, "-", "+", "BYLEX", "WITHSCORES"),
                  "ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    assert is_err(raw.call("ZRANGE", k, 0, 1, "BYSCORE", "BYLEX"), SYNTAX)
    assert is_err(raw.call("ZRANGEBYSCORE", k, 0, 1, "REV"), SYNTAX)
    assert is_err(raw.call("ZRANGE", k, "a", 1), NOT_INT)
    assert is_err(raw.call("ZRANGE", k, 0, 1, "BYSCORE", "LIMIT", "x", 1), NOT_INT)
    assert is_err(raw.call("ZRANGEBYSCORE", k, "a", 1), RANGE_FLOAT)
    z = key + "lex"
    raw.call("ZADD", z, 0, "alpha", 0, "bar", 0, "cool", 0, "down", 0, "elephant")
    assert raw.call("ZRANGEBYLEX", z, "-", "[cool") == [b"alpha", b"bar", b"cool"]
    assert raw.call("ZRANGEBYLEX", z, "(bar", "+", "LIMIT", 1, 2) == [b"down", b"elephant"]
    assert raw.call("ZREVRANGEBYLEX", z, "+", "(bar") == [b"elephant", b"down", b"cool"]
    assert raw.call("ZRANGE", z, "[c", "(e", "BYLEX") == [b"cool", b"down"]
    assert raw.call("ZRANGE", z, "(e", "[c", "BYLEX", "REV") == [b"down", b"cool"]
    assert is_err(raw.call("ZRANGEBYLEX", z, "a", "+"), RANGE_LEX)
    # wrong type: after the arguments are checked
    s = key + "str"
    raw.call("SET", s, "x")
    assert is_err(raw.call("ZRANGE", s, 0, 1), WRONGTYPE)
    assert is_err(raw.call("ZRANGE", s, "a", 1), NOT_INT)


def test_zrangestore(raw, key):
    src, dst = key + "{t}src", key + "{t}dst"
    raw.call("ZADD", src, 1, "a", 2, "b", 3, "c", 4, "d")
    assert raw.call("ZRANGESTORE", dst, src, 1, 2) == 2
    assert raw.call("ZRANGE", dst, 0, -1, "WITHSCORES") == [b"b", b"2", b"c", b"3"]
    assert raw.call("ZRANGESTORE", dst, src, "+inf", 3, "BYSCORE", "REV") == 2
    assert raw.call("ZRANGE", dst, 0, -1) == [b"c", b"d"]
    assert raw.call("ZRANGESTORE", dst, src, "[a", "[b", "BYLEX") == 2
    assert raw.call("ZRANGESTORE", dst, src, 5, 10) == 0
    assert raw.call("EXISTS", dst) == 0                # an empty result deletes
    raw.call("SET", dst, "string")
    assert raw.call("ZRANGESTORE", dst, key + "{t}missing", 0, -1) == 0
    assert raw.call("EXISTS", dst) == 0
    assert is_err(raw.call("ZRANGESTORE", dst, src, 0, -1, "WITHSCORES"), SYNTAX)


def test_zremrange(raw, key):
    k = key + "z"
    raw.call("ZADD", k, 1, "a", 2, "b", 3, "c", 4, "d", 5, "e")
    assert raw.call("ZREMRANGEBYRANK", k, 0, 1) == 2
    assert raw.call("ZRANGE", k, 0, -1) == [b"c", b"d", b"e"]
    assert raw.call("ZREMRANGEBYRANK", k, 5, 10) == 0
    assert raw.call("ZREMRANGEBYSCORE", k, "(3", 4) == 1
    assert raw.call("ZREMRANGEBYSCORE", k, 10, 20) == 0
    assert raw.call("ZREMRANGEBYRANK", key + "missing", 0, -1) == 0
    assert is_err(raw.call("ZREMRANGEBYRANK", k, "a", 1), NOT_INT)
    assert is_err(raw.call("ZREMRANGEBYSCORE", k, "a", 1), RANGE_FLOAT)
    assert is_err(raw.call("ZREMRANGEBYLEX", k, "a", "+"), RANGE_LEX)
    assert raw.call("ZREMRANGEBYRANK", k, 0, -1) == 2
    assert raw.call("EXISTS", k) == 0
    z = key + "lex"
    raw.call("ZADD", z, 0, "a", 0, "b", 0, "c", 0, "d")
    assert raw.call("ZREMRANGEBYLEX", z, "(a", "[c") == 2
    assert raw.call("ZRANGE", z, 0, -1) == [b"a", b"d"]


def test_zpop_and_zmpop(raw, key):
    k = key + "{t}z"
    assert raw.call("ZPOPMIN", k) == []
    assert raw.call("ZPOPMIN", k, 3) == []
    raw.call("ZADD", k, 1, "a", 2, "b", 3, "c", 4, "d", 5, "e")
    assert raw.call("ZPOPMIN", k) == [b"a", b"1"]
    assert raw.call("ZPOPMAX", k, 2) == [b"e", b"5", b"d", b"4"]
    assert raw.call("ZPOPMIN", k, 0) == []
    assert is_err(raw.call("ZPOPMIN", k, -1), "ERR value is out of range, must be positive")
    assert is_err(raw.call("ZPOPMIN", k, "x"), "ERR value is out of range, must be positive")
    assert is_err(raw.call("ZPOPMIN", k, 1, 2), SYNTAX)
    m = key + "{t}missing"
    assert raw.call("ZMPOP", 2, m, k, "MIN") == [k.encode(), [[b"b", b"2"]]]
    assert raw.call("ZMPOP", 1, k, "MAX", "COUNT", 10) == [k.encode(), [[b"c", b"3"]]]
    assert raw.call("EXISTS", k) == 0
    assert raw.call("ZMPOP", 2, m, k, "MIN") is None
    assert is_err(raw.call("ZMPOP", 0, k, "MIN"), "ERR numkeys should be greater than 0")
    assert is_err(raw.call("ZMPOP", 1, k, "MID"), SYNTAX)
    assert is_err(raw.call("ZMPOP", 3, k, "MIN"), SYNTAX)
    assert is_err(raw.call("ZMPOP", 1, k, "MIN", "COUNT", 0), "ERR count should be greater than 0")
    assert is_err(raw.call("ZMPOP", 1, k, "MIN", "COUNT", 1, "COUNT", 1), SYNTAX)


def test_blocking_pops_with_data(raw, key):
    a, b = key + "{t}a", key + "{t}b"
    raw.call("ZADD", b, 1, "x", 2, "y")
    assert raw.call("BZPOPMIN", a, b, 0) == [b.encode(), b"x", b"1"]
    assert raw.call("BZPOPMAX", a, b, "0.5") == [b.encode(), b"y", b"2"]
    raw.call("ZADD", a, 1, "x", 2, "y", 3, "z")
    assert raw.call("BZMPOP", 1, 2, a, b, "MAX", "COUNT", 2) == [
        a.encode(), [[b"z", b"3"], [b"y", b"2"]]]
    assert is_err(raw.call("BZPOPMIN", a, -1), "ERR timeout is negative")
    assert is_err(raw.call("BZPOPMIN", a, "x"), "ERR timeout is not a float or out of range")
    # in MULTI a blocking pop never blocks: nil as on a timeout
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("BZPOPMIN", b, 0) == QUEUED
    assert raw.call("EXEC") == [None]


@pytest.mark.rckv_only
def test_blocking_pop_that_would_block_is_an_error(raw, key):
    r = raw.call("BZPOPMIN", key + "none", 1)
    assert isinstance(r, Error) and r.startswith("ERR rckv does not block")
    r = raw.call("BZMPOP", 1, 1, key + "none", "MIN")
    assert isinstance(r, Error) and r.startswith("ERR rckv does not block")


def test_zrandmember(raw, key):
    k = key + "z"
    assert raw.call("ZRANDMEMBER", k) is None
    assert raw.call("ZRANDMEMBER", k, 3) == []
    raw.call("ZADD", k, 1, "a", 2, "b", 3, "c")
    assert raw.call("ZRANDMEMBER", k) in (b"a", b"b", b"c")
    got = raw.call("ZRANDMEMBER", k, 2)
    assert len(set(got)) == 2 and set(got) <= {b"a", b"b", b"c"}
    got = raw.call("ZRANDMEMBER", k, 10, "WITHSCORES")
    assert sorted(pairs(got)) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    got = raw.call("ZRANDMEMBER", k, -7, "WITHSCORES")
    assert len(got) == 14 and set(pairs(got)) <= {(b"a", b"1"), (b"b", b"2"), (b"c", b"3")}
    assert raw.call("ZRANDMEMBER", k, 0) == []
    assert is_err(raw.call("ZRANDMEMBER", k, 1, "x"), SYNTAX)
    assert is_err(raw.call("ZRANDMEMBER", k, "x"), NOT_INT)
    assert is_err(raw.call("ZRANDMEMBER", k, -9223372036854775808),
                  "ERR value is out of range, value must between -9223372036854775807 and "
                  "9223372036854775807")


def test_zscan(raw, key):
    k = key + "z"
    raw.call("ZADD", k, *[x for i in range(200) for x in (str(i * 0.5), "m%d" % i)])
    seen = {}
    cursor = b"0"
    while True:
        cursor, items = raw.call("ZSCAN", k, cursor, "COUNT", 50)
        seen.update(dict(pairs(items)))
        if cursor == b"0":
            break
    assert len(seen) == 200
    assert seen[b"m3"] == b"1.5" and seen[b"m10"] == b"5"
    cursor, items = raw.call("ZSCAN", key + "missing", 0)
    assert cursor == b"0" and items == []


def test_union_inter_diff(raw, key):
    a, b, c, s = (key + "{t}" + x for x in "abcs")
    raw.call("ZADD", a, 1, "x", 2, "y", 3, "z")
    raw.call("ZADD", b, 10, "y", 20, "z", 30, "w")
    raw.call("SADD", s, "x", "w")
    assert raw.call("ZUNION", 2, a, b, "WITHSCORES") == [
        b"x", b"1", b"y", b"12", b"z", b"23", b"w", b"30"]
    assert raw.call("ZINTER", 2, a, b, "WITHSCORES") == [b"y", b"12", b"z", b"23"]
    assert raw.call("ZINTER", 2, a, b, "AGGREGATE", "MIN", "WITHSCORES") == [
        b"y", b"2", b"z", b"3"]
    assert raw.call("ZINTER", 2, a, b, "WEIGHTS", 2, "0.5", "AGGREGATE", "MAX",
                    "WITHSCORES") == [b"y", b"5", b"z", b"10"]
    assert raw.call("ZDIFF", 2, a, b, "WITHSCORES") == [b"x", b"1"]
    assert raw.call("ZDIFF", 1, a) == [b"x", b"y", b"z"]
    assert raw.call("ZUNION", 2, a, s, "WITHSCORES") == [b"w", b"1", b"x", b"2", b"y", b"2",
                                                         b"z", b"3"]
    assert raw.call("ZINTER", 3, a, s, c) == []
    assert raw.call("ZUNION", 2, a, key + "{t}missing") == [b"x", b"y", b"z"]
    assert raw.call("ZUNIONSTORE", c, 2, a, b, "WEIGHTS", 1, "inf") == 4
    assert raw.call("ZRANGE", c, 0, -1, "WITHSCORES") == [
        b"x", b"1", b"w", b"inf", b"y", b"inf", b"z", b"inf"]
    assert raw.call("ZINTERSTORE", c, 2, a, b) == 2
    assert raw.call("ZDIFFSTORE", c, 2, a, a) == 0
    assert raw.call("EXISTS", c) == 0
    assert raw.call("ZINTERCARD", 2, a, b) == 2
    assert raw.call("ZINTERCARD", 2, a, b, "LIMIT", 1) == 1
    assert raw.call("ZINTERCARD", 2, a, b, "LIMIT", 0) == 2
    # inf * 0 is 0, inf + -inf is 0, as in Redis
    raw.call("ZADD", c, "inf", "x")
    assert raw.call("ZUNION", 2, a, c, "WEIGHTS", 0, 0, "WITHSCORES") == [b"x", b"0", b"y", b"0",
                                                                        b"z", b"0"]
    raw.call("ZADD", b, "-inf", "x")
    assert raw.call("ZINTER", 2, b, c, "WITHSCORES") == [b"x", b"0"]
    # errors
    assert is_err(raw.call("ZUNION", 0, a), "ERR at least 1 input key is needed for 'zunion' command")
    assert is_err(raw.call("ZUNIONSTORE", c, 0, a),
                  "ERR at least 1 input key is needed for 'zunionstore' command")
    assert is_err(raw.call("ZUNION", 3, a, b), SYNTAX)
    assert is_err(raw.call("ZUNION", "x", a), NOT_INT)
    assert is_err(raw.call("ZUNION", 1, a, "WEIGHTS", "x"), "ERR weight value is not a float")
    assert is_err(raw.call("ZUNION", 1, a, "AGGREGATE", "AVG"), SYNTAX)
    assert is_err(raw.call("ZDIFF", 2, a, b, "WEIGHTS", 1, 2), SYNTAX)
    assert is_err(raw.call("ZUNIONSTORE", c, 1, a, "WITHSCORES"), SYNTAX)
    assert is_err(raw.call("ZINTERCARD", 1, a, "LIMIT", -1), "ERR LIMIT can't be negative")
    assert is_err(raw.call("ZINTERCARD", 1, a, "WITHSCORES"), SYNTAX)
    raw.call("SET", key + "{t}str", "v")
    assert is_err(raw.call("ZUNION", 2, a, key + "{t}str"), WRONGTYPE)


def test_wrongtype_encoding_expire_copy_rename(raw, key):
    k, h = key + "{t}z", key + "{t}h"
    raw.call("HSET", h, "f", "v")
    assert is_err(raw.call("ZADD", h, 1, "a"), WRONGTYPE)
    assert is_err(raw.call("ZSCORE", h, "a"), WRONGTYPE)
    assert is_err(raw.call("ZCARD", h), WRONGTYPE)
    raw.call("ZADD", k, 1, "a")
    assert is_err(raw.call("HGET", k, "f"), WRONGTYPE)
    assert is_err(raw.call("GET", k), WRONGTYPE)
    assert raw.call("OBJECT", "ENCODING", k) == b"listpack"
    raw.call("ZADD", k, 2, "m" * 65)
    assert raw.call("OBJECT", "ENCODING", k) == b"skiplist"
    n = key + "{t}n"
    raw.call("ZADD", n, *[x for i in range(128) for x in (i, "e%d" % i)])
    assert raw.call("OBJECT", "ENCODING", n) == b"listpack"
    raw.call("ZADD", n, 1000, "one-more")
    assert raw.call("OBJECT", "ENCODING", n) == b"skiplist"
    raw.call("ZREM", n, "one-more", "e1")
    assert raw.call("OBJECT", "ENCODING", n) == b"skiplist"   # one way, as Redis
    # a STORE converts to what the result needs
    d = key + "{t}d"
    assert raw.call("ZUNIONSTORE", d, 1, n) == 127
    assert raw.call("OBJECT", "ENCODING", d) == b"listpack"
    # COPY and RENAME of a small and a big zset
    assert raw.call("COPY", n, key + "{t}n2") == 1
    assert raw.call("ZRANGE", key + "{t}n2", 0, 2) == [b"e0", b"e2", b"e3"]
    assert raw.call("ZREM", n, "e0") == 1
    assert raw.call("ZCARD", key + "{t}n2") == 127 and raw.call("ZCARD", n) == 126
    assert raw.call("RENAME", key + "{t}n2", key + "{t}n3") == "OK"
    assert raw.call("ZRANK", key + "{t}n3", "e100") == 99
    assert raw.call("COPY", key + "{t}n3", key + "{t}n4") == 1
    if not REDIS_MODE:     # redis-server refuses DEBUG unless configured to allow it
        assert raw.call("DEBUG", "DIGEST-VALUE", key + "{t}n3") != raw.call(
            "DEBUG", "DIGEST-VALUE", n)
        assert raw.call("DEBUG", "DIGEST-VALUE", key + "{t}n3") == raw.call(
            "DEBUG", "DIGEST-VALUE", key + "{t}n4")
    assert raw.call("MEMORY", "USAGE", n) > 0
    # expiry as for any key
    assert raw.call("PEXPIRE", n, 50) == 1
    raw.call("ZADD", n, 5, "e5")               # a write keeps the TTL
    assert raw.call("PTTL", n) > 0
    import time
    time.sleep(0.2)
    assert raw.call("ZCARD", n) == 0 and raw.call("EXISTS", n) == 0


def test_scan_type(r, key):
    r.zadd(key + "z", {"a": 1})
    r.hset(key + "h", "f", "v")
    assert list(r.scan_iter(match=key + "*", _type="zset")) == [(key + "z").encode()]
    assert list(r.scan_iter(match=key + "*", _type="hash")) == [(key + "h").encode()]


def test_zset_in_multi(raw, key):
    k = key + "z"
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("ZADD", k, 1, "a", 2, "b") == QUEUED
    assert raw.call_raw("ZINCRBY", k, 5, "a") == QUEUED
    assert raw.call_raw("ZRANGE", k, 0, -1, "WITHSCORES") == QUEUED
    assert raw.call_raw("ZPOPMIN", k) == QUEUED
    assert raw.call("EXEC") == [2, b"6", [b"b", b"2", b"a", b"6"], [b"b", b"2"]]


def model_order(d):
    return sorted(d.items(), key=lambda kv: (kv[1], kv[0]))


@pytest.mark.parametrize("pad", [0, 150])
def test_random_ops_against_a_model(make_server, key, pad):
    """Random ZADD/ZINCRBY/ZREM/ZREMRANGEBYSCORE on a zset that grows past
    the listpack limit and shrinks again, compared with a Python model by
    ranks, ranges and counts (chunks split and merge on the way; with long
    members, leaves of chunks split and empty too). Its own server of
    256 MB: chunks and leaves of every size take a slab per size class,
    and a 64 MB region has 14 slabs (README, "Not yet")."""
    r = make_server(opts={"memory": "256mb"}).client()
    k = key + "z%d" % pad
    rnd = random.Random(7 + pad)
    model = {}
    for step in range(60):
        p = r.pipeline(transaction=False)
        for _ in range(100):
            op = rnd.random()
            m = b"m%d" % rnd.randrange(3000) + b"x" * pad
            if op < 0.6 or len(model) < 50:
                s = rnd.randrange(-500, 500) / 4
                p.zadd(k, {m: s})
                model[m] = float(s)
            elif op < 0.75:
                p.zincrby(k, 1.25, m)
                model[m] = model.get(m, 0.0) + 1.25
            else:
                p.zrem(k, m)
                model.pop(m, None)
        if step % 10 == 9:
            lo = rnd.randrange(-120, 100)
            p.zremrangebyscore(k, lo, lo + 5)
            for m in [m for m, s in model.items() if lo <= s <= lo + 5]:
                del model[m]
        p.execute()
        order = model_order(model)
        assert r.zcard(k) == len(model)
        got = r.zrange(k, 0, -1, withscores=True)
        assert [(m, s) for m, s in got] == order
        for _ in range(5):
            i = rnd.randrange(len(order))
            assert r.zrank(k, order[i][0]) == i
            assert r.zrevrank(k, order[i][0]) == len(order) - 1 - i
            lo, hi = sorted((rnd.randrange(-130, 130), rnd.randrange(-130, 130)))
            want = [m for m, s in order if lo < s <= hi]
            assert r.zcount(k, "(%d" % lo, hi) == len(want)
            assert r.zrangebyscore(k, "(%d" % lo, hi) == want
            assert r.zrevrangebyscore(k, hi, "(%d" % lo, start=1, num=3) == want[::-1][1:4]
    while model:                                 # empty it: the key goes
        n = min(len(model), 700)
        got = r.zpopmin(k, n)
        order = model_order(model)
        assert [(m, s) for m, s in got] == order[:n]
        for m, _ in order[:n]:
            del model[m]
    assert r.exists(k) == 0


@pytest.mark.time_limit(150)
def test_big_zset(make_server, key):
    """100,000 members by pipelined ZADDs; ranks and ranges in the middle;
    ZPOPMIN gives them all back in order. (Its own server: a pipelined
    group of ZADDs is one transaction, and its undo log wants room.)"""
    r = make_server(opts={"memory": "256mb"}).client()
    k = key + "big"
    n = 100000
    rnd = random.Random(3)
    scores = {b"m%06d" % i: rnd.randrange(10 ** 6) for i in range(n)}
    items = list(scores.items())
    p = r.pipeline(transaction=False)
    for i in range(0, n, 20):
        p.zadd(k, dict(items[i:i + 20]))
    assert sum(p.execute()) == n
    assert r.zcard(k) == n
    order = sorted(items, key=lambda kv: (kv[1], kv[0]))
    assert r.zrange(k, 50000, 50009, withscores=True) == [(m, float(s))
                                                           for m, s in order[50000:50010]]
    assert r.zrevrange(k, 0, 2) == [m for m, _ in order[::-1][:3]]
    for i in (0, 1, 777, 49999, 50000, 99998, 99999):
        assert r.zrank(k, order[i][0]) == i
    lo, hi = order[30000][1], order[30100][1]
    want = [m for m, s in order if lo <= s <= hi]
    assert r.zcount(k, lo, hi) == len(want)
    assert r.zrangebyscore(k, lo, hi) == want
    assert r.zincrby(k, 10 ** 7, order[0][0]) == float(order[0][1] + 10 ** 7)
    assert r.zrank(k, order[0][0]) == n - 1
    r.zadd(k, {order[0][0]: order[0][1]})
    p = r.pipeline(transaction=False)
    for _ in range(0, n, 5000):
        p.zpopmin(k, 5000)
    popped = [m for batch in p.execute() for m, _ in batch]
    assert popped == [m for m, _ in order]
    assert r.exists(k) == 0


@pytest.fixture(scope="module")
def cluster3():
    if REDIS_MODE:
        pytest.skip("rckv cluster (RCKV_TEST_TARGET=redis)")
    with running_cluster("shm") as cl:
        yield cl


@pytest.mark.rckv_only
@pytest.mark.parametrize("cc", ["nowait", "silo", "calvin"])
def test_cluster_zunionstore_in_multi(cluster3, key, cc):
    k = {i: cluster3.key_on(i, key + "n%d:" % i) for i in (1, 2, 3)}
    conns = {i: cluster3.raw(i) for i in (1, 2, 3)}
    try:
        c = conns[1]
        assert c.call_raw("CONFIG", "SET", "cc", cc) == OK
        for i in (1, 2, 3):   # node 1 small, nodes 2 and 3 chunked
            n = 3 if i == 1 else 300
            args = [x for j in range(n) for x in (j, "%d:%d" % (i, j))]
            assert c.call("ZADD", k[i], *args) == n
        assert c.call_raw("MULTI") == OK
        assert c.call_raw("ZINCRBY", k[2], 1000, "2:7") == QUEUED
        assert c.call_raw("ZADD", k[3], 5, "1:0") == QUEUED
        assert c.call_raw("ZUNIONSTORE", k[3], 3, k[1], k[2], k[3], "WEIGHTS", 1, 1, 2) == QUEUED
        assert c.call_raw("ZCARD", k[3]) == QUEUED
        assert c.call_raw("ZREVRANGE", k[3], 0, 0, "WITHSCORES") == QUEUED
        assert c.call("EXEC") == [b"1007", 1, 603, 603, [b"2:7", b"1007"]]
        for j in (1, 2, 3):
            assert conns[j].call("ZCARD", k[3]) == 603
            assert conns[j].call("ZSCORE", k[3], "1:0") == b"10"   # 0 + 5 * 2
            assert conns[j].call("ZRANK", k[3], "3:299") == 601
            assert conns[j].call("ZSCORE", k[2], "2:7") == b"1007"
        assert conns[2].call("ZINTERCARD", 2, k[1], k[3]) == 3
        # outside MULTI too, from another node: keys found by the numkeys specs
        assert conns[2].call("ZUNIONSTORE", k[1], 2, k[2], k[3], "AGGREGATE", "MAX") == 603
        assert conns[3].call("ZMPOP", 3, k[3] + "none", k[1], k[2], "MAX", "COUNT", 2) == [
            k[1].encode(), [[b"2:7", b"1007"], [b"3:299", b"598"]]]
        assert conns[1].call("ZCARD", k[1]) == 601
        assert conns[2].call("ZRANGESTORE", k[2], k[3], 0, 9) == 10
        assert conns[3].call("ZCARD", k[2]) == 10
    finally:
        conns[1].call("CONFIG", "SET", "cc", "silo")
        for c in conns.values():
            c.close()


@pytest.mark.rckv_only
@pytest.mark.time_limit(120)
@pytest.mark.parametrize("cc", ["nowait", "silo", "calvin"])
def test_concurrent_zincrby_sums(server, key, cc):
    """Several clients ZINCRBY the same members of a chunked zset at once:
    each final score is the sum of every increment (nothing lost)."""
    k = key + "z"
    admin = server.client()
    admin.config_set("cc", cc)
    try:
        admin.zadd(k, {"x%d" % i: i for i in range(400)})   # chunked
        members = ["x%d" % i for i in range(0, 400, 80)]      # 5 members
        threads, errors = [], []
        nthreads, rounds = 4, 150

        def worker(t):
            try:
                c = server.client()
                p = c.pipeline(transaction=False)
                for i in range(rounds):
                    p.zincrby(k, t + 1, members[i % len(members)])
                    if i % 10 == 9:
                        p.execute()
                p.execute()
                c.close()
            except Exception as e:     # reported below
                errors.append(e)

        for t in range(nthreads):
            threads.append(threading.Thread(target=worker, args=(t,)))
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors
        per = rounds // len(members)
        for j, m in enumerate(members):
            want = int(m[1:]) + per * sum(t + 1 for t in range(nthreads))
            assert admin.zscore(k, m) == want
        order = admin.zrange(k, 0, -1, withscores=True)
        assert [s for _, s in order] == sorted(s for _, s in order)
        assert admin.zcard(k) == 400
    finally:
        admin.config_set("cc", "silo")
        admin.close()


@pytest.mark.rckv_only
@pytest.mark.parametrize("cc", ["nowait", "waitdie", "woundwait", "timestamp", "mvcc", "silo",
                                "occ", "sundial", "cicada", "maat", "calvin"])
def test_chunked_zset_under_every_protocol(raw, key, cc):
    assert raw.call("CONFIG", "SET", "cc", cc) == "OK"
    try:
        k = key + "z"
        args = [x for i in range(600) for x in (i, "m%03d" % i)]
        assert raw.call("ZADD", k, *args) == 600               # converts, splits
        assert raw.call("ZADD", k, "CH", 1000, "m001", "0.5", "new") == 2
        assert raw.call("ZRANK", k, "m001") == 600
        assert raw.call("ZRANGE", k, 0, 2) == [b"m000", b"new", b"m002"]
        assert raw.call("ZCOUNT", k, 100, "(200") == 100
        assert len(raw.call("ZRANGE", k, 0, -1)) == 601         # read ahead
        assert raw.call_raw("MULTI") == OK
        assert raw.call_raw("ZINCRBY", k, 1, "new") == QUEUED
        assert raw.call_raw("ZREMRANGEBYRANK", k, 0, 99) == QUEUED
        assert raw.call_raw("ZPOPMAX", k) == QUEUED
        assert raw.call_raw("ZCARD", k) == QUEUED
        assert raw.call("EXEC") == [b"1.5", 100, [b"m001", b"1000"], 500]
        assert raw.call("ZRANGE", k, 0, 0, "WITHSCORES") == [b"m100", b"100"]
        assert raw.call("ZREMRANGEBYSCORE", k, "-inf", "+inf") == 500
        assert raw.call("EXISTS", k) == 0
    finally:
        raw.call("CONFIG", "SET", "cc", "silo")


@pytest.mark.rckv_only
def test_orphans_of_a_deleted_or_expired_zset_are_collected(make_server):
    """DEL of a chunked zset drops its root: its buckets, chunks, leaves
    and top are collected by the expiry scan (INFO rckv_parts_collected);
    an expired one's too; a COPY's parts are its own."""
    import time
    r = make_server(opts={"memory": "128mb"}).client()

    def collected():
        return int(r.info("stats")["rckv_parts_collected"])

    def wait_until(what, cond, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return
            time.sleep(0.1)
        raise AssertionError(what)
    n = 5000
    r.zadd("big", {"member:%05d" % i: i for i in range(n)})
    assert r.copy("big", "{x}copy")
    # parts: n/16 buckets, chunks of <= 2 KB (~20 bytes a member), a leaf or more, the top
    least = n // 16 + n * 20 // 2048 + 2
    r.delete("big")
    wait_until("parts of 'big' collected", lambda: collected() >= least, 30)
    base = collected()
    assert r.zcard("{x}copy") == n and r.zrank("{x}copy", "member:04999") == n - 1
    r.pexpire("{x}copy", 1)
    wait_until("parts of an expired zset collected", lambda: collected() >= base + least, 60)
    assert r.dbsize() == 0
    r.close()


def test_command_info_and_getkeys(raw):
    info = raw.call("COMMAND", "INFO", "zadd", "bzpopmin", "bzmpop", "zunionstore", "zrange")
    assert [(e[0], e[1], e[2], e[3], e[4], e[5]) for e in info] == [
        (b"zadd", -4, ["write", "denyoom", "fast"], 1, 1, 1),
        (b"bzpopmin", -3, ["write", "noscript", "blocking", "fast"], 1, -2, 1),
        (b"bzmpop", -5, ["write", "blocking", "movablekeys"], 0, 0, 0),
        (b"zunionstore", -4, ["write", "denyoom", "movablekeys"], 1, 1, 1),
        (b"zrange", -4, ["readonly"], 1, 1, 1)]
    assert info[0][6] == ["@write", "@sortedset", "@fast"]
    assert raw.call("COMMAND", "GETKEYS", "ZUNIONSTORE", "d", 2, "a", "b", "WEIGHTS", 1, 2) == [
        b"d", b"a", b"b"]
    assert raw.call("COMMAND", "GETKEYS", "ZMPOP", 2, "a", "b", "MIN") == [b"a", b"b"]
    assert raw.call("COMMAND", "GETKEYS", "BZMPOP", 0, 2, "a", "b", "MIN") == [b"a", b"b"]
    assert raw.call("COMMAND", "GETKEYS", "BZPOPMIN", "a", "b", 0) == [b"a", b"b"]
    assert raw.call("COMMAND", "GETKEYS", "ZRANGESTORE", "d", "s", 0, 1) == [b"d", b"s"]
    assert raw.call("COMMAND", "GETKEYS", "ZINTERCARD", 2, "a", "b", "LIMIT", 1) == [b"a", b"b"]
