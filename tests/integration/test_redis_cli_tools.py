"""redis-cli's operator modes run against the server without an error:
--bigkeys, --memkeys, --latency (one sampling round) and --stat.

Validated against redis-server 7.0 with RCKV_TEST_TARGET=redis.
"""

import subprocess

from rckvtest import HOST


def cli(server, *args, timeout=20):
    p = subprocess.run(["stdbuf", "-oL", "redis-cli", "-h", HOST, "-p", str(server.port)] +
                       list(args), capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def fill(r, key):
    for i in range(1, 6):
        r.call("SET", "%s%d" % (key, i), "x" * (i * 100))


def test_bigkeys_and_memkeys(server, raw, key):
    fill(raw, key)
    rc, out = cli(server, "--bigkeys")
    assert rc == 0 and "ERR" not in out, out
    assert "Biggest string found" in out and "strings with" in out
    rc, out = cli(server, "--memkeys")
    assert rc == 0 and "ERR" not in out, out
    assert "Biggest string found" in out and "bytes" in out


def test_latency_one_round(server):
    rc, out = cli(server, "--latency", "--raw", "-i", "0.5")
    assert rc == 0, out
    fields = out.split()
    # min max avg samples
    assert len(fields) == 4 and int(fields[3]) >= 5, out


def test_stat(server):
    try:
        p = subprocess.run(["timeout", "2", "stdbuf", "-oL", "redis-cli", "-h", HOST, "-p",
                            str(server.port), "--stat", "-i", "0.2"],
                           capture_output=True, text=True, timeout=20)
        out = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = str(e.stdout)
    lines = out.splitlines()
    assert lines[0].startswith("------- data ------"), out
    assert len([l for l in lines[2:] if l.split() and l.split()[0].isdigit()]) >= 3, out
    assert "ERR" not in out
