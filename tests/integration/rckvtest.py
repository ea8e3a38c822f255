"""Helpers for the black-box tests: start and stop servers, talk raw RESP.

Every server a test starts runs in its own process group on a free
loopback port with a fresh temporary directory, and is killed (SIGTERM,
then SIGKILL after a deadline) and its directory removed when the test
ends, when the interpreter exits (atexit) or both; nothing is left behind
even when a test fails half way.

RCKV_TEST_TARGET=redis runs the same tests against /usr/bin/redis-server so
that the expected replies, which must match Redis 7.0 byte for byte, can be
validated against the real thing. Tests that exercise rckv-only behaviour
are marked `rckv_only` and skipped in that mode (see conftest.py).
"""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TARGET = os.environ.get("RCKV_TEST_TARGET", "rckv").strip().lower() or "rckv"
REDIS_MODE = TARGET == "redis"
REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
HOST = "127.0.0.1"

# Debug and sanitizer builds create a 64 MB region and start slower than
# Redis; 30 s is a deadline for a hung start, not an expectation.
START_DEADLINE = 30.0
STOP_DEADLINE = 10.0

# Options Redis understands with the same meaning; every other option is
# rckv-specific and dropped in redis mode (tests that need them are rckv_only).
_SHARED_OPTS = {"requirepass", "maxclients", "timeout", "loglevel", "protected-mode",
                "client-output-buffer-limit",
                "proto-max-bulk-len", "client-query-buffer-limit"}


_PDEATHSIG = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []


def server_binary():
    """The binary under test: RCKV_SERVER (set by ctest) or build/rckv-server,
    as an absolute path: servers start in their temporary directory, where a
    path relative to the caller's directory names nothing."""
    if REDIS_MODE:
        return REDIS_SERVER
    return os.path.abspath(os.environ.get("RCKV_SERVER")
                           or os.path.join(REPO, "build", "rckv-server"))


def free_port():
    """A loopback TCP port that nobody listens on right now.

    Binding port 0 lets the kernel pick; the socket is closed before the
    server binds, so a race with another process is possible but rare, and
    the start fails loudly (the server exits) rather than silently.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


_live = set()
_live_lock = threading.Lock()


def _kill_all_at_exit():
    with _live_lock:
        servers = list(_live)
    for s in servers:
        try:
            s.cleanup()
        except Exception:
            pass


atexit.register(_kill_all_at_exit)


class ServerError(Exception):
    pass


class Server:
    """One rckv-server (or redis-server in redis mode) under test.

    opts: dict of option name -> value (str/int, or a list for several
    arguments), passed as `--name value`. conf: optional config file path
    passed first. The data directory (--dir) and the log live in a fresh
    temporary directory that cleanup() removes.
    """

    def __init__(self, opts=None, conf=None, port=None, name="rckv"):
        self.opts = dict(opts or {})
        self.conf = conf
        self.port = port or free_port()
        self.name = name
        self.tmp = tempfile.mkdtemp(prefix="rckv-test-")
        self.dir = os.path.join(self.tmp, "data")
        os.mkdir(self.dir)
        self.logpath = os.path.join(self.tmp, "server.log")
        self.proc = None
        self.starts = 0
        self._cleaned = False
        with _live_lock:
            _live.add(self)

    # --- command line -------------------------------------------------

    def argv(self):
        if REDIS_MODE:
            args = [server_binary()]
            if self.conf:
                args.append(self.conf)
            args += ["--port", str(self.port), "--bind", HOST, "--dir", self.dir,
                     "--save", "", "--appendonly", "no", "--daemonize", "no"]
            for k, v in self.opts.items():
                if k in _SHARED_OPTS:
                    args += ["--" + k] + _vals(v)
            return args
        args = [server_binary()]
        if self.conf:
            args.append(self.conf)
        # The production configuration, small: tests that want test-only
        # features pass {"testing": "yes"} themselves.
        base = {"port": self.port, "bind": HOST, "dir": self.dir,
                "memory": "64mb", "persistence": "process", "threads": 2}
        base.update(self.opts)
        for k, v in base.items():
            if v is None:
                continue
            args += ["--" + k] + _vals(v)
        return args

    # --- life cycle ---------------------------------------------------

    def start(self, wait=True):
        if self.proc is not None and self.proc.poll() is None:
            raise ServerError("server already running")
        binary = server_binary()
        if not os.access(binary, os.X_OK):
            raise ServerError("server binary not found or not executable: %s "
                              "(build first, or set RCKV_SERVER)" % binary)
        self.starts += 1
        log = open(self.logpath, "ab")
        log.write(("\n=== start %d: %s\n" % (self.starts, " ".join(self.argv()))).encode())
        log.flush()
        try:
            # Own session and process group: kill() reaches the server and
            # anything it forks, never the test runner. The parent-death
            # signal kills the server if the runner itself is SIGKILLed
            # (a ctest timeout) before its finalizers run; it fires when the
            # thread that started the server exits, so start servers from
            # the main thread (fixtures do).
            self.proc = subprocess.Popen(_PDEATHSIG + self.argv(), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.tmp, start_new_session=True)
        finally:
            log.close()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, deadline=START_DEADLINE):
        """Poll PING until the server answers (PONG, or NOAUTH when a
        password is set) or the deadline passes or the process exits."""
        end = time.monotonic() + deadline
        last = None
        while time.monotonic() < end:
            rc = self.proc.poll()
            if rc is not None:
                raise ServerError("server exited with status %s during start\n%s"
                                  % (rc, self.log_tail()))
            try:
                with socket.create_connection((HOST, self.port), timeout=1.0) as s:
                    s.settimeout(2.0)
                    s.sendall(b"*1\r\n$4\r\nPING\r\n")
                    data = s.recv(64)
                    if data.startswith(b"+PONG") or data.startswith(b"-NOAUTH"):
                        return
                    last = data
            except OSError as e:
                last = e
            time.sleep(0.05)
        raise ServerError("server did not answer PING within %.0f s (last: %r)\n%s"
                          % (deadline, last, self.log_tail()))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout=STOP_DEADLINE):
        """Wait for the process to exit by itself; return its status or
        raise ServerError (the process is then still running)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ServerError("server still running after %.0f s\n%s"
                              % (timeout, self.log_tail()))

    def stop(self, deadline=STOP_DEADLINE):
        """SIGTERM the process group, SIGKILL it after the deadline.
        Returns the exit status (None if it was not running)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            _killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                _killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=deadline)
        return self.proc.returncode

    def power_cut(self):
        """SIGKILL, and drop the region copy a cluster node's write-ahead
        log keeps in /dev/shm (Cluster.power_cut says why); no restart."""
        self.kill9()
        drop_region_copy(self.dir)

    def kill9(self):
        """SIGKILL, as a power cut of the process would; wait for it."""
        if self.proc is not None and self.proc.poll() is None:
            _killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=STOP_DEADLINE)

    def restart(self, opts=None, kill=False):
        """Stop (SIGTERM, or SIGKILL if kill) and start again on the same
        port and directory; opts, if given, are merged into the options."""
        if kill:
            self.kill9()
        else:
            self.stop()
        if opts:
            self.opts.update(opts)
        return self.start()

    def cleanup(self):
        """Stop the server and remove its directory. Returns the sanitizer
        reports found in its log (see sanitizer_reports), read before the
        log is removed, so that fixtures can fail the test on them."""
        if self._cleaned:
            return []
        reports = []
        try:
            self.stop()
            reports = self.sanitizer_reports()
        finally:
            self._cleaned = True
            shutil.rmtree(self.tmp, ignore_errors=True)
            with _live_lock:
                _live.discard(self)
        return reports

    _SANITIZER = ("runtime error:", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                  "WARNING: ThreadSanitizer", "ERROR: ThreadSanitizer")

    def sanitizer_reports(self, start=0):
        """Lines of the log (from byte offset start) where a sanitizer build
        reported a bug. UBSan reports and continues, and LeakSanitizer
        reports at exit, so without this a sanitizer build could pass."""
        try:
            with open(self.logpath, "rb") as f:
                f.seek(start)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        return [ln for ln in text.splitlines() if any(m in ln for m in self._SANITIZER)]

    def log_size(self):
        try:
            return os.path.getsize(self.logpath)
        except OSError:
            return 0

    def log_tail(self, n=60):
        try:
            with open(self.logpath, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return "(no log)"
        return "--- %s log (last %d lines) ---\n%s" % (self.name, n, "\n".join(lines[-n:]))

    # --- clients ------------------------------------------------------

    def client(self, **kw):
        """A redis-py client with bounded timeouts."""
        import redis
        kw.setdefault("socket_timeout", 20)
        kw.setdefault("socket_connect_timeout", 5)
        return redis.Redis(host=HOST, port=self.port, **kw)

    def raw(self, timeout=10.0):
        return RawConn(self.port, timeout=timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()


def _vals(v):
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    return [str(v)]


def _killpg(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# --- raw RESP ----------------------------------------------------------

class Error(str):
    """An error reply (the text without the leading '-')."""


def encode(*args):
    """A RESP array of bulk strings (the form clients send)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Closed(Exception):
    pass


class RawConn:
    """A socket that speaks RESP byte for byte, for exact-reply checks."""

    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        try:
            b = self.sock.recv(65536)
        except ConnectionResetError:
            b = b""
        if not b:
            raise Closed("connection closed by server (pending %r)" % self.buf[:200])
        self.buf += b

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i + 2], self.buf[i + 2:]
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_raw(self):
        """The bytes of exactly one complete reply (RESP2 or RESP3)."""
        line = self._line()
        t = line[:1]
        if t in b"$=!":
            n = int(line[1:-2])
            return line if n < 0 else line + self._exact(n + 2)
        if t in b"*~>%|":
            n = int(line[1:-2])
            if n < 0:
                return line
            if t in b"%|":
                n *= 2
            return line + b"".join(self.read_raw() for _ in range(n))
        return line  # + - : _ , # (

    def read(self):
        return parse(self.read_raw())

    def call_raw(self, *args):
        """Send one command (array of bulk strings), return the raw reply."""
        self.send(encode(*args))
        return self.read_raw()

    def call(self, *args):
        self.send(encode(*args))
        return self.read()

    def expect_closed(self, timeout=3.0):
        """True if the server closes the connection within timeout (after
        any bytes already in flight); False if it is still open."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                b = self.sock.recv(65536)
            except socket.timeout:
                return False
            except ConnectionResetError:
                return True
            if not b:
                return True
            self.buf += b


def parse(raw):
    """Parse one reply's bytes: bulk -> bytes, simple -> str, error -> Error,
    integer -> int, null -> None, array -> list."""
    val, rest = _parse(raw)
    assert rest == b"", rest
    return val


def _parse(b):
    i = b.index(b"\r\n")
    t, body, rest = b[:1], b[1:i], b[i + 2:]
    if t == b"+":
        return body.decode(), rest
    if t == b"-":
        return Error(body.decode("utf-8", "replace")), rest
    if t == b":":
        return int(body), rest
    if t == b"_":
        return None, rest
    if t == b",":
        return float(body), rest
    if t == b"#":
        return body == b"t", rest
    if t in b"$=!":
        n = int(body)
        if n < 0:
            return None, rest
        return rest[:n], rest[n + 2:]
    if t in b"*~>%|":
        n = int(body)
        if n < 0:
            return None, rest
        if t in b"%|":
            n *= 2
        out = []
        for _ in range(n):
            v, rest = _parse(rest)
            out.append(v)
        return out, rest
    raise ValueError("bad reply %r" % b[:50])


# --- subprocesses with bounds -------------------------------------------

class UntilDeath:
    """Client threads that run until the server dies under them (a power
    cut, a kill -9): a subclass fills `threads`, and `errors` with what
    its clients saw wrong; join() waits for them once the server is gone."""

    def __init__(self):
        self.threads = []
        self.errors = []
        self.lock = threading.Lock()

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        for t in self.threads:
            t.join(timeout=20)
            assert not t.is_alive(), "a client did not notice the server died"
        assert not self.errors, self.errors[:5]

    def run_until_death(self, server, seconds):
        """Start; wait for the server to die (a power-sim cut point) for
        up to `seconds`, kill -9 it if it has not; join. True when it had
        to be killed."""
        self.start()
        deadline = time.monotonic() + seconds
        while server.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        killed = server.alive()
        if killed:
            server.kill9()
        self.join()
        return killed


class MultiThread(threading.Thread):
    """One MULTI ... EXEC on its own connection, in a thread (protocol
    scenario tests hold a transaction open with DEBUG SLEEP inside it);
    keeps the reply, or the exception, and when it arrived."""

    def __init__(self, server, commands):
        super().__init__(daemon=True)
        self.client = server.client()
        self.id = self.client.client_id()
        self.commands = commands
        self.reply = None
        self.error = None
        self.done_at = None

    def run(self):
        try:
            p = self.client.pipeline(transaction=True)
            for cmd in self.commands:
                p.execute_command(*cmd)
            self.reply = p.execute()
        except Exception as e:  # reported by finish()
            self.error = e
        finally:
            self.done_at = time.monotonic()
            self.client.close()

    def finish(self, timeout=30):
        self.join(timeout)
        assert not self.is_alive(), "transaction %r did not finish" % (self.commands,)
        assert self.error is None, "%r failed: %r" % (self.commands, self.error)
        return self.reply


def begin_multi(server, admin, commands):
    """Start a MULTI in a thread and return once its EXEC runs on the
    server (CLIENT LIST shows cmd=exec for its connection): the
    transaction has begun, and its commands before a DEBUG SLEEP take
    microseconds."""
    t = MultiThread(server, commands)
    t.start()
    deadline = time.monotonic() + 10
    while True:
        mine = [c for c in admin.client_list() if int(c["id"]) == t.id]
        if mine and mine[0]["cmd"] == "exec":
            return t
        assert t.is_alive() or t.error is None, t.error
        assert time.monotonic() < deadline, "EXEC of %r never started" % (commands,)
        time.sleep(0.005)


def run(argv, timeout=30, input=None, env=None):
    """Run a client program in its own process group with a deadline; on
    timeout kill the whole group and raise. Returns CompletedProcess with
    text stdout/stderr."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, env=env)
    try:
        out, err = p.communicate(input=input.encode() if isinstance(input, str) else input,
                                 timeout=timeout)
    except subprocess.TimeoutExpired:
        _killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise AssertionError("%s timed out after %s s\nstdout: %s\nstderr: %s"
                             % (argv, timeout, out[-2000:], err[-2000:]))
    finally:
        if p.poll() is None:
            _killpg(p.pid, signal.SIGKILL)
            p.wait()
    return subprocess.CompletedProcess(argv, p.returncode,
                                       out.decode("utf-8", "replace"),
                                       err.decode("utf-8", "replace"))


def drop_region_copy(data_dir):
    """Remove the /dev/shm copies of the regions whose dir is data_dir
    (persistence power's stable copy, named by a hash of the dir; its .dir
    file names the dir): the memory a power cut would lose."""
    want = os.path.realpath(data_dir)
    for name in os.listdir("/dev/shm"):
        if not (name.startswith("rckv-wal-") and name.endswith(".dir")):
            continue
        path = os.path.join("/dev/shm", name)
        try:
            with open(path) as f:
                if f.read().strip() != want:
                    continue
        except OSError:
            continue
        for ext in (".region", ".journal"):
            try:
                os.unlink(path[:-4] + ext)
            except OSError:
                pass
