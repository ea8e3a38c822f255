#!/usr/bin/python3
"""Run recorded workloads against rckv and check their histories.

  /usr/bin/python3 tests/checker/run.py                 # short: every protocol, ~10 s each
  /usr/bin/python3 tests/checker/run.py --long          # what `make check-serializable` runs
  /usr/bin/python3 tests/checker/run.py --quick         # --long cut to about 15 minutes
  /usr/bin/python3 tests/checker/run.py --protocol silo --zipf 0.99 --keys 8 --duration 60
  /usr/bin/python3 tests/checker/run.py --protocol silo --fault --duration 30
  /usr/bin/python3 tests/checker/run.py --topology tcp3 --protocol nowait --keys 64
  /usr/bin/python3 tests/checker/run.py --topology shm3 --protocol calvin --server-opt calvin-acquire=write
  /usr/bin/python3 tests/checker/checker.py HISTORY.jsonl   # replay a kept history

A run starts a topology, loads it with client threads that record every
transaction (history.py), optionally switches the protocol or kill -9s and
restarts a node in the middle, stops the load, reads every key it used
(final reads), stops the servers and checks the history (checker.py).
Histories of failing runs are kept. The suites (short, quick, long) are
the rows of SUITES. The last line printed says how many runs passed and
failed and the wall time.

RCKV_SERVER names the server binary (default build/rckv-server); a
relative path is made absolute at start, since the servers run in
temporary directories.

Topologies: `single` (one node), `shm3` and `tcp3` (a 3-node cluster,
tests/integration/cluster.py, on the shm or the tcp fabric). On a cluster
the client threads connect to the nodes round-robin, and the hot keys are
placed with RCKV KEYNODE so that hot key i lives on node i mod 3: the
hottest keys sit on different nodes and many transactions span nodes
(each cluster run counts them).

The protocol list is the server's own: `CONFIG SET cc <bogus>` replies
with the protocols it offers ("one of: ..."), and `none` (no concurrency
control, selectable only with `testing yes`) is added where a run must
find anomalies.
"""

import argparse
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import random
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import redis  # noqa: E402
import checker  # noqa: E402
import cluster  # noqa: E402  (tests/integration/cluster.py)
import rckvtest  # noqa: E402
from history import Recorder  # noqa: E402
from workload import (AppendWorkload, BankWorkload, Context, EvalWorkload, KeySpace,  # noqa: E402
                      ListWorkload)

# Used only if the server's reply to a bogus `CONFIG SET cc` cannot be
# parsed (the only place a protocol list is written down here).
FALLBACK_PROTOCOLS = ["nowait", "silo", "occ"]
BROKEN_PROTOCOL = "none"

# Default load: enough clients that each worker always has transactions in
# flight, and a per-round-trip fabric delay so that the coroutines of a
# worker interleave inside transactions (without it a transaction of a
# single-node shm fabric runs to its end without yielding).
# RCKV_CHECKER_FABRIC_DELAY_US overrides the delay, for `make test` too.
DEFAULT_CLIENTS = 8
# Three per node on a 3-node cluster.
CLUSTER_CLIENTS = 9
DEFAULT_FABRIC_DELAY_US = int(os.environ.get("RCKV_CHECKER_FABRIC_DELAY_US", "20"))
DEFAULT_THREADS = 2
# A run fails when no transaction completes for this long (a restart after
# kill -9 takes a second or two).
STALL_SECONDS = 20.0
# A failover's bound, from a kill to the first write on the dead node's key
# through another node: the lease (1.5 s) and the leader's grace (0.5 s)
# after the last renewal, an election if the leader died, the takeover.
FAILOVER_DEADLINE = 30.0
# How long a paused node stays stopped (SIGSTOP, then SIGCONT).
PAUSE_SECONDS = 10.0


# ------------------------------------------------------------ topologies

# Protocol variants: "nowait-shared" is nowait with `cc-lock-mode shared`.
SHARED_SUFFIX = "-shared"


# A protocol name may end in "@<cc-stages>": the stages that go by RPC
# ("silo@rpc", "mvcc@read=rpc,lock=rpc"); without it, every stage is
# one-sided.
STAGES_SEP = "@"
STAGES = ("read", "lock", "validate", "log", "commit", "release")


def protocol_opts(protocol):
    """Server options that select a protocol name or variant, and its
    cc-stages."""
    name, _, stages = protocol.partition(STAGES_SEP)
    opts = {"cc-stages": stages or "onesided"}
    if name.endswith(SHARED_SUFFIX):
        opts.update({"cc": name[:-len(SHARED_SUFFIX)], "cc-lock-mode": "shared"})
    else:
        opts["cc"] = name
    return opts


def hybrid_stages(rng):
    """A random stage-wise hybrid (RCC 5.1's enumeration), neither pure
    mode: each stage one-sided or RPC, as CONFIG SET cc-stages says it."""
    while True:
        rpc = [rng.random() < 0.5 for _ in STAGES]
        if any(rpc) and not all(rpc):
            return ",".join("%s=%s" % (s, "rpc" if r else "onesided")
                            for s, r in zip(STAGES, rpc))


def stages_canonical(stages):
    """CONFIG GET cc-stages's form of a cc-stages value (the RPC stages
    only, or onesided / rpc)."""
    if stages in ("onesided", "rpc"):
        return stages
    rpc = [s for s in STAGES if "%s=rpc" % s in stages.split(",")]
    if not rpc:
        return "onesided"
    if len(rpc) == len(STAGES):
        return "rpc"
    return ",".join("%s=rpc" % s for s in rpc)


def server_opts(protocol, testing, fabric_delay_us, threads, extra):
    """Every node's options for a run (a topology's servers)."""
    opts = protocol_opts(protocol)
    opts.update({"threads": threads, "fabric-delay-us": fabric_delay_us})
    if testing or protocol == BROKEN_PROTOCOL:
        opts["testing"] = "yes"
    opts.update(extra or {})
    return opts


# Protocols that have a shared-lock variant (cc-lock-mode shared).
SHARED_VARIANTS = ("nowait",)


def with_variants(names):
    """The protocol list with each protocol's variants right after it
    (nowait -> nowait, nowait-shared): the checker runs every one."""
    out = []
    for n in names:
        out.append(n)
        if n in SHARED_VARIANTS and n + SHARED_SUFFIX not in names:
            out.append(n + SHARED_SUFFIX)
    return out


class SingleTopology:
    """One rckv-server on a free loopback port (rckvtest.Server: own process
    group, temporary --dir, killed even when the run fails)."""

    name = "single"

    def __init__(self, protocol, testing=False, fabric_delay_us=DEFAULT_FABRIC_DELAY_US,
                 threads=DEFAULT_THREADS, extra=None):
        opts = server_opts(protocol, testing, fabric_delay_us, threads, extra)
        self.server = rckvtest.Server(opts=opts, name="checker")

    def start(self):
        self.server.start()

    def endpoints(self):
        return [(rckvtest.HOST, self.server.port)]

    def admin(self, node=0):
        return self.server.client()

    def nodes(self):
        return 1

    def node_ids(self):
        return [1]

    def spread(self, prefix, n):
        """Key placement: nothing to spread on one node."""
        return None

    def kill_and_restart(self, node=0):
        """kill -9 the node and start it again on the same --dir and port."""
        self.server.restart(kill=True)

    def power_cut(self):
        """kill -9 and drop the region copy (rckvtest.Server.power_cut),
        then start again."""
        self.server.power_cut()
        self.server.start()

    def log_tail(self):
        return self.server.log_tail(60)

    def stop(self):
        return self.server.cleanup()


class ClusterTopology:
    """A 3-node cluster on loopback (tests/integration/cluster.py: free
    client and fabric ports, a temporary cluster file, a directory and a
    log per node, each node in its own process group, all three ready
    before the run starts and all three stopped by stop()). Every node
    gets the run's options on its command line (cc, threads,
    fabric-delay-us, testing)."""

    fabric = None  # "shm" or "tcp": the subclasses
    name = None

    def __init__(self, protocol, testing=False, fabric_delay_us=DEFAULT_FABRIC_DELAY_US,
                 threads=DEFAULT_THREADS, extra=None):
        opts = server_opts(protocol, testing, fabric_delay_us, threads, extra)
        self.cluster = cluster.Cluster(n=3, fabric=self.fabric, opts=opts)

    def start(self):
        self.cluster.start()

    def endpoints(self):
        """Client addresses of nodes 1, 2, 3: client thread i uses node i mod 3."""
        return [(rckvtest.HOST, nd.port) for nd in self.cluster.nodes]

    def node_ids(self):
        return [nd.id for nd in self.cluster.nodes]

    def admin(self, node=0):
        """A client of the node at index `node` of endpoints()."""
        return self.cluster.nodes[node].client()

    def nodes(self):
        return len(self.cluster.nodes)

    def spread(self, prefix, n):
        """n hash tags [(tag, node id)], tag i owned by the (i mod 3)-th
        node, as the nodes themselves place them (RCKV KEYNODE, asked in
        pipelined batches). A key "{tag}..." lives where its tag does."""
        ids = self.node_ids()
        want = [ids[i % len(ids)] for i in range(n)]
        tags = [None] * n
        admin = self.admin(0)
        try:
            cand = 0
            while any(t is None for t in tags):
                if cand > 1000 * n:
                    raise RuntimeError("RCKV KEYNODE never placed a tag on nodes %s"
                                       % sorted(set(want[i] for i in range(n)
                                                    if tags[i] is None)))
                batch = ["%s%d" % (prefix, cand + j) for j in range(64)]
                cand += 64
                pipe = admin.pipeline(transaction=False)
                for t in batch:
                    pipe.execute_command("RCKV", "KEYNODE", "{%s}" % t)
                for t, node in zip(batch, pipe.execute()):
                    for i in range(n):
                        if tags[i] is None and want[i] == int(node):
                            tags[i] = (t, want[i])
                            break
        finally:
            admin.close()
        return tags

    def kill_and_restart(self, node=0):
        """kill -9 the node at index `node`, start it again on the same
        --dir and ports; it rejoins its peers, which settle what its dead
        transactions left in their regions."""
        nd = self.cluster.nodes[node % len(self.cluster.nodes)]
        nd.kill9()
        nd.start()

    @staticmethod
    def node_state(c, node_id):
        """A node's state in RCKV NODES (up, out, joining, late), asked
        of client c; None if c's node does not answer."""
        try:
            row = [r for r in c.execute_command("RCKV", "NODES") if r[0] == node_id][0]
        except redis.exceptions.RedisError:
            return None
        return row[5].decode() if isinstance(row[5], bytes) else row[5]

    def pause(self, node, probe_key, seconds=PAUSE_SECONDS, deadline=FAILOVER_DEADLINE):
        """SIGSTOP the node at index `node` (a hung node), SIGCONT it
        `seconds` after the stop: _replace. Once woken it finds itself out,
        empties its region, rejoins and copies."""
        def stop(nd):
            os.killpg(nd.proc.pid, signal.SIGSTOP)

        def wake(nd):
            os.killpg(nd.proc.pid, signal.SIGCONT)

        def wake_later(nd, t0):
            time.sleep(max(0.0, t0 + seconds - time.monotonic()))
            wake(nd)
        return self._replace(node, probe_key, deadline, stop, wake_later, undo=wake)

    def failover(self, node, probe_key, deadline=FAILOVER_DEADLINE):
        """kill -9 the node at index `node`, start it again once the
        others serve its keys: _replace."""
        return self._replace(node, probe_key, deadline, lambda nd: nd.kill9(),
                             lambda nd, t0: nd.start())

    def shutdown(self, node, probe_key, deadline=FAILOVER_DEADLINE):
        """SIGTERM the node at index `node` and wait for its exit (it hands
        its slots over first: server/membership.h mb_leave), start it
        again once the others serve its keys: _replace."""
        def stop(nd):
            rc = nd.stop()
            if rc != 0:
                raise RuntimeError("node %d exited with status %r on SIGTERM" % (nd.id, rc))
        return self._replace(node, probe_key, deadline, stop, lambda nd, t0: nd.start())

    def _replace(self, node, probe_key, deadline, fail, revive, undo=None):
        """fail(nd) on the node at index `node` (replicas 2 or more); wait
        until another node shows it out of the configuration and a write
        to probe_key, a key whose primary it was, commits through that
        node (the failover); revive(nd, t0) it (t0: when it failed), and
        wait until the others show it "up" in RCKV NODES (it rejoined,
        copied its slots and took its primaries back), then read keys of
        its slots written before the fault through it. undo(nd) runs if
        the failover does not come. Returns the seconds from the fault to
        that write and to "up"."""
        nd = self.cluster.nodes[node % len(self.cluster.nodes)]
        other = self.cluster.nodes[(node + 1) % len(self.cluster.nodes)]
        c = other.client()
        try:
            cold = self._write_cold(c, probe_key)
            t0 = time.monotonic()  # (a SIGTERM's fail returns at the exit)
            fail(nd)
            try:
                write_s = self._wait_served(c, nd, probe_key, t0 + deadline)
            except Exception:
                if undo:
                    undo(nd)
                raise
            revive(nd, t0)
            self._wait_up(c, nd, time.monotonic() + deadline)
            back_s = time.monotonic() - t0
            self._check_cold(nd, cold)
            return write_s, back_s
        finally:
            c.close()

    def _wait_served(self, c, nd, probe_key, end):
        """Until c's node shows nd out and a write to probe_key commits
        through it; the seconds it took from the caller's start."""
        t0 = time.monotonic()
        # Out of the configuration first: on shm the dead node's region
        # is still mapped and written until then.
        while self.node_state(c, nd.id) != "out":
            if time.monotonic() > end:
                raise RuntimeError("node %d not out of the configuration in time" % nd.id)
            time.sleep(0.02)
        while True:
            try:
                if c.execute_command("SET", probe_key, "x"):
                    return time.monotonic() - t0
            except redis.exceptions.RedisError:
                pass
            if time.monotonic() > end:
                raise RuntimeError("no write to %s through another node in time" % probe_key)
            time.sleep(0.02)

    COLD_KEYS = 16

    def _write_cold(self, c, probe_key):
        """Keys in the probe key's slot (its hash tag: the victim is their
        primary) that no transaction touches again: after the rejoin they
        are on the victim only if its copy of its slots brought them back."""
        tag = probe_key[:probe_key.index("}") + 1]
        cold = {"%scold%d" % (tag, i): "v%d-%d" % (i, time.monotonic_ns())
                for i in range(self.COLD_KEYS)}
        c.mset(cold)
        return cold

    def _check_cold(self, nd, cold):
        """Read the cold keys through the victim, their primary again."""
        v = nd.client()
        try:
            got = v.mget(list(cold))
        finally:
            v.close()
        lost = [k for k, g in zip(cold, got) if g != cold[k].encode()]
        if lost:
            raise RuntimeError("node %d rejoined without %d of the %d keys of its slots written "
                               "before it failed: %s" % (nd.id, len(lost), len(cold), lost[:3]))

    def _wait_up(self, c, nd, end):
        while self.node_state(c, nd.id) != "up":
            if time.monotonic() > end:
                raise RuntimeError("node %d not back in place in time" % nd.id)
            time.sleep(0.05)

    def power_cut(self):
        """Every node killed together, their region copies dropped, all
        started again (cluster.Cluster.power_cut)."""
        self.cluster.power_cut()

    def log_tail(self):
        return "\n".join(nd.log_tail(40) for nd in self.cluster.nodes)

    def stop(self):
        return self.cluster.cleanup()


class Shm3Topology(ClusterTopology):
    """Three nodes on the shm fabric (each maps the others' regions)."""
    fabric = "shm"
    name = "shm3"


class Tcp3Topology(ClusterTopology):
    """Three nodes on the tcp fabric (one-sided operations over TCP to each
    node's NIC-emulation thread)."""
    fabric = "tcp"
    name = "tcp3"


TOPOLOGIES = {"single": SingleTopology, "shm3": Shm3Topology, "tcp3": Tcp3Topology}
CLUSTER_TOPOLOGIES = ("shm3", "tcp3")


def resolve_server_binary():
    """Make the server binary's path absolute in RCKV_SERVER, once, before
    any server starts: the servers run in temporary directories
    (rckvtest.Server, cluster.py), where a path relative to the caller's
    directory names nothing. Returns (path, None), or (path, why) when it
    cannot be run, for a one-line error."""
    path = os.path.abspath(rckvtest.server_binary())
    os.environ["RCKV_SERVER"] = path
    if not os.path.exists(path):
        return path, "does not exist (build first: make build, or set RCKV_SERVER)"
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return path, "is not an executable file (set RCKV_SERVER to the rckv-server binary)"
    return path, None


def discover_protocols(admin):
    """The protocols the server offers, from its reply to a bogus name."""
    try:
        admin.config_set("cc", "no-such-protocol")
    except Exception as e:  # redis.ResponseError: the reply we want
        m = re.search(r"one of: ([^)]*)\)", str(e))
        if m:
            names = [n.strip() for n in m.group(1).split(",") if n.strip()]
            if names:
                return with_variants(names), None
        return list(FALLBACK_PROTOCOLS), "could not parse %r; using %s" % (
            str(e), FALLBACK_PROTOCOLS)
    return list(FALLBACK_PROTOCOLS), "CONFIG SET cc accepted a bogus name; using %s" % (
        FALLBACK_PROTOCOLS,)


def server_protocols(topology="single"):
    """Start a throwaway node, ask it for its protocols, stop it."""
    topo = TOPOLOGIES[topology](protocol="silo")
    try:
        topo.start()
        admin = topo.admin()
        try:
            return discover_protocols(admin)
        finally:
            admin.close()
    finally:
        topo.stop()


# ---------------------------------------------------------------- a run

class RunSpec:
    """One run. switch: protocols to cycle through (CONFIG SET cc) during
    the run; faults: how many kill -9 + restart of a node, evenly spread;
    failovers: how many kill -9 of a random node, evenly spread, each
    waiting until the others serve its keys, then restarting it and waiting
    until it is back in place (replicas 2 or more: ClusterTopology.failover);
    pauses: how many SIGSTOP of a random node for PAUSE_SECONDS, then
    SIGCONT, waiting until it is back in place (ClusterTopology.pause).
    shutdowns: how many SIGTERM of a random node, waiting until the others
    serve its keys, then restarting it (ClusterTopology.shutdown).
    switch_every: instead of one pass through `switch` evenly spread, a
    switch every this many seconds, in a random order (rounds of every
    protocol of `switch`, shuffled with the seed, never twice in a row).
    workload: "append" (MULTI/EXEC), "eval" (the same transactions as Lua
    scripts, workload.EvalWorkload), "list" (the same on Redis lists, RPUSH
    and LRANGE: workload.ListWorkload) or "bank". torn: with eval, one script
    per op, broken on purpose: the checker must find anomalies."""

    def __init__(self, name, protocol, workload="append", duration=10.0, clients=None,
                 keys=8, zipf=0.99, max_ops=4, max_writes=64, switch=None, faults=0,
                 fabric_delay_us=DEFAULT_FABRIC_DELAY_US, threads=DEFAULT_THREADS,
                 realtime=True, seed=None, topology="single", accounts=8,
                 switch_every=None, persistence=None, power_cuts=0, replicas=1,
                 failovers=0, pauses=0, shutdowns=0, torn=False, server_opts=None):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        if self.seed is None:
            self.seed = int(time.time() * 1000) % 100000
        if self.clients is None:
            self.clients = CLUSTER_CLIENTS if topology in CLUSTER_TOPOLOGIES \
                else DEFAULT_CLIENTS

    def describe(self):
        s = "%s: %s on %s, %s workload, %.0f s, %d clients" % (
            self.name, self.protocol, self.topology, self.workload, self.duration, self.clients)
        if self.workload in ("append", "eval", "list"):
            s += ", %d keys zipf %.2f" % (self.keys, self.zipf)
        else:
            s += ", %d accounts" % self.accounts
        if self.switch and self.switch_every:
            s += ", switching every %g s among %s in random order" % (
                self.switch_every, ",".join(self.switch))
        elif self.switch:
            s += ", switching %s" % "->".join(self.switch)
        if self.faults:
            s += ", %d kill -9" % self.faults
        if self.failovers:
            s += ", %d kill -9 with failover" % self.failovers
        if self.pauses:
            s += ", %d SIGSTOP for %.0f s" % (self.pauses, PAUSE_SECONDS)
        if self.shutdowns:
            s += ", %d SIGTERM" % self.shutdowns
        if self.power_cuts:
            s += ", %d power cut" % self.power_cuts
        if self.torn:
            s += ", torn (one script per op: must find anomalies)"
        if self.persistence:
            s += ", persistence %s" % self.persistence
        if self.replicas > 1:
            s += ", replicas %d" % self.replicas
        if self.server_opts:
            s += ", " + ", ".join("%s %s" % kv for kv in sorted(self.server_opts.items()))
        return s + ", seed %d" % self.seed


class RunError(RuntimeError):
    """A run that could not complete (server stalled, unreachable, ...),
    with the server's log tail in its message."""


class RunResult:
    def __init__(self, spec, history, result, elapsed, events, reconnects, client_errors,
                 server_log="", server_stats=None, span=None, keys=None):
        self.server_log = server_log
        self.server_stats = server_stats or {}
        self.span = span or {}  # cluster runs: how transactions spread over nodes
        self.keys = keys  # the list-append KeySpace (its node_of places keys)
        self.spec = spec
        self.history = history
        self.result = result
        self.elapsed = elapsed
        self.events = events
        self.reconnects = reconnects
        self.client_errors = client_errors

    @property
    def checked(self):
        return self.result.stats.get("transactions", 0)

    def cross_node_cycles(self):
        """(cycles, of which spanning nodes) among the dependency cycles the
        checker kept as examples (up to checker.KEEP_PER_KIND per kind): a
        cycle spans nodes when its transactions' keys live on two or more
        nodes. None when the run has no key placement (single node)."""
        if self.keys is None or not self.keys.tags:
            return None
        from history import load
        ops = {t["id"]: t["ops"] for t in load(self.history)[0]}
        total = spanning = 0
        for kind in checker.CYCLE_KINDS:
            for d in self.result.details.get(kind, ()):
                nodes = set(self.keys.node_of(op[1]) for tid in d["txns"]
                            for op in ops.get(tid, ()))
                total += 1
                spanning += len(nodes) > 1
        return total, spanning

    def line(self):
        st = self.result.stats
        sv = self.server_stats
        abort = " server abort rate %s" % sv["abort_rate"] if "abort_rate" in sv else ""
        if sv.get("by_cause"):
            abort += " (%s)" % ", ".join("%s %d" % kv for kv in sorted(sv["by_cause"].items()))
        span = ""
        if self.span.get("committed"):
            span = " %d%% cross-node" % (100 * self.span["cross"] // self.span["committed"])
        return "%-6s %-22s %-7s %7d txns (ok %s, failed %s, unknown %s)%s%s: %s" % (
            self.spec.topology, self.spec.name, self.spec.protocol, self.checked,
            st.get("ok", "-"), st.get("failed", "-"), st.get("unknown", "-"), abort, span,
            self.result.summary())


def run(spec, history_path):
    """Run one spec, write its history to history_path, check it. Always
    stops the servers it started. Returns a RunResult."""
    extra = {"persistence": spec.persistence} if spec.persistence else {}
    if spec.replicas > 1:
        extra["replicas"] = spec.replicas
    extra.update(spec.server_opts or {})
    topo = TOPOLOGIES[spec.topology](protocol=spec.protocol,
                                     fabric_delay_us=spec.fabric_delay_us,
                                     threads=spec.threads, extra=extra)
    events = []
    failovers = []
    windows = []  # (node index, fault start, back in place), monotonic ns
    keys = None
    span = None
    rec = Recorder(history_path)
    ctx = None
    server_log = ""
    server_stats = {}
    started = time.monotonic()
    try:
        topo.start()
        ctx = Context(topo.endpoints(), rec, spec.seed)
        rec.meta(run=spec.describe(), protocol=spec.protocol, topology=spec.topology)
        if spec.workload in ("append", "eval", "list"):
            prefix = "la%d:" % spec.seed
            keys = KeySpace(prefix, spec.keys, spec.zipf, spec.max_writes,
                            tags=topo.spread(prefix, spec.keys))
            if spec.workload == "eval":
                wl = EvalWorkload(keys, max_ops=spec.max_ops, torn=spec.torn)
            elif spec.workload == "list":
                wl = ListWorkload(keys, max_ops=spec.max_ops)
            else:
                wl = AppendWorkload(keys, max_ops=spec.max_ops)
            placement = keys.tags
        else:
            prefix = "acct%d:" % spec.seed
            placement = topo.spread(prefix, spec.accounts)
            wl = BankWorkload(prefix, accounts=spec.accounts,
                              names=["{%s}" % t for t, _ in placement] if placement else None)
            wl.setup(ctx, topo.endpoints()[0])
        if placement:
            ids = topo.node_ids()
            rec.meta(placement=" ".join("{%s}@%d" % tp for tp in placement),
                     clients=" ".join("c%d@%d" % (i, ids[i % len(ids)])
                                      for i in range(spec.clients)))
        threads = [threading.Thread(target=_guarded, args=(wl.client, i, ctx), daemon=True,
                                    name="client-%d" % i) for i in range(spec.clients)]
        for t in threads:
            t.start()
        _drive(spec, topo, rec, events, failovers, windows)
        ctx.stop.set()
        for t in threads:
            t.join(timeout=rckvtest.STOP_DEADLINE + 20)
        if any(t.is_alive() for t in threads):
            raise RuntimeError("client threads did not stop")
        wl.final_reads(ctx, topo.endpoints()[0], deadline=time.monotonic() + 30)
        rec.flush()
        if spec.replicas > 1:
            _check_copies(topo, keys.all_keys() if keys is not None else wl.accounts)
        server_stats = _server_stats(topo)
        if keys is not None and keys.tags:
            span = _span(history_path, keys)
    except Exception as e:
        raise RunError("%s\nserver counters: %s\nlocks held (RCKV LOCKS): %s\n%s"
                       % (e, _server_stats(topo), _held_locks(topo), topo.log_tail())) from None
    finally:
        if ctx is not None:
            ctx.stop.set()
        rec.close()
        server_log = topo.log_tail()
        _save_logs(topo, history_path)
        reports = topo.stop()
        if reports:
            raise RunError("sanitizer reports in the server log:\n" + "\n".join(reports[:20]))
    elapsed = time.monotonic() - started
    result = checker.check_file(history_path, realtime=spec.realtime)
    r = RunResult(spec, history_path, result, elapsed, events, ctx.reconnects, ctx.errors,
                  server_log, server_stats, span, keys)
    r.failovers = failovers
    r.max_wait_s = _max_wait(history_path, windows, topo.nodes())
    return r


def _max_wait(history_path, windows, nodes):
    """The longest a transaction that got an answer (committed, or failed
    with an error) waited for it, in seconds; but for those of clients of
    a node while it was killed or stopped (client i talks to node i mod
    nodes): nobody can answer them."""
    import json
    longest = 0
    with open(history_path, encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            if t.get("type") == "meta" or t.get("complete") is None or t.get("final"):
                continue
            if any(t["client"] % nodes == nd and t["invoke"] < end and t["complete"] > start
                   for nd, start, end in windows):
                continue
            longest = max(longest, t["complete"] - t["invoke"])
    return longest / 1e9


def _check_copies(topo, names):
    """With replicas, once the load stopped: every copy of every key the
    run touched (RCKV COPIES) has its primary's version and value."""
    admin = topo.admin(0)
    try:
        bad = []
        for k in names:
            copies = admin.execute_command("RCKV", "COPIES", k)
            if any(c[1:] != copies[0][1:] for c in copies[1:]) or len(copies) < 2:
                bad.append("%s: %r" % (k, copies))
        if bad:
            raise RuntimeError("%d of %d keys differ between replicas: %s"
                               % (len(bad), len(names), "; ".join(bad[:3])))
    finally:
        admin.close()


def _held_locks(topo):
    """The lock words each node reports held (RCKV LOCKS): a run whose
    final reads keep aborting shows the lock left behind and its owner
    word (node, transaction)."""
    out = {}
    for i in range(topo.nodes()):
        try:
            admin = topo.admin(i)
            try:
                held = admin.execute_command("RCKV", "LOCKS")
            finally:
                admin.close()
        except Exception as e:  # a node that does not answer says so here
            held = ["(%r)" % e]
        if held:
            out[topo.node_ids()[i]] = [h.decode() if isinstance(h, bytes) else h
                                       for h in held[:10]]
    return out or "none"


def _server_stats(topo):
    """Commit/abort counters summed over the nodes, for the run's line."""
    try:
        tot = {"commits": 0, "aborts": 0, "timeouts": 0, "errors": 0}
        for i in range(topo.nodes()):
            admin = topo.admin(i)
            try:
                cc = admin.info("cc")
                st = admin.info("stats")
            finally:
                admin.close()
            tot["commits"] += int(cc.get("cc_txn_committed", 0))
            tot["aborts"] += int(cc.get("cc_aborts", 0))
            tot["timeouts"] += int(st.get("txn_timeouts", 0))
            # Transactions that failed with an error rather than a CC
            # abort (the cc_proto_<id> lines' errors).
            tot["errors"] += sum(int(v.get("errors", 0)) for k, v in cc.items()
                                 if k.startswith("cc_proto_") and isinstance(v, dict))
            # Aborts by cause (INFO cc_aborts_<cause>): a run whose final
            # reads keep aborting says why (lock, stale address, ...).
            for k, v in cc.items():
                if k.startswith("cc_aborts_") and int(v or 0):
                    cause = k[len("cc_aborts_"):]
                    tot.setdefault("by_cause", {})
                    tot["by_cause"][cause] = tot["by_cause"].get(cause, 0) + int(v)
        attempts = tot["commits"] + tot["aborts"]
        tot["abort_rate"] = "%.4f" % (tot["aborts"] / attempts if attempts else 0.0)
        return tot
    except Exception as e:  # stats are informative only
        return {"error": repr(e)}


def _span(history_path, keys):
    """How a cluster run's committed list-append transactions spread: how
    many touched keys on two or more nodes ("cross"), and per node how
    many keys-on-that-node operations were committed. Proves the run did
    what it is for: transactions that span nodes."""
    import json
    committed = cross = 0
    ops_per_node = {}
    with open(history_path, encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            if t.get("type") == "meta" or t.get("outcome") != "ok" or t.get("final"):
                continue
            nodes = set()
            for op in t["ops"]:
                n = keys.node_of(op[1])
                nodes.add(n)
                ops_per_node[n] = ops_per_node.get(n, 0) + 1
            committed += 1
            cross += len(nodes) > 1
    return {"committed": committed, "cross": cross, "ops_per_node": ops_per_node}


def _guarded(fn, cid, ctx):
    try:
        fn(cid, ctx)
    except Exception as e:  # a client bug must not pass silently
        ctx.errors.append("client %d: %r" % (cid, e))
        ctx.stop.set()


def _drive(spec, topo, rec, events, failovers, windows):
    """The main thread during the load: protocol switches and faults at
    even intervals, then wait for the end of the run."""
    start = time.monotonic()
    end = start + spec.duration
    watch = _StallWatch(rec)
    switches = 0
    in_force = spec.protocol  # the protocol (and stages) the last switch set
    plan = []
    if spec.switch and spec.switch_every:
        count = int((spec.duration - 0.5) / spec.switch_every)
        for i, p in enumerate(random_switch_order(spec.switch, spec.protocol, count,
                                                  spec.seed)):
            plan.append((start + spec.switch_every * (i + 1), "switch", p))
    elif spec.switch:
        n = len(spec.switch)
        for i in range(1, n + 1):  # ends on the protocol it started with
            plan.append((start + spec.duration * i / (n + 1), "switch", spec.switch[i % n]))
    victims = random.Random(spec.seed).choices(range(topo.nodes()), k=spec.faults)
    for i in range(spec.faults):
        plan.append((start + spec.duration * (i + 1) / (spec.faults + 1), "kill", victims[i]))
    for i in range(spec.power_cuts):
        plan.append((start + spec.duration * (i + 0.5) / spec.power_cuts, "cut", None))
    # Faults that a failover answers (replicas): each on a random node,
    # evenly spread, shutdowns half a step earlier (the plan runs one
    # event at a time: each waits for the one before to end).
    probes = None
    for kind, count, salt, shift in (("failover", spec.failovers, 1, 1.0),
                                     ("pause", spec.pauses, 2, 1.0),
                                     ("shutdown", spec.shutdowns, 3, 0.5)):
        picks = random.Random(spec.seed + salt).choices(range(topo.nodes()), k=count)
        if count and not probes:
            probes = topo.spread("fo%d:" % spec.seed, topo.nodes())
        for i in range(count):
            plan.append((start + spec.duration * (i + shift) / (count + 1), kind, picks[i]))
    plan.sort(key=lambda p: p[0])
    for when, kind, arg in plan:
        while time.monotonic() < when:
            time.sleep(min(0.1, max(0.0, when - time.monotonic())))
            watch.check()
        if kind == "switch":
            # On a cluster, each switch is sent to the next node: any node
            # switches all of them, and every node must then report it.
            via = switches % topo.nodes()
            switches += 1
            ids = topo.node_ids()
            admin = topo.admin(via)
            try:
                t0 = time.monotonic()
                opts = protocol_opts(arg)
                was = protocol_opts(in_force)
                if (opts["cc"], opts.get("cc-lock-mode")) == (was["cc"],
                                                              was.get("cc-lock-mode")):
                    # The stages alone: no protocol switch (no quiesce).
                    admin.execute_command("CONFIG", "SET", "cc-stages", opts["cc-stages"])
                else:
                    admin.execute_command("CONFIG", "SET", "cc", opts["cc"], "cc-lock-mode",
                                          opts.get("cc-lock-mode", "exclusive"), "cc-stages",
                                          opts["cc-stages"])
                in_force = arg
                ms = (time.monotonic() - t0) * 1000
            finally:
                admin.close()
            for i in range(topo.nodes()):
                c = topo.admin(i)
                try:
                    now = c.config_get("cc").get("cc")
                    stages = c.config_get("cc-stages").get("cc-stages")
                finally:
                    c.close()
                want = protocol_opts(arg)
                if now != want["cc"] or stages != stages_canonical(want["cc-stages"]):
                    raise RuntimeError("CONFIG SET cc %s sent to node %d left cc = %r, "
                                       "cc-stages = %r on node %d" % (arg, ids[via], now,
                                                                       stages, ids[i]))
            where = " via node %d" % ids[via] if topo.nodes() > 1 else ""
            events.append("switch to %s%s (%.0f ms)" % (arg, where, ms))
            rec.meta(event="CONFIG SET cc %s%s" % (arg, where))
        elif kind in ("failover", "pause", "shutdown"):
            nid = topo.node_ids()[arg]
            what = {"failover": "kill -9", "pause": "SIGSTOP", "shutdown": "SIGTERM"}[kind]
            rec.meta(event="%s node %d" % (what, nid))
            key = "{%s}probe" % [t for t, owner in probes if owner == nid][0]
            t_fault = time.monotonic_ns()
            write_s, back_s = getattr(topo, kind)(arg, key)
            watch.reset()
            windows.append((arg, t_fault, time.monotonic_ns()))
            events.append("%s of node %d: its key written through another node after %.2f s, "
                          "back in place after %.1f s" % (what, nid, write_s, back_s))
            failovers.append((write_s, back_s))
            rec.meta(event="node %d back in place" % nid)
        elif kind == "cut":
            rec.meta(event="power cut")
            t0 = time.monotonic()
            topo.power_cut()
            events.append("power cut and restart of every node (%.1f s)"
                          % (time.monotonic() - t0))
            rec.meta(event="restarted after the power cut")
        else:
            nid = topo.node_ids()[arg]
            rec.meta(event="kill -9 node %d" % nid)
            t0 = time.monotonic()
            topo.kill_and_restart(arg)
            events.append("kill -9 and restart of node %d (%.1f s)"
                          % (nid, time.monotonic() - t0))
            rec.meta(event="node %d restarted" % nid)
    while time.monotonic() < end:
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))
        watch.check()


def random_switch_order(protocols, current, count, seed):
    """count switch targets: rounds of every protocol in a random order
    (seeded), each target other than the protocol in use before it."""
    rnd = random.Random(seed)
    out = []
    while len(out) < count:
        rnd_round = list(protocols)
        rnd.shuffle(rnd_round)
        if len(rnd_round) > 1 and rnd_round[0] == current:
            i = rnd.randrange(1, len(rnd_round))
            rnd_round[0], rnd_round[i] = rnd_round[i], rnd_round[0]
        out += rnd_round
        current = rnd_round[-1]
    return out[:count]


class _StallWatch:
    """Fails the run when no transaction completes for STALL_SECONDS (a
    server that hangs would otherwise hold every client for its socket
    timeout, again and again)."""

    def __init__(self, rec):
        self.rec = rec
        self.last = rec.total
        self.since = time.monotonic()

    def reset(self):
        """A fault the driver waited out on purpose: count from now."""
        self.last, self.since = self.rec.total, time.monotonic()

    def check(self):
        n = self.rec.total
        if n != self.last:
            self.last, self.since = n, time.monotonic()
        elif time.monotonic() - self.since > STALL_SECONDS:
            raise RuntimeError("no transaction completed for %.0f s: the server is stalled"
                               % STALL_SECONDS)


# ---------------------------------------------------------------- suites

class Suite:
    """Which runs a suite makes on each topology (suite() builds them).

    duration: default seconds of load per run. Per protocol:
      cells: (zipf, hot keys) of the list-append runs, `duration` each;
      bank: a bank run of duration / 2;
      nodelay: a list-append run (zipf 0.99, 8 keys) without the fabric
        delay, duration / 2: far more transactions, parallel only across
        worker threads;
      fault, bank_fault: a list-append / bank run with kill -9 faults, as
        (kills on one node, kills on a cluster, run length as a fraction of
        duration), or None for no such run;
      failover: on a cluster, a bank run with `replicas 2` and kill -9
        faults each waited out until the others serve the dead node's keys
        and it is back (ClusterTopology.failover), as (kills, run length as
        a fraction of duration), or None.
      rpc: a list-append run (zipf 0.99, 8 keys) with every stage by RPC
        (cc-stages rpc);
      hybrids: on shm3, this many list-append runs per protocol, each with
        a random stage-wise hybrid (hybrid_stages, seeded by the run's seed
        and the protocol);
      eval: an eval run (the list-append transactions as Lua scripts with
        undeclared keys, zipf 0.99, 8 keys), duration / 2;
    Per topology:
      switch_rounds: a list-append run that switches through every protocol
        this many times (when there are two or more);
      none, bank_none: a list-append / bank run under `none`, which must
        find anomalies (min(duration, 15) s each; not with --no-none);
      eval_checks: (with eval) an eval run with kill -9 faults under the
        first protocol, and one of torn scripts (one script per op), which
        must find anomalies (not with --no-none), duration / 2 each."""

    def __init__(self, duration, cells, bank=True, nodelay=False, fault=None,
                 bank_fault=None, switch_rounds=1, none=True, bank_none=False, failover=None,
                 rpc=False, hybrids=0, eval=False, eval_checks=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]


# The suites, by the option that selects one. "quick" is "long" cut to
# about a fifth of its length: every protocol on every topology still, at
# the two extremes of contention of the long matrix (zipf 0.99 over 8
# keys, zipf 0.0 over 64), with the bank and a kill -9 run per protocol,
# the switch run and both runs under `none`. It drops the cells in between
# (zipf 0.0 over 8 keys, zipf 0.99 over 64), the run without fabric delay
# and the bank under kill -9, and each run is a fifth as long (6 s: with 11
# protocol variants, 141 runs, a run's start, final reads and check cost
# about as much as its load).
SUITES = {
    "short": Suite(10.0, cells=((0.99, 8),)),
    "quick": Suite(6.0, cells=((0.99, 8), (0.0, 64)), fault=(1, 3, 1.0), bank_none=True,
                   rpc=True, hybrids=1, eval=True),
    "long": Suite(30.0, cells=((0.0, 8), (0.0, 64), (0.99, 8), (0.99, 64)), nodelay=True,
                  fault=(2, 6, 1.0), bank_fault=(1, 4, 0.5), switch_rounds=3, bank_none=True,
                  failover=(3, 1.0), rpc=True, hybrids=3, eval=True, eval_checks=True),
}


def suite(protocols, duration, kind="short", topology="single", with_none=True, seed=0):
    """The runs of the suite SUITES[kind] on one topology, `duration`
    seconds per run (see Suite for what each run lasts). The long one is
    `make check-serializable`, the short one run.py's default; kill -9
    faults hit a random node of a cluster each time."""
    su = SUITES[kind]
    specs = []
    t = dict(topology=topology)
    on_cluster = topology in CLUSTER_TOPOLOGIES
    for p in protocols:
        for z, k in su.cells:
            specs.append(RunSpec("append-z%.2f-k%d" % (z, k), p, keys=k, zipf=z,
                                 duration=duration, **t))
        if su.bank:
            specs.append(RunSpec("bank", p, workload="bank", duration=duration / 2, **t))
        if su.nodelay:
            specs.append(RunSpec("append-nodelay-z0.99-k8", p, duration=duration / 2,
                                 fabric_delay_us=0, **t))
        if su.fault:
            one, three, part = su.fault
            specs.append(RunSpec("fault-kill9", p, duration=duration * part,
                                 faults=three if on_cluster else one, **t))
        if su.bank_fault:
            one, three, part = su.bank_fault
            specs.append(RunSpec("bank-fault-kill9", p, workload="bank",
                                 duration=duration * part,
                                 faults=three if on_cluster else one, **t))
        if su.failover and on_cluster:
            kills, part = su.failover
            specs.append(RunSpec("bank-failover", p, workload="bank", duration=duration * part,
                                 failovers=kills, shutdowns=1, replicas=2, **t))
        if su.rpc:
            specs.append(RunSpec("append-rpc", p + STAGES_SEP + "rpc", duration=duration / 2,
                                 **t))
        if su.eval:
            specs.append(RunSpec("eval-z0.99-k8", p, workload="eval", duration=duration / 2,
                                 **t))
        if su.hybrids and topology == "shm3":
            rng = random.Random("%s:%s" % (seed, p))
            for i in range(su.hybrids):
                specs.append(RunSpec("append-hybrid%d" % i,
                                     p + STAGES_SEP + hybrid_stages(rng),
                                     duration=duration / 2, **t))
    if len(protocols) > 1 and su.switch_rounds:
        specs.append(RunSpec("switch", protocols[0], duration=duration,
                             switch=list(protocols) * su.switch_rounds, **t))
    if with_none and su.none:
        specs.append(RunSpec("must-find-anomalies", BROKEN_PROTOCOL,
                             duration=min(duration, 15.0), **t))
    if su.eval_checks and protocols:
        specs.append(RunSpec("eval-fault-kill9", protocols[0], workload="eval",
                             duration=duration / 2, faults=3 if on_cluster else 1, **t))
        if with_none:
            specs.append(RunSpec("eval-torn-must-find-anomalies", protocols[0],
                                 workload="eval", duration=duration / 2, torn=True, **t))
    if with_none and su.bank_none:
        specs.append(RunSpec("bank-must-find-anomalies", BROKEN_PROTOCOL, workload="bank",
                             duration=min(duration, 15.0), **t))
    return specs


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Run recorded list-append / bank workloads against rckv and check the "
                    "histories for serializability anomalies (see tests/checker/checker.py).",
        epilog="Topologies: 'single' is one node; 'shm3' and 'tcp3' are a 3-node cluster "
               "on the shm and the tcp fabric, with client threads spread over the nodes "
               "and hot keys placed on every node (RCKV KEYNODE), so that transactions span "
               "nodes. kill -9 faults hit a random node of a cluster each time. --long and "
               "--quick: the last one given wins (`make check-serializable "
               "CHECK_ARGS=--quick` runs the quick suite).")
    ap.add_argument("--topology", choices=sorted(TOPOLOGIES), action="append",
                    help="where to run (repeatable): 'single' = one node, 'shm3'/'tcp3' = a "
                         "3-node cluster on the shm/tcp fabric. Default: single, or all three "
                         "with --long or --quick")
    ap.add_argument("--long", dest="suite", action="store_const", const="long",
                    default="short",
                    help="the full matrix of `make check-serializable` (about 2 hours), on "
                         "every topology unless --topology is given: every protocol x zipf "
                         "0.0/0.99 x 8/64 keys, with and without fabric delay, bank, eval "
                         "(Lua scripts), kill -9 faults, a switch run, and `none` and torn "
                         "scripts (which must fail)")
    ap.add_argument("--quick", dest="suite", action="store_const", const="quick",
                    help="--long cut to about 15 minutes: every protocol on every topology "
                         "unless --topology is given, zipf 0.99 over 8 keys and zipf 0.0 over "
                         "64, bank, eval, a kill -9 run per protocol, a switch run, and `none` "
                         "(list-append and bank, which must fail); 6 s per run")
    ap.add_argument("--duration", type=float, default=None,
                    help="seconds per run (default 10, or 30 with --long)")
    ap.add_argument("--protocol", action="append",
                    help="run only this protocol (repeatable); default: every protocol the "
                         "server offers")
    ap.add_argument("--workload", choices=("append", "eval", "list", "bank"), default=None,
                    help="a single run of this workload instead of a suite")
    ap.add_argument("--torn", action="store_true",
                    help="with --workload eval: one script per op, recorded as one "
                         "transaction (broken on purpose: the run passes when the checker "
                         "finds anomalies)")
    ap.add_argument("--keys", type=int, default=8, help="hot keys (single run)")
    ap.add_argument("--zipf", type=float, default=0.99, help="zipf exponent (single run)")
    ap.add_argument("--clients", type=int, default=None,
                    help="client threads per run (default %d, or %d on a cluster: %d per node)"
                         % (DEFAULT_CLIENTS, CLUSTER_CLIENTS, CLUSTER_CLIENTS // 3))
    ap.add_argument("--fault", type=int, nargs="?", const=1, default=0, metavar="N",
                    help="kill -9 and restart a node N times during a single run (on a "
                         "cluster, a random node each time)")
    ap.add_argument("--failover", type=int, nargs="?", const=1, default=0, metavar="N",
                    help="N kill -9 of a random node, each waiting for the failover, then "
                    "restarting it and waiting for its rejoin (clusters, --replicas 2 or more)")
    ap.add_argument("--pause", type=int, nargs="?", const=1, default=0, metavar="N",
                    help="N SIGSTOP of a random node for %.0f s, then SIGCONT, each waiting "
                    "for the failover and then for its rejoin (clusters, --replicas 2 or more)"
                    % PAUSE_SECONDS)
    ap.add_argument("--shutdown", type=int, nargs="?", const=1, default=0, metavar="N",
                    help="N SIGTERM of a random node, each waiting for the others to serve "
                    "its keys (it hands them over as it shuts down), then restarting it and "
                    "waiting for its rejoin (clusters, --replicas 2 or more)")
    ap.add_argument("--power-cut", type=int, nargs="?", const=1, default=0, metavar="N",
                    help="with --persistence power: N times during a single run, kill -9 every "
                         "node together and drop their region copies in /dev/shm, so that "
                         "they restart from their checkpoints and logs")
    ap.add_argument("--switch", action="store_true",
                    help="single run: cycle CONFIG SET cc through the protocols mid-run")
    ap.add_argument("--switch-every", type=float, default=None, metavar="S",
                    help="with --switch: switch every S seconds, in a random order (rounds "
                         "of every protocol, shuffled with the seed)")
    ap.add_argument("--fabric-delay-us", type=int, default=None,
                    help="the server's per-round-trip fabric delay (default %d; the long suite "
                         "also has a run with 0)" % DEFAULT_FABRIC_DELAY_US)
    ap.add_argument("--no-realtime", action="store_true",
                    help="check serializability only, not strict serializability")
    ap.add_argument("--no-none", action="store_true",
                    help="skip the run under `none` that must find anomalies")
    ap.add_argument("--persistence", choices=("none", "process", "power", "power-everysec"),
                    default=None,
                    help="the servers' persistence (default: the server's, process); with "
                         "power, a kill -9 (--fault) restarts from the write-ahead log on one "
                         "node and from the flushed region files on a cluster")
    ap.add_argument("--replicas", type=int, default=1,
                    help="cluster topologies: nodes per slot (the servers' `replicas`); "
                         "each run then also compares every key's copies (RCKV COPIES)")
    ap.add_argument("--server-opt", action="append", default=[], metavar="NAME=VALUE",
                    help="a server option every node of every run gets on its command line "
                         "(e.g. calvin-acquire=write); repeatable")
    ap.add_argument("--out", help="directory for histories (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep histories of passing runs too")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)

    started = time.monotonic()
    server, why = resolve_server_binary()
    if why:
        print("%s: error: server binary %s %s" % (ap.prog, server, why), file=sys.stderr)
        return 2

    duration = args.duration or SUITES[args.suite].duration
    topologies = args.topology or (["single"] + list(CLUSTER_TOPOLOGIES)
                                   if args.suite != "short" else ["single"])
    topologies = list(dict.fromkeys(topologies))  # once each, in the order given
    out = args.out or tempfile.mkdtemp(prefix="rckv-checker-")
    os.makedirs(out, exist_ok=True)

    offered, note = server_protocols()
    if note:
        print("note: %s" % note)
    protocols = args.protocol or offered
    print("topologies: %s; protocols offered by the server: %s; checking: %s" % (
        ", ".join(topologies), ", ".join(offered), ", ".join(protocols)))

    if (args.workload or args.fault or args.switch or args.power_cut or args.failover or
            args.pause or args.shutdown):
        specs = []
        for topo in topologies:
            one = RunSpec("%s%s%s" % (args.workload or "append", "-fault" if args.fault else "",
                                      "-switch" if args.switch else ""),
                          protocols[0], workload=args.workload or "append", duration=duration,
                          clients=args.clients, keys=args.keys, zipf=args.zipf,
                          switch=list(protocols) if args.switch else None,
                          switch_every=args.switch_every if args.switch else None,
                          faults=args.fault, power_cuts=args.power_cut,
                          failovers=args.failover, pauses=args.pause,
                          shutdowns=args.shutdown, torn=args.torn,
                          fabric_delay_us=DEFAULT_FABRIC_DELAY_US
                          if args.fabric_delay_us is None else args.fabric_delay_us,
                          realtime=not args.no_realtime, seed=args.seed, topology=topo)
            specs += [one] if args.switch else [_with(one, protocol=p) for p in protocols]
    else:
        specs = []
        for topo in topologies:
            specs += suite(protocols, duration, args.suite, topo, with_none=not args.no_none,
                           seed=args.seed or 0)
        for s in specs:
            if args.fabric_delay_us is not None:
                s.fabric_delay_us = args.fabric_delay_us
            if args.clients is not None:
                s.clients = args.clients
            s.realtime = not args.no_realtime
            if args.seed is not None:
                s.seed = args.seed
    server_extra = {}
    for o in args.server_opt:
        name, eq, value = o.partition("=")
        if not eq or not name.strip() or not value.strip():
            ap.error("--server-opt %r: expected NAME=VALUE" % o)
        server_extra[name.strip()] = value.strip()
    for s in specs:
        s.persistence = args.persistence
        s.server_opts = dict(server_extra)
        if s.topology in CLUSTER_TOPOLOGIES:
            # A failover needs a copy to fail over to.
            s.replicas = (max(args.replicas, 2) if s.failovers or s.pauses or s.shutdowns
                          else args.replicas)

    print("%d runs, %s of load (plus each run's start, final reads and check)"
          % (len(specs), _minutes(sum(sp.duration for sp in specs))), flush=True)
    failures = 0
    results = []
    done = 0
    try:
        for i, spec in enumerate(specs, 1):
            path = os.path.join(out, "%02d-%s-%s-%s.jsonl" % (i, spec.topology, spec.name,
                                                               spec.protocol))
            print("[%d/%d] %s" % (i, len(specs), spec.describe()), flush=True)
            r, bad = _run_and_report(spec, path, args.keep)
            done += 1
            failures += bad
            if r is not None:
                results.append(r)
    finally:
        # Also when stopped part-way (Ctrl-C, SIGTERM): what ran, and how
        # it went; the run in progress then is not counted.
        total = sum(r.checked for r in results if r.spec.protocol != BROKEN_PROTOCOL)
        print("\nsummary: %d runs, %d transactions checked under real protocols, %d failures"
              % (done, total, failures))
        for r in results:
            print("  " + r.line())
        if not args.out and not os.listdir(out):
            os.rmdir(out)
        elif os.path.isdir(out):
            print("histories: %s" % out)
        ran = ("%d runs" % done if done == len(specs)
               else "stopped after %d of %d runs" % (done, len(specs)))
        print("result: %s: %d passed, %d failed; wall time %s"
              % (ran, done - failures, failures, _minutes(time.monotonic() - started)),
              flush=True)
    return 1 if failures else 0


def _logs_dir(history_path):
    return history_path + ".logs"


def _save_logs(topo, history_path):
    """Copy every server's log next to the history (<history>.logs/), before
    the servers' directories go: a failing run keeps them with its history."""
    servers = [nd for nd in topo.cluster.nodes] if hasattr(topo, "cluster") else \
        [topo.server]
    d = _logs_dir(history_path)
    os.makedirs(d, exist_ok=True)
    for srv in servers:
        try:
            shutil.copy(srv.logpath, os.path.join(d, "%s.log" % srv.name))
        except OSError:
            pass


def _drop(path):
    os.remove(path)
    shutil.rmtree(_logs_dir(path), ignore_errors=True)


def _run_and_report(spec, path, keep):
    """Run one spec and print how it went. Returns (RunResult or None when
    the run could not complete, whether it failed). A run under `none`
    passes when the checker finds anomalies. Deletes the history of a
    passing run unless `keep`."""
    try:
        r = run(spec, path)
    except Exception as e:
        print("   ERROR: %s" % e, flush=True)
        if os.path.exists(path):
            print("   history so far kept: %s (replay: /usr/bin/python3 %s %s --realtime)"
                  % (path, os.path.join(HERE, "checker.py"), path), flush=True)
        return None, True
    expect_anomalies = spec.protocol == BROKEN_PROTOCOL or spec.torn
    bad = (r.result.valid() == expect_anomalies) or bool(r.client_errors)
    print("   %s  [%.1f s%s]" % (r.line(), r.elapsed,
                                 "; " + ", ".join(r.events) if r.events else ""),
          flush=True)
    if r.failovers:
        ws = sorted(w for w, _ in r.failovers)
        print("   failovers: fault to the first write on the dead node's key: median %.2f s, "
              "max %.2f s; the longest a live node's client waited: %.2f s"
              % (ws[len(ws) // 2], ws[-1], r.max_wait_s), flush=True)
    if r.span.get("committed"):
        print("   %d of %d committed transactions span nodes; operations per node: %s"
              % (r.span["cross"], r.span["committed"],
                 ", ".join("%s: %d" % kv for kv in sorted(r.span["ops_per_node"].items(),
                                                            key=str))))
    for e in r.client_errors:
        print("   client error: %s" % e)
    if bad:
        if expect_anomalies:
            print("   FAIL: %s, yet the checker found nothing: the checker is blind or "
                  "the load too gentle" % ("the scripts were torn on purpose" if spec.torn
                                           else "`none` has no concurrency control"))
        else:
            print(r.result.report())
        print("   history kept: %s, the servers' logs in %s (replay: /usr/bin/python3 %s %s%s)"
              % (path, _logs_dir(path), os.path.join(HERE, "checker.py"), path,
                 " --realtime" if spec.realtime else ""))
    elif expect_anomalies:
        cyc = r.cross_node_cycles()
        if cyc:
            print("   %d of the %d dependency cycles kept as examples span nodes"
                  % (cyc[1], cyc[0]))
        print("   (expected) first anomaly %s:" % ("of the torn scripts" if spec.torn
                                                  else "under `none`"))
        kinds = [k for k in checker.CYCLE_KINDS if k in r.result.details]
        kind = (kinds or sorted(r.result.details))[0]
        print("   " + r.result.details[kind][0]["text"].replace("\n", "\n   "))
        if not keep:
            _drop(path)
    elif not keep:
        _drop(path)
    return r, bad


def _minutes(seconds):
    """A duration for people: "1 h 05 min 12 s", "18 min 40 s", "9.5 s"."""
    if seconds < 60:
        return "%.1f s" % seconds
    m, sec = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return ("%d h %02d min %02d s" % (h, m, sec)) if h else ("%d min %02d s" % (m, sec))


def _with(spec, **kw):
    d = dict(spec.__dict__)
    d.update(kw)
    return RunSpec(**d)


def _exit_on_sigterm(signum, frame):
    # SystemExit unwinds through run()'s finally and rckvtest's atexit, so a
    # terminated run still stops its servers.
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    sys.exit(main())
