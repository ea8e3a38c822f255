"""Scenario tests of the 2PL protocols (cc/protocols/waitdie.c,
woundwait.c, nowait.c's shared mode) and the per-protocol INFO lines.

A transaction is held open with DEBUG SLEEP inside its MULTI: EXEC runs
the queued commands in one transaction (server/multi.c), so the sleep runs
inside it, on its coroutine, holding every lock it took before. Its age
is the timestamp of its first attempt (cc/exec.c cc_run: prio_ts, kept
across retries), so a MULTI whose EXEC started first is the older one,
whatever it does later. A retry reruns the whole MULTI, sleep included.

Each scenario asserts what its rule decides and what a client can see of
it: the INFO counters of the decision (cc_aborts_die, cc_lock_waits,
cc_wounds, the cc_proto_<id> line's aborts_<cause>) and the order in which
the transactions took effect (the final values). Removing the rule (the
protocol then behaves as nowait, or always waits, or always dies) changes
at least one of them.
"""

import time

import pytest
import redis

import rckvtest

pytestmark = pytest.mark.rckv_only

# Every protocol `CONFIG SET cc` offers (besides the testing-only `none`),
# and nowait's shared-lock mode, as (name, id in INFO, extra options).
PROTOCOLS = [
    ("nowait", "nowait", {"cc-lock-mode": "exclusive"}),
    ("nowait", "nowait_shared", {"cc-lock-mode": "shared"}),
    ("waitdie", "waitdie", {}),
    ("woundwait", "woundwait", {}),
    ("timestamp", "timestamp", {}),
    ("mvcc", "mvcc", {}),
    ("silo", "silo", {}),
    ("occ", "occ", {}),
    ("sundial", "sundial", {}),
    ("cicada", "cicada", {}),
    ("maat", "maat", {}),
]


Txn = rckvtest.MultiThread
begin = rckvtest.begin_multi


def cc_info(c, proto_id):
    """INFO cc: the node's counters and the cc_proto_<id> line (a dict)."""
    info = c.info("cc")
    line = info.get("cc_proto_" + proto_id)
    assert isinstance(line, dict), "INFO has no cc_proto_%s line: %r" % (
        proto_id, {k: v for k, v in info.items() if k.startswith("cc_proto_")})
    return info, line


def delta(after, before, *names):
    return [int(after[n]) - int(before[n]) for n in names]


def start(make_server, cc, **opts):
    o = {"cc": cc}
    o.update(opts)
    s = make_server(opts=o)
    with s.client() as c:
        assert c.config_get("cc") == {"cc": cc}
    return s


# ---------------------------------------------------------------- wait-die

def test_waitdie_younger_dies(make_server, key):
    """A (older) locks k and sleeps holding it. B, younger, writes k: the
    lock word names an older holder, so B dies (cause die) instead of
    waiting, and is retried until A is done; its write lands after A's.
    No one ever waits: the only conflict is a younger requester's."""
    s = start(make_server, "waitdie")
    k = key + "k"
    with s.client() as c:
        c.set(k, "v0")
        info0, line0 = cc_info(c, "waitdie")
        a = begin(s, c, [("SET", k, "A"), ("DEBUG", "SLEEP", 0.8)])
        time.sleep(0.1)
        t0 = time.monotonic()
        assert c.set(k, "B") is True, "the younger write failed instead of being retried"
        b_took = time.monotonic() - t0
        a.finish()
        info1, line1 = cc_info(c, "waitdie")

        assert c.get(k) == b"B", "the younger write did not land after the older one's"
        assert b_took > 0.3, "the younger write went through while the older held k"
        die, waits = delta(info1, info0, "cc_aborts_die", "cc_lock_waits")
        assert die >= 1, "the younger transaction never died (INFO cc_aborts_die)"
        assert delta(line1, line0, "aborts_die")[0] >= 1, \
            "no aborts_die on the cc_proto_waitdie line"
        assert waits == 0, "a younger transaction waited for an older one (%d waits)" % waits


def test_waitdie_older_waits(make_server, key):
    """A (older) starts first and sleeps; C, younger, then locks k and
    sleeps holding it; A wakes and writes k. The holder is younger, so A
    waits (INFO cc_lock_waits) and never dies; its write lands after C's.
    (A wait is bounded, CC_WAIT_MAX_MS: if C still holds k then, A aborts
    with cause lock and waits again on its retry, older still.)"""
    s = start(make_server, "waitdie")
    k = key + "k"
    with s.client() as c:
        c.set(k, "v0")
        info0, line0 = cc_info(c, "waitdie")
        a = begin(s, c, [("DEBUG", "SLEEP", 0.6), ("SET", k, "A")])
        cy = begin(s, c, [("SET", k, "C"), ("DEBUG", "SLEEP", 0.8)])
        cy.finish()
        a.finish()
        info1, line1 = cc_info(c, "waitdie")

        assert c.get(k) == b"A", "the older write did not land after the younger holder's"
        assert a.done_at >= cy.done_at - 0.05
        die, waits = delta(info1, info0, "cc_aborts_die", "cc_lock_waits")
        assert waits >= 1, "the older transaction never waited (INFO cc_lock_waits)"
        assert die == 0, "a transaction died although only an older one met a younger holder"
        assert delta(line1, line0, "aborts_die")[0] == 0
        assert delta(line1, line0, "commits")[0] >= 2


# -------------------------------------------------------------- wound-wait

def test_woundwait_older_wounds_holder(make_server, key):
    """O is older than Y; Y holds k when O wants it. O wounds Y (Atomic^T
    on Y's record: INFO cc_wounds) and waits; Y notices at its next step
    (a lock wait round), aborts (cause wounded) and releases k; O commits
    at once, long before Y could have finished; Y's retry, younger,
    waits for O and writes k after it.

    The ages: Z1 and Z2 start first and hold x and w, sleeping. O starts
    next and writes x: it waits for the older Z1 (each CC_WAIT_MAX_MS it
    aborts with cause lock and retries, keeping its age). Y starts last,
    locks k and then waits for w, which the older Z2 holds longer than
    Z1 holds x. When Z1 is done, O gets x and meets Y on k. (A holder
    that sleeps in its MULTI would notice the wound only at its commit,
    and its retry would lock k again and sleep on: the wait is the step
    that notices.) Without wounds O would wait for Y, which waits for Z2."""
    s = start(make_server, "woundwait")
    x, w, k = key + "x", key + "w", key + "k"
    with s.client() as c:
        c.mset({x: "x0", w: "w0", k: "k0"})
        info0, line0 = cc_info(c, "woundwait")
        z2 = begin(s, c, [("SET", w, "Z2"), ("DEBUG", "SLEEP", 2.0)])
        z1 = begin(s, c, [("SET", x, "Z1"), ("DEBUG", "SLEEP", 0.6)])
        o = begin(s, c, [("SET", x, "O"), ("SET", k, "O")])
        y = begin(s, c, [("SET", k, "Y"), ("SET", w, "Y")])
        for t in (z1, o, z2, y):
            t.finish()
        info1, line1 = cc_info(c, "woundwait")

        assert c.mget([x, k, w]) == [b"O", b"Y", b"Y"], \
            "O (older) did not commit before the holder it wounded (Y) wrote k again"
        assert o.done_at < z2.done_at - 0.5, \
            "O waited for the younger holder of k (which waited for Z2) instead of wounding it"
        wounds, wounded = delta(info1, info0, "cc_wounds", "cc_aborts_wounded")
        assert wounds >= 1, "O never wounded the younger holder (INFO cc_wounds)"
        assert wounded >= 1, "the wounded holder never aborted (INFO cc_aborts_wounded)"
        assert delta(line1, line0, "aborts_wounded")[0] >= 1, \
            "no aborts_wounded on the cc_proto_woundwait line"


# ------------------------------------------------------ nowait lock modes

def test_lock_mode_bad_value_is_refused(make_server):
    s = start(make_server, "nowait")
    with s.client() as c:
        with pytest.raises(redis.ResponseError,
                           match="cc-lock-mode.*must be one of the following: exclusive, shared"):
            c.config_set("cc-lock-mode", "sharde")
        assert c.config_get("cc-lock-mode") == {"cc-lock-mode": "exclusive"}
        assert c.info("cc")["cc_protocol"] == "nowait"


def test_lock_mode_switches_nowait(make_server, key):
    """CONFIG SET cc-lock-mode while cc is nowait switches the protocol to
    its shared variant (its own INFO line), CONFIG GET cc still says
    nowait; back to exclusive, back to nowait's line. Under another
    protocol it only sets the mode nowait will use."""
    s = start(make_server, "nowait")
    k = key + "k"
    with s.client() as c:
        def commits(proto_id):
            return int(cc_info(c, proto_id)[1]["commits"])

        c.set(k, "1")
        n0 = commits("nowait")
        assert c.config_set("cc-lock-mode", "shared")
        assert c.config_get("cc") == {"cc": "nowait"}
        assert c.config_get("cc-lock-mode") == {"cc-lock-mode": "shared"}
        for _ in range(5):
            c.incr(k)
        assert commits("nowait_shared") == 5
        assert commits("nowait") == n0
        assert c.config_set("cc-lock-mode", "exclusive")
        c.incr(k)
        assert commits("nowait") == n0 + 1
        assert commits("nowait_shared") == 5

        assert c.config_set("cc", "silo")
        assert c.config_set("cc-lock-mode", "shared")
        assert c.config_get("cc") == {"cc": "silo"}
        c.incr(k)
        assert commits("nowait_shared") == 5
        assert c.config_set("cc", "nowait")
        c.incr(k)
        assert commits("nowait_shared") == 6
        assert c.get(k) == b"9"


def test_shared_locks_let_readers_share(make_server, key):
    """A reader holds k in a sleeping read-only MULTI. In shared mode a
    second reader of k commits at once without an abort, while a writer
    of k aborts (cause lock) until the reader is done. In exclusive mode
    (the default) the second reader aborts too."""
    s = start(make_server, "nowait", **{"cc-lock-mode": "shared"})
    k = key + "k"
    with s.client() as c:
        c.set(k, "v0")

        def reader_meets_reader():
            info0 = c.info("cc")
            a = begin(s, c, [("GET", k), ("DEBUG", "SLEEP", 0.8)])
            time.sleep(0.1)
            t0 = time.monotonic()
            p = c.pipeline(transaction=True)
            p.get(k)
            assert p.execute() == [b"v0"]
            took = time.monotonic() - t0
            a_running = a.is_alive()
            assert a.finish() == [b"v0", b"OK"]
            info1 = c.info("cc")
            return took, a_running, delta(info1, info0, "cc_aborts_lock")[0]

        took, a_running, aborts = reader_meets_reader()
        assert aborts == 0, "a reader aborted on another reader's shared lock"
        assert a_running, "the second reader waited for the first to finish"
        assert took < 0.5

        # A writer meets the shared holder: it must not write under it.
        info0 = c.info("cc")
        a = begin(s, c, [("GET", k), ("DEBUG", "SLEEP", 0.8)])
        time.sleep(0.1)
        t0 = time.monotonic()
        assert c.set(k, "w") is True
        took = time.monotonic() - t0
        assert a.finish() == [b"v0", b"OK"], "the shared holder saw a write under its lock"
        assert took > 0.3, "a write went through while a reader held k shared"
        assert delta(c.info("cc"), info0, "cc_aborts_lock")[0] >= 1

        # The same two readers with exclusive locks: the second aborts.
        assert c.config_set("cc-lock-mode", "exclusive")
        c.set(k, "v0")
        took, a_running, aborts = reader_meets_reader()
        assert aborts >= 1, "exclusive mode: the second reader did not abort"
        assert took > 0.3


# -------------------------------------------------------------------- INFO

def small_load(c, prefix, n=20):
    """n MULTIs of reads and writes on a few keys, and n single INCRs."""
    for i in range(n):
        p = c.pipeline(transaction=True)
        p.get(prefix + "a")
        p.set(prefix + "b", str(i))
        p.incr(prefix + "n")
        p.execute()
        c.incr(prefix + "m")


def switch_to(c, name, opts):
    args = ["CONFIG", "SET", "cc", name]
    for k, v in opts.items():
        args += [k, v]
    assert c.execute_command(*args)


def test_info_has_a_line_per_protocol(make_server, key):
    """After a little load under each protocol, in turn (CONFIG SET cc),
    each has its own cc_proto_<id> line: its commits, aborts by cause,
    verbs and round trips per transaction; later load under other
    protocols is not added to it."""
    s = start(make_server, "silo")
    with s.client() as c:
        seen = {}
        for name, pid, opts in PROTOCOLS:
            switch_to(c, name, opts)
            assert c.config_get("cc") == {"cc": name}
            assert c.info("cc")["cc_protocol"] == name
            small_load(c, key + pid + ":")
            _, line = cc_info(c, pid)
            assert line["commits"] >= 40, (pid, line)
            assert line["errors"] == 0, (pid, line)
            for cause in ("lock", "validate", "stale", "other", "die", "wounded", "ts",
                          "version", "renew", "newer", "interval", "list_full"):
                assert "aborts_" + cause in line, (pid, cause, line)
            assert line["verbs_per_txn"] > 0, (pid, line)
            assert line["round_trips_per_txn"] > 0, (pid, line)
            seen[pid] = line["commits"]
        info = c.info("cc")
        for _, pid, _ in PROTOCOLS:
            assert info["cc_proto_" + pid]["commits"] == seen[pid], \
                "%s's commits grew under the protocols after it" % pid


def test_silo_one_key_writes_are_lean(make_server):
    # silo: INCR locks its key at the read (txn_hint_single_write) and a
    # one-node commit is records, install, retire, unlock: 2 round trips
    # and 6 verbs per INCR, 2 and 6 per blind SET too (INFO cc_proto_silo).
    # With a fabric delay, as on a network: only then does a worker keep
    # its own node's addresses in the address cache (a lookup there is
    # otherwise as cheap as the cache).
    s = start(make_server, "silo", **{"fabric-delay-us": 1})
    c = s.client()
    try:
        c.set("lean", 0)
        c.set("lean2", "v")  # both keys exist and their addresses are cached
        _, before = cc_info(c, "silo")
        for _ in range(50):
            c.incr("lean")
        for _ in range(50):
            c.set("lean2", "v")
        _, after = cc_info(c, "silo")
        assert int(c.get("lean")) == 50
        commits = int(after["commits"]) - int(before["commits"])
        assert commits == 100

        def per_txn(name):  # over these 100 transactions only
            total = lambda line: float(line[name]) * int(line["commits"])
            return (total(after) - total(before)) / commits

        assert per_txn("round_trips_per_txn") == pytest.approx(2.0, abs=0.05), after
        assert per_txn("verbs_per_txn") == pytest.approx(6.0, abs=0.05), after
    finally:
        c.close()


# ------------------------------------------------- reads of absent keys

def stats(c):
    st = c.info("stats")
    return {n: int(st[n]) for n in ("absent_key_reads", "txn_committed", "keyspace_misses",
                                    "keyspace_hits")}


@pytest.mark.parametrize("name,pid,opts", PROTOCOLS, ids=[p[1] for p in PROTOCOLS])
def test_absent_key_reads_need_no_transaction(make_server, key, name, pid, opts):
    """GET, STRLEN, TYPE and EXISTS of one absent key reply without a
    transaction (INFO absent_key_reads; txn_committed does not move),
    except under the timestamp-ordered protocols, whose reads must leave a
    read timestamp on a placeholder (cc.h reads_mark; maat: the reader's
    entry and rts). The answer is never
    stale: a key SET by another client is seen by the next GET, and a
    DELeted one is gone, under every protocol. In MULTI, with several
    keys, or with the key written earlier in the same pipeline, a read
    still runs as a transaction and sees what it must."""
    marks = name in ("timestamp", "mvcc", "sundial", "cicada", "maat")
    s = start(make_server, name, **opts)
    k = key + "k"
    w, r = s.client(), s.client()
    try:
        before = stats(r)
        assert r.get(k) is None
        assert r.strlen(k) == 0
        assert r.type(k) == b"none"
        assert r.exists(k) == 0
        after = stats(r)
        fast = 0 if marks else 4
        assert after["absent_key_reads"] - before["absent_key_reads"] == fast, after
        assert after["txn_committed"] - before["txn_committed"] == 4 - fast, after
        assert after["keyspace_misses"] - before["keyspace_misses"] == 4, after

        for i in range(60):
            assert w.set(k, "v%d" % i)
            assert r.get(k) == b"v%d" % i, i
            assert r.exists(k) == 1, i
            assert w.delete(k) == 1
            assert r.get(k) is None, i
            assert r.strlen(k) == 0, i

        before = stats(r)
        p = r.pipeline(transaction=True)
        p.get(k)
        p.exists(k)
        assert p.execute() == [None, 0]
        assert r.exists(k, k + "other") == 0
        after = stats(r)
        assert after["absent_key_reads"] == before["absent_key_reads"], after
        assert after["txn_committed"] - before["txn_committed"] == 2, after

        # SET then GET in one write: the SET commits before the GET looks.
        p = r.pipeline(transaction=False)
        p.set(k, "piped")
        p.get(k)
        assert p.execute() == [True, b"piped"]
    finally:
        w.close()
        r.close()
