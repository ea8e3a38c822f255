"""Cluster startup with a node missing, on the shm and the tcp fabric: the
nodes that are up wait for it, say so in their logs every 2 s, do not
serve clients yet and do not crash; once it starts, all three become
ready and serve a transaction that spans them. A node that is told to
stop while it waits exits cleanly.

rckv only (skipped with RCKV_TEST_TARGET=redis).
"""

import re
import socket
import time

import pytest

from cluster import fabric, make_cluster  # noqa: F401 (fixtures)
from rckvtest import HOST, encode

pytestmark = pytest.mark.rckv_only

WAIT_LOGGED = 10.0   # seconds: a deadline; the nodes log within ~0 s and every 2 s
STILL_WAITING = 4.5  # seconds the missing node stays missing


def answers_ping(port):
    """True if something at port answers PING within a second. A node that
    waits for its peers may accept connections without serving them."""
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as s:
            s.settimeout(1.0)
            s.sendall(encode("PING"))
            return s.recv(64).startswith(b"+PONG")
    except OSError:  # refused, reset or timed out
        return False


def wait_for(pred, deadline):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


@pytest.mark.time_limit(60)
@pytest.mark.parametrize("missing", [3, 1])
def test_missing_node_at_startup(make_cluster, fabric, missing):
    cl = make_cluster(fabric, start=False)
    up = [i for i in (1, 2, 3) if i != missing]
    gone = cl.node(missing)
    started = time.monotonic()
    cl.start(ids=up, wait=False)
    waiting = re.compile(r"waiting for node %d at 127\.0\.0\.1:%d \(\d+ s\)"
                         % (missing, gone.fabric_port))
    for i in up:
        nd = cl.node(i)
        assert wait_for(lambda: waiting.search(nd.log_text()), WAIT_LOGGED), \
            "node %d did not log that it waits for node %d\n%s" % (i, missing, nd.log_tail())

    time.sleep(max(0.0, STILL_WAITING - (time.monotonic() - started)))
    for i in up:
        nd = cl.node(i)
        assert nd.alive(), "node %d exited while waiting\n%s" % (i, nd.log_tail())
        assert not nd.logged_ready(), nd.log_tail()
        assert not answers_ping(nd.port), "node %d serves clients without node %d" % (i, missing)
        # It keeps saying so (every 2 s).
        assert len(waiting.findall(nd.log_text())) >= 2, nd.log_tail()

    cl.start(ids=[missing])
    cl.wait_ready()
    for i in (1, 2, 3):
        assert cl.node(i).alive()
    keys = {i: cl.key_on(i, "k%d:" % i) for i in (1, 2, 3)}
    for via in (1, 2, 3):
        with cl.raw(via) as c:
            assert c.call_raw("MULTI") == b"+OK\r\n"
            for i in (1, 2, 3):
                assert c.call_raw("INCR", keys[i]) == b"+QUEUED\r\n"
            assert c.call_raw("MGET", keys[1], keys[2], keys[3]) == b"+QUEUED\r\n"
            v = b"$1\r\n%d\r\n" % via
            assert c.call_raw("EXEC") == b"*4\r\n" + b":%d\r\n" % via * 3 + b"*3\r\n" + v * 3


@pytest.mark.time_limit(60)
def test_waiting_node_stops_on_sigterm(make_cluster, fabric):
    cl = make_cluster(fabric, start=False)
    nd = cl.node(2)
    cl.start(ids=[2], wait=False)
    assert wait_for(lambda: "waiting for node" in nd.log_text(), WAIT_LOGGED), nd.log_tail()
    status = cl.stop(ids=[2])[0]
    # Its own exit, not rckvtest's SIGKILL after the deadline, nor a crash.
    assert status is not None and status >= 0, "status %s\n%s" % (status, nd.log_tail())
    assert "waiting for node" in nd.log_text()


@pytest.mark.time_limit(60)
@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_restarted_node_rejoins(make_cluster, fabric, how):
    """A node that stops (SIGTERM) or dies (kill -9) and starts again joins
    the running others: every node then reads and writes keys on every
    node, and the data written before is there."""
    cl = make_cluster(fabric)
    keys = {i: cl.key_on(i, "k%d:" % i) for i in (1, 2, 3)}
    with cl.raw(1) as c:
        assert c.call_raw("MSET", keys[1], "a", keys[2], "b", keys[3], "c") == b"+OK\r\n"
    nd = cl.node(2)
    if how == "kill9":
        nd.kill9()
    else:
        nd.stop()
    nd.start()
    assert cl.alive()
    bad = []
    for via in (1, 2, 3):
        with cl.raw(via) as c:
            got = c.call_raw("MGET", keys[1], keys[2], keys[3])
            if got != b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n":
                bad.append("via node %d: MGET -> %r" % (via, got))
            c.send(encode("MULTI") + b"".join(encode("INCR", keys[i] + "n") for i in (1, 2, 3)) +
                   encode("EXEC"))
            replies = [c.read_raw() for _ in range(4)]
            ex = c.read_raw()
            n = b":%d\r\n" % via
            if ex != b"*3\r\n" + n * 3:
                bad.append("via node %d: MULTI INCR x3 -> %r %r" % (via, replies, ex))
    assert not bad, "after node 2 restarted (%s):\n%s" % (how, "\n".join(bad))
