"""EVAL, EVALSHA, EVAL_RO and SCRIPT as Redis 7.0 does them, byte for byte
(the semantics of Redis's unit/scripting: replies, errors, the sandbox, the
script cache), and where rckv differs on purpose: a script is one
transaction, so an error undoes everything it wrote, and a long script can
be stopped without blocking anyone.

Validated against redis-server 7.0.15 with RCKV_TEST_TARGET=redis (the
rckv_only tests are skipped there).
"""

import hashlib
import threading
import time

import pytest

from rckvtest import REDIS_MODE

OK = b"+OK\r\n"
NIL = b"$-1\r\n"
NOSCRIPT = b"-NOSCRIPT No matching script. Please use EVAL.\r\n"


def bulk(v):
    v = v.encode() if isinstance(v, str) else v
    return b"$%d\r\n%s\r\n" % (len(v), v)


def sha(script):
    return hashlib.sha1(script.encode()).hexdigest()


def where(script, line=1):
    """The tail Redis 7 gives a script's runtime error."""
    return b" script: %s, on @user_script:%d.\r\n" % (sha(script).encode(), line)


@pytest.fixture(autouse=True)
def _empty_cache(raw):
    raw.call_raw("SCRIPT", "FLUSH")


# Lua value -> RESP, as Redis converts a script's return value.
RETURNS = [
    ("return 1", b":1\r\n"),
    ("return 3.99", b":3\r\n"),
    ("return -3.99", b":-3\r\n"),
    ("return 2^53", b":9007199254740992\r\n"),
    ("return {math.huge}", b"*1\r\n:-9223372036854775808\r\n"),
    ("return 0/0", b":-9223372036854775808\r\n"),
    ("return 'x'", bulk("x")),
    ("return true", b":1\r\n"),
    ("return false", NIL),
    ("return nil", NIL),
    ("return {}", b"*0\r\n"),
    ("return {1,2,{3,'x'},nil,4}", b"*3\r\n:1\r\n:2\r\n*2\r\n:3\r\n$1\r\nx\r\n"),
    ("return {false, true}", b"*2\r\n$-1\r\n:1\r\n"),
    ("return {1, 2.5, 'a', {ok='x'}, {err='y'}}",
     b"*5\r\n:1\r\n:2\r\n$1\r\na\r\n+x\r\n-y\r\n"),
    ("return {err='My Error'}", b"-My Error\r\n"),
    ("return {err='-E2 z'}", b"--E2 z\r\n"),
    ("return {err='a\\r\\nb'}", b"-a  b\r\n"),
    ("return {ok='fine'}", b"+fine\r\n"),
    ("return redis.status_reply('S')", b"+S\r\n"),
    ("return redis.error_reply('E1')", b"-ERR E1\r\n"),
    ("return redis.error_reply('-E1 x')", b"-E1 x\r\n"),
    ("return redis.error_reply('E1 x')", b"-E1 x\r\n"),
    ("return redis.error_reply('ERR z')", b"-ERR z\r\n"),
    ("return redis.error_reply('-E1')", b"-ERR E1\r\n"),
    ("return redis.error_reply('lower case words')", b"-lower case words\r\n"),
    ("return redis.error_reply('')", b"-ERR \r\n"),
    ("return redis.error_reply(' x')", b"- x\r\n"),
    ("return redis.sha1hex('')", bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709")),
    ("return redis.sha1hex('abc')", bulk("a9993e364706816aba3e25717850c26c9cd0d89d")),
    ("return redis.LOG_WARNING", b":3\r\n"),
    ("return redis.log(redis.LOG_NOTICE, 'from a test')", NIL),
    ("return unpack({1,2})", b":1\r\n"),
    ("return select('#', 1, 2)", b":2\r\n"),
    ("return tonumber('0x10')", b":16\r\n"),
    ("return string.format('%d', 7)", bulk("7")),
    ("return bit.band(3, 1)", b":1\r\n"),
    ("return bit.tohex(255, 4)", bulk("00ff")),
    ("return cjson.encode({1,2,'x',{a=1}})", bulk('[1,2,"x",{"a":1}]')),
    ("return cjson.encode(cjson.decode('{\"k\":[1,2.5,null]}'))", bulk('{"k":[1,2.5,null]}')),
    ("return cjson.decode('[1,2,{\"a\":true}]')[3].a", b":1\r\n"),
    ("return loadstring", NIL),
    ("return {double=3.5}", bulk("3.5")),
    ("return {1, {double=0.1}}", b"*2\r\n:1\r\n" + bulk("0.10000000000000001")),
    ("return {map={a=1}}", b"*2\r\n$1\r\na\r\n:1\r\n"),
    ("return {set={a=true}}", b"*1\r\n$1\r\na\r\n"),
    ("return {big_number='123'}", bulk("123")),
    # A returned table's metamethods are not run by the conversion.
    ("return setmetatable({}, {__index=function() error('x') end})", b"*0\r\n"),
    ("return setmetatable({}, {__index=function() while true do end end})", b"*0\r\n"),
    ("return bit.tohex(1, -2147483648)", bulk("00000001")),
    # Pattern matching recurses in C as deep as Redis's stack allows.
    ("return string.find(string.rep('a', 10000), string.rep('a?', 10000))", b":1\r\n"),
    ("return coroutine", b"*0\r\n"),
    ("return type(pcall)", bulk("function")),
    ("return pcall(function() error('x') end)", NIL),
    ("return {xpcall(function() error('x') end, function(e) return 'h:' .. e end)}",
     b"*2\r\n$-1\r\n$18\r\nh:user_script:1: x\r\n"),
    ("return {xpcall(function() return 7 end, function(e) return e end)}", b"*2\r\n:1\r\n:7\r\n"),
    ("local co = coroutine.create(function(a) local b = coroutine.yield(a + 1) return b * 2 end) "
     "local _, v1 = coroutine.resume(co, 1) local _, v2 = coroutine.resume(co, 10) return {v1, v2}",
     b"*2\r\n:2\r\n:20\r\n"),
]


@pytest.mark.parametrize("script,reply", RETURNS, ids=[s for s, _ in RETURNS])
def test_lua_to_resp(raw, script, reply):
    assert raw.call_raw("EVAL", script, "0") == reply


def test_redis_to_lua(raw, key):
    k = key
    assert raw.call_raw("EVAL", "return redis.call('set', KEYS[1], 'v')", "1", k) == OK
    assert raw.call_raw("EVAL", "return redis.call('get', KEYS[1])", "1", k) == bulk("v")
    assert raw.call_raw("EVAL", "return redis.call('exists', KEYS[1])", "1", k) == b":1\r\n"
    # A missing value is false; a status reply a table with `ok`.
    assert raw.call_raw("EVAL", "return type(redis.call('get', KEYS[1]))", "1",
                        k + "nope") == bulk("boolean")
    assert raw.call_raw("EVAL", "return {redis.call('get', KEYS[1])}", "1",
                        k + "nope") == b"*1\r\n$-1\r\n"
    assert raw.call_raw("EVAL", "return redis.call('ping')", "0") == b"+PONG\r\n"
    assert raw.call_raw("EVAL", "return type(redis.call('ping'))", "0") == bulk("table")
    assert raw.call_raw("EVAL", "return redis.call('mget', KEYS[1], KEYS[2])", "2", k,
                        k + "nope") == b"*2\r\n$1\r\nv\r\n$-1\r\n"
    # Numbers are passed as their "%.17g" string.
    for number, text in (("10.0", "10"), ("123456789012345", "123456789012345"),
                         ("0.1", "0.10000000000000001"), ("2^53", "9007199254740992")):
        s = "redis.call('set', KEYS[1], %s) return redis.call('get', KEYS[1])" % number
        assert raw.call_raw("EVAL", s, "1", k) == bulk(text)
    assert raw.call_raw("EVAL", "return redis.call('incrby', KEYS[1], 2^31)", "1",
                        k + "n") == b":2147483648\r\n"
    assert raw.call_raw("EVAL", "return redis.call('incrbyfloat', KEYS[1], '1.5')", "1",
                        k + "f") == bulk("1.5")


def test_keys_and_argv(raw):
    assert raw.call_raw("EVAL", "return KEYS[1] .. ARGV[1]", "1", "a", "b") == bulk("ab")
    assert raw.call_raw("EVAL", "return #KEYS", "3", "a", "b", "c", "d") == b":3\r\n"
    assert raw.call_raw("EVAL", "return ARGV", "0", "a", "b") == \
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"


def test_numkeys_errors(raw):
    assert raw.call_raw("EVAL", "return 1", "-1") == \
        b"-ERR Number of keys can't be negative\r\n"
    assert raw.call_raw("EVAL", "return 1", "2", "a") == \
        b"-ERR Number of keys can't be greater than number of args\r\n"
    assert raw.call_raw("EVAL", "return 1", "x") == \
        b"-ERR value is not an integer or out of range\r\n"
    assert raw.call_raw("EVAL", "return 1") == \
        b"-ERR wrong number of arguments for 'eval' command\r\n"


def test_runtime_errors(raw, key):
    s = "error('boom')"
    assert raw.call_raw("EVAL", s, "0") == b"-ERR user_script:1: boom" + where(s)
    s = "error({err='X y'})"
    assert raw.call_raw("EVAL", s, "0") == b"-X y" + where(s)
    s = "error({err=5})"
    assert raw.call_raw("EVAL", s, "0") == b"-5" + where(s)
    s = "error(nil)"
    assert raw.call_raw("EVAL", s, "0") == b"-ERR nil" + where(s)
    s = "error(true)"
    assert raw.call_raw("EVAL", s, "0") == b"-ERR true" + where(s)
    assert raw.call_raw("EVAL", "return redis.error_reply('-ERR x\\r\\n')", "0") == b"-ERR x\r\n"
    s = "error('a\\nb')"
    assert raw.call_raw("EVAL", s, "0") == b"-ERR user_script:1: a b" + where(s)
    raw.call_raw("SET", key, "abc")
    s = "return redis.call('incr', KEYS[1])"
    assert raw.call_raw("EVAL", s, "1", key) == \
        b"-ERR value is not an integer or out of range" + where(s)
    # pcall gives the error to the script as a table with `err`.
    assert raw.call_raw("EVAL", "return redis.pcall('incr', KEYS[1])", "1", key) == \
        b"-ERR value is not an integer or out of range\r\n"
    assert raw.call_raw("EVAL", "local r = redis.pcall('incr', KEYS[1]); return type(r) .. r.err",
                        "1", key) == bulk("tableERR value is not an integer or out of range")
    s = "\nreturn redis.call('nosuch')"
    assert raw.call_raw("EVAL", s, "0") == \
        b"-ERR Unknown Redis command called from script" + where(s, 2)
    s = "return redis.call('get')"
    assert raw.call_raw("EVAL", s, "0") == \
        b"-ERR Wrong number of args calling Redis command from script" + where(s)
    s = "return redis.call()"
    assert raw.call_raw("EVAL", s, "0") == \
        b"-ERR Please specify at least one argument for this redis lib call" + where(s)
    s = "return redis.call({})"
    assert raw.call_raw("EVAL", s, "0") == \
        b"-ERR Lua redis lib command arguments must be strings or integers" + where(s)
    for call in ("'watch', 'k'", "'multi'", "'eval', 'return 1', 0", "'script', 'kill'"):
        s = "return redis.call(%s)" % call
        assert raw.call_raw("EVAL", s, "0") == \
            b"-ERR This Redis command is not allowed from script" + where(s)
    s = "return redis.log(99, 'x')"
    assert raw.call_raw("EVAL", s, "0") == b"-ERR Invalid debug level." + where(s)
    s = "return redis.setresp(4)"
    assert raw.call_raw("EVAL", s, "0") == b"-ERR RESP version must be 2 or 3." + where(s)
    assert raw.call_raw("EVAL", "return redis.error_reply()", "0") == \
        b"-ERR wrong number or type of arguments\r\n"
    # The message of a caught error: a Redis error's text, or Lua's.
    assert raw.call_raw("EVAL", "local ok, e = pcall(redis.call, 'nosuch'); return e", "0") == \
        bulk("ERR Unknown Redis command called from script")
    assert raw.call_raw("EVAL", "local ok, e = pcall(function() error('x') end); return e",
                        "0") == bulk("user_script:1: x")
    assert raw.call_raw("EVAL", "local ok, e = pcall(function() error({err='X'}) end); return e",
                        "0") == bulk("X")


def test_compile_errors(raw):
    err = b"-ERR Error compiling script (new function): user_script:1: '=' expected near '1'\r\n"
    assert raw.call_raw("EVAL", "retur 1", "0") == err
    assert raw.call_raw("SCRIPT", "LOAD", "retur 1") == err
    assert raw.call_raw("SCRIPT", "EXISTS", sha("retur 1")) == b"*1\r\n:0\r\n"


def test_sandbox(raw):
    for name in ("a", "os", "io", "print", "dofile", "loadfile", "getfenv", "debug"):
        s = "return %s" % name
        assert raw.call_raw("EVAL", s, "0") == (
            b"-ERR user_script:1: Script attempted to access nonexistent global variable '%s'"
            % name.encode() + where(s))
    s = "return _G.x"
    assert raw.call_raw("EVAL", s, "0").startswith(
        b"-ERR user_script:1: Script attempted to access nonexistent global variable 'x'")
    assert raw.call_raw("EVAL", "return rawget(_G, 'x')", "0") == NIL
    for s in ("a = 1", "string.foo = 1", "local s = string; s.rep = nil", "redis.call = nil",
              "math.floor = nil", "table.insert = nil", "cjson.encode = nil"):
        assert raw.call_raw("EVAL", s, "0") == \
            b"-ERR user_script:1: Attempt to modify a readonly table" + where(s)
    for s in ("rawset(_G, 'evil', 1)", "rawset(string, 'evil', 1)", "setmetatable(_G, nil)"):
        assert raw.call_raw("EVAL", s, "0") == b"-ERR Attempt to modify a readonly table" + where(s)
    s = "getmetatable('').__index.rep = nil"
    assert raw.call_raw("EVAL", s, "0") == \
        b"-ERR user_script:1: Attempt to modify a readonly table" + where(s)
    assert raw.call_raw("EVAL", "local t = {} rawset(t, 'a', 1) return t.a", "0") == b":1\r\n"
    assert raw.call_raw("EVAL", "return ('ab'):rep(2)", "0") == bulk("abab")
    # The strings' metatable cannot be changed either: a method planted
    # there would run inside the next scripts.
    s = "getmetatable('').__index = function(s, k) return string.upper end"
    assert raw.call_raw("EVAL", s, "0") == \
        b"-ERR user_script:1: Attempt to modify a readonly table" + where(s)
    assert raw.call_raw("EVAL", "return ('ab'):rep(2)", "0") == bulk("abab")
    # No precompiled chunks: Lua 5.1 runs them unverified.
    assert raw.call_raw("EVAL", "\x1bLuaQ", "0") == (
        b"-ERR Error compiling script (new function): user_script:1: "
        b"unexpected symbol near 'char(27)'\r\n")
    assert raw.call_raw("EVAL", "return {loadstring(string.dump(function() return 42 end))}",
                        "0") == b"*0\r\n"
    assert raw.call_raw("EVAL", "return loadstring('return 5')()", "0") == b":5\r\n"
    s = "local p = {'return ', '7'} local i = 0 return load(function() i = i + 1 return p[i] end)()"
    assert raw.call_raw("EVAL", s, "0") == b":7\r\n"
    # A failed attempt changes nothing for the next script.
    assert raw.call_raw("EVAL", "return type(redis.call)", "0") == bulk("function")
    assert raw.call_raw("EVAL", "return string.rep('ab', 2)", "0") == bulk("abab")


def test_script_cache(raw):
    body = "return 'cached'"
    h = sha(body)
    assert raw.call_raw("EVALSHA", h, "0") == NOSCRIPT
    assert raw.call_raw("SCRIPT", "LOAD", body) == bulk(h)
    assert raw.call_raw("EVALSHA", h, "0") == bulk("cached")
    assert raw.call_raw("EVALSHA", h.upper(), "0") == bulk("cached")
    assert raw.call_raw("EVALSHA", "abc", "0") == NOSCRIPT
    assert raw.call_raw("SCRIPT", "EXISTS", h, "f" * 40) == b"*2\r\n:1\r\n:0\r\n"
    # EVAL caches its script too.
    other = "return 'evaled'"
    assert raw.call_raw("EVAL", other, "0") == bulk("evaled")
    assert raw.call_raw("EVALSHA", sha(other), "0") == bulk("evaled")
    info = raw.call("INFO", "memory").decode()
    assert "number_of_cached_scripts:2" in info
    assert raw.call_raw("SCRIPT", "FLUSH", "bogus") == \
        b"-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n"
    assert raw.call_raw("SCRIPT", "FLUSH", "ASYNC") == OK
    assert raw.call_raw("EVALSHA", h, "0") == NOSCRIPT
    assert raw.call_raw("SCRIPT", "EXISTS", h) == b"*1\r\n:0\r\n"
    assert raw.call_raw("SCRIPT", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n"
    assert raw.call_raw("SCRIPT", "nosuch") == b"-ERR unknown subcommand 'nosuch'. Try SCRIPT HELP.\r\n"
    assert raw.call_raw("SCRIPT") == b"-ERR wrong number of arguments for 'script' command\r\n"
    assert raw.call_raw("SCRIPT", "HELP").startswith(b"*")


def test_read_only_scripts(raw, key):
    s = "return redis.call('set', KEYS[1], 'b')"
    assert raw.call_raw("EVAL_RO", s, "1", key) == \
        b"-ERR Write commands are not allowed from read-only scripts." + where(s)
    raw.call_raw("SCRIPT", "LOAD", s)
    assert raw.call_raw("EVALSHA_RO", sha(s), "1", key) == \
        b"-ERR Write commands are not allowed from read-only scripts." + where(s)
    assert raw.call_raw("EXISTS", key) == b":0\r\n"
    raw.call_raw("SET", key, "v")
    assert raw.call_raw("EVAL_RO", "return redis.call('get', KEYS[1])", "1", key) == bulk("v")
    s = "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 'b')"
    assert raw.call_raw("EVAL", s, "1", key) == \
        b"-ERR Write commands are not allowed from read-only scripts." + where(s, 2)


def test_shebang(raw):
    assert raw.call_raw("EVAL", "#!lua\nreturn 1", "0") == b":1\r\n"
    assert raw.call_raw("EVAL", "#!lua flags=bogus\nreturn 1", "0") == \
        b"-ERR Unexpected flag in script shebang: bogus\r\n"
    assert raw.call_raw("EVAL", "#!python\nreturn 1", "0") == \
        b"-ERR Unexpected engine in script shebang: #!python\r\n"
    assert raw.call_raw("EVAL", "#!lua name=x\nreturn 1", "0") == \
        b"-ERR Unknown lua shebang option: name=x\r\n"
    assert raw.call_raw("EVAL", "#!lua\r\nreturn 1", "0") == b":1\r\n"
    assert raw.call_raw("EVAL", "#!lua flags=\nreturn 1", "0") == b":1\r\n"
    assert raw.call_raw("EVAL", "#!lua  flags=no-writes,allow-oom\nreturn 1", "0") == b":1\r\n"
    for s in ("#!lua flags=no-writes,,\nreturn 1", "#!lua flags=no-writes,\nreturn 1"):
        assert raw.call_raw("EVAL", s, "0") == b"-ERR Unexpected flag in script shebang: \r\n"


def test_eval_in_multi(raw, key):
    assert raw.call_raw("MULTI") == OK
    assert raw.call_raw("SET", key, "1") == b"+QUEUED\r\n"
    assert raw.call_raw("EVAL", "return redis.call('incr', KEYS[1])", "1", key) == \
        b"+QUEUED\r\n"
    assert raw.call_raw("GET", key) == b"+QUEUED\r\n"
    assert raw.call_raw("EXEC") == b"*3\r\n" + OK + b":2\r\n" + bulk("2")


def test_command_info(raw):
    info = raw.call("COMMAND", "INFO", "eval")
    assert info[0][0] == b"eval" and info[0][1] == -3
    flags = [f.decode() if isinstance(f, bytes) else f for f in info[0][2]]
    assert "movablekeys" in flags and "noscript" in flags
    assert raw.call("COMMAND", "GETKEYS", "EVAL", "return 1", "2", "a", "b", "c") == [b"a", b"b"]


def test_deep_recursion_is_an_error(raw):
    # Lua stops C recursion at its limit; the server survives it.
    s = "local t = setmetatable({}, {__index=function(t,k) return t[k] end}); return t.x"
    assert b"C stack overflow" in raw.call_raw("EVAL", s, "0")
    assert raw.call_raw("PING") == b"+PONG\r\n"


def test_concurrent_increments_are_not_lost(server, key):
    """Read, compute, write in Lua from several clients at once: under
    rckv a CC abort reruns the script, invisibly; no increment is lost.
    The loop between the read and the write outlasts the 2 ms after which
    a running script lets the worker's other scripts run, so the scripts
    interleave and conflict (asserted on rckv: INFO counts the reruns)."""
    script = ("local v = tonumber(redis.call('get', KEYS[1]) or '0') "
              "local x = 0 for i = 1, 400000 do x = x + i end "
              "redis.call('set', KEYS[1], v + 1) return v + 1")
    clients, per = 4, 40
    errors = []

    def worker():
        c = server.client()
        try:
            h = c.script_load(script)
            for _ in range(per):
                c.evalsha(h, 1, key)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            c.close()

    def retries():
        c = server.client()
        try:
            return 0 if REDIS_MODE else int(c.info("cc")["cc_retries"])
        finally:
            c.close()

    before = retries()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    c = server.client()
    try:
        assert int(c.get(key)) == clients * per
        if not REDIS_MODE:
            assert retries() > before
    finally:
        c.close()


# ---- where rckv differs from Redis on purpose ----


@pytest.mark.rckv_only
def test_error_after_a_write_leaves_nothing(raw, key):
    s = "redis.call('set', KEYS[1], '1') redis.call('set', KEYS[2], '2') error('late')"
    assert raw.call_raw("EVAL", s, "2", key + "a", key + "b") == \
        b"-ERR user_script:1: late" + where(s)
    assert raw.call_raw("EXISTS", key + "a", key + "b") == b":0\r\n"
    # An uncaught Redis error too, and keys it reached without declaring.
    raw.call_raw("SET", key + "s", "abc")
    s = "redis.call('set', KEYS[1] .. 'x', '1') return redis.call('incr', KEYS[1] .. 's')"
    assert raw.call_raw("EVAL", s, "1", key).startswith(b"-ERR value is not an integer")
    assert raw.call_raw("EXISTS", key + "x") == b":0\r\n"
    # A caught one does not fail the script: its writes stay.
    s = "redis.call('set', KEYS[1] .. 'y', '1') redis.pcall('incr', KEYS[1] .. 's') return 1"
    assert raw.call_raw("EVAL", s, "1", key) == b":1\r\n"
    assert raw.call_raw("EXISTS", key + "y") == b":1\r\n"


@pytest.mark.rckv_only
def test_failing_script_in_multi_undoes_only_itself(raw, key):
    assert raw.call_raw("MULTI") == OK
    raw.call_raw("SET", key, "1")
    raw.call_raw("EVAL", "redis.call('set', KEYS[1], '99') error('no')", "1", key)
    raw.call_raw("GET", key)
    reply = raw.call_raw("EXEC")
    assert reply.startswith(b"*3\r\n+OK\r\n-ERR user_script:1: no")
    assert reply.endswith(bulk("1"))


@pytest.mark.rckv_only
def test_command_failing_inside_the_store_ends_the_script(server, raw, key):
    """A command that fails in the transaction machinery (here a value
    over max-value-bytes) ends the script even under pcall, its writes
    undone (savepoints do not nest; server/script.c)."""
    admin = server.raw()
    try:
        assert admin.call_raw("CONFIG", "SET", "max-value-bytes", "10") == OK
        s = ("redis.call('set', KEYS[1], '1') "
             "local ok, e = pcall(redis.call, 'set', KEYS[2], string.rep('a', 100)) return 1")
        reply = raw.call_raw("EVAL", s, "2", key + "a", key + "b")
        assert reply.startswith(b"-ERR string exceeds maximum allowed size (max-value-bytes)")
        assert b"nothing it wrote was kept" in reply
        assert raw.call_raw("EXISTS", key + "a") == b":0\r\n"
    finally:
        admin.call_raw("CONFIG", "SET", "max-value-bytes", "1mb")
        admin.close()


@pytest.mark.rckv_only
def test_busy_script_is_stopped_and_others_are_served(make_server, key):
    # One worker: the script and the PING below share its thread.
    server = make_server(opts={"threads": 1})
    raw = server.raw()
    admin = server.raw()
    try:
        assert admin.call_raw("CONFIG", "SET", "busy-reply-threshold", "400") == OK
        assert admin.call("CONFIG", "GET", "lua-time-limit") == [b"lua-time-limit", b"400"]
        result = {}

        def run():
            c = server.raw()
            try:
                result["reply"] = c.call_raw(
                    "EVAL", "redis.call('set', KEYS[1], 'w') while true do end", "1", key)
            finally:
                c.close()

        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.1)
        # The script's worker serves its other clients while the script
        # still runs (threads 1).
        assert admin.call_raw("PING") == b"+PONG\r\n"
        assert t.is_alive() and "reply" not in result
        t.join(10)
        assert not t.is_alive()
        assert result["reply"].startswith(b"-ERR Script killed: it ran ")
        assert b"busy-reply-threshold (400 ms); nothing it wrote was kept" in result["reply"]
        assert raw.call_raw("EXISTS", key) == b":0\r\n"
        # A script that catches every error is stopped all the same.
        for catcher in ("pcall(function() while true do end end)",
                        "xpcall(function() while true do end end, function(e) return e end)",
                        "coroutine.resume(coroutine.create(function() while true do end end))"):
            s = "redis.call('set', KEYS[1], 'w') while true do %s end" % catcher
            assert raw.call_raw("EVAL", s, "1", key).startswith(b"-ERR Script killed: it ran ")
            assert raw.call_raw("EXISTS", key) == b":0\r\n"
    finally:
        raw.close()
        admin.close()


@pytest.mark.rckv_only
def test_script_kill_stops_a_script_that_wrote(server, raw, key):
    result = {}

    def run():
        c = server.raw()
        try:
            result["reply"] = c.call_raw(
                "EVAL", "redis.call('set', KEYS[1], 'w') while true do end", "1", key)
        finally:
            c.close()

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 3
    killed = b""
    while time.monotonic() < deadline:
        killed = raw.call_raw("SCRIPT", "KILL")
        if killed == OK:
            break
        time.sleep(0.02)
    t.join(10)
    assert killed == OK
    assert result["reply"].startswith(b"-ERR Script killed by user with SCRIPT KILL")
    assert raw.call_raw("EXISTS", key) == b":0\r\n"


@pytest.mark.rckv_only
def test_commands_outside_transactions_are_refused(raw):
    for call in ("'keys', '*'", "'config', 'get', 'cc'", "'flushall'", "'dbsize'"):
        s = "return redis.call(%s)" % call
        assert b"not allowed from script" in raw.call_raw("EVAL", s, "0")
    assert raw.call_raw("EVAL", "return redis.call('echo', 'x')", "0") == bulk("x")
    assert raw.call_raw("EVAL", "return #redis.call('time')", "0") == b":2\r\n"


def test_object_randomkey_lastsave_move_in_scripts(raw, key):
    """Redis 7 lets a script call OBJECT, RANDOMKEY, LASTSAVE and MOVE.
    rckv runs OBJECT and RANDOMKEY in the script's transaction, so they see
    the script's own writes, as Redis's do."""
    raw.call("FLUSHALL")
    k = key + "k"
    enc = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('OBJECT', 'ENCODING', KEYS[1])"
    assert raw.call_raw("EVAL", enc, "1", k, "12345") == bulk("int")
    assert raw.call_raw("EVAL", enc, "1", k, "hello") == bulk("embstr")
    assert raw.call_raw("EVAL", "return redis.call('OBJECT', 'REFCOUNT', KEYS[1])", "1",
                        k) == b":1\r\n"
    assert raw.call_raw("EVAL", "return redis.call('OBJECT', 'ENCODING', KEYS[1])", "1",
                        k + "none") == NIL
    assert raw.call_raw("EVAL_RO", "return redis.call('RANDOMKEY')", "0") == bulk(k)
    gone = "redis.call('DEL', KEYS[1]); return redis.call('RANDOMKEY')"
    assert raw.call_raw("EVAL", gone, "1", k) == NIL
    assert raw.call_raw("EXISTS", k) == b":0\r\n"
    made = "redis.call('SET', KEYS[1], 'v'); return redis.call('RANDOMKEY')"
    assert raw.call_raw("EVAL", made, "1", k + "new") == bulk(k + "new")
    assert raw.call_raw("EVAL", "return redis.call('LASTSAVE')", "0") == raw.call_raw("LASTSAVE")
    move = "return redis.pcall('MOVE', KEYS[1], '0')"
    assert raw.call_raw("EVAL", move, "1", k + "new").startswith(
        b"-ERR source and destination objects are the same")
    assert raw.call_raw("EVAL_RO", move, "1", k + "new").startswith(
        b"-ERR Write commands are not allowed from read-only scripts")


@pytest.mark.rckv_only
def test_cjson_is_bounded(raw):
    """lua-cjson 2.1.0 sizes its buffer in int (CVE-2022-24834): a text
    that could pass script-memory-limit is refused before encoding; the
    library's settings, which would outlive the script in its VM, are not
    offered."""
    assert raw.call_raw("EVAL", "return #cjson.encode(ARGV[1])", "0", "a" * 100000) == \
        b":100002\r\n"
    reply = raw.call_raw("EVAL", "return #cjson.encode(ARGV[1])", "0", "a" * (70 << 20))
    assert reply.startswith(b"-ERR user_script:1: cjson.encode: the JSON text could exceed "
                            b"script-memory-limit")
    assert raw.call_raw("EVAL", "return type(cjson.decode_max_depth)", "0") == bulk("nil")
    assert raw.call_raw("PING") == b"+PONG\r\n"


@pytest.mark.rckv_only
def test_memory_limit(raw):
    reply = raw.call_raw("EVAL", "local t = {} for i = 1, 1e8 do t[i] = i end return #t", "0")
    assert reply.startswith(b"-ERR script used more than script-memory-limit")
    assert raw.call_raw("EVAL", "return #string.rep('x', 1000)", "0") == b":1000\r\n"


@pytest.mark.skipif(not REDIS_MODE, reason="documents the Redis behaviour rckv departs from")
def test_redis_keeps_writes_before_an_error(raw, key):
    s = "redis.call('set', KEYS[1], '1') error('late')"
    raw.call_raw("EVAL", s, "1", key)
    assert raw.call_raw("EXISTS", key) == b":1\r\n"
