"""Scenario tests of the cicada protocol (RDMA-Cicada, RCBench Algorithm 11,
cc/protocols/cicada.c).

Cicada's defining rule: a transaction reads, for every item, the newest
version older than its begin timestamp bts, whatever newer versions exist,
committed (CM) or pending (RN); it waits only when the version it must read
is pending. An older reader R is held open with DEBUG SLEEP inside its
MULTI: the sleep runs inside the transaction, on its coroutine, after it
took its bts (when EXEC starts), and before its GET reads (a MULTI of one
key has no fetch stage: the GET reads after the sleep).

A writer's version is pending (RN) from its install, at validation, to the
CAS that flips it to CM after the commit point: inside one commit, which
DEBUG SLEEP cannot hold open (the queued commands run before the commit
starts). `fabric-delay-us` can: it adds its delay after every round trip
has taken effect (rdma/fab.c exec_done), so with a delay D a plain SET
installs its RN version one round trip into its commit (the latch is the
first) and flips it one D later: the version is pending for D seconds, at a
known time. D is long (0.8 s) so that a loaded machine still hits the
window.
"""

import threading
import time

import pytest

import rckvtest

pytestmark = pytest.mark.rckv_only

# The older reader's pause, without fabric delay: the writers run in it.
HOLD_S = 0.8
# The fabric delay of the pending-version tests, and when in a SET's
# commit (from its start) its version is pending: [D, 2 D].
DELAY_S = 0.6


def start(make_server, cc="cicada", **opts):
    s = make_server(opts=dict({"cc": cc}, **opts))
    with s.client() as c:
        assert c.config_get("cc") == {"cc": cc}
    return s


def counters(c, proto="cicada"):
    info = c.info()
    line = info.get("cc_proto_" + proto)
    assert isinstance(line, dict), "INFO has no cc_proto_%s line" % proto
    return {"aborts": int(info["cc_aborts"]), "waits": int(info["cc_lock_waits"]),
            "newer": int(line.get("aborts_newer", 0)), "commits": int(line["commits"])}


def start_running(c, commands, server):
    """Start a MULTI on its own connection; return once its EXEC runs."""
    return rckvtest.begin_multi(server, c, commands)


@pytest.mark.parametrize("cc", ["cicada", "silo"])
def test_older_reader_reads_the_version_before_its_timestamp(make_server, key, cc):
    """R begins (its bts), sleeps, then reads x. Meanwhile two younger
    writers commit x=v1 and x=v2. Under cicada R reads v0, the newest
    version older than its bts, kept in x's version slots, and commits
    with it at the first attempt: its validation finds the proper version
    for its bts unchanged. Silo, single-version, as control: R reads v2."""
    s = start(make_server, cc)
    x = key + "x"
    with s.client() as c:
        c.set(x, "v0")
        before = counters(c, cc)
        r = start_running(c, [("DEBUG", "SLEEP", HOLD_S), ("GET", x)], s)
        time.sleep(0.1)
        assert c.set(x, "v1")
        assert c.set(x, "v2")
        reply = r.finish()
        after = counters(c, cc)
        assert c.get(x) == b"v2"

    if cc == "silo":
        assert reply == [b"OK", b"v2"], reply
        return
    assert reply == [b"OK", b"v0"], (
        "the older reader did not read the version before its timestamp: %r" % (reply,))
    assert after["aborts"] == before["aborts"], "a transaction aborted"


class Writer(threading.Thread):
    """SET k v on a connection of its own, opened (and PINGed) before go():
    the SET leaves at once, and `sent` says when."""

    def __init__(self, server, k, v):
        super().__init__(daemon=True)
        self.server, self.k, self.v = server, k, v
        self.ready, self.start_set = threading.Event(), threading.Event()
        self.sent = self.reply = None

    def run(self):
        with self.server.client() as c:
            c.ping()
            self.ready.set()
            self.start_set.wait(30)
            self.sent = time.monotonic()
            self.reply = c.set(self.k, self.v)

    def go(self):
        self.start()
        assert self.ready.wait(30), "the writer's connection never opened"
        self.start_set.set()

    def finish(self):
        self.join(30)
        assert not self.is_alive() and self.reply is True, self.reply


def test_older_reader_passes_a_pending_version(make_server, key):
    """R (older) sleeps 1.5 D inside its MULTI; right after R began, W
    (younger) runs SET x v1, whose version is pending (RN) from D to 2 D
    into its commit. R's GET reads x inside that window: the newest version
    is W's RN one, newer than R's bts, so R reads v0 at once, without
    waiting for W (no cc_lock_waits), and commits with it, no abort."""
    s = start(make_server, **{"fabric-delay-us": int(DELAY_S * 1e6), "threads": 1})
    x = key + "x"
    with s.client() as c:
        c.set(x, "v0")
        assert c.get(x) == b"v0"  # x's address is cached for what follows
        before = counters(c)
        w = Writer(s, x, "v1")
        r = start_running(c, [("DEBUG", "SLEEP", 1.5 * DELAY_S), ("GET", x)], s)
        w.go()
        reply = r.finish()
        w.finish()
        after = counters(c)
        assert c.get(x) == b"v1"

    assert reply == [b"OK", b"v0"], (
        "the older reader did not pass the pending version of a younger writer: %r"
        % (reply,))
    assert after["waits"] == before["waits"], \
        "the older reader waited for a younger writer's pending version"
    assert after["aborts"] == before["aborts"], "a transaction aborted"


def test_younger_reader_waits_for_a_pending_version(make_server, key):
    """The other half of the rule: Y, which begins inside W's pending window
    (1.5 D into W's commit) with a bts after W's, must read W's version,
    which is RN: it waits (INFO cc_lock_waits) until W flips it to CM, and
    reads v1."""
    s = start(make_server, **{"fabric-delay-us": int(DELAY_S * 1e6), "threads": 1})
    x = key + "x"
    with s.client() as c:
        c.set(x, "v0")
        assert c.get(x) == b"v0"
        before = counters(c)
        w = Writer(s, x, "v1")
        w.go()
        deadline = time.monotonic() + 10
        while w.sent is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert w.sent is not None, "the writer's SET never left"
        time.sleep(max(0.0, w.sent + 1.5 * DELAY_S - time.monotonic()))
        assert c.get(x) == b"v1", "the younger reader did not read the pending version"
        w.finish()
        after = counters(c)

    assert after["waits"] > before["waits"], \
        "the younger reader did not wait for the pending version (INFO cc_lock_waits)"


def test_write_after_a_newer_version_aborts_with_cause_newer(make_server, key):
    """T (older) sleeps, then GETSETs x; a younger W commits x=v1 during the
    sleep. T's read returns v0, the version before its bts, but its write
    would be installed behind v1, newer than T (Algorithm 11 line 10): T
    aborts with cause newer (INFO cc_aborts_newer and the cc_proto_cicada
    line's aborts_newer), and its retry, with a new bts, reads v1."""
    s = start(make_server)
    x = key + "x"
    with s.client() as c:
        c.set(x, "v0")
        before = counters(c)
        t = start_running(c, [("DEBUG", "SLEEP", HOLD_S), ("GETSET", x, "T")], s)
        time.sleep(0.1)
        assert c.set(x, "v1")
        reply = t.finish()
        after = counters(c)
        assert int(c.info()["cc_aborts_newer"]) >= 1
        assert c.get(x) == b"T"

    assert reply == [b"OK", b"v1"], reply
    assert after["newer"] - before["newer"] == 1, \
        "T did not abort once with cause newer (cc_proto_cicada aborts_newer)"
