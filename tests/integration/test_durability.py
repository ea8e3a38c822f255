"""Durability of one node's MemStore, seen from outside (rckv only):

- a region file the node must not use (made by another cluster, for
  another memory size, truncated, or not a region at all) stops the server
  at start with a non-zero status and a message naming the file and the
  reason, and the file is left byte for byte as it was;
- a full MemStore (standalone, the smallest `memory`) refuses new data with
  an OOM error of its own (the MemStore is full) and keeps serving and keeping what it holds; DEL makes
  room again;
- kill -9 at random moments while clients run MSET and MULTI/INCR: after
  each restart no transaction is half there, no acknowledged write is
  lost, and INFO persistence reports the unclean stop and what recovery did
  (the same numbers as the recovery log line);
- kill -9 while MULTIs hold item locks (nowait, a slowed fabric): the
  restart releases them and INFO recovered_locks_released counts them, and
  the keys take writes again;
- persistence none keeps nothing across a restart, and says so.

test_restart.py covers restarts between commands, test_cluster_limits.py
the full MemStore of a cluster node.
"""

import hashlib
import os
import random
import re
import threading
import time

import pytest

import rckvtest
from cluster import Cluster
from rckvtest import Closed

pytestmark = pytest.mark.rckv_only

OK = b"+OK\r\n"
# A full MemStore's refusal: Redis's OOM code, its own text (maxmemory's is
# "OOM command not allowed when used memory > 'maxmemory'.", test_memory.py).
OOM = (b"-OOM command not allowed: the MemStore is full (the region's 'memory' holds no "
       b"free block for it)\r\n")
MEM = "16mb"                  # the smallest region: quick to hash and to fill
REFUSE_DEADLINE = 15          # a refused start that takes longer is a hang


def bulk(v):
    v = v.encode() if isinstance(v, str) else v
    return b"$%d\r\n%s\r\n" % (len(v), v)


def info(server, section):
    """INFO <section> as a dict of str -> str."""
    with server.raw() as c:
        text = c.call("INFO", section).decode()
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def file_state(path):
    with open(path, "rb") as f:
        return os.path.getsize(path), hashlib.sha256(f.read()).hexdigest()


# --- region files the node must refuse ------------------------------------

def make_region(make_server, **opts):
    """Start a standalone node with `opts`, write a little, stop it cleanly:
    its data dir then holds a valid node-1.region."""
    o = {"memory": MEM}
    o.update(opts)
    s = make_server(opts=o, name="maker")
    with s.raw() as c:
        assert c.call_raw("SET", "kept", "value") == OK
    assert s.stop() == 0, s.log_tail()
    return os.path.join(s.dir, "node-1.region")


def make_cluster_region(tag):
    """A 1-node cluster (its own cluster file, hence its own cluster id)
    makes node-1.region; returns (cluster, path), the cluster stopped."""
    cl = Cluster(n=1, fabric="shm", opts={"memory": MEM})
    cl.start()
    nd = cl.node(1)
    with nd.raw() as c:
        assert c.call_raw("SET", "kept", tag) == OK
    assert cl.stop() == [0], nd.log_tail()
    return cl, os.path.join(nd.dir, "node-1.region")


def refused_start(argv, path, reason):
    """Run the server with argv; it must exit non-zero by itself, and both
    stderr and its log (stdout here) must name `path` and match `reason`."""
    t0 = time.monotonic()
    res = rckvtest.run(argv, timeout=REFUSE_DEADLINE)
    took = time.monotonic() - t0
    assert res.returncode not in (0, None), \
        "server started on a bad region (status %s)\n%s" % (res.returncode, res.stdout[-2000:])
    for where, text in (("stderr", res.stderr), ("log", res.stdout)):
        assert path in text, "%s does not name %s:\n%s" % (where, path, text)
        assert re.search(reason, text), "%s does not say %r:\n%s" % (where, reason, text)
    assert "Ready to accept" not in res.stdout
    return took


def standalone_argv(make_server, path, **opts):
    """The command line of a standalone node 1 on path's directory."""
    o = {"memory": MEM, "dir": os.path.dirname(path)}
    o.update(opts)
    return make_server(opts=o, start=False, name="victim").argv()


def test_region_of_another_cluster_is_refused(make_server):
    cl_a, path = make_cluster_region("A")
    cl_b = Cluster(n=1, fabric="shm", opts={"memory": MEM, "dir": os.path.dirname(path)})
    try:
        before = file_state(path)
        # A standalone node with the same dir and node id...
        refused_start(standalone_argv(make_server, path), path,
                      r"created for cluster \d+, this node is in cluster 0")
        assert file_state(path) == before
        # ... and node 1 of another cluster (other addresses, other id).
        refused_start(cl_b.node(1).argv(), path,
                      r"created for cluster \d+, this node is in cluster \d+")
        assert file_state(path) == before
        # The cluster that made it still opens it, with its data.
        cl_a.start()
        with cl_a.node(1).raw() as c:
            assert c.call_raw("GET", "kept") == bulk("A")
    finally:
        cl_b.cleanup()
        cl_a.cleanup()


def test_standalone_region_is_refused_by_a_cluster_node(make_server):
    path = make_region(make_server)
    before = file_state(path)
    cl = Cluster(n=1, fabric="shm", opts={"memory": MEM, "dir": os.path.dirname(path)})
    try:
        refused_start(cl.node(1).argv(), path,
                      r"created for cluster 0, this node is in cluster \d+")
    finally:
        cl.cleanup()
    assert file_state(path) == before


def test_region_of_another_memory_size_is_refused(make_server):
    path = make_region(make_server)
    before = file_state(path)
    refused_start(standalone_argv(make_server, path, memory="32mb"), path,
                  r"region is 16777216 bytes, config says memory 33554432")
    assert file_state(path) == before


@pytest.mark.parametrize("damage", ["half", "header-only", "empty"])
def test_truncated_region_is_refused(make_server, damage):
    path = make_region(make_server)
    full = os.path.getsize(path)
    keep = {"half": full // 2, "header-only": 4096, "empty": 0}[damage]
    os.truncate(path, keep)
    before = file_state(path)
    assert before[0] == keep
    if damage == "empty":
        reason = r"truncated or not an rckv region \(file is 0 bytes\)"
    else:
        reason = r"truncated: file is %d bytes, its header says %d" % (keep, full)
    refused_start(standalone_argv(make_server, path), path, reason)
    assert file_state(path) == before


def test_garbage_region_is_refused(make_server):
    s = make_server(opts={"memory": MEM}, start=False, name="victim")
    path = os.path.join(s.dir, "node-1.region")
    with open(path, "wb") as f:
        f.write(random.Random(7).randbytes(16 << 20))   # the right size for 16mb
    before = file_state(path)
    refused_start(s.argv(), path, r"not an rckv region \(bad magic\)")
    assert file_state(path) == before
    # No stray temporary file (the lock file stays: it only holds a lock).
    assert sorted(os.listdir(s.dir)) == ["node-1.lock", "node-1.region"]


# --- a full MemStore on a standalone node ---------------------------------

FILL_VALUE = 6000   # fits one undo log slot of a 16mb region (DEL logs the old value)
FILL_MAX = 4000     # 24 MB of such values cannot fit in 16 MB


def fill_value(i):
    return (b"%07d:" % i) * (FILL_VALUE // 8)


def fill(c, prefix):
    """SET prefix<i> until the MemStore is full; return the values stored."""
    values = []
    for i in range(FILL_MAX):
        v = fill_value(i)
        reply = c.call_raw("SET", "%s%d" % (prefix, i), v)
        if reply != OK:
            assert reply == OOM, "after %d values: %r" % (len(values), reply)
            return values
        values.append(v)
    raise AssertionError("%d values of %d bytes fit in a %s MemStore"
                         % (FILL_MAX, FILL_VALUE, MEM))


def check_all(c, prefix, values, extra=0):
    for base in range(0, len(values), 100):
        keys = ["%s%d" % (prefix, i) for i in range(base, min(len(values), base + 100))]
        got = c.call("MGET", *keys)
        bad = [k for k, g, i in zip(keys, got, range(base, base + 100)) if g != values[i]]
        assert not bad, "%d keys lost or changed, first %s" % (len(bad), bad[:3])
    assert c.call("DBSIZE") == len(values) + extra


@pytest.mark.time_limit(90)
def test_full_memstore_standalone(make_server):
    s = make_server(opts={"memory": MEM})
    p = "full:"
    with s.raw(timeout=30) as c:
        assert c.call_raw("SET", "small", "before") == OK
        values = fill(c, p)
        assert len(values) >= 500, "full after only %d values" % len(values)
        n = len(values)

        # Everything stored reads back, by GET, MGET, EXISTS, STRLEN, DBSIZE.
        check_all(c, p, values, extra=1)
        for i in (0, n // 2, n - 1):
            assert c.call_raw("GET", "%s%d" % (p, i)) == bulk(values[i])
            assert c.call_raw("STRLEN", "%s%d" % (p, i)) == b":%d\r\n" % len(values[i])
        assert c.call_raw("EXISTS", p + "0", p + "1", p + "absent") == b":2\r\n"
        assert c.call_raw("GET", "small") == bulk("before")

        # New data of the full size class is refused, alone or in MSET,
        # and an MSET that fails writes none of its keys.
        big = b"n" * FILL_VALUE
        assert c.call_raw("SET", "new", big) == OOM
        assert c.call_raw("MSET", "m:small", "x", "m:big", big, "small", "changed") == OOM
        assert c.call("MGET", "m:small", "m:big", "small") == [None, None, b"before"]
        assert c.call_raw("EXISTS", "new", "m:small", "m:big") == b":0\r\n"
        # Overwriting a value in place needs no new block.
        values[3] = fill_value(10**6 + 3)
        assert c.call_raw("SET", p + "3", values[3]) == OK
        check_all(c, p, values, extra=1)

        # DEL makes room: as many new values fit as were deleted (the
        # freed blocks may come back after the deleting transaction is
        # retired, hence the short wait).
        # One key per DEL here (a DEL logs no value bytes, so one of many
        # keys fits its undo log slot: test_large_deletes_and_overwrites).
        for i in range(10, 20):
            assert c.call_raw("DEL", p + str(i)) == b":1\r\n"
        for i in range(10, 20):
            values[i] = None
        deadline = time.monotonic() + 5
        while c.call_raw("SET", "new", big) != OK:
            assert time.monotonic() < deadline, "SET still OOM after DEL of 10 values"
            time.sleep(0.05)
        for j in range(1, 10):
            assert c.call_raw("SET", "new%d" % j, big) == OK, j
        assert c.call_raw("SET", "one-too-many", big) == OOM
        assert c.call("DBSIZE") == n + 1
        for i, v in enumerate(values):
            assert c.call("GET", "%s%d" % (p, i)) == v, i

    # All of it survives a kill -9, still full.
    s.restart(kill=True)
    with s.raw(timeout=30) as c:
        for i, v in enumerate(values):
            assert c.call("GET", "%s%d" % (p, i)) == v, i
        assert c.call("MGET", "new", "new9", "small") == [big, big, b"before"]
        assert c.call_raw("SET", "one-too-many", big) == OOM
        assert c.call("DBSIZE") == n + 1


@pytest.mark.time_limit(30)
@pytest.mark.parametrize("case", ["one-512kb-value", "del-of-ten-6kb-values"])
def test_large_deletes_and_overwrites(make_server, case):
    """Any value SET accepts (up to max-value-bytes, 1mb) can later be
    overwritten and deleted, and any keys can be deleted together, whatever
    `memory` is."""
    s = make_server(opts={"memory": "64mb" if case == "one-512kb-value" else MEM})
    with s.raw(timeout=30) as c:
        if case == "one-512kb-value":
            big = b"b" * (512 * 1024)
            assert c.call_raw("SET", "big", big) == OK
            assert c.call_raw("SET", "big", b"c" * len(big)) == OK
            assert c.call_raw("DEL", "big") == b":1\r\n"
        else:
            keys = ["k%d" % i for i in range(10)]
            for k in keys:
                assert c.call_raw("SET", k, b"v" * FILL_VALUE) == OK
            assert c.call_raw("DEL", *keys) == b":10\r\n"


# --- kill -9 while transactions run ---------------------------------------

GROUPS = 4          # MSET writers, each with its own 20 keys
GROUP_KEYS = 20
INCR_WRITERS = 2    # MULTI / INCR x5 / EXEC writers on the same 5 keys
INCR_KEYS = 5
CYCLES = 5
PAD = b"." * 200    # bigger images: more undo bytes per transaction


def mset_value(n):
    return b"%d:" % n + PAD


RECOVERY_LINE = re.compile(
    r"MemStore was not closed cleanly: recovered in (\d+) ms \(undo log \d+ ms: "
    r"(\d+) transactions rolled back, (\d+) records undone, (\d+) committed ones "
    r"finished; scan \d+ ms: (\d+) locks released[^)]*\), (\d+) keys")


def group_keys(g):
    return ["grp%d:{k}%02d" % (g, i) for i in range(GROUP_KEYS)]


INCR = ["ctr:%d" % i for i in range(INCR_KEYS)]


class Writers(rckvtest.UntilDeath):
    """Client threads that run until the server dies under them. Per MSET
    group: `sent` is the last counter sent, `acked` the last acknowledged.
    For the INCR keys: `incr_acked` the highest value an EXEC returned."""

    def __init__(self, server, start_counter, start_incr):
        super().__init__()
        self.server = server
        self.sent = dict(start_counter)
        self.acked = dict(start_counter)
        self.incr_acked = start_incr
        self.threads = [threading.Thread(target=self._mset, args=(g,), daemon=True)
                        for g in range(GROUPS)]
        self.threads += [threading.Thread(target=self._incr, daemon=True)
                         for _ in range(INCR_WRITERS)]

    def _mset(self, g):
        keys = group_keys(g)
        try:
            with self.server.raw(timeout=20) as c:
                while True:
                    n = self.sent[g] + 1
                    self.sent[g] = n
                    val = mset_value(n)
                    args = []
                    for k in keys:
                        args += [k, val]
                    reply = c.call_raw("MSET", *args)
                    if reply != OK:
                        self.errors.append("MSET: %r" % reply)
                        return
                    self.acked[g] = n
        except (Closed, OSError):
            return

    def _incr(self):
        try:
            with self.server.raw(timeout=20) as c:
                while True:
                    c.send(b"".join([rckvtest.encode("MULTI")] +
                                    [rckvtest.encode("INCR", k) for k in INCR] +
                                    [rckvtest.encode("EXEC")]))
                    replies = [c.read() for _ in range(INCR_KEYS + 2)]
                    got = replies[-1]
                    if not isinstance(got, list) or len(set(got)) != 1:
                        self.errors.append("EXEC: %r" % (replies,))
                        return
                    with self.lock:
                        self.incr_acked = max(self.incr_acked, got[0])
        except (Closed, OSError):
            return


def recovery_line(server, start_offset):
    with open(server.logpath, "rb") as f:
        f.seek(start_offset)
        text = f.read().decode("utf-8", "replace")
    lines = RECOVERY_LINE.findall(text)
    assert len(lines) == 1, "expected one recovery line since the restart:\n%s" % text
    return [int(x) for x in lines[0]]


@pytest.mark.time_limit(120)
def test_kill9_never_leaves_half_a_transaction(make_server):
    """On one node a transaction's records, installs and commit mark go in
    one batch, so a kill seldom lands inside a commit (then recovery rolls
    it back): the checks hold whichever way each kill falls."""
    s = make_server(opts={"persistence": "process"})
    counter = {g: 0 for g in range(GROUPS)}
    incr = 0
    rng = random.Random()
    totals = [0, 0, 0, 0]
    for cycle in range(CYCLES):
        w = Writers(s, counter, incr)
        w.start()
        time.sleep(rng.uniform(0.2, 1.2))
        s.kill9()
        w.join()
        assert all(w.acked[g] > counter[g] for g in range(GROUPS)), \
            "cycle %d: a writer made no progress before the kill" % cycle
        offset = s.log_size()
        s.start()
        with s.raw(timeout=20) as c:
            for g in range(GROUPS):
                got = c.call("MGET", *group_keys(g))
                vals = set(got)
                assert len(vals) == 1, "cycle %d group %d: a mix of %s" % (cycle, g, sorted(
                    v.split(b":")[0] for v in vals if v))
                v = got[0]
                assert v is not None, "cycle %d group %d lost" % (cycle, g)
                n = int(v.split(b":")[0])
                assert v == mset_value(n), (cycle, g, v[:40])
                # Acknowledged: kept. Sent, not acknowledged: either way.
                assert w.acked[g] <= n <= w.sent[g], (cycle, g, w.acked[g], n, w.sent[g])
                counter[g] = w.sent[g]   # the next cycle writes above both
            got = c.call("MGET", *INCR)
            assert len(set(got)) == 1, "cycle %d: INCR keys differ: %r" % (cycle, got)
            incr = int(got[0])
            assert w.incr_acked <= incr <= w.incr_acked + INCR_WRITERS, (cycle, w.incr_acked, incr)
            dbsize = c.call("DBSIZE")
        assert dbsize == GROUPS * GROUP_KEYS + INCR_KEYS

        st = info(s, "persistence")
        ms, rolled, undone, committed, locks, keys = recovery_line(s, offset)
        assert st["persistence"] == "process"
        assert st["persistence_durable_on"] == "process crash"
        assert st["last_stop_clean"] == "0"
        assert int(st["recovered_keys"]) == keys == dbsize
        assert int(st["recovery_ms"]) == ms
        assert int(st["recovered_txns_rolled_back"]) == rolled
        assert int(st["recovered_records_undone"]) == undone
        assert int(st["recovered_txns_committed"]) == committed
        assert int(st["recovered_locks_released"]) == locks
        # No check that a rollback undid records: a kill inside the copy of
        # a slot's header and records leaves torn records, rolled back with
        # nothing to undo (the installs come after them; seen once under
        # CI load). That nothing half-done survived is the MGET checks'.
        for i, x in enumerate((rolled, undone, committed, locks)):
            totals[i] += x

    # The server serves normally after all that, and a clean stop is
    # reported as one, with nothing to recover.
    with s.raw() as c:
        assert c.call_raw("SET", "after", "kills") == OK
    assert s.stop() == 0, s.log_tail()
    s.start()
    st = info(s, "persistence")
    assert st["last_stop_clean"] == "1"
    for f in ("recovery_ms", "recovered_txns_rolled_back", "recovered_records_undone",
              "recovered_txns_committed", "recovered_locks_released"):
        assert st[f] == "0", (f, st[f])
    with s.raw() as c:
        assert c.call_raw("GET", "after") == bulk("kills")
        assert c.call("MGET", *INCR) == [b"%d" % incr] * INCR_KEYS
    print("recovery over %d kills: %d rolled back, %d records undone, %d committed "
          "finished, %d locks released" % (CYCLES, *totals))


LOCK_CLIENTS = 4
LOCK_KEYS = 8           # per client: a MULTI of that many INCRs
LOCK_DELAY_US = 50000   # fabric-delay-us: 50 ms per round trip


@pytest.mark.time_limit(60)
def test_kill9_with_locks_held_counts_them(make_server):
    """kill -9 while transactions hold item locks: the restart releases
    them, INFO recovered_locks_released says how many (as the recovery log
    line does), nothing of the killed transactions is there, and the keys
    take writes again (a lock left held would abort every later write to
    its key). With nowait a MULTI's keys are locked by its fetch stage,
    the 8 INCRs' keys in one batch: with 50 ms round trips (3 on a cold
    address cache) they are locked about 150 ms into the EXEC, and the
    DEBUG SLEEP that ends the block holds them to 3 s: a kill at 600 ms
    finds every client's 8 locks, whatever the scheduling."""
    s = make_server(opts={"persistence": "process", "cc": "nowait"})
    keys = [["lk%d:%d" % (c, i) for i in range(LOCK_KEYS)] for c in range(LOCK_CLIENTS)]
    with s.raw(timeout=20) as c:
        args = []
        for k in sum(keys, []):
            args += [k, "0"]
        assert c.call_raw("MSET", *args) == OK
    assert s.stop() == 0, s.log_tail()
    s.opts.update({"fabric-delay-us": LOCK_DELAY_US})
    s.start()
    conns = [s.raw(timeout=20) for _ in range(LOCK_CLIENTS)]
    try:
        for c, ks in zip(conns, keys):
            c.send(b"".join([rckvtest.encode("MULTI")] +
                            [rckvtest.encode("INCR", k) for k in ks] +
                            [rckvtest.encode("DEBUG", "SLEEP", "3")]))
            assert [c.read() for _ in range(LOCK_KEYS + 2)] == ["OK"] + ["QUEUED"] * (LOCK_KEYS + 1)
        for c in conns:
            c.send(rckvtest.encode("EXEC"))
        time.sleep(0.6)
        s.kill9()
    finally:
        for c in conns:
            c.close()
    offset = s.log_size()
    s.opts.update({"fabric-delay-us": 0})
    s.start()
    ms, rolled, undone, committed, locks, nkeys = recovery_line(s, offset)
    st = info(s, "persistence")
    assert st["last_stop_clean"] == "0"
    assert int(st["recovered_locks_released"]) == locks
    assert locks > 0, "killed with transactions holding locks, none released:\n" + s.log_tail(5)
    assert nkeys == LOCK_CLIENTS * LOCK_KEYS
    print("%d locks released" % locks)
    with s.raw(timeout=20) as c:
        for ks in keys:
            assert c.call("MGET", *ks) == [b"0"] * LOCK_KEYS, "a killed MULTI left a trace"
            c.send(b"".join([rckvtest.encode("MULTI")] +
                            [rckvtest.encode("INCR", k) for k in ks] +
                            [rckvtest.encode("EXEC")]))
            got = [c.read() for _ in range(LOCK_KEYS + 2)][-1]
            assert got == [1] * LOCK_KEYS, "keys still locked after recovery: %r" % (got,)


# --- persistence none -----------------------------------------------------

@pytest.mark.time_limit(60)
@pytest.mark.parametrize("how", ["shutdown", "kill9"])
def test_persistence_none_keeps_nothing(make_server, how):
    s = make_server(opts={"persistence": "none"})
    st = info(s, "persistence")
    assert st["persistence"] == "none"
    assert st["persistence_durable_on"] == "nothing (lost at exit)"
    with s.raw() as c:
        assert c.call_raw("MSET", "a", "1", "b", "2") == OK
        assert c.call_raw("DBSIZE") == b":2\r\n"
    assert os.listdir(s.dir) == []            # no region file in dir
    old_pid = s.proc.pid
    shm = "/dev/shm/rckv-%d-node-1.region" % old_pid
    assert os.path.exists(shm)
    s.restart(kill=(how == "kill9"))
    with s.raw() as c:
        assert c.call_raw("DBSIZE") == b":0\r\n"
        assert c.call_raw("MGET", "a", "b") == b"*2\r\n$-1\r\n$-1\r\n"
    # The old process's shared memory is gone: removed at a clean stop,
    # swept by the next start after a kill.
    assert not os.path.exists(shm)
    st = info(s, "persistence")
    assert st["persistence"] == "none"
    assert st["recovered_keys"] == "0"
