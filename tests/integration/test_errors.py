"""Every error reply, byte for byte as Redis 7.0 sends it.

Each expected string here was checked against redis-server 7.0
(RCKV_TEST_TARGET=redis). Clients match on these texts (redis-py maps
prefixes to exception classes, scripts grep them), so "close enough" is a
bug. Only string values exist in rckv, so WRONGTYPE does not apply.
Transaction errors are in test_multi.py, protocol errors in test_badinput.py.
"""

import pytest

UNKNOWN = b"-ERR unknown command '%s', with args beginning with: %s\r\n"
NOT_INT = b"-ERR value is not an integer or out of range\r\n"
NOT_FLOAT = b"-ERR value is not a valid float\r\n"
SYNTAX = b"-ERR syntax error\r\n"
OVERFLOW = b"-ERR increment or decrement would overflow\r\n"
DB_RANGE = b"-ERR DB index is out of range\r\n"
NOAUTH = b"-NOAUTH Authentication required.\r\n"
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"


def arity(name):
    return b"-ERR wrong number of arguments for '%s' command\r\n" % name.encode()


@pytest.mark.parametrize("args,expected", [
    (("foo", "a", "b"), UNKNOWN % (b"foo", b"'a' 'b' ")),
    (("foo",), UNKNOWN % (b"foo", b"")),
    (("FooBar", "x"), UNKNOWN % (b"FooBar", b"'x' ")),
    (("foo",) + tuple("abcdefghij"), UNKNOWN % (b"foo", b"'a' 'b' 'c' 'd' 'e' 'f' 'g' 'h' 'i' 'j' ")),
    # The argument list is cut at 128 characters of quoted text.
    (("foo", "a" * 200), UNKNOWN % (b"foo", b"'" + b"a" * 128 + b"' ")),
    (("foo", "a" * 50, "b" * 50, "c" * 50, "d"),
     UNKNOWN % (b"foo", b"'" + b"a" * 50 + b"' '" + b"b" * 50 + b"' '" + b"c" * 22 + b"' ")),
    # CR and LF in an echoed argument become spaces (an error is one line).
    (("foo", "a\r\nb"), UNKNOWN % (b"foo", b"'a  b' ")),
], ids=["two-args", "no-args", "case-kept", "ten-args", "long-arg", "cut-at-128", "crlf"])
def test_unknown_command(raw, args, expected):
    assert raw.call_raw(*args) == expected
    assert raw.call_raw("PING") == b"+PONG\r\n"


@pytest.mark.parametrize("args,name", [
    (("get",), "get"),
    (("GET", "a", "b"), "get"),
    (("GeT",), "get"),
    (("set", "k"), "set"),
    (("incr",), "incr"),
    (("incrby", "k"), "incrby"),
    (("mset", "a"), "mset"),
    (("mset", "a", "b", "c"), "mset"),
    (("getrange", "k"), "getrange"),
    (("echo",), "echo"),
    (("ping", "a", "b"), "ping"),
    (("watch",), "watch"),
    (("config", "get"), "config|get"),
    (("config", "set", "foo"), "config|set"),
])
def test_wrong_arity(raw, args, name):
    assert raw.call_raw(*args) == arity(name)


def test_syntax_error(raw, key):
    assert raw.call_raw("set", key, "v", "xx", "yy") == SYNTAX
    assert raw.call_raw("set", key, "v", "nx", "xx") == SYNTAX
    assert raw.call_raw("exists", key) == b":0\r\n"  # nothing was written


@pytest.mark.parametrize("value", ["abc", " 1", "1 ", "+1", "01", "-0", "", "1.5",
                                   "12345678901234567890"])
def test_incr_not_integer(raw, key, value):
    assert raw.call_raw("set", key, value) == b"+OK\r\n"
    assert raw.call_raw("incr", key) == NOT_INT
    assert raw.call_raw("decr", key) == NOT_INT
    assert raw.call_raw("incrby", key, "2") == NOT_INT
    assert raw.call_raw("get", key) == b"$%d\r\n%s\r\n" % (len(value), value.encode())


@pytest.mark.parametrize("args", [
    ("incrby", "{k}", "x"), ("incrby", "{k}", "1.5"), ("incrby", "{k}", ""),
    ("incrby", "{k}", "+2"), ("decrby", "{k}", "9223372036854775808"),
    ("getrange", "{k}", "0", "x"), ("getrange", "{k}", "a", "b"),
    ("setrange", "{k}", "x", "v"), ("select", "x"),
])
def test_argument_not_integer(raw, key, args):
    raw.call_raw("set", key, "1")
    args = tuple(a.replace("{k}", key) for a in args)
    assert raw.call_raw(*args) == NOT_INT
    assert raw.call_raw("get", key) == b"$1\r\n1\r\n"


def test_overflow(raw, key):
    assert raw.call_raw("set", key, "9223372036854775807") == b"+OK\r\n"
    assert raw.call_raw("incr", key) == OVERFLOW
    assert raw.call_raw("incrby", key, "1") == OVERFLOW
    assert raw.call_raw("get", key) == b"$19\r\n9223372036854775807\r\n"
    assert raw.call_raw("set", key, "-9223372036854775808") == b"+OK\r\n"
    assert raw.call_raw("decr", key) == OVERFLOW
    assert raw.call_raw("decrby", key, "1") == OVERFLOW
    assert raw.call_raw("set", key, "1") == b"+OK\r\n"
    assert raw.call_raw("incrby", key, "9223372036854775807") == OVERFLOW
    assert raw.call_raw("decrby", key, "-9223372036854775808") == \
        b"-ERR decrement would overflow\r\n"
    assert raw.call_raw("get", key) == b"$1\r\n1\r\n"


def test_not_a_valid_float(raw, key):
    assert raw.call_raw("set", key, "1") == b"+OK\r\n"
    assert raw.call_raw("incrbyfloat", key, "abc") == NOT_FLOAT
    assert raw.call_raw("incrbyfloat", key, "") == NOT_FLOAT
    assert raw.call_raw("set", key, "abc") == b"+OK\r\n"
    assert raw.call_raw("incrbyfloat", key, "1") == NOT_FLOAT
    assert raw.call_raw("set", key, "") == b"+OK\r\n"
    assert raw.call_raw("incrbyfloat", key, "1") == NOT_FLOAT
    assert raw.call_raw("set", key, "1") == b"+OK\r\n"
    assert raw.call_raw("incrbyfloat", key, "inf") == \
        b"-ERR increment would produce NaN or Infinity\r\n"
    assert raw.call_raw("incrbyfloat", key, "1.5") == b"$3\r\n2.5\r\n"


def test_offset_out_of_range(raw, key):
    assert raw.call_raw("setrange", key, "-1", "x") == b"-ERR offset is out of range\r\n"
    assert raw.call_raw("exists", key) == b":0\r\n"


def test_select(raw):
    assert raw.call_raw("select", "16") == DB_RANGE
    assert raw.call_raw("select", "-1") == DB_RANGE
    assert raw.call_raw("select", "0") == b"+OK\r\n"


def test_unknown_subcommand(raw):
    assert raw.call_raw("config", "foo") == b"-ERR unknown subcommand 'foo'. Try CONFIG HELP.\r\n"
    assert raw.call_raw("CONFIG", "FOO") == b"-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n"
    assert raw.call_raw("client", "foo") == b"-ERR unknown subcommand 'foo'. Try CLIENT HELP.\r\n"


def test_config_set_unknown_option(raw):
    assert raw.call_raw("config", "set", "foo", "bar") == \
        b"-ERR Unknown option or number of arguments for CONFIG SET - 'foo'\r\n"


def test_auth_without_password(raw):
    assert raw.call_raw("auth", "x") == (
        b"-ERR AUTH <password> called without any password configured for the default user. "
        b"Are you sure your configuration is correct?\r\n")
    assert raw.call_raw("auth", "a", "b", "c") == SYNTAX


def test_auth_required(make_server):
    s = make_server(opts={"requirepass": "sekret"})
    with s.raw() as c:
        for args in (("get", "a"), ("set", "a", "1"), ("ping",), ("multi",), ("discard",),
                     ("watch", "a"), ("config", "get", "port"), ("select", "0")):
            assert c.call_raw(*args) == NOAUTH, args
        assert c.call_raw("auth", "wrong") == WRONGPASS
        assert c.call_raw("auth", "default", "wrong") == WRONGPASS
        assert c.call_raw("hello", "3") == (
            b"-NOAUTH HELLO must be called with the client already authenticated, otherwise "
            b"the HELLO AUTH <user> <pass> option can be used to authenticate the client and "
            b"select the RESP protocol version at the same time\r\n")
        assert c.call_raw("get", "a") == NOAUTH
        assert c.call_raw("auth", "sekret") == b"+OK\r\n"
        assert c.call_raw("set", "a", "1") == b"+OK\r\n"
        assert c.call_raw("get", "a") == b"$1\r\n1\r\n"
    with s.raw() as c:
        # The two-argument form names the default user.
        assert c.call_raw("auth", "default", "sekret") == b"+OK\r\n"
        assert c.call_raw("get", "a") == b"$1\r\n1\r\n"
    with s.raw() as c:
        # HELLO AUTH authenticates and replies with the server map.
        reply = c.call("hello", "2", "auth", "default", "sekret")
        assert isinstance(reply, list) and b"proto" in reply, reply
        assert c.call_raw("get", "a") == b"$1\r\n1\r\n"
    # redis-py's password= path and its exception classes.
    import redis
    with pytest.raises((redis.exceptions.AuthenticationError, redis.exceptions.ResponseError),
                       match="^WRONGPASS invalid username-password pair"):
        s.client(password="nope").get("a")
    with pytest.raises(redis.exceptions.AuthenticationError, match="Authentication required"):
        s.client().get("a")
    assert s.client(password="sekret").get("a") == b"1"
