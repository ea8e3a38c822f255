"""The rest of the string family as Redis 7.0 answers it: SETBIT, GETBIT,
BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO, LCS, and the edge cases of
GETRANGE and SETRANGE.

Every expected reply here was checked against redis-server 7.0.15
(RCKV_TEST_TARGET=redis), errors byte for byte. rckv-only: its 1 MB
max-value-bytes (Redis allows 512 MB), and BITOP and SETBIT in one MULTI
over keys of three cluster nodes.
"""

import pytest

from cluster import running_cluster
from rckvtest import REDIS_MODE, Error

OK = b"+OK\r\n"
QUEUED = b"+QUEUED\r\n"
NOT_INT = "ERR value is not an integer or out of range"
SYNTAX = "ERR syntax error"
BIT_OFFSET = "ERR bit offset is not an integer or out of range"
BIT_VALUE = "ERR bit is not an integer or out of range"
BITPOS_BIT = "ERR The bit argument must be 1 or 0."
BF_TYPE = ("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not "
           "supported but i64 is.")
TOO_LONG = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
MAX_VALUE = "ERR string exceeds maximum allowed size (max-value-bytes)"


def is_err(reply, text):
    return isinstance(reply, Error) and reply == text


def bits(value):
    """A string's bits, '0' and '1', bit 0 (the MSB of byte 0) first."""
    return "".join(format(b, "08b") for b in value)


# ---- SETBIT, GETBIT ----

def test_setbit_returns_old_bit_and_grows_with_zeros(raw, key):
    k = key + "s"
    assert raw.call("SETBIT", k, 7, 1) == 0
    assert raw.call("GET", k) == b"\x01"
    assert raw.call("SETBIT", k, 7, 1) == 1
    assert raw.call("SETBIT", k, 7, 0) == 1
    assert raw.call("SETBIT", k, 0, 1) == 0
    assert raw.call("GET", k) == b"\x80"
    # Past the end: zero bytes first, the bit last.
    assert raw.call("SETBIT", k, 8 * 4 + 2, 1) == 0
    assert raw.call("GET", k) == b"\x80\x00\x00\x00\x20"
    assert raw.call("GETBIT", k, 0) == 1
    assert raw.call("GETBIT", k, 1) == 0
    assert raw.call("GETBIT", k, 34) == 1
    assert raw.call("GETBIT", k, 40) == 0        # past the end
    assert raw.call("GETBIT", k, 4294967295) == 0  # the last offset allowed
    assert raw.call("GETBIT", key + "missing", 3) == 0


def test_setbit_zero_creates_the_key(raw, key):
    k = key + "z"
    assert raw.call("SETBIT", k, 20, 0) == 0
    assert raw.call("GET", k) == b"\x00\x00\x00"
    assert raw.call("SETBIT", k, 0, 0) == 0       # changes nothing, stays 3 bytes
    assert raw.call("STRLEN", k) == 3


def test_setbit_on_text(raw, key):
    k = key + "t"
    raw.call("SET", k, "a")                       # 0x61 = 01100001
    assert [raw.call("GETBIT", k, i) for i in range(8)] == [0, 1, 1, 0, 0, 0, 0, 1]
    assert raw.call("SETBIT", k, 6, 1) == 0
    assert raw.call("SETBIT", k, 7, 0) == 1
    assert raw.call("GET", k) == b"b"


@pytest.mark.parametrize("offset", ["-1", "x", "", "1.5", "4294967296",
                                    "9223372036854775808", "#1"])
def test_bit_offset_errors(raw, key, offset):
    k = key + "e"
    assert is_err(raw.call("SETBIT", k, offset, 1), BIT_OFFSET)
    assert is_err(raw.call("GETBIT", k, offset), BIT_OFFSET)
    assert raw.call("EXISTS", k) == 0


@pytest.mark.parametrize("value", ["2", "-1", "x", "", "01", "1.0"])
def test_setbit_value_errors(raw, key, value):
    assert is_err(raw.call("SETBIT", key + "v", 0, value), BIT_VALUE)
    # The offset is checked first.
    assert is_err(raw.call("SETBIT", key + "v", -1, value), BIT_OFFSET)
    assert raw.call("EXISTS", key + "v") == 0


def test_setbit_that_changes_nothing_keeps_a_watch(server, raw, key):
    k = key + "w"
    raw.call("SET", k, b"\xff")
    other = server.raw()
    try:
        assert raw.call_raw("WATCH", k) == OK
        assert other.call("SETBIT", k, 3, 1) == 1   # already 1: not a write
        assert raw.call_raw("MULTI") == OK
        assert raw.call_raw("GETBIT", k, 3) == QUEUED
        assert raw.call("EXEC") == [1]
        assert raw.call_raw("WATCH", k) == OK
        assert other.call("SETBIT", k, 3, 0) == 1   # a change fails the EXEC
        assert raw.call_raw("MULTI") == OK
        assert raw.call_raw("GETBIT", k, 3) == QUEUED
        assert raw.call("EXEC") is None
    finally:
        other.close()


# ---- BITCOUNT ----

def test_bitcount_ranges(raw, key):
    k = key + "c"
    raw.call("SET", k, "foobar")
    assert raw.call("BITCOUNT", k) == 26
    assert raw.call("BITCOUNT", k, 0, 0) == 4
    assert raw.call("BITCOUNT", k, 1, 1) == 6
    assert raw.call("BITCOUNT", k, 1, 1, "BYTE") == 6
    assert raw.call("BITCOUNT", k, 5, 30, "BIT") == 17
    assert raw.call("BITCOUNT", k, 5, 30, "bit") == 17
    assert raw.call("BITCOUNT", k, 0, -1) == 26
    assert raw.call("BITCOUNT", k, -2, -1) == 7     # "ar"
    assert raw.call("BITCOUNT", k, -100, 100) == 26  # clamped
    assert raw.call("BITCOUNT", k, 3, 1) == 0        # reversed
    assert raw.call("BITCOUNT", k, 6, 100) == 0      # past the end
    assert raw.call("BITCOUNT", k, -1, -5) == 0
    assert raw.call("BITCOUNT", k, 0, -1, "BIT") == 26
    assert raw.call("BITCOUNT", k, 1, 1, "BIT") == 1  # 'f' = 01100110
    assert raw.call("BITCOUNT", k, 0, 0, "BIT") == 0
    assert raw.call("BITCOUNT", k, -8, -1, "BIT") == 4  # 'r' = 01110010
    assert raw.call("BITCOUNT", k, 3, 4, "BIT") == 0
    assert raw.call("BITCOUNT", k, 3, 5, "BIT") == 1


def test_bitcount_edge_cases(raw, key):
    k, empty, missing = key + "c", key + "empty", key + "missing"
    raw.call("SET", k, "foobar")
    raw.call("SET", empty, "")
    assert raw.call("BITCOUNT", empty) == 0
    assert raw.call("BITCOUNT", empty, 0, -1) == 0
    assert raw.call("BITCOUNT", missing) == 0
    # A missing key is 0 before its arguments are even looked at.
    assert raw.call("BITCOUNT", missing, "a", "b") == 0
    assert raw.call("BITCOUNT", missing, 0) == 0
    assert is_err(raw.call("BITCOUNT", k, 0), SYNTAX)
    assert is_err(raw.call("BITCOUNT", k, 0, 1, "BYTE", "x"), SYNTAX)
    assert is_err(raw.call("BITCOUNT", k, 0, 1, "BITS"), SYNTAX)
    assert is_err(raw.call("BITCOUNT", k, "a", 1), NOT_INT)
    assert is_err(raw.call("BITCOUNT", k, 0, "b"), NOT_INT)
    # Both from the end and reversed: 0 before the unit is parsed.
    assert raw.call("BITCOUNT", k, -1, -5, "junk") == 0


# ---- BITPOS ----

def test_bitpos_bytes(raw, key):
    k = key + "p"
    raw.call("SET", k, b"\xff\xf0\x00")
    assert raw.call("BITPOS", k, 0) == 12
    assert raw.call("BITPOS", k, 1) == 0
    assert raw.call("BITPOS", k, 1, 1) == 8
    assert raw.call("BITPOS", k, 1, 2) == -1
    assert raw.call("BITPOS", k, 0, 2) == 16
    assert raw.call("BITPOS", k, 0, -1) == 16
    assert raw.call("BITPOS", k, 1, -2, -1) == 8
    assert raw.call("BITPOS", k, 1, 5, 1) == -1      # empty range
    raw.call("SET", k, b"\x00\xff\xf0")
    assert raw.call("BITPOS", k, 1, 0) == 8
    assert raw.call("BITPOS", k, 1, 2, -1, "BYTE") == 16


def test_bitpos_clear_bit_past_the_end(raw, key):
    k = key + "p"
    raw.call("SET", k, b"\xff\xff\xff")
    # No end given: the string goes on with zeros.
    assert raw.call("BITPOS", k, 0) == 24
    assert raw.call("BITPOS", k, 0, 1) == 24
    # A unit needs an end before it: here "BIT" is the end.
    assert is_err(raw.call("BITPOS", k, 0, 3, "BIT"), NOT_INT)
    # An explicit end closes the range: no clear bit in it.
    assert raw.call("BITPOS", k, 0, 0, -1) == -1
    assert raw.call("BITPOS", k, 0, 1, 2, "BYTE") == -1
    assert raw.call("BITPOS", k, 0, 0, 23, "BIT") == -1


def test_bitpos_bits(raw, key):
    k = key + "p"
    raw.call("SET", k, b"\x00\x01\x80")  # ones at bits 15 and 16
    assert raw.call("BITPOS", k, 1, 7, 15, "BIT") == 15
    assert raw.call("BITPOS", k, 1, 7, 14, "BIT") == -1
    assert raw.call("BITPOS", k, 1, 16, -1, "BIT") == 16
    assert raw.call("BITPOS", k, 1, 17, -1, "BIT") == -1
    assert raw.call("BITPOS", k, 0, 15, 16, "BIT") == -1
    assert raw.call("BITPOS", k, 0, 15, 17, "BIT") == 17
    assert raw.call("BITPOS", k, 1, -9, -1, "bit") == 15
    assert raw.call("BITPOS", k, 1, -8, -1, "bit") == 16
    assert raw.call("BITPOS", k, 1, 3, 3, "BIT") == -1
    assert raw.call("BITPOS", k, 0, 3, 3, "BIT") == 3
    raw.call("SET", k, b"\xff\xff")
    assert raw.call("BITPOS", k, 0, 3, 9, "BIT") == -1


def test_bitpos_edge_cases(raw, key):
    k, empty, missing = key + "p", key + "empty", key + "missing"
    raw.call("SET", k, "a")
    raw.call("SET", empty, "")
    # A missing key is an endless run of zeros; its range is not parsed.
    assert raw.call("BITPOS", missing, 0) == 0
    assert raw.call("BITPOS", missing, 1) == -1
    assert raw.call("BITPOS", missing, 0, "a", "b", "c") == 0
    # An empty string holds no bit at all.
    assert raw.call("BITPOS", empty, 0) == -1
    assert raw.call("BITPOS", empty, 1) == -1
    assert raw.call("BITPOS", empty, 0, 0) == -1
    for bad in ("2", "-1", "10"):
        assert is_err(raw.call("BITPOS", k, bad), BITPOS_BIT)
        assert is_err(raw.call("BITPOS", missing, bad), BITPOS_BIT)
    assert is_err(raw.call("BITPOS", missing, "x"), NOT_INT)
    assert is_err(raw.call("BITPOS", k, 1, "x"), NOT_INT)
    assert is_err(raw.call("BITPOS", k, 1, 0, "x"), NOT_INT)
    assert is_err(raw.call("BITPOS", k, 1, 0, 1, "bits"), SYNTAX)
    # The unit is parsed before the end.
    assert is_err(raw.call("BITPOS", k, 1, 0, "x", "bits"), SYNTAX)
    assert is_err(raw.call("BITPOS", k, 1, 0, 1, "BIT", "x"), SYNTAX)


# ---- BITOP ----

def test_bitop_and_or_xor_not(raw, key):
    a, b, c, d = key + "a", key + "b", key + "c", key + "d"
    raw.call("SET", a, b"\xf0\x0f\xff")
    raw.call("SET", b, b"\x3c\x3c")
    raw.call("SET", c, b"\x01")
    assert raw.call("BITOP", "AND", d, a, b) == 3
    assert raw.call("GET", d) == b"\x30\x0c\x00"     # b padded with zeros
    assert raw.call("BITOP", "or", d, a, b, c) == 3
    assert raw.call("GET", d) == b"\xfd\x3f\xff"
    assert raw.call("BITOP", "Xor", d, a, b, c) == 3
    assert raw.call("GET", d) == b"\xcd\x33\xff"
    assert raw.call("BITOP", "NOT", d, b) == 2
    assert raw.call("GET", d) == b"\xc3\xc3"
    # The destination may be a source.
    assert raw.call("BITOP", "NOT", a, a) == 3
    assert raw.call("GET", a) == b"\x0f\xf0\x00"


def test_bitop_missing_keys(raw, key):
    a, d, m1, m2 = key + "a", key + "d", key + "m1", key + "m2"
    raw.call("SET", a, b"\xff\x01")
    # A missing source is an empty string.
    assert raw.call("BITOP", "AND", d, a, m1) == 2
    assert raw.call("GET", d) == b"\x00\x00"
    assert raw.call("BITOP", "OR", d, m1, a) == 2
    assert raw.call("GET", d) == b"\xff\x01"
    assert raw.call("BITOP", "NOT", d, m1) == 0
    # Only empty sources: the destination is deleted.
    assert raw.call("EXISTS", d) == 0
    raw.call("SET", d, "old")
    raw.call("SET", m2, "")
    assert raw.call("BITOP", "XOR", d, m1, m2) == 0
    assert raw.call("EXISTS", d) == 0


def test_bitop_errors(raw, key):
    d, a = key + "d", key + "a"
    raw.call("SET", a, "x")
    assert is_err(raw.call("BITOP", "NOT", d, a, a),
                  "ERR BITOP NOT must be called with a single source key.")
    assert is_err(raw.call("BITOP", "NAND", d, a), SYNTAX)
    assert is_err(raw.call("BITOP", "AND", d),
                  "ERR wrong number of arguments for 'bitop' command")
    assert raw.call("EXISTS", d) == 0


# ---- BITFIELD, BITFIELD_RO ----

def test_bitfield_get_set_incrby(raw, key):
    k = key + "f"
    assert raw.call("BITFIELD", k, "SET", "i8", 0, 100, "GET", "i8", 0) == [0, 100]
    assert raw.call("BITFIELD", k, "INCRBY", "i5", 100, 1, "GET", "u4", 0) == [1, 6]
    assert raw.call("BITFIELD", k, "SET", "u8", 8, 255, "GET", "u8", 8, "GET", "i8", 8) \
        == [0, 255, -1]
    assert raw.call("STRLEN", k) == 14
    assert raw.call("BITFIELD", k, "SET", "i64", 128, -2, "GET", "i64", 128,
                    "GET", "u63", 128) == [0, -2, 2 ** 63 - 1]
    # '#N' is the N-th field of the type's width.
    assert raw.call("BITFIELD", k, "SET", "u8", "#3", 65, "GET", "u8", 24,
                    "GET", "u4", "#6") == [0, 65, 4]
    # Past the end a GET reads zeros and writes nothing.
    assert raw.call("BITFIELD", k, "GET", "u16", 200, "GET", "i64", 1000) == [0, 0]
    assert raw.call("STRLEN", k) == 24
    assert raw.call("BITFIELD", k) == []
    assert raw.call("BITFIELD", k, "OVERFLOW", "SAT") == []
    assert raw.call("BITFIELD", key + "missing", "GET", "u8", 0) == [0]
    assert raw.call("EXISTS", key + "missing") == 0


def test_bitfield_overflow_modes(raw, key):
    k = key + "o"
    assert raw.call("BITFIELD", k, "SET", "u2", 0, 3, "INCRBY", "u2", 0, 1) == [0, 0]
    assert raw.call("BITFIELD", k, "OVERFLOW", "SAT", "INCRBY", "u2", 0, 5,
                    "INCRBY", "u2", 0, -10) == [3, 0]
    assert raw.call("BITFIELD", k, "OVERFLOW", "FAIL", "INCRBY", "u2", 0, 4,
                    "INCRBY", "u2", 0, 3, "INCRBY", "u2", 0, 1) == [None, 3, None]
    # The mode holds for the operations after it, until the next OVERFLOW.
    assert raw.call("BITFIELD", k, "OVERFLOW", "FAIL", "INCRBY", "u2", 0, 1,
                    "OVERFLOW", "WRAP", "INCRBY", "u2", 0, 1) == [None, 0]
    assert raw.call("BITFIELD", k, "SET", "i8", 8, 127, "INCRBY", "i8", 8, 1,
                    "OVERFLOW", "sat", "INCRBY", "i8", 8, -1000,
                    "INCRBY", "i8", 8, 1000) == [0, -128, -128, 127]
    # SET's value is fitted too: WRAP keeps the low bits, SAT the bound.
    assert raw.call("BITFIELD", k, "SET", "i8", 16, 300, "OVERFLOW", "SAT",
                    "SET", "i8", 24, 300, "SET", "i8", 32, -300,
                    "SET", "u8", 40, -1, "OVERFLOW", "FAIL", "SET", "u8", 48, 256,
                    "GET", "i8", 16, "GET", "i8", 24, "GET", "i8", 32,
                    "GET", "u8", 40, "GET", "u8", 48) \
        == [0, 0, 0, 0, None, 44, 127, -128, 255, 0]
    assert raw.call("BITFIELD", k, "OVERFLOW", "WRAP", "SET", "i64", 64,
                    9223372036854775807, "INCRBY", "i64", 64, 1) == [0, -9223372036854775808]
    assert raw.call("BITFIELD", k, "OVERFLOW", "SAT", "INCRBY", "i64", 64, -1,
                    "INCRBY", "u63", 128, 9223372036854775807,
                    "INCRBY", "u63", 128, 1) \
        == [-9223372036854775808, 9223372036854775807, 9223372036854775807]


def test_bitfield_fail_still_creates_the_key(raw, key):
    k = key + "n"
    assert raw.call("BITFIELD", k, "OVERFLOW", "FAIL", "INCRBY", "u2", 100, 10) == [None]
    assert raw.call("GET", k) == b"\x00" * 13


def test_bitfield_errors(raw, key):
    k = key + "e"
    for t in ("u64", "i65", "i0", "u0", "x8", "8", "", "i", "u-1", "I8", "i08"):
        assert is_err(raw.call("BITFIELD", k, "GET", t, 0), BF_TYPE), t
    for off in ("-1", "x", "#-1", "#x", "4294967296", "#536870912"):
        assert is_err(raw.call("BITFIELD", k, "GET", "u8", off), BIT_OFFSET), off
    assert is_err(raw.call("BITFIELD", k, "SET", "u8", 0, "x"), NOT_INT)
    assert is_err(raw.call("BITFIELD", k, "INCRBY", "u8", 0), SYNTAX)
    assert is_err(raw.call("BITFIELD", k, "GET", "u8"), SYNTAX)
    assert is_err(raw.call("BITFIELD", k, "FOO", "u8", 0), SYNTAX)
    assert is_err(raw.call("BITFIELD", k, "OVERFLOW"), SYNTAX)
    assert is_err(raw.call("BITFIELD", k, "OVERFLOW", "PANIC"),
                  "ERR Invalid OVERFLOW type specified")
    # A bad operation anywhere runs none of them.
    assert is_err(raw.call("BITFIELD", k, "SET", "u8", 0, 1, "GET", "u64", 0), BF_TYPE)
    assert raw.call("EXISTS", k) == 0


def test_bitfield_ro(raw, key):
    k = key + "r"
    raw.call("SET", k, b"\x12\x34")
    assert raw.call("BITFIELD_RO", k, "GET", "u8", 0, "GET", "u4", "#3", "GET", "i16", 0) \
        == [0x12, 4, 0x1234]
    assert raw.call("BITFIELD_RO", k) == []
    assert is_err(raw.call("BITFIELD_RO", k, "GET", "u8", 0, "SET", "u8", 0, 1),
                  "ERR BITFIELD_RO only supports the GET subcommand")
    assert is_err(raw.call("BITFIELD_RO", k, "INCRBY", "u8", 0, 1),
                  "ERR BITFIELD_RO only supports the GET subcommand")
    # Parse errors come first.
    assert is_err(raw.call("BITFIELD_RO", k, "SET", "u64", 0, 1), BF_TYPE)
    assert raw.call("GET", k) == b"\x12\x34"


# ---- LCS ----

def test_lcs(raw, key):
    a, b = key + "{x}a", key + "{x}b"
    raw.call("SET", a, "ohmytext")
    raw.call("SET", b, "mynewtext")
    assert raw.call("LCS", a, b) == b"mytext"
    assert raw.call("LCS", a, b, "LEN") == 6
    assert raw.call("LCS", a, b, "IDX") == [
        b"matches", [[[4, 7], [5, 8]], [[2, 3], [0, 1]]], b"len", 6]
    assert raw.call("LCS", a, b, "IDX", "MINMATCHLEN", 4) == [
        b"matches", [[[4, 7], [5, 8]]], b"len", 6]
    assert raw.call("LCS", a, b, "IDX", "MINMATCHLEN", 4, "WITHMATCHLEN") == [
        b"matches", [[[4, 7], [5, 8], 4]], b"len", 6]
    assert raw.call("LCS", a, b, "idx", "withmatchlen", "minmatchlen", -5) == [
        b"matches", [[[4, 7], [5, 8], 4], [[2, 3], [0, 1], 2]], b"len", 6]
    # WITHMATCHLEN and MINMATCHLEN change nothing without IDX.
    assert raw.call("LCS", a, b, "WITHMATCHLEN", "MINMATCHLEN", 3) == b"mytext"


def test_lcs_resp3_map(server, key):
    a, b = key + "a", key + "b"
    c = server.raw()
    try:
        c.call("HELLO", 3)
        c.call("SET", a, "abcXdef")
        c.call("SET", b, "abcYdef")
        assert c.call_raw("LCS", a, b, "IDX") == (
            b"%2\r\n$7\r\nmatches\r\n*2\r\n"
            b"*2\r\n*2\r\n:4\r\n:6\r\n*2\r\n:4\r\n:6\r\n"
            b"*2\r\n*2\r\n:0\r\n:2\r\n*2\r\n:0\r\n:2\r\n"
            b"$3\r\nlen\r\n:6\r\n")
    finally:
        c.close()


def test_lcs_edge_cases(raw, key):
    a, b, missing = key + "a", key + "b", key + "missing"
    raw.call("SET", a, "abc")
    raw.call("SET", b, "xyz")
    assert raw.call("LCS", a, b) == b""
    assert raw.call("LCS", a, b, "IDX") == [b"matches", [], b"len", 0]
    assert raw.call("LCS", a, missing) == b""
    assert raw.call("LCS", missing, missing, "LEN") == 0
    assert raw.call("LCS", a, a) == b"abc"
    assert raw.call("LCS", a, a, "IDX", "WITHMATCHLEN") == [
        b"matches", [[[0, 2], [0, 2], 3]], b"len", 3]
    assert is_err(raw.call("LCS", a, b, "LEN", "IDX"),
                  "ERR If you want both the length and indexes, please just use IDX.")
    assert is_err(raw.call("LCS", a, b, "MINMATCHLEN"), SYNTAX)
    assert is_err(raw.call("LCS", a, b, "MINMATCHLEN", "x"), NOT_INT)
    assert is_err(raw.call("LCS", a, b, "FOO"), SYNTAX)
    assert is_err(raw.call("LCS", a), "ERR wrong number of arguments for 'lcs' command")


def test_lcs_table_over_proto_max_bulk_len(raw, key):
    # (12001 x 12001) uint32 cells are 576 MB, over the 512 MB default.
    a, b = key + "a", key + "b"
    raw.call("SET", a, "x" * 12000)
    raw.call("SET", b, "y" * 12000)
    assert is_err(raw.call("LCS", a, b), "ERR Insufficient memory, transient memory for "
                                         "LCS exceeds proto-max-bulk-len")
    assert raw.call("LCS", a, key + "missing", "LEN") == 0


# ---- GETRANGE, SETRANGE edge cases ----

def test_getrange_edges(raw, key):
    k, empty, missing = key + "g", key + "empty", key + "missing"
    raw.call("SET", k, "Hello")
    raw.call("SET", empty, "")
    cases = [((0, -1), b"Hello"), ((-3, -1), b"llo"), ((-1, -5), b""), ((-100, 1), b"He"),
             ((3, 100), b"lo"), ((5, 10), b""), ((2, 1), b""), ((-1, -1), b"o"),
             ((4, -1), b"o"), ((0, -100), b"H"), ((-9223372036854775808, 9223372036854775807),
                                                b"Hello")]
    for (s, e), want in cases:
        assert raw.call("GETRANGE", k, s, e) == want, (s, e)
    assert raw.call("GETRANGE", empty, 0, -1) == b""
    assert raw.call("GETRANGE", missing, 0, -1) == b""
    assert is_err(raw.call("GETRANGE", missing, "a", 1), NOT_INT)
    assert is_err(raw.call("GETRANGE", k, 0, "9223372036854775808"), NOT_INT)


def test_setrange_edges(raw, key):
    k, missing = key + "s", key + "missing"
    assert raw.call("SETRANGE", k, 3, "ab") == 5
    assert raw.call("GET", k) == b"\x00\x00\x00ab"
    assert raw.call("SETRANGE", k, 1, "XYZWV") == 6
    assert raw.call("GET", k) == b"\x00XYZWV"
    assert raw.call("SETRANGE", k, 0, "") == 6
    # Nothing to write on a missing key: 0, and the key is not created.
    assert raw.call("SETRANGE", missing, 10, "") == 0
    assert raw.call("EXISTS", missing) == 0
    assert is_err(raw.call("SETRANGE", k, -1, "x"), "ERR offset is out of range")
    assert is_err(raw.call("SETRANGE", k, "x", "x"), NOT_INT)
    assert is_err(raw.call("SETRANGE", k, 536870912, "x"), TOO_LONG)
    assert is_err(raw.call("SETRANGE", missing, 536870911, "xy"), TOO_LONG)
    assert raw.call("EXISTS", missing) == 0
    assert raw.call("GET", k) == b"\x00XYZWV"


# ---- inside MULTI, and COMMAND's view of the keys ----

def test_bits_in_multi(raw, key):
    a, b, d = key + "{m}a", key + "{m}b", key + "{m}d"
    assert raw.call_raw("MULTI") == OK
    for cmd in (("SETBIT", a, 1, 1), ("SETBIT", b, 9, 1), ("BITOP", "OR", d, a, b),
                ("BITCOUNT", d), ("BITPOS", d, 1, 1), ("GETBIT", d, 9),
                ("BITFIELD", d, "INCRBY", "u8", 0, 1), ("GET", d), ("LCS", a, d, "LEN"),
                ("SETBIT", a, -1, 1)):
        assert raw.call_raw(*cmd) == QUEUED
    got = raw.call("EXEC")
    assert got[:9] == [0, 0, 2, 2, 9, 1, [65], b"\x41\x40", 1]
    assert is_err(got[9], BIT_OFFSET)


def test_command_getkeysandflags_bitop(raw):
    assert raw.call("COMMAND", "GETKEYSANDFLAGS", "BITOP", "AND", "d", "s1", "s2") == [
        [b"d", ["OW", "update"]], [b"s1", ["RO", "access"]], [b"s2", ["RO", "access"]]]
    assert raw.call("COMMAND", "GETKEYS", "LCS", "a", "b", "IDX") == [b"a", b"b"]
    # BITFIELD's key is a read when every operation is a GET.
    ro, rw = ["RO", "access"], ["RW", "access", "update"]
    for args, flags in ((("GET", "u8", 0, "OVERFLOW", "SAT", "GET", "i4", 3), ro),
                        ((), ro),
                        (("GET", "u8", 0, "INCRBY", "u8", 0, 1), rw),
                        (("SET", "u8", 0, 1), rw),
                        (("GET", "u8"), rw)):
        assert raw.call("COMMAND", "GETKEYSANDFLAGS", "BITFIELD", "k", *args) == \
            [[b"k", flags]], args


def key_spec(flags, index, lastkey, notes=None):
    spec = [b"flags", flags, b"begin_search", [b"type", b"index", b"spec", [b"index", index]],
            b"find_keys", [b"type", b"range", b"spec",
                           [b"lastkey", lastkey, b"keystep", 1, b"limit", 0]]]
    return ([b"notes", notes] if notes else []) + spec


def test_command_info_key_specs(raw):
    # BITOP has two key specs (its destination, then its sources).
    assert raw.call("COMMAND", "INFO", "bitop") == [[
        b"bitop", -4, ["write", "denyoom"], 2, -1, 1, ["@write", "@bitmap", "@slow"], [],
        [key_spec(["OW", "update"], 2, 0), key_spec(["RO", "access"], 3, -1)], []]]
    assert raw.call("COMMAND", "INFO", "bitfield", "getbit", "lcs") == [
        [b"bitfield", -2, ["write", "denyoom"], 1, 1, 1, ["@write", "@bitmap", "@slow"], [],
         [key_spec(["RW", "access", "update", "variable_flags"], 1, 0,
                   b"This command allows both access and modification of the key")], []],
        [b"getbit", 3, ["readonly", "fast"], 1, 1, 1, ["@read", "@bitmap", "@fast"], [],
         [key_spec(["RO", "access"], 1, 0)], []],
        [b"lcs", -3, ["readonly"], 1, 2, 1, ["@read", "@string", "@slow"], [],
         [key_spec(["RO", "access"], 1, 1)], []]]


# ---- rckv's own limit ----

@pytest.mark.rckv_only
def test_writes_past_max_value_bytes(make_server):
    s = make_server(opts={"max-value-bytes": 1024})
    with s.raw() as c:
        assert c.call("SETBIT", "k", 8 * 1024 - 1, 1) == 0   # the last byte allowed
        assert c.call("STRLEN", "k") == 1024
        assert is_err(c.call("SETBIT", "k", 8 * 1024, 1), MAX_VALUE)
        assert is_err(c.call("SETBIT", "new", 8 * 1024, 0), MAX_VALUE)
        assert is_err(c.call("BITFIELD", "k", "SET", "u8", 8 * 1024 - 4, 1), MAX_VALUE)
        assert is_err(c.call("SETRANGE", "k", 1024, "x"), MAX_VALUE)
        assert c.call("STRLEN", "k") == 1024
        assert c.call("EXISTS", "new") == 0
        # Reading past the limit is fine, as in Redis up to 512 MB.
        assert c.call("GETBIT", "k", 8 * 1024 * 1024) == 0
        assert c.call("BITFIELD", "k", "GET", "u8", 8 * 1024 * 1024) == [0]
        # Past proto-max-bulk-len, Redis's own error.
        assert is_err(c.call("SETBIT", "k", 4294967296, 1), BIT_OFFSET)


# ---- across the nodes of a cluster ----

@pytest.fixture(scope="module")
def cluster3():
    if REDIS_MODE:
        pytest.skip("rckv cluster (RCKV_TEST_TARGET=redis)")
    with running_cluster("shm") as cl:
        yield cl


# A lock-based protocol, an optimistic one, and calvin, which runs only what
# the command table declares (BITOP's destination and sources).
@pytest.mark.rckv_only
@pytest.mark.parametrize("cc", ["nowait", "silo", "calvin"])
def test_cluster_bitop_and_multi_setbit(cluster3, key, cc):
    k = {i: cluster3.key_on(i, key + "n%d:" % i) for i in (1, 2, 3)}
    dest = cluster3.key_on(2, key + "dest:")
    conns = {i: cluster3.raw(i) for i in (1, 2, 3)}
    try:
        c = conns[1]
        assert c.call_raw("CONFIG", "SET", "cc", cc) == OK
        # One MULTI sets a bit on each node; every node then sees all three.
        assert c.call_raw("MULTI") == OK
        for i in (1, 2, 3):
            assert c.call_raw("SETBIT", k[i], 8 * i + i, 1) == QUEUED
        assert c.call_raw("BITOP", "OR", dest, k[1], k[2], k[3]) == QUEUED
        assert c.call_raw("BITCOUNT", dest) == QUEUED
        assert c.call("EXEC") == [0, 0, 0, 4, 3]
        want = b"\x00\x40\x20\x10"
        for i in (1, 2, 3):
            assert conns[i].call("GET", dest) == want
            assert conns[i].call("GETBIT", k[i], 8 * i + i) == 1
        # BITOP from another node, sources on all three, destination on node 2.
        assert conns[3].call("BITOP", "XOR", dest, k[1], k[2], k[3], dest) == 4
        assert conns[2].call("GET", dest) == b"\x00" * 4
        assert conns[3].call("BITOP", "NOT", dest, k[3]) == 4
        assert conns[1].call("GET", dest) == b"\xff\xff\xff\xef"
        # Only missing sources: the destination is deleted on its node.
        assert conns[2].call("BITOP", "AND", dest, key + "none1", key + "none2") == 0
        assert conns[1].call("EXISTS", dest) == 0
        # A failed command inside the MULTI leaves the others committed.
        assert c.call_raw("MULTI") == OK
        assert c.call_raw("SETBIT", k[2], 0, 1) == QUEUED
        assert c.call_raw("SETBIT", k[3], -1, 1) == QUEUED
        assert c.call_raw("BITFIELD", k[3], "INCRBY", "u4", 0, 3) == QUEUED
        got = c.call("EXEC")
        assert got[0] == 0 and is_err(got[1], BIT_OFFSET) and got[2] == [3]
        assert conns[2].call("BITFIELD_RO", k[2], "GET", "u1", 0) == [1]
        assert conns[3].call("GETRANGE", k[3], 0, 0) == b"\x30"
        assert conns[1].call("BITFIELD", k[3], "GET", "u4", 0, "GET", "u4", 4) == [3, 0]
    finally:
        for cc in conns.values():
            cc.close()
