"""Lua scripts as distributed transactions (issue 19): the bank as a
script, and a script's error leaving nothing written.

One 3-node cluster on the shm fabric for the module. Four accounts live on
each node (hash tags placed with RCKV KEYNODE). A transfer is one EVAL (or
EVALSHA) of TRANSFER: it reads a source account, and if it covers the
amount, debits it and credits two accounts on the two other nodes; the
source and the first destination are declared in KEYS, the second
destination is undeclared (the script builds its name). An audit is one
script reading all twelve accounts, half of them undeclared, and
returning their sum. 12 clients, spread over the nodes, run transfers
(four in five) and audits for AUDIT_SECONDS under each protocol in turn
(CONFIG SET cc through rotating nodes, nowait's shared-lock mode too).

Checked per protocol: every audit returns the opening total; no client
gets an error reply (a CC abort reruns the script invisibly); at the end
no balance is negative and every balance is its opening one plus the
transfers the clients saw commit (a lost or partial transfer shows).

And per protocol, a script whose redis.call fails after its first write
(and one with a Lua error after its first writes) replies with the error
and leaves nothing written, on any node: rckv rolls back the whole script,
which Redis does not (DESIGN.md section 10). A redis.pcall-caught error
is Redis's: the script goes on and commits what it wrote.

rckv only (skipped with RCKV_TEST_TARGET=redis: Redis has no such cluster,
and keeps a failed script's earlier writes).
"""

import hashlib
import random
import re
import threading
import time

import pytest
import redis

from cluster import running_cluster, track_cluster  # noqa: F401 (fixture)
from rckvtest import REDIS_MODE

pytestmark = pytest.mark.rckv_only

PER_NODE = 4
BALANCE = 1000
CLIENTS = 12
AUDIT_RATIO = 0.2
# Load per protocol: about 11 of them (nowait's shared mode included).
LOAD_SECONDS = 2.0
SOCKET_TIMEOUT = 30.0  # a protocol switch pauses clients; never this long

# KEYS[1] pays ARGV[3] if it can: ARGV[4] of it to KEYS[2], the rest to
# the undeclared account '{ARGV[1]}:acct:ARGV[2]'. Replies {1, what
# KEYS[1] has left} or {0, its balance} when it cannot pay.
TRANSFER = """
local third = '{' .. ARGV[1] .. '}:acct:' .. ARGV[2]
local amount = tonumber(ARGV[3])
local part = tonumber(ARGV[4])
local bal = tonumber(redis.call('GET', KEYS[1]))
if bal < amount then
  return {0, bal}
end
redis.call('DECRBY', KEYS[1], amount)
redis.call('INCRBY', KEYS[2], part)
redis.call('INCRBY', third, amount - part)
return {1, bal - amount}
"""

# The sum of KEYS and of the accounts named in ARGV (undeclared), and how
# many were read.
AUDIT = """
local sum, n = 0, 0
for _, k in ipairs(KEYS) do
  sum = sum + tonumber(redis.call('GET', k))
  n = n + 1
end
for _, k in ipairs(ARGV) do
  sum = sum + tonumber(redis.call('GET', k))
  n = n + 1
end
return {sum, n}
"""

SHA = {s: hashlib.sha1(s.encode()).hexdigest() for s in (TRANSFER, AUDIT)}


@pytest.fixture(scope="module")
def cluster():
    if REDIS_MODE:
        pytest.skip("rckv cluster (RCKV_TEST_TARGET=redis)")
    with running_cluster("shm") as cl:
        yield cl


def protocols(c):
    """Every protocol the node offers (its reply to a bogus name), as
    CONFIG SET arguments; nowait also in shared-lock mode."""
    with pytest.raises(redis.ResponseError) as e:
        c.config_set("cc", "no-such-protocol")
    m = re.search(r"one of: ([^)]*)\)", str(e.value))
    assert m, "cannot read the protocol list from %r" % str(e.value)
    out = []
    for name in (n.strip() for n in m.group(1).split(",")):
        if name:
            out.append((name, "exclusive"))
            if name == "nowait":
                out.append((name, "shared"))
    return out


def tags(cl):
    """A hash tag owned by each of nodes 1, 2, 3."""
    out = {}
    with cl.raw(1) as c:
        i = 0
        while len(out) < 3:
            t = "sb%d" % i
            out.setdefault(c.call("RCKV", "KEYNODE", "{%s}" % t), t)
            i += 1
            assert i < 10000
    return [out[n] for n in (1, 2, 3)]


class Bank:
    def __init__(self, cl):
        self.cl = cl
        self.tags = tags(cl)
        # accounts[node index] = [(tag, i, key)]
        self.accounts = [[(t, i, "{%s}:acct:%d" % (t, i)) for i in range(PER_NODE)]
                         for t in self.tags]
        self.names = [a[2] for node in self.accounts for a in node]
        self.total = BALANCE * len(self.names)
        c = cl.client(1)
        try:
            c.mset({k: BALANCE for k in self.names})
            for nid in (1, 2, 3):
                with cl.client(nid) as cn:
                    for s in (TRANSFER, AUDIT):
                        assert cn.script_load(s) == SHA[s], "SCRIPT LOAD's sha1 differs"
        finally:
            c.close()
        self.expect = {k: BALANCE for k in self.names}

    def run(self, seconds):
        """CLIENTS threads of transfers and audits for `seconds`. Returns
        (stats, errors)."""
        stop = threading.Event()
        lock = threading.Lock()
        stats = {"transfers": 0, "refused": 0, "audits": 0}
        errors = []

        def client(idx):
            rnd = random.Random(idx * 7919 + int(time.time()))
            nid = idx % 3 + 1
            mine = {"transfers": 0, "refused": 0, "audits": 0}
            ledger = []
            try:
                with self.cl.client(nid, socket_timeout=SOCKET_TIMEOUT) as c:
                    while not stop.is_set():
                        if rnd.random() < AUDIT_RATIO:
                            self.audit(c, rnd, nid)
                            mine["audits"] += 1
                        elif self.transfer(c, rnd, ledger, nid):
                            mine["transfers"] += 1
                        else:
                            mine["refused"] += 1
            except Exception as e:  # an error reply, a bad reply, a broken link
                with lock:
                    errors.append("client %d (node %d): %s" % (idx, nid, e))
                stop.set()
            with lock:
                for k, v in mine.items():
                    stats[k] += v
                for src, d1, d2, amount, part in ledger:
                    self.expect[src] -= amount
                    self.expect[d1] += part
                    self.expect[d2] += amount - part

        threads = [threading.Thread(target=client, args=(i,), daemon=True)
                   for i in range(CLIENTS)]
        for t in threads:
            t.start()
        stop.wait(seconds)
        stop.set()
        for t in threads:
            t.join(SOCKET_TIMEOUT + 5)
        assert not any(t.is_alive() for t in threads), "clients did not stop"
        return stats, errors

    @staticmethod
    def _script(c, rnd, script, keys, args):
        """EVALSHA or EVAL, at random."""
        if rnd.random() < 0.5:
            return c.evalsha(SHA[script], len(keys), *(keys + args))
        return c.eval(script, len(keys), *(keys + args))

    def transfer(self, c, rnd, ledger, nid):
        """One transfer from an account to accounts on the two other
        nodes; True if it committed, False if the source could not pay."""
        n = rnd.sample(range(3), 3)
        src, d1 = rnd.choice(self.accounts[n[0]]), rnd.choice(self.accounts[n[1]])
        d2 = rnd.choice(self.accounts[n[2]])
        amount = rnd.randint(1, 300)
        part = rnd.randint(0, amount)
        got = self._script(c, rnd, TRANSFER, [src[2], d1[2]],
                           [d2[0], d2[1], amount, part])
        if not (isinstance(got, list) and len(got) == 2 and got[0] in (0, 1)):
            raise AssertionError("TRANSFER %s -> %s, %s: %r, want [1, left] or [0, balance]"
                                 % (src[2], d1[2], d2[2], got))
        if got[0] == 0:
            if got[1] >= amount:
                raise AssertionError("TRANSFER of %d refused with a balance of %d"
                                     % (amount, got[1]))
            return False
        if got[1] < 0:
            raise AssertionError("TRANSFER of %d from %s left %d" % (amount, src[2], got[1]))
        ledger.append((src[2], d1[2], d2[2], amount, part))
        return True

    def audit(self, c, rnd, nid):
        names = list(self.names)
        rnd.shuffle(names)
        half = len(names) // 2
        got = self._script(c, rnd, AUDIT, names[:half], names[half:])
        if got != [self.total, len(names)]:
            raise AssertionError("AUDIT via node %d: %r, want [%d, %d] (sum, accounts read)"
                                 % (nid, got, self.total, len(names)))

    def check_final(self):
        for nid in (1, 2, 3):
            with self.cl.client(nid) as c:
                vals = [int(v) for v in c.mget(self.names)]
            assert sum(vals) == self.total, "final total via node %d: %d, want %d" % (
                nid, sum(vals), self.total)
            assert min(vals) >= 0, "negative balance via node %d: %r" % (nid, vals)
            got = dict(zip(self.names, vals))
            diff = [(k, got[k], self.expect[k]) for k in self.names if got[k] != self.expect[k]]
            assert not diff, "balances differ from the committed transfers " \
                "(account, balance, expected): %r" % diff


def switch(cl, name, mode, via):
    with cl.client(via) as c:
        assert c.execute_command("CONFIG", "SET", "cc", name, "cc-lock-mode", mode)
    for nid in (1, 2, 3):
        with cl.client(nid) as c:
            assert c.config_get("cc") == {"cc": name}, (name, nid)


@pytest.mark.time_limit(150)
def test_bank_script_across_three_nodes_under_every_protocol(cluster):
    """The bank invariant under every protocol, 12 clients, each transfer
    one script touching accounts on all three nodes."""
    bank = Bank(cluster)
    with cluster.client(1) as c:
        procs = protocols(c)
    report = []
    try:
        for i, (name, mode) in enumerate(procs):
            switch(cluster, name, mode, via=i % 3 + 1)
            stats, errors = bank.run(LOAD_SECONDS)
            report.append("%s%s: %r" % (name, "-shared" if mode == "shared" else "", stats))
            assert not errors, "under %s (%s locks): %s" % (name, mode, "; ".join(errors[:5]))
            # The load really ran: transfers committed, some refused for
            # lack of money, audits read the total.
            assert stats["transfers"] > 0 and stats["audits"] > 0, (name, mode, stats)
            bank.check_final()
    finally:
        print("\n".join(report))
        switch(cluster, "silo", "exclusive", via=1)


# ------------------------------------------------------- errors roll back

def _keys(cluster, label):
    """A key on each of nodes 1, 2, 3 (fresh names per call)."""
    t = tags(cluster)
    stamp = "%s%d" % (label, time.monotonic_ns())
    return ["{%s}:%s" % (t[i], stamp) for i in range(3)]


# The first write lands on KEYS[1], then a redis.call fails: INCR of a
# value that is not an integer (KEYS[2] holds "abc"), uncaught. KEYS[3] is
# written between the two, undeclared ones after it never are.
CALL_ERROR = """
redis.call('SET', KEYS[1], 'written')
redis.call('APPEND', KEYS[3], '-more')
redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], 'after the error')
return 'not reached'
"""

# The same writes, then a Lua error (arithmetic on nil), not a command's.
LUA_ERROR = """
redis.call('SET', KEYS[1], 'written')
redis.call('APPEND', KEYS[3], '-more')
local t = nil
return t.field + 1
"""

# redis.pcall returns the error as a table: the script goes on, and
# whatever it wrote, before and after, commits.
PCALL_ERROR = """
redis.call('SET', KEYS[1], 'written')
local r = redis.pcall('INCR', KEYS[2])
redis.call('APPEND', KEYS[3], '-more')
if type(r) == 'table' and r.err then
  return {'caught', r.err}
end
return {'no error', tostring(r)}
"""


@pytest.mark.time_limit(60)
def test_script_error_after_a_write_leaves_nothing_written(cluster):
    """Under every protocol: a script whose redis.call fails after its
    first writes, and one that raises a Lua error after them, reply with
    the error, and none of their writes (on three nodes) is visible
    afterwards, through any node. The pcall form goes on and commits."""
    with cluster.client(1) as c:
        procs = protocols(c)
    try:
        for i, (name, mode) in enumerate(procs):
            switch(cluster, name, mode, via=i % 3 + 1)
            _errors_roll_back(cluster, "%s-%s" % (name, mode), via=i % 3 + 1)
    finally:
        switch(cluster, "silo", "exclusive", via=1)


def _errors_roll_back(cluster, label, via):
    for script, what in ((CALL_ERROR, "not an integer"), (LUA_ERROR, "")):
        k1, k2, k3 = _keys(cluster, label)
        with cluster.client(via) as c:
            c.set(k1, "before")
            c.set(k2, "abc")
            c.set(k3, "v")
            with pytest.raises(redis.ResponseError) as e:
                c.eval(script, 3, k1, k2, k3)
            assert what in str(e.value), (label, str(e.value))
        for nid in (1, 2, 3):
            with cluster.client(nid) as c:
                got = c.mget([k1, k2, k3])
            assert got == [b"before", b"abc", b"v"], (
                "%s: after %r failed with %r, node %d reads %r, want nothing written"
                % (label, script.strip().splitlines()[-2], str(e.value), nid, got))

    k1, k2, k3 = _keys(cluster, label)
    with cluster.client(via) as c:
        c.set(k2, "abc")
        got = c.eval(PCALL_ERROR, 3, k1, k2, k3)
        assert got[0] == b"caught" and b"not an integer" in got[1], (label, got)
    for nid in (1, 2, 3):
        with cluster.client(nid) as c:
            assert c.mget([k1, k2, k3]) == [b"written", b"abc", b"-more"], (label, nid)
