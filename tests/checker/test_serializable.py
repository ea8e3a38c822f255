"""The short serializability check of `make test` (the long one is
`make check-serializable`, see run.py and README.md).

Per protocol the server offers (about 7 s each): a list-append run at high
contention (8 hot keys, zipf 0.99) checked for serializability and strict
serializability, and a bank run whose read-only MULTI/GET-all transactions
must see the opening total. Then: a run with `CONFIG SET cc` switches in the
middle, a run with kill -9 and restart of the node (unknown outcomes,
nothing acknowledged lost), and a run under `none`, which has no concurrency
control and in which the checker must find anomalies.

On a 3-node cluster (run.py's shm3 and tcp3 topologies: client threads
spread over the nodes, hot keys placed on every node with RCKV KEYNODE):
per protocol and fabric a list-append run of about 6 s, whose committed
transactions must span nodes; a `CONFIG SET cc` switch mid-run, sent to a
different node each time, on tcp3; and `none` on shm3, which must again
show anomalies. And kill -9 of random nodes of a cluster under load, every
node restarting and rejoining: the bank on shm3 per protocol (the sum read
by every audit stays the opening total across the crashes, and the history
stays serializable), list-append on tcp3 (nothing acknowledged lost).

At zipf 0.0 (uniform over the 8 keys), per protocol, a short list-append
run on one node, on shm3 and on tcp3, with every stage by RPC (cc-stages
rpc), on shm3 also with three random stage-wise hybrids in turn and on
Redis lists (the list workload: RPUSH and LRANGE 0 -1) (`make
check-serializable` also runs every protocol in rpc at zipf 0.99, and
three random hybrids per protocol on shm3, each a run of its own). The
protocol list is the server's, with nowait's shared-lock variant added
("nowait-shared": run.py with_variants). And the bank under switches of
protocol and of stages every second, among all protocols in a random order,
each with a random hybrid of one-sided and RPC stages, on one node and on
shm3: no client sees an error, and every audit sees the opening total.

Lua scripts (EVAL, the eval workload: list-append transactions with keys
the scripts build themselves): a protocol of each family on one node, shm3
and tcp3, about 3 s each, and scripts torn on purpose (one script per op)
in which the checker must find anomalies.

Under persistence power, kill -9 twice under load on one node (its
write-ahead log) and on shm3 (page flushes): list-append and the bank, one
protocol per cell.

A failing run keeps its history (path in the failure message) for
`/usr/bin/python3 tests/checker/checker.py HISTORY --realtime`.
"""

import os
import random
import shutil

import pytest

import run as runner

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
KEEP_DIR = os.path.join(os.environ.get("RCKV_BUILD") or os.path.join(REPO, "build"),
                        "checker-histories")

# Shorter than they were (failover's runs in test_replicas.py and the
# issues' new suites took their time in `make test`'s 30 minutes): each
# still commits thousands of transactions per protocol; `make
# check-serializable` runs 30 s each.
APPEND_SECONDS = 2.5
BANK_SECONDS = 2.0
FAULT_SECONDS = 5.0
# One kill -9 per protocol, in the middle: 1.75 s of load on each side of
# it (it was 2.5 s), 7,000 to 14,000 transactions per run measured, and as
# many unknown outcomes as before (8 to 16).
KILL9_SECONDS = 3.5
SWITCH_SECONDS = 5.0
# The runs under `none` are as long as the list-append runs they vouch
# for: a checker that finds anomalies there finds them in a history of
# that size.
NONE_SECONDS = APPEND_SECONDS
# Cluster runs: about 5.5 s each with the start of three nodes and the
# check (3 s of load: they were 5 s).
CLUSTER_APPEND_SECONDS = 3.0
CLUSTER_SWITCH_SECONDS = 5.0
CLUSTER_NONE_SECONDS = CLUSTER_APPEND_SECONDS
# Four kills 1 s apart (they were 1.4 s): a restart on shm takes about
# 0.2 s, so thousands of transactions still run between two kills (9,000
# to 23,000 per run measured).
CLUSTER_FAULT_SECONDS = 5.0
CLUSTER_FAULTS = 4
# List-append with three kills on tcp3: as long as it was, a kill every
# 1.25 s (a restart on tcp takes longer than on shm).
CLUSTER_APPEND_FAULT_SECONDS = 5.0
# zipf 0.0 runs, per protocol and topology (the zipf 0.99 runs are above);
# on shm3 in cc-stages rpc and three random hybrids, a fifth of it each.
UNIFORM_SECONDS = 1.5
HYBRID_SECONDS = 2.0
# Switches every SWITCH_PERIOD seconds, each protocol once: a second of the
# bank is still thousands of transactions per protocol on one node and
# on shm3 (it was 2 s; the number of switches does not depend on it).
SWITCH_PERIOD = 1.0

pytestmark = pytest.mark.rckv_only


def _run(spec, tmp_path):
    path = str(tmp_path / ("%s-%s.jsonl" % (spec.name, spec.protocol)))
    try:
        return runner.run(spec, path)
    except runner.RunError as e:
        msg = "%s failed: %s\n(history so far: %s)" % (spec.describe(), e, _keep(path))
    pytest.fail(msg, pytrace=False)  # outside except: no chained traceback


def _keep(path):
    """Copy a failing run's history where it survives the test."""
    try:
        os.makedirs(KEEP_DIR, exist_ok=True)
        dst = os.path.join(KEEP_DIR, os.path.basename(path))
        shutil.copyfile(path, dst)
        return dst
    except OSError:
        return path


def _assert_valid(r):
    if r.client_errors:
        pytest.fail("client threads failed: %s" % "; ".join(r.client_errors), pytrace=False)
    if not r.result.valid():
        kept = _keep(r.history)
        pytest.fail("%s\n%s\n\nhistory: %s\nreplay: /usr/bin/python3 tests/checker/checker.py "
                    "%s%s\n\n%s" % (r.spec.describe(), r.result.report(), kept, kept,
                                    " --realtime" if r.spec.realtime else "", r.server_log),
                    pytrace=False)
    assert r.checked > 0


@pytest.mark.time_limit(120)
def test_protocol_is_serializable(protocol, tmp_path, checked):
    r = _run(runner.RunSpec("append", protocol, duration=APPEND_SECONDS, keys=8, zipf=0.99),
             tmp_path)
    checked("append %s" % protocol, r)
    _assert_valid(r)
    assert r.result.stats["final reads"] != "0 keys"
    _assert_no_aborts_under_calvin(r)
    b = _run(runner.RunSpec("bank", protocol, workload="bank", duration=BANK_SECONDS), tmp_path)
    checked("bank %s" % protocol, b)
    _assert_valid(b)
    assert b.result.stats["total reads checked"] > 0


def _assert_no_aborts_under_calvin(r):
    """calvin orders every transaction before it runs: at zipf 0.99 over 8
    keys, where every other protocol aborts, the nodes count no abort of
    any cause (INFO cc_aborts, summed over the nodes)."""
    if r.spec.protocol != "calvin":
        return
    sv = r.server_stats
    assert "aborts" in sv, sv
    assert sv["aborts"] == 0 and sv["commits"] > 1000, sv


@pytest.mark.time_limit(120)
def test_protocol_survives_kill9(protocol, tmp_path, checked):
    """kill -9 in the middle of the load, restart on the same --dir and
    port, clients reconnect and carry on. Transactions whose reply was lost
    are unknown; still no anomaly, and every acknowledged append is in the
    final reads (the checker's lost-append check)."""
    r = _run(runner.RunSpec("fault-kill9", protocol, duration=KILL9_SECONDS, faults=1),
             tmp_path)
    checked("kill -9 %s" % protocol, r)
    _assert_valid(r)
    assert any("kill -9" in e for e in r.events), r.events
    assert r.reconnects > 0, "no client noticed the kill"


@pytest.mark.time_limit(120)
def test_switch_in_the_middle_of_a_run(tmp_path, checked):
    protocols = runner.server_protocols()[0]
    if len(protocols) < 2:
        pytest.skip("the server offers one protocol")
    r = _run(runner.RunSpec("switch", protocols[0], duration=SWITCH_SECONDS,
                            switch=list(protocols)), tmp_path)
    checked("switch %s" % "->".join(protocols), r)
    _assert_valid(r)
    assert len([e for e in r.events if e.startswith("switch")]) == len(protocols), r.events


@pytest.mark.time_limit(120)
def test_checker_finds_anomalies_under_none(tmp_path, checked):
    """`none` reads and writes without concurrency control: the checker must
    report anomalies. If it reports nothing, the checker is blind."""
    r = _run(runner.RunSpec("must-find-anomalies", runner.BROKEN_PROTOCOL,
                            duration=NONE_SECONDS), tmp_path)
    checked("none", r)
    assert r.checked > 0
    assert not r.result.valid(), (
        "no anomaly found under `none` in %d transactions: the checker is blind\n%s"
        % (r.checked, r.result.report()))
    print(r.result.report(per_kind=1))


def test_none_needs_testing_mode(make_server):
    """`none` is refused unless the server runs with `testing yes`."""
    import redis
    s = make_server()
    c = s.client()
    try:
        with pytest.raises(redis.ResponseError, match="available only with 'testing yes'"):
            c.config_set("cc", "none")
        assert "none" not in runner.discover_protocols(c)[0]
    finally:
        c.close()
    t = make_server(opts={"testing": "yes"})
    c = t.client()
    try:
        assert c.config_set("cc", "none")
        assert c.config_get("cc") == {"cc": "none"}
    finally:
        c.close()


# ------------------------------------------------------------ 3-node cluster

def _assert_spans_nodes(r):
    """The run did what a cluster run is for: committed transactions that
    touch keys on two or more nodes, and committed work on every node."""
    span = r.span
    assert span.get("committed", 0) > 0, "no committed transaction in %s" % r.spec.describe()
    assert span["cross"] > 0, "no committed transaction spans nodes: %r" % span
    on = sorted(n for n, ops in span["ops_per_node"].items() if ops > 0)
    assert on == [1, 2, 3], "committed operations only on nodes %s: %r" % (on, span)


@pytest.mark.time_limit(150)
@pytest.mark.parametrize("topology", runner.CLUSTER_TOPOLOGIES)
def test_cluster_protocol_is_serializable(protocol, topology, tmp_path, checked):
    """List-append at high contention on a 3-node cluster: 3 clients per
    node, the 8 hot keys spread over the nodes, so MULTI/EXEC blocks span
    nodes; serializable and strictly serializable, nothing lost."""
    r = _run(runner.RunSpec("append", protocol, duration=CLUSTER_APPEND_SECONDS, keys=8,
                            zipf=0.99, topology=topology), tmp_path)
    checked("append %s %s, %d%% cross-node" % (
        protocol, topology, 100 * r.span.get("cross", 0) // max(1, r.span.get("committed", 0))),
        r)
    _assert_valid(r)
    _assert_spans_nodes(r)
    assert r.result.stats["final reads"] != "0 keys"
    _assert_no_aborts_under_calvin(r)


@pytest.mark.time_limit(150)
def test_cluster_switch_in_the_middle_of_a_run(tmp_path, checked):
    """CONFIG SET cc during the load, each switch sent to the next node:
    every node must report the new protocol right after, and the history
    across the switches must stay serializable."""
    protocols = runner.server_protocols()[0]
    if len(protocols) < 2:
        pytest.skip("the server offers one protocol")
    r = _run(runner.RunSpec("switch", protocols[0], duration=CLUSTER_SWITCH_SECONDS,
                            switch=list(protocols), topology="tcp3"), tmp_path)
    checked("switch %s on tcp3" % "->".join(protocols), r)
    _assert_valid(r)
    _assert_spans_nodes(r)
    switches = [e for e in r.events if e.startswith("switch")]
    assert len(switches) == len(protocols), r.events
    vias = set(e.split(" via ")[1].split(" (")[0] for e in switches)
    assert len(vias) > 1, "switches not sent to different nodes: %s" % switches


@pytest.mark.time_limit(150)
def test_cluster_bank_survives_kill9(protocol, tmp_path, checked):
    """The bank on a 3-node shm cluster while a random node is killed with
    kill -9 and restarted, CLUSTER_FAULTS times: every audit (a read-only
    MULTI of every balance) sees the opening total, and the history, with
    the transactions the crashes left unknown, has no anomaly."""
    r = _run(runner.RunSpec("bank-fault", protocol, workload="bank",
                            duration=CLUSTER_FAULT_SECONDS, faults=CLUSTER_FAULTS,
                            topology="shm3"), tmp_path)
    checked("bank kill -9 %s shm3" % protocol, r)
    _assert_valid(r)
    assert r.result.stats["total reads checked"] > 0
    kills = [e for e in r.events if "kill -9" in e]
    assert len(kills) == CLUSTER_FAULTS, r.events
    assert r.reconnects > 0, "no client noticed the kills"


@pytest.mark.time_limit(150)
def test_cluster_append_survives_kill9_on_tcp(protocol, tmp_path, checked):
    """List-append on a 3-node tcp cluster with kill -9 of random nodes:
    serializable, and every acknowledged append is in the final reads."""
    r = _run(runner.RunSpec("append-fault", protocol, duration=CLUSTER_APPEND_FAULT_SECONDS,
                            faults=3, topology="tcp3"), tmp_path)
    checked("append kill -9 %s tcp3" % protocol, r)
    _assert_valid(r)
    _assert_spans_nodes(r)


@pytest.mark.time_limit(150)
def test_cluster_checker_finds_anomalies_under_none(tmp_path, checked):
    """`none` on a cluster (started with testing yes): the checker must
    still find anomalies, or it is blind to cross-node ones."""
    r = _run(runner.RunSpec("must-find-anomalies", runner.BROKEN_PROTOCOL,
                            duration=CLUSTER_NONE_SECONDS, topology="shm3"), tmp_path)
    checked("none on shm3", r)
    assert r.checked > 0
    _assert_spans_nodes(r)
    assert not r.result.valid(), (
        "no anomaly found under `none` on shm3 in %d transactions: the checker is blind\n%s"
        % (r.checked, r.result.report()))
    cycles, spanning = r.cross_node_cycles()
    assert spanning > 0, (
        "none of the %d dependency cycles found under `none` spans nodes: the checker (or the "
        "key placement) is blind to cross-node anomalies\n%s" % (cycles, r.result.report()))
    print("%d of %d example cycles span nodes" % (spanning, cycles))
    print(r.result.report(per_kind=1))


# ------------------------------------------------- zipf 0.0, switching

@pytest.mark.time_limit(120)
@pytest.mark.parametrize("topology", ("single",) + runner.CLUSTER_TOPOLOGIES)
def test_protocol_in_rpc_stages_is_serializable_at_zipf_0(protocol, topology, tmp_path,
                                                          checked):
    """List-append with uniform key choice (zipf 0.0) over the 8 keys, with
    every stage by RPC (cc-stages rpc: the ops a stage would post
    one-sided, applied by a worker of the target node), and on shm3 also
    three random stage-wise hybrids in turn (CONFIG SET cc-stages while the
    load runs): the load spread evenly, every key contended now and then
    rather than one all the time. On shm3 the appends are to Redis lists
    (the list workload: RPUSH and LRANGE in MULTI/EXEC), the list type's
    serializability check under every protocol.
    Serializable, strictly serializable, nothing lost; on a cluster,
    transactions span nodes (test_stages.py counts that the stages do go
    by RPC)."""
    rpc = protocol + runner.STAGES_SEP + "rpc"
    if topology == "shm3":
        # And three random hybrids, each for a fifth of the run (CONFIG
        # SET cc-stages alone), then rpc again.
        rng = random.Random()
        cells = [rpc] + [protocol + runner.STAGES_SEP + runner.hybrid_stages(rng)
                         for _ in range(3)]
        r = _run(runner.RunSpec("list-z0-rpc-hybrids", rpc, workload="list",
                                duration=HYBRID_SECONDS, keys=8, zipf=0.0, topology=topology,
                                switch=cells), tmp_path)
        assert len([e for e in r.events if e.startswith("switch to ")]) == 4, r.events
    else:
        r = _run(runner.RunSpec("append-z0-rpc", rpc, duration=UNIFORM_SECONDS, keys=8,
                                zipf=0.0, topology=topology), tmp_path)
    checked("%s zipf 0 rpc %s %s" % ("list" if topology == "shm3" else "append", protocol,
                                    topology), r)
    _assert_valid(r)
    assert r.result.stats["final reads"] != "0 keys"
    if topology != "single":
        _assert_spans_nodes(r)


def _client_errors(r):
    """Errors that reached a client of the run: error replies in its
    history (a null EXEC after a failed WATCH is not an error), unknown
    outcomes, and transactions the servers failed with an error or a
    timeout (the client may have swallowed the reply, e.g. WATCH's)."""
    from history import load
    errs = []
    for t in load(r.history)[0]:
        e = t.get("error")
        if t["outcome"] == "info" or (e and e not in ("null EXEC", "WATCH: null EXEC")):
            errs.append("T%s %s: %s" % (t["id"], t["outcome"], e))
    for k in ("errors", "timeouts"):
        if r.server_stats.get(k):
            errs.append("servers: %d transactions failed (%s)" % (r.server_stats[k], k))
    if "error" in r.server_stats:
        errs.append("server counters unreadable: %s" % r.server_stats["error"])
    return errs


@pytest.mark.time_limit(150)
@pytest.mark.parametrize("topology", ("single", "shm3"))
def test_switch_every_second_among_all_protocols(topology, tmp_path, checked):
    """The bank while CONFIG SET cc and cc-stages switch every second among
    every protocol (nowait-shared included), in a random order, each with
    a random stage-wise hybrid (one-sided and RPC stages mixed): no client
    sees an error, every audit sees the opening total, and the history has
    no anomaly."""
    protocols = runner.server_protocols()[0]
    if len(protocols) < 2:
        pytest.skip("the server offers one protocol")
    n = len(protocols)
    rng = random.Random()
    cells = [p + runner.STAGES_SEP + runner.hybrid_stages(rng) for p in protocols]
    print("protocols and their stages: %s" % "; ".join(cells))
    r = _run(runner.RunSpec("bank-switch-%gs" % SWITCH_PERIOD, cells[0], workload="bank",
                            duration=SWITCH_PERIOD * (n + 1), switch=cells,
                            switch_every=SWITCH_PERIOD, topology=topology), tmp_path)
    checked("bank, switch every %g s %s" % (SWITCH_PERIOD, topology), r)
    _assert_valid(r)
    assert r.result.stats["total reads checked"] > 0
    assert r.result.stats["transfers committed"] > 0
    switches = [e for e in r.events if e.startswith("switch to ")]
    assert len(switches) == n, r.events
    reached = set(e.split()[2].partition(runner.STAGES_SEP)[0] for e in switches)
    assert reached == set(protocols), "never switched to %s: %s" % (
        sorted(set(protocols) - reached), r.events)
    errs = _client_errors(r)
    assert not errs, "errors reached the clients under switching:\n" + "\n".join(errs[:20])


# ------------------------------------------------------ Lua scripts (EVAL)

# The list-append transactions as Lua scripts (workload.EvalWorkload): half
# their keys undeclared, a third with a key chosen by what the script read.
# A protocol of each family (2PL, OCC, multi-version, timestamp ordering)
# on a topology each; `make check-serializable` runs every protocol on
# every topology, with kill -9 too.
EVAL_SECONDS = 3.0
EVAL_CELLS = [("single", "silo"), ("single", "nowait"), ("shm3", "mvcc"), ("tcp3", "cicada")]


@pytest.mark.time_limit(120)
@pytest.mark.parametrize("topology,proto", EVAL_CELLS, ids=["-".join(c) for c in EVAL_CELLS])
def test_eval_scripts_are_serializable(topology, proto, tmp_path, checked):
    """Each transaction one EVAL/EVALSHA whose reply holds every read:
    serializable, strictly serializable, nothing lost; on a cluster,
    scripts span nodes."""
    r = _run(runner.RunSpec("eval", proto, workload="eval", duration=EVAL_SECONDS, keys=8,
                            zipf=0.99, topology=topology), tmp_path)
    checked("eval %s %s" % (proto, topology), r)
    _assert_valid(r)
    assert r.result.stats["final reads"] != "0 keys"
    if topology != "single":
        _assert_spans_nodes(r)


@pytest.mark.time_limit(120)
def test_checker_finds_torn_scripts(tmp_path, checked):
    """The eval workload broken on purpose: each op its own script, the
    history still one transaction per plan. If the checker finds nothing,
    the eval workload's recording (or the checker) is blind."""
    r = _run(runner.RunSpec("eval-torn", "silo", workload="eval", duration=EVAL_SECONDS,
                            keys=8, zipf=0.99, torn=True), tmp_path)
    checked("eval torn silo", r)
    assert r.checked > 0
    assert not r.result.valid(), (
        "no anomaly found in %d transactions of torn scripts: the checker is blind\n%s"
        % (r.checked, r.result.report()))
    print(r.result.report(per_kind=1))


# persistence power: on one node a kill -9 restarts from the write-ahead
# log (checkpoint plus replay, then the undo log's recovery). In a cluster
# each node keeps its own log: on shm3 fed through its journal ring, and a
# kill -9 restarts the node from the region copy it left; on tcp3 written
# by its NIC thread, waited for by remote flushes, and a kill -9 replays it.
# A power cut (every node killed together, their copies dropped) restarts
# all of them from their checkpoints and logs, so one of each per cluster
# cell. One protocol per cell, chosen so that the four cover a
# multi-version protocol, OCC and 2PL.
POWER_CELLS = [("single", "append", "mvcc"), ("single", "bank", "silo"),
               ("shm3", "append", "silo"), ("tcp3", "bank", "nowait")]


@pytest.mark.time_limit(150)
@pytest.mark.parametrize("topology,workload,proto", POWER_CELLS,
                         ids=["-".join(c) for c in POWER_CELLS])
def test_power_survives_kill9(topology, workload, proto, tmp_path, checked):
    cluster = topology != "single"
    r = _run(runner.RunSpec("power-fault", proto, workload=workload,
                            duration=FAULT_SECONDS, faults=1 if cluster else 2,
                            power_cuts=1 if cluster else 0, topology=topology,
                            persistence="power"), tmp_path)
    checked("power kill -9 %s %s %s" % (topology, workload, proto), r)
    _assert_valid(r)
    assert sum("kill -9" in e for e in r.events) == (1 if cluster else 2), r.events
    assert sum("power cut" in e for e in r.events) == (1 if cluster else 0), r.events
