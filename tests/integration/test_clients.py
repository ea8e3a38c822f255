"""Real clients, unchanged: redis-cli (one-shot and interactive) and redis-py."""

import os
import pty
import select
import signal
import threading
import time

import pytest
import redis

from rckvtest import HOST, free_port, run


def cli(server, *args, input=None, raw=None):
    argv = ["redis-cli", "-h", HOST, "-p", str(server.port)]
    if raw is True:
        argv.append("--raw")
    elif raw is False:
        argv.append("--no-raw")
    return run(argv + list(args), timeout=20, input=input)


# --- redis-cli one-shot -------------------------------------------------

def test_cli_oneshot(server, key):
    k = key + "a"
    p = cli(server, "set", k, "hello world", raw=False)
    assert (p.returncode, p.stdout, p.stderr) == (0, "OK\n", "")
    p = cli(server, "get", k, raw=False)
    assert (p.returncode, p.stdout) == (0, '"hello world"\n')
    p = cli(server, "get", k, raw=True)
    assert (p.returncode, p.stdout) == (0, "hello world\n")
    p = cli(server, "get", key + "missing", raw=False)
    assert p.stdout == "(nil)\n"
    p = cli(server, "incr", key + "n", raw=False)
    assert p.stdout == "(integer) 1\n"
    p = cli(server, "incrby", key + "n", "41", raw=True)
    assert p.stdout == "42\n"
    p = cli(server, "mget", k, key + "missing", key + "n", raw=False)
    assert p.stdout == '1) "hello world"\n2) (nil)\n3) "42"\n'
    p = cli(server, "mget", k, key + "missing", key + "n", raw=True)
    assert p.stdout == "hello world\n\n42\n"
    p = cli(server, "ping", raw=False)
    assert p.stdout == "PONG\n"


def test_cli_errors(server):
    # redis-cli 7.0 prints error replies and still exits 0.
    p = cli(server, "foo", "a", "b", raw=False)
    assert p.returncode == 0
    assert p.stdout == "(error) ERR unknown command 'foo', with args beginning with: 'a' 'b' \n"
    p = cli(server, "get", raw=True)
    # --raw prints an error and an empty line.
    assert p.stdout == "ERR wrong number of arguments for 'get' command\n\n"


def test_cli_connection_refused_exit_code():
    # The exit status scripts rely on when no server is there.
    p = run(["redis-cli", "-h", HOST, "-p", str(free_port()), "ping"], timeout=20)
    assert p.returncode == 1
    assert "Could not connect" in p.stdout + p.stderr


def test_cli_several_commands_from_stdin(server, key):
    k = key + "x"
    script = "set {k} 10\nincr {k}\nget {k}\nmulti\nincr {k}\nincrby {k} 5\nexec\ndel {k}\n" \
        "exists {k}\n".format(k=k)
    p = cli(server, input=script, raw=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ("OK\n(integer) 11\n\"11\"\nOK\nQUEUED\nQUEUED\n"
                        "1) (integer) 12\n2) (integer) 17\n(integer) 1\n(integer) 0\n")


def test_cli_repeat_and_db(server, key):
    p = cli(server, "-r", "5", "incr", key + "r", raw=True)
    assert p.stdout == "1\n2\n3\n4\n5\n"
    p = cli(server, "-n", "0", "get", key + "r", raw=True)
    assert p.stdout == "5\n"


# --- redis-cli interactive through a pty ----------------------------------

class Pty:
    """redis-cli in a pseudo-terminal. TERM=dumb keeps linenoise in its
    simple line mode (no cursor-position queries), which is still the
    interactive code path: prompts, (TX) state, formatted replies."""

    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child
            try:
                os.environ["TERM"] = "dumb"
                os.execvp(argv[0], argv)
            finally:
                os._exit(127)
        self.buf = b""

    def read_until(self, pat, timeout=10.0):
        pat = pat.encode() if isinstance(pat, str) else pat
        end = time.monotonic() + timeout
        while pat not in self.buf:
            left = end - time.monotonic()
            r = select.select([self.fd], [], [], max(0.0, left))[0] if left > 0 else []
            if not r:
                raise AssertionError("timed out waiting for %r; got %r" % (pat, self.buf))
            try:
                b = os.read(self.fd, 4096)
            except OSError:
                b = b""
            if not b:
                raise AssertionError("redis-cli exited waiting for %r; got %r" % (pat, self.buf))
            if b"\x1b[6n" in b:  # answer a cursor-position query if one comes
                os.write(self.fd, b"\x1b[1;1R")
            self.buf += b
        i = self.buf.index(pat) + len(pat)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out.decode("utf-8", "replace").replace("\r\n", "\n")

    def line(self, text):
        os.write(self.fd, text.encode() + b"\r")

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        os.close(self.fd)


def test_cli_interactive(server, key):
    prompt = "%s:%d> " % (HOST, server.port)
    tx = "%s:%d(TX)> " % (HOST, server.port)
    k = key + "i"
    t = Pty(["redis-cli", "-h", HOST, "-p", str(server.port)])
    try:
        assert t.read_until(prompt).endswith(prompt)

        def say(cmd, until):
            t.line(cmd)
            out = t.read_until(until)
            # The pty echoes the command line first.
            assert out.startswith(cmd + "\n"), out
            return out[len(cmd) + 1:]

        assert say("set %s 5" % k, prompt) == "OK\n" + prompt
        assert say("multi", tx) == "OK\n" + tx
        assert say("incr %s" % k, tx) == "QUEUED\n" + tx
        assert say("get %s" % k, tx) == "QUEUED\n" + tx
        assert say("incrbyfloat %s x" % k, tx) == "QUEUED\n" + tx
        assert say("exec", prompt) == ('1) (integer) 6\n2) "6"\n'
                                       '3) (error) ERR value is not a valid float\n' + prompt)
        assert say("multi", tx) == "OK\n" + tx
        assert say("incr %s" % k, tx) == "QUEUED\n" + tx
        assert say("discard", prompt) == "OK\n" + prompt
        assert say("get %s" % k, prompt) == '"6"\n' + prompt
        assert say("foo bar", prompt) == \
            "(error) ERR unknown command 'foo', with args beginning with: 'bar' \n" + prompt
        assert say("multi", tx) == "OK\n" + tx
        assert say("nosuch", tx) == \
            "(error) ERR unknown command 'nosuch', with args beginning with: \n" + tx
        assert say("exec", prompt) == \
            "(error) EXECABORT Transaction discarded because of previous errors.\n" + prompt
        t.line("quit")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid, status = os.waitpid(t.pid, os.WNOHANG)
            if pid:
                assert os.waitstatus_to_exitcode(status) == 0
                break
            time.sleep(0.05)
        else:
            raise AssertionError("redis-cli did not exit after quit")
    finally:
        t.close()


# --- redis-py ---------------------------------------------------------------

def test_redis_py_plain(r, key):
    a, b, n = key + "a", key + "b", key + "n"
    assert r.ping() is True
    assert r.set(a, "1") is True
    assert r.get(a) == b"1"
    assert r.incr(a) == 2
    assert r.incrby(a, 10) == 12
    assert r.decr(a) == 11
    assert r.incrbyfloat(a, 0.5) == 11.5
    assert r.append(a, "x") == 5
    assert r.strlen(a) == 5
    assert r.getrange(a, 0, 1) == b"11"
    assert r.setrange(a, 0, "99") == 5
    assert r.get(a) == b"99.5x"
    assert r.getset(a, "g") == b"99.5x"
    assert r.setnx(a, "no") is False
    assert r.setnx(b, "yes") is True
    assert r.mset({a: "1", b: "2"}) is True
    assert r.mget([a, b, n]) == [b"1", b"2", None]
    assert r.msetnx({a: "x", n: "y"}) is False
    assert r.get(n) is None
    assert r.exists(a, b, n) == 2
    assert r.getdel(b) == b"2"
    assert r.delete(a, b, n) == 1
    assert r.get(a) is None
    assert r.set(a, "v", nx=True) is True
    assert r.set(a, "w", nx=True) is None
    assert r.set(a, "w", xx=True) is True
    assert r.set(n, "w", xx=True) is None
    assert r.type(a) == b"string"
    assert r.type(n) == b"none"
    assert r.echo("hi") == b"hi"


def test_redis_py_response_errors(r, key):
    r.set(key, "abc")
    with pytest.raises(redis.exceptions.ResponseError,
                       match="^value is not an integer or out of range$"):
        r.incr(key)
    with pytest.raises(redis.exceptions.ResponseError, match="^unknown command 'FOO'"):
        r.execute_command("FOO", "x")
    assert r.get(key) == b"abc"


def test_redis_py_transaction_pipeline(server, r, key):
    a, b, s = key + "a", key + "b", key + "s"
    r.set(s, "text")
    with r.pipeline(transaction=True) as p:
        p.set(a, 1).incr(a).incrby(b, 5).get(a).mget(a, b)
        assert p.execute() == [True, 2, 5, b"2", [b"2", b"5"]]
    # A runtime error inside EXEC: raise_on_error=False returns it in place.
    with r.pipeline(transaction=True) as p:
        p.incr(a).incr(s).incr(b)
        res = p.execute(raise_on_error=False)
        assert res[0] == 3 and res[2] == 6
        assert isinstance(res[1], redis.exceptions.ResponseError)
    with r.pipeline(transaction=True) as p:
        p.incr(a).incr(s)
        with pytest.raises(redis.exceptions.ResponseError):
            p.execute()
    assert r.get(a) == b"4"  # no rollback, as in Redis
    # A queue-time error aborts the whole block.
    with r.pipeline(transaction=True) as p:
        p.incr(a).execute_command("NOSUCHCOMMAND")
        with pytest.raises(redis.exceptions.ResponseError):
            p.execute()
    assert r.get(a) == b"4"


def test_redis_py_non_transaction_pipeline(r, key):
    with r.pipeline(transaction=False) as p:
        for i in range(200):
            p.set("%s%d" % (key, i), i)
        assert p.execute() == [True] * 200
    assert r.mget(["%s%d" % (key, i) for i in range(200)]) == [str(i).encode() for i in range(200)]


def test_redis_py_watch_retry(server, key):
    """The WATCH/retry idiom: the first EXEC loses to a concurrent write and
    raises WatchError; the retry succeeds on the new value."""
    c1, c2 = server.client(), server.client()
    try:
        c1.set(key, 10)
        attempts = 0
        with c1.pipeline() as p:
            while True:
                attempts += 1
                try:
                    p.watch(key)
                    cur = int(p.get(key))
                    if attempts == 1:
                        c2.incrby(key, 100)  # the conflicting write
                    p.multi()
                    p.set(key, cur + 1)
                    assert p.execute() == [True]
                    break
                except redis.WatchError:
                    assert attempts == 1, "retry failed again"
                    continue
        assert attempts == 2
        assert c1.get(key) == b"111"
        # The transaction() helper does the same loop.
        def incr(pipe):
            v = int(pipe.get(key))
            pipe.multi()
            pipe.set(key, v + 1)
        assert c1.transaction(incr, key) == [True]
        assert c1.get(key) == b"112"
    finally:
        c1.close()
        c2.close()


def test_redis_py_watch_threads(server, key):
    """Two threads with their own connections contend with WATCH; both
    finish and no increment is lost."""
    n, errors = 100, []

    def work():
        c = server.client()
        try:
            for _ in range(n):
                c.transaction(lambda p: (lambda v: (p.multi(), p.set(key, v + 1)))(
                    int(p.get(key) or 0)), key)
        except Exception as e:  # reported below
            errors.append(repr(e))
        finally:
            c.close()

    ts = [threading.Thread(target=work, daemon=True) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not errors
    assert server.client().get(key) == str(2 * n).encode()
