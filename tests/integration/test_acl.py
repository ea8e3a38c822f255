"""Limits and access as Redis 7.0 has them: requirepass and ACL users
(categories, key and channel patterns, MULTI, scripts, ACL LOG), protected
mode, maxclients, client-output-buffer-limit normal,
client-query-buffer-limit, and 1,000 clients that never read.

Validated against redis-server 7.0.15 with RCKV_TEST_TARGET=redis.
"""

import hashlib
import resource
import socket
import threading
import time

import pytest
import redis

from rckvtest import REDIS_MODE, encode

PW_HASH = "30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4"  # sha256("pw")

NOPERM_CMD = b"-NOPERM this user has no permissions to run the '%s' command\r\n"
NOPERM_KEY = b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n"
NOPERM_CHAN = (b"-NOPERM this user has no permissions to access one of the channels used as "
               b"arguments\r\n")
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
NOAUTH = b"-NOAUTH Authentication required.\r\n"
DENIED = (
    b"-DENIED Redis is running in protected mode because protected mode is enabled and no "
    b"password is set for the default user. In this mode connections are only accepted from "
    b"the loopback interface. If you want to connect from external computers to Redis you may "
    b"adopt one of the following solutions: 1) Just disable protected mode sending the command "
    b"'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from "
    b"the same host the server is running, however MAKE SURE Redis is not publicly accessible "
    b"from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) "
    b"Alternatively you can just disable the protected mode by editing the Redis configuration "
    b"file, and setting the protected mode option to 'no', and then restarting the server. 3) "
    b"If you started the server manually just for testing, restart it with the "
    b"'--protected-mode no' option. 4) Setup a an authentication password for the default "
    b"user. NOTE: You only need to do one of the above things in order for the server to start "
    b"accepting connections from the outside.\r\n")


@pytest.fixture
def users(server):
    """Users made by a test, deleted after it (the module's server is shared)."""
    made = []
    admin = server.raw()

    def setuser(name, *rules):
        made.append(name)
        assert admin.call_raw("ACL", "SETUSER", name, *rules) == b"+OK\r\n"

    try:
        yield setuser
    finally:
        if made:
            admin.call("ACL", "DELUSER", *made)
        admin.call("ACL", "LOG", "RESET")
        admin.close()


def login(server, user, password="pw"):
    c = server.raw()
    assert c.call_raw("AUTH", user, password) == b"+OK\r\n"
    return c


def pyclient(server, user, password="pw"):
    return redis.Redis(host="127.0.0.1", port=server.port, username=user, password=password,
                       socket_timeout=10)


# ---- requirepass, AUTH, HELLO ----


def test_requirepass_sets_the_default_users_password(make_server):
    s = make_server(opts={"requirepass": "s3cret"})
    c = s.raw()
    assert c.call_raw("PING") == NOAUTH
    assert c.call_raw("GET", "x") == NOAUTH
    assert c.call_raw("AUTH", "nope") == WRONGPASS
    assert c.call_raw("AUTH", "default", "nope") == WRONGPASS
    assert c.call_raw("AUTH", "nobody", "s3cret") == WRONGPASS
    assert c.call_raw("AUTH", "s3cret") == b"+OK\r\n"
    assert c.call_raw("PING") == b"+PONG\r\n"
    c2 = s.raw()
    assert c2.call_raw("AUTH", "default", "s3cret") == b"+OK\r\n"
    line = c2.call("ACL", "LIST")[0].decode()
    assert line == "user default on #%s ~* &* +@all" % hashlib.sha256(b"s3cret").hexdigest()
    # CONFIG SET requirepass "" makes the default user nopass again.
    assert c2.call_raw("CONFIG", "SET", "requirepass", "") == b"+OK\r\n"
    assert c2.call("ACL", "LIST")[0] == b"user default on nopass ~* &* +@all"
    c3 = s.raw()
    assert c3.call_raw("PING") == b"+PONG\r\n"
    assert c3.call_raw("AUTH", "x") == (
        b"-ERR AUTH <password> called without any password configured for the default user. "
        b"Are you sure your configuration is correct?\r\n")
    # And a new password applies to new connections; old ones stay logged in.
    assert c3.call_raw("CONFIG", "SET", "requirepass", "other") == b"+OK\r\n"
    assert c3.call_raw("PING") == b"+PONG\r\n"
    c4 = s.raw()
    assert c4.call_raw("PING") == NOAUTH
    assert c4.call_raw("AUTH", "s3cret") == WRONGPASS
    assert c4.call_raw("AUTH", "other") == b"+OK\r\n"
    for x in (c, c2, c3, c4):
        x.close()


def test_hello_auth_and_reset(make_server):
    s = make_server(opts={"requirepass": "s3cret"})
    c = s.raw()
    assert c.call_raw("HELLO", "3").startswith(b"-NOAUTH HELLO must be called with the client "
                                               b"already authenticated")
    assert c.call_raw("HELLO", "3", "AUTH", "default", "bad") == WRONGPASS
    reply = c.call("HELLO", "3", "AUTH", "default", "s3cret")
    assert dict(zip(reply[::2], reply[1::2]))[b"proto"] == 3
    assert c.call_raw("PING") == b"+PONG\r\n"
    assert c.call_raw("RESET") == b"+RESET\r\n"
    assert c.call_raw("PING") == NOAUTH
    c.close()
    r = redis.Redis(host="127.0.0.1", port=s.port, password="s3cret")
    assert r.set("k", "v") and r.get("k") == b"v"
    with pytest.raises((redis.AuthenticationError, redis.ResponseError), match="WRONGPASS"):
        redis.Redis(host="127.0.0.1", port=s.port, password="bad").ping()


# ---- users with redis-py ----


def test_read_only_user_with_redis_py(server, users, key):
    users("ro", "on", ">pw", "~*", "-@all", "+@read")
    admin = server.client()
    admin.set(key + "a", "1")
    r = pyclient(server, "ro")
    assert r.get(key + "a") == b"1"
    assert r.mget([key + "a", key + "b"]) == [b"1", None]
    assert r.exists(key + "a") == 1
    with pytest.raises(redis.exceptions.NoPermissionError) as e:
        r.set(key + "a", "2")
    assert str(e.value) == "this user has no permissions to run the 'set' command"
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.delete(key + "a")
    with pytest.raises(redis.exceptions.NoPermissionError) as e:
        r.config_get("maxclients")
    assert "'config|get'" in str(e.value)
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.flushall()
    assert admin.get(key + "a") == b"1"


def test_app_prefix_user_with_redis_py(server, users):
    users("app", "on", ">pw", "~app:*", "+@all", "-@dangerous")
    r = pyclient(server, "app")
    assert r.set("app:1", "a") is True
    assert r.get("app:1") == b"a"
    assert r.incr("app:n") == 1
    r.hset("app:h", mapping={"f": "v"})
    assert r.hgetall("app:h") == {b"f": b"v"}
    for call in (lambda: r.get("other"), lambda: r.set("other", 1),
                 lambda: r.mget(["app:1", "other"]), lambda: r.rename("app:1", "x:1"),
                 lambda: r.mset({"app:2": 1, "b": 2})):
        with pytest.raises(redis.exceptions.NoPermissionError) as e:
            call()
        assert str(e.value) == ("this user has no permissions to access one of the keys used "
                                "as arguments")
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.flushall()  # @dangerous
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.keys("*")  # KEYS is @dangerous too
    # A pipeline: each refused command gets its own error, the others run.
    p = r.pipeline(transaction=False)
    p.set("app:p", 1)
    p.set("nope", 1)
    p.get("app:p")
    res = p.execute(raise_on_error=False)
    assert res[0] is True and res[2] == b"1"
    assert isinstance(res[1], redis.exceptions.NoPermissionError)
    assert server.client().exists("nope") == 0


def test_pipelined_writes_are_checked_each(server, users, key):
    # rckv runs pipelined writes as one group: a restricted user's must
    # still be checked one by one.
    users("pipe", "on", ">pw", "~ok:*", "+@all")
    c = login(server, "pipe")
    cmds = []
    for i in range(40):
        cmds.append(encode("SET", ("ok:%d" if i % 2 else "no:%d") % i, "v"))
    c.send(b"".join(cmds))
    for i in range(40):
        reply = c.read_raw()
        assert reply == (b"+OK\r\n" if i % 2 else NOPERM_KEY)
    admin = server.raw()
    assert admin.call("EXISTS", "no:0", "no:2") == 0
    assert admin.call("EXISTS", "ok:1", "ok:3") == 2
    c.close()
    admin.close()


def test_read_and_write_key_patterns(server, users):
    users("rw", "on", ">pw", "%R~r:*", "%W~w:*", "~both:*", "+@all")
    c = login(server, "rw")
    assert c.call_raw("GET", "r:1") == b"$-1\r\n"
    assert c.call_raw("SET", "r:1", "x") == NOPERM_KEY
    assert c.call_raw("SET", "w:1", "x") == b"+OK\r\n"
    assert c.call_raw("GET", "w:1") == NOPERM_KEY
    assert c.call_raw("INCR", "w:2") == NOPERM_KEY  # reads and writes
    assert c.call_raw("INCR", "both:1") == b":1\r\n"
    assert c.call_raw("COPY", "r:1", "w:1") == b":0\r\n"  # source read, destination written
    assert c.call_raw("COPY", "w:1", "r:1") == NOPERM_KEY
    c.close()
    adm = server.raw()
    line = [x for x in adm.call("ACL", "LIST") if x.startswith(b"user rw ")][0]
    assert line == (b"user rw on #" + PW_HASH.encode() +
                    b" %R~r:* %W~w:* ~both:* resetchannels +@all")
    adm.close()


def test_categories_and_commands(server, users):
    users("mix", "on", "nopass", "~*", "-@all", "+@string", "-set", "+ping", "+config|get")
    c = login(server, "mix", "any")
    assert c.call_raw("PING") == b"+PONG\r\n"
    assert c.call_raw("GET", "x") == b"$-1\r\n"
    assert c.call_raw("SET", "x", "1") == NOPERM_CMD % b"set"
    assert c.call_raw("APPEND", "x", "1") == b":1\r\n"
    assert c.call_raw("HSET", "h", "f", "v") == NOPERM_CMD % b"hset"
    assert c.call("CONFIG", "GET", "maxclients")[0] == b"maxclients"
    assert c.call_raw("CONFIG", "SET", "maxclients", "10") == NOPERM_CMD % b"config|set"
    # AUTH and HELLO are every user's.
    assert c.call_raw("AUTH", "mix", "any") == b"+OK\r\n"
    c.close()


def test_live_clients_follow_setuser_and_deluser(server, users):
    users("live", "on", ">pw", "~*", "+@all")
    c = login(server, "live")
    assert c.call_raw("SET", "lk", "1") == b"+OK\r\n"
    adm = server.raw()
    assert adm.call_raw("ACL", "SETUSER", "live", "-set") == b"+OK\r\n"
    assert c.call_raw("SET", "lk", "2") == NOPERM_CMD % b"set"
    assert c.call_raw("GET", "lk") == b"$1\r\n1\r\n"
    assert adm.call_raw("ACL", "SETUSER", "live", "resetkeys", "~other:*") == b"+OK\r\n"
    assert c.call_raw("GET", "lk") == NOPERM_KEY
    assert adm.call_raw("ACL", "DELUSER", "live") == b":1\r\n"
    # Its clients are disconnected (Redis at once, rckv at their next
    # command, which gets no reply).
    try:
        c.send(encode("GET", "lk"))
    except OSError:
        pass
    assert c.expect_closed()
    assert c.buf == b""
    adm.close()


def test_user_off_and_passwords(server, users):
    users("u1", "on", ">pw", ">pw2", "+@all", "~*")
    assert server.raw().call_raw("AUTH", "u1", "pw2") == b"+OK\r\n"
    users("u1", "<pw2")
    assert server.raw().call_raw("AUTH", "u1", "pw2") == WRONGPASS
    assert server.raw().call_raw("AUTH", "u1", "pw") == b"+OK\r\n"
    users("u1", "off")
    assert server.raw().call_raw("AUTH", "u1", "pw") == WRONGPASS
    users("u1", "on", "resetpass")
    assert server.raw().call_raw("AUTH", "u1", "pw") == WRONGPASS
    users("u1", "#" + PW_HASH)
    assert server.raw().call_raw("AUTH", "u1", "pw") == b"+OK\r\n"
    users("u1", "!" + PW_HASH, "nopass")
    assert server.raw().call_raw("AUTH", "u1", "anything") == b"+OK\r\n"


# ---- ACL subcommands ----


def test_setuser_errors(raw, users):
    def err(*rules):
        return raw.call_raw("ACL", "SETUSER", "bad", *rules)
    assert err("foo") == b"-ERR Error in ACL SETUSER modifier 'foo': Syntax error\r\n"
    assert err("+nosuch") == (b"-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command "
                              b"or category name in ACL\r\n")
    assert err("+@nosuch") == (b"-ERR Error in ACL SETUSER modifier '+@nosuch': Unknown command "
                               b"or category name in ACL\r\n")
    assert err("<nope") == (b"-ERR Error in ACL SETUSER modifier '<nope': The password you are "
                            b"trying to remove from the user does not exist\r\n")
    assert err("#abc") == (b"-ERR Error in ACL SETUSER modifier '#abc': The password hash must "
                           b"be exactly 64 characters and contain only lowercase hexadecimal "
                           b"characters\r\n")
    assert err("allkeys", "~x") == (
        b"-ERR Error in ACL SETUSER modifier '~x': Adding a pattern after the * pattern (or the "
        b"'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start "
        b"with an empty list of patterns\r\n")
    # A failed SETUSER changes nothing, and makes no user.
    assert raw.call("ACL", "GETUSER", "bad") is None
    assert raw.call_raw("ACL", "DELUSER", "default") == (
        b"-ERR The 'default' user cannot be removed\r\n")


def test_getuser_list_users(raw, users):
    users("ro", "on", ">pw", "~*", "-@all", "+@read")
    users("newbie")
    users("chan", "on", "nopass", "&ch*", "+@all", "~*")
    assert raw.call("ACL", "GETUSER", "ro") == [
        b"flags", [b"on"], b"passwords", [PW_HASH.encode()], b"commands", b"-@all +@read",
        b"keys", b"~*", b"channels", b"", b"selectors", []]
    assert raw.call("ACL", "GETUSER", "newbie") == [
        b"flags", [b"off"], b"passwords", [], b"commands", b"-@all", b"keys", b"",
        b"channels", b"", b"selectors", []]
    assert raw.call("ACL", "GETUSER", "default") == [
        b"flags", [b"on", b"nopass"], b"passwords", [], b"commands", b"+@all", b"keys", b"~*",
        b"channels", b"&*", b"selectors", []]
    assert raw.call("ACL", "GETUSER", "nosuch") is None
    listing = raw.call("ACL", "LIST")
    assert b"user default on nopass ~* &* +@all" in listing
    assert b"user ro on #" + PW_HASH.encode() + b" ~* resetchannels -@all +@read" in listing
    assert b"user newbie off resetchannels -@all" in listing
    assert b"user chan on nopass ~* resetchannels &ch* +@all" in listing
    assert listing == sorted(listing)
    names = raw.call("ACL", "USERS")
    assert names == sorted(names) and {b"default", b"ro", b"newbie"} <= set(names)
    assert raw.call("ACL", "WHOAMI") == b"default"
    users("newbie", "reset")
    assert b"user newbie off sanitize-payload resetchannels -@all" in raw.call("ACL", "LIST")
    assert raw.call_raw("ACL", "DELUSER", "newbie", "nosuch") == b":1\r\n"


def test_acl_cat(raw):
    cats = raw.call("ACL", "CAT")
    assert cats == [c.encode() for c in (
        "keyspace read write set sortedset list hash string bitmap hyperloglog geo stream "
        "pubsub admin fast slow blocking dangerous connection transaction scripting").split()]
    read = set(raw.call("ACL", "CAT", "read"))
    assert {b"get", b"mget", b"hgetall", b"exists", b"smembers"} <= read
    assert not {b"set", b"del", b"flushall"} & read
    conn = set(raw.call("ACL", "CAT", "connection"))
    assert {b"ping", b"auth", b"hello", b"client|setname", b"client|list"} <= conn
    assert {b"flushall", b"keys", b"config|set", b"acl|setuser"} <= set(
        raw.call("ACL", "CAT", "dangerous"))
    assert raw.call_raw("ACL", "CAT", "nosuch") == b"-ERR Unknown category 'nosuch'\r\n"


def test_dryrun(raw, users):
    users("ro", "on", ">pw", "~*", "-@all", "+@read")
    users("app", "on", ">pw", "~app:*", "+@all")
    assert raw.call_raw("ACL", "DRYRUN", "ro", "get", "x") == b"+OK\r\n"
    assert raw.call("ACL", "DRYRUN", "ro", "set", "a", "b") == (
        b"This user has no permissions to run the 'set' command")
    assert raw.call("ACL", "DRYRUN", "app", "get", "x") == (
        b"This user has no permissions to access the 'x' key")
    assert raw.call_raw("ACL", "DRYRUN", "app", "get", "app:1") == b"+OK\r\n"
    assert raw.call_raw("ACL", "DRYRUN", "nosuch", "get", "x") == (
        b"-ERR User 'nosuch' not found\r\n")
    assert raw.call_raw("ACL", "DRYRUN", "ro", "nosuchcmd", "x") == (
        b"-ERR Command 'nosuchcmd' not found\r\n")
    assert raw.call_raw("ACL", "DRYRUN", "ro", "get") == (
        b"-ERR wrong number of arguments for 'get' command\r\n")


def test_acl_log(server, users):
    users("ro", "on", ">pw", "~*", "-@all", "+@read")
    adm = server.raw()
    adm.call("ACL", "LOG", "RESET")
    c = login(server, "ro")
    assert c.call_raw("SET", "a", "b") == NOPERM_CMD % b"set"
    assert c.call_raw("SET", "a", "b") == NOPERM_CMD % b"set"
    assert server.raw().call_raw("AUTH", "ro", "bad") == WRONGPASS
    log = adm.call("ACL", "LOG")
    assert len(log) == 2
    auth = dict(zip(log[0][::2], log[0][1::2]))
    assert auth[b"reason"] == b"auth" and auth[b"object"] == b"AUTH"
    assert auth[b"username"] == b"ro" and auth[b"context"] == b"toplevel"
    e = dict(zip(log[1][::2], log[1][1::2]))
    assert e[b"count"] == 2 and e[b"reason"] == b"command" and e[b"object"] == b"set"
    assert e[b"username"] == b"ro" and e[b"context"] == b"toplevel"
    assert b"user=ro" in e[b"client-info"] and b"cmd=set" in e[b"client-info"]
    assert 0 <= float(e[b"age-seconds"]) < 30
    assert list(log[1][::2]) == [b"count", b"reason", b"context", b"object", b"username",
                                 b"age-seconds", b"client-info"]
    assert len(adm.call("ACL", "LOG", "1")) == 1
    assert adm.call_raw("ACL", "LOG", "RESET") == b"+OK\r\n"
    assert adm.call("ACL", "LOG") == []
    c.close()
    adm.close()


def test_multi_checks_when_queued(server, users):
    users("app", "on", ">pw", "~app:*", "+@all")
    c = login(server, "app")
    assert c.call_raw("MULTI") == b"+OK\r\n"
    assert c.call_raw("SET", "x", "1") == NOPERM_KEY
    assert c.call_raw("SET", "app:m", "1") == b"+QUEUED\r\n"
    assert c.call_raw("EXEC") == (
        b"-EXECABORT Transaction discarded because of previous errors.\r\n")
    assert server.raw().call("EXISTS", "app:m") == 0
    adm = server.raw()
    e = adm.call("ACL", "LOG", "1")[0]
    e = dict(zip(e[::2], e[1::2]))
    assert (e[b"reason"], e[b"context"], e[b"object"]) == (b"key", b"multi", b"x")
    c.close()
    adm.close()


def test_scripts_are_checked(server, users):
    users("app3", "on", "nopass", "~app:*", "-@all", "+eval", "+get")
    c = login(server, "app3", "x")
    r = c.call_raw("EVAL", "return redis.call('set','app:1',1)", "0")
    assert r == (b"-ERR The user executing the script can't run this command or subcommand "
                 b"script: 14e1f0980a3ea674b6cda0b0d1fcabee2c193508, on @user_script:1.\r\n")
    r = c.call_raw("EVAL", "return redis.call('get','x')", "0")
    assert r == (b"-ERR The user executing the script can't access at least one of the keys "
                 b"mentioned in the command arguments script: "
                 b"db94c2918043c41a85e5c7f5b637c7a9c9c7119c, on @user_script:1.\r\n")
    r = c.call("EVAL", "return redis.pcall('set','app:1',1)", "0")
    assert "can't run this command or subcommand" in str(r)
    assert c.call_raw("EVAL", "return redis.call('get','app:none')", "0") == b"$-1\r\n"
    adm = server.raw()
    e = adm.call("ACL", "LOG", "1")[0]
    e = dict(zip(e[::2], e[1::2]))
    assert e[b"context"] == b"lua" and e[b"username"] == b"app3"
    c.close()
    adm.close()


def test_channels(server, users):
    users("pub", "on", "nopass", "~*", "&news.*", "+@all")
    c = login(server, "pub", "x")
    assert c.call_raw("PUBLISH", "news.1", "m") == b":0\r\n"
    assert c.call_raw("PUBLISH", "sports", "m") == NOPERM_CHAN
    assert c.call_raw("SUBSCRIBE", "sports") == NOPERM_CHAN
    assert c.call_raw("PSUBSCRIBE", "news.1*") == NOPERM_CHAN  # a pattern must be allowed as is
    c.close()
    adm = server.raw()
    assert adm.call("ACL", "DRYRUN", "pub", "publish", "x", "m") == (
        b"This user has no permissions to access the 'x' channel")
    adm.close()


def test_client_list_shows_the_user(server, users):
    users("who", "on", ">pw", "~*", "+@all")
    c = login(server, "who")
    assert b"user=who" in c.call("CLIENT", "INFO")
    assert c.call("ACL", "WHOAMI") == b"who"
    c.close()


# ---- protected mode ----


def connect_from(port, src):
    s = socket.socket()
    s.settimeout(5)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def read_all(s):
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        data += chunk
    return data


def test_protected_mode(make_server):
    s = make_server(opts={"protected-mode": "yes"})
    # 127.0.0.2 is on the loopback device, yet not "127.0.0.1 or ::1".
    c = connect_from(s.port, "127.0.0.2")
    assert read_all(c) == DENIED
    c.close()
    local = s.raw()
    assert local.call_raw("PING") == b"+PONG\r\n"
    # A password for the default user lets outside clients in (to AUTH).
    assert local.call_raw("CONFIG", "SET", "requirepass", "pw") == b"+OK\r\n"
    c = connect_from(s.port, "127.0.0.2")
    c.sendall(encode("PING"))
    assert c.recv(100) == NOAUTH
    c.sendall(encode("AUTH", "pw") + encode("PING"))
    time.sleep(0.2)
    assert c.recv(100) == b"+OK\r\n+PONG\r\n"
    c.close()
    assert local.call_raw("CONFIG", "SET", "requirepass", "") == b"+OK\r\n"
    assert local.call_raw("CONFIG", "SET", "protected-mode", "no") == b"+OK\r\n"
    c = connect_from(s.port, "127.0.0.2")
    c.sendall(encode("PING"))
    assert c.recv(100) == b"+PONG\r\n"
    c.close()
    local.close()


# ---- limits ----


def test_maxclients(make_server):
    s = make_server(opts={"maxclients": "8"})
    conns = []
    for _ in range(8):
        c = s.raw()
        assert c.call_raw("PING") == b"+PONG\r\n"
        conns.append(c)
    extra = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    assert read_all(extra) == b"-ERR max number of clients reached\r\n"
    extra.close()
    for c in conns:  # the others are still served
        assert c.call_raw("PING") == b"+PONG\r\n"
    conns.pop().close()
    time.sleep(0.3)
    c = s.raw()
    assert c.call_raw("PING") == b"+PONG\r\n"
    for c in conns + [c]:
        c.close()


def test_output_buffer_limit_normal(make_server):
    s = make_server(opts={"client-output-buffer-limit": ["normal", "1mb", "0", "0"]})
    admin = s.raw()
    assert admin.call_raw("SET", "big", "x" * 100000) == b"+OK\r\n"
    slow = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    port = slow.getsockname()[1]
    slow.sendall(encode("GET", "big") * 500)  # 50 MB of replies that nobody reads
    deadline = time.time() + 10
    while (b"output buffer limits" not in open(s.logpath, "rb").read() and
           time.time() < deadline):
        time.sleep(0.1)
    assert b"scheduled to be closed ASAP for overcoming of output buffer limits" in open(
        s.logpath, "rb").read()
    assert (":%d " % port).encode() not in admin.call("CLIENT", "LIST")  # cut off
    assert admin.call_raw("PING") == b"+PONG\r\n"
    slow.close()
    assert admin.call_raw("GET", "big").startswith(b"$100000\r\n")
    admin.close()


def test_query_buffer_limit(make_server):
    s = make_server(opts={"client-query-buffer-limit": "1mb"})
    other = s.raw()
    c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    # An argument that never ends.
    c.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$500000000\r\n")
    chunk = b"a" * 65536
    closed = False
    try:
        for _ in range(64):  # 4 MB, past the 1 MB limit
            c.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    if not closed:
        read_all(c)  # ends at EOF or reset: the server closed it
    c.close()
    deadline = time.time() + 5
    while (b"Closing client that reached max query buffer length"
           not in open(s.logpath, "rb").read() and time.time() < deadline):
        time.sleep(0.1)
    assert b"Closing client that reached max query buffer length" in open(s.logpath, "rb").read()
    assert other.call_raw("PING") == b"+PONG\r\n"
    other.close()


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.mark.time_limit(120)
def test_thousand_clients_that_never_read(make_server):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    s = make_server(opts={"maxclients": "5000"})
    admin = s.raw()
    value = "v" * 16384
    assert admin.call_raw("SET", "big", value) == b"+OK\r\n"
    pid = s.proc.pid
    before = rss_kb(pid)
    slow = []
    req = encode("GET", "big") * 8  # 128 kB of replies each, never read
    for _ in range(1000):
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.setblocking(False)
        try:
            c.send(req)
        except BlockingIOError:
            pass
        slow.append(c)
    # Meanwhile others run normally.
    lat = []
    stop = threading.Event()
    errors = []

    def normal(i):
        try:
            r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=10)
            n = 0
            while not stop.is_set():
                t0 = time.monotonic()
                r.set("n:%d" % i, n)
                assert r.get("n:%d" % i) == str(n).encode()
                lat.append(time.monotonic() - t0)
                n += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=normal, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(3.0)
    during = rss_kb(pid)
    stop.set()
    for t in threads:
        t.join()
    for c in slow:
        c.close()
    time.sleep(1.0)
    admin.call_raw("PING")
    after = rss_kb(pid)
    assert not errors, errors
    lat.sort()
    print("\nslow clients: RSS before %d kB, during %d kB, after %d kB; normal clients: %d "
          "round trips, median %.2f ms, max %.2f ms" % (
              before, during, after, len(lat), 1000 * lat[len(lat) // 2], 1000 * lat[-1]))
    assert not errors, errors
    # Every answer came, none after 15 s: a liveness bound, not a speed
    # claim (the numbers printed above are the measurement).
    assert len(lat) > 0 and lat[-1] < 15.0
    assert s.alive()
    assert admin.call_raw("GET", "n:0").startswith(b"$")
    # rckv's memory comes back once the slow clients are gone (redis-server
    # keeps much of it in its allocator: not asserted there).
    if not REDIS_MODE:
        assert after < before + (during - before) / 2 + 20000
    admin.close()


def test_client_kill_user(server, users):
    users("victim", "on", ">pw", "~*", "+@all")
    v1, v2 = login(server, "victim"), login(server, "victim")
    bystander = server.raw()
    assert bystander.call_raw("CLIENT", "KILL", "USER", "victim") == b":2\r\n"
    assert v1.expect_closed() and v2.expect_closed()
    assert bystander.call_raw("PING") == b"+PONG\r\n"
    assert bystander.call_raw("CLIENT", "KILL", "USER", "nobody") == (
        b"-ERR No such user 'nobody'\r\n")
    bystander.close()


def test_set_key_flags_for_acl(raw, users):
    assert raw.call("COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v") == [[b"k", ["OW", "update"]]]
    assert raw.call("COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v", "GET") == [
        [b"k", ["RW", "access", "update"]]]
    users("wo", "on", ">pw", "%W~w:*", "+@all")
    assert raw.call_raw("ACL", "DRYRUN", "wo", "SET", "w:1", "v", "NX") == b"+OK\r\n"
    assert raw.call("ACL", "DRYRUN", "wo", "SET", "w:1", "v", "GET") == (
        b"This user has no permissions to access the 'w:1' key")


def test_slowlog_redacts_secrets(make_server):
    s = make_server()
    c = s.raw()
    assert c.call_raw("CONFIG", "SET", "slowlog-log-slower-than", "0") == b"+OK\r\n"
    c.call("SLOWLOG", "RESET")
    assert c.call_raw("ACL", "SETUSER", "x", "on", ">secretpw", "~*", "+@all") == b"+OK\r\n"
    assert c.call_raw("AUTH", "x", "secretpw") == b"+OK\r\n"
    assert c.call("HELLO", "2", "AUTH", "x", "secretpw")[0] == b"server"
    entries = c.call("SLOWLOG", "GET", "10")
    args = {tuple(e[3][:2]): e[3] for e in entries}
    assert args[(b"AUTH", b"(redacted)")] == [b"AUTH", b"(redacted)", b"(redacted)"]
    assert args[(b"ACL", b"SETUSER")] == [b"ACL", b"SETUSER"] + [b"(redacted)"] * 5
    assert args[(b"HELLO", b"2")] == [b"HELLO", b"2", b"AUTH", b"(redacted)", b"(redacted)"]
    assert b"secretpw" not in repr(entries).encode()
    c.close()


def test_exec_rechecks_changed_rules(server, users):
    users("m", "on", "nopass", "~*", "&*", "+@all")
    c = login(server, "m", "x")
    adm = server.raw()
    adm.call("ACL", "LOG", "RESET")
    assert c.call_raw("MULTI") == b"+OK\r\n"
    for cmd in (("SET", "mx", "1"), ("GET", "mx"), ("GET", "y"), ("PUBLISH", "ch", "m")):
        assert c.call_raw(*cmd) == b"+QUEUED\r\n"
    assert adm.call_raw("ACL", "SETUSER", "m", "-set", "resetkeys", "~y",
                        "resetchannels") == b"+OK\r\n"
    why = (b"-NOPERM ACLs rules changed between the moment the transaction was accumulated "
           b"and the EXEC call. This command is no longer allowed for the following reason: ")
    assert c.call_raw("EXEC") == (
        b"*4\r\n" + why + b"no permission to execute the command or subcommand\r\n" +
        why + b"no permission to touch the specified keys\r\n$-1\r\n" +
        why + b"no permission to access one of the channels used as arguments\r\n")
    log = [dict(zip(e[::2], e[1::2])) for e in adm.call("ACL", "LOG")]
    assert [(e[b"reason"], e[b"context"], e[b"object"]) for e in log] == [
        (b"channel", b"multi", b"ch"), (b"key", b"multi", b"mx"), (b"command", b"multi", b"set")]
    assert adm.call("EXISTS", "mx") == 0
    c.close()
    adm.close()


def test_getuser_resp3(server):
    c = server.raw()
    c.call("HELLO", "3")
    assert c.call_raw("ACL", "GETUSER", "default") == (
        b"%6\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$6\r\nnopass\r\n$9\r\npasswords\r\n*0\r\n"
        b"$8\r\ncommands\r\n$5\r\n+@all\r\n$4\r\nkeys\r\n$2\r\n~*\r\n$8\r\nchannels\r\n$2\r\n&*\r\n"
        b"$9\r\nselectors\r\n*0\r\n")
    c.close()
