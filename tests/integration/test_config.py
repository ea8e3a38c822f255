"""Configuration errors stop startup with a message that names the file,
the line and the reason (or the command-line option), and a non-zero exit
status. Good configuration files, the shipped conf/rckv.conf included,
start a working server."""

import glob
import os
import re
import shutil
import tempfile

import pytest

from rckvtest import REPO, Error, free_port, run, server_binary

pytestmark = pytest.mark.rckv_only


@pytest.fixture
def tmp():
    d = tempfile.mkdtemp(prefix="rckv-conf-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def refuse(tmp, args):
    """Run the server expecting it to refuse to start: it must exit non-zero
    on its own (run() kills it and fails the test if it starts serving).
    Always a free port and a temp dir, in case it does start."""
    safe = ["--port", str(free_port()), "--dir", tmp, "--memory", "16mb"]
    if args and not args[0].startswith("--"):   # the config file comes first
        argv = [server_binary(), args[0]] + safe + args[1:]
    else:
        argv = [server_binary()] + safe + args
    p = run(argv, timeout=15)
    out = p.stdout + p.stderr
    assert p.returncode != 0, "started despite a bad configuration:\n" + out
    assert p.returncode > 0, "crashed (signal %d) instead of exiting:\n%s" % (-p.returncode, out)
    return out


def write(tmp, text, name="bad.conf"):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def names_line(out, path, line):
    return re.search(re.escape(path) + r"(:|, line |: line | line | at line )%d\b" % line, out)


@pytest.mark.parametrize("text,line,words", [
    ("# rckv\nport 7000\nnosuchoption yes\n", 3, ["nosuchoption", "unknown"]),
    ("port abc\n", 1, ["port"]),
    ("\n\nport 70000\n", 3, ["port"]),
    ("threads 2\nmemory lots\n", 2, ["memory"]),
    ("persistence sometimes\n", 1, ["persistence"]),
    ("cc nosuchprotocol\n", 1, ["cc"]),
    ("loglevel loud\n", 1, ["loglevel"]),
    ("port\n", 1, ["port"]),
    ("testing maybe\n", 1, ["testing"]),
    ('requirepass "abc\n', 1, []),
], ids=["unknown-option", "port-text", "port-range", "memory", "persistence", "cc",
        "loglevel", "missing-argument", "bool", "unbalanced-quote"])
def test_config_file_error(tmp, text, line, words):
    path = write(tmp, text)
    out = refuse(tmp, [path])
    assert names_line(out, path, line), "no '%s:%d' in:\n%s" % (path, line, out)
    for w in words:
        assert w.lower() in out.lower(), "%r not in:\n%s" % (w, out)


def test_missing_config_file(tmp):
    path = os.path.join(tmp, "does-not-exist.conf")
    out = refuse(tmp, [path])
    assert path in out, out


@pytest.mark.parametrize("args,words", [
    (["--nosuchopt", "1"], ["nosuchopt"]),
    (["--port", "abc"], ["port"]),
    (["--port", "70000"], ["port"]),
    (["--memory", "lots"], ["memory"]),
    (["--persistence", "sometimes"], ["persistence"]),
    (["--cc", "nosuchprotocol"], ["cc"]),
    (["--threads", "many"], ["threads"]),
    (["--threads", "0"], ["threads"]),
], ids=["unknown", "port-text", "port-range", "memory", "persistence", "cc", "threads-text",
        "threads-zero"])
def test_command_line_error(tmp, args, words):
    out = refuse(tmp, args)
    for w in words:
        assert w in out, "%r not in:\n%s" % (w, out)


def test_threads_auto(make_server):
    # The default: one worker per online core but one, at least one. The
    # shipped file says "threads auto" too; an explicit number wins.
    want = max(1, (os.cpu_count() or 1) - 1)
    for opts, expect in (({"threads": None}, want), ({"threads": "auto"}, want),
                         ({"threads": "3"}, 3)):
        s = make_server(opts=opts)
        c = s.client()
        try:
            assert c.config_get("threads") == {"threads": str(expect)}, opts
            assert "(%d threads," % expect in s.log_tail(), s.log_tail()
            # Each worker is a thread of that name (top -H, perf).
            names = [open(os.path.join(t, "comm")).read().strip()
                     for t in glob.glob("/proc/%d/task/*" % s.proc.pid)]
            assert sorted(n for n in names if n.startswith("rckv-worker-")) == \
                ["rckv-worker-%d" % i for i in range(expect)], names
        finally:
            c.close()
            s.stop()


def test_config_file_is_used(make_server, tmp):
    # Quotes, units, comments; command-line options override the file.
    path = write(tmp, "# a comment\n\n  requirepass \"se cret\"\nmax-value-bytes 2kb\nport 1\n",
                 name="good.conf")
    s = make_server(conf=path)  # --port on the command line wins over "port 1"
    c = s.client(password="se cret")
    try:
        assert c.ping() is True
        assert c.config_get("port")["port"] == str(s.port)
        assert c.set("small", b"x" * 2048) is True
        with pytest.raises(Exception, match="max-value-bytes"):
            c.set("big", b"x" * 2049)
    finally:
        c.close()


def test_shipped_config_starts(make_server):
    conf = os.path.join(REPO, "conf", "rckv.conf")
    assert os.path.exists(conf), "conf/rckv.conf is missing"
    s = make_server(conf=conf)
    with s.raw() as c:
        assert c.call_raw("SET", "k", "v") == b"+OK\r\n"
        assert c.call_raw("GET", "k") == b"$1\r\nv\r\n"


def test_config_set_save_to_nothing(raw):
    """Test suites and tools turn snapshots off with CONFIG SET save "" (and
    appendonly no): rckv persists every commit itself, so that is what it
    does already and is accepted; asking for snapshots is refused."""
    assert raw.call("CONFIG", "SET", "save", "") == "OK"
    assert raw.call("CONFIG", "SET", "appendonly", "no") == "OK"
    assert raw.call("CONFIG", "GET", "save") == [b"save", b""]
    r = raw.call("CONFIG", "SET", "save", "900 1")
    assert isinstance(r, Error) and "'save' is not an rckv option" in r, r
