"""The short serializability check of `make test` (the long one is
`make check-serializable`, see run.py and README.md).

Per protocol the server offers (about 10 s each): a list-append run at high
contention (8 hot keys, zipf 0.99) checked for serializability and strict
serializability, and a bank run whose read-only MULTI/GET-all transactions
must see the opening total. Then: a run with `CONFIG SET cc` switches in the
middle, a run with kill -9 and restart of the node (unknown outcomes,
nothing acknowledged lost), and a run under `none`, which has no concurrency
control and in which the checker must find anomalies.

A failing run keeps its history (path in the failure message) for
`/usr/bin/python3 tests/checker/checker.py HISTORY --realtime`.
"""

import os
import shutil

import pytest

import run as runner

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
KEEP_DIR = os.path.join(os.environ.get("RCKV_BUILD") or os.path.join(REPO, "build"),
                        "checker-histories")

APPEND_SECONDS = 6.0
BANK_SECONDS = 3.0
FAULT_SECONDS = 8.0
SWITCH_SECONDS = 6.0
NONE_SECONDS = 6.0

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
    b = _run(runner.RunSpec("bank", protocol, workload="bank", duration=BANK_SECONDS), tmp_path)
    checked("bank %s" % protocol, b)
    _assert_valid(b)
    assert b.result.stats["total reads checked"] > 0


@pytest.mark.time_limit(120)
@pytest.mark.xfail(strict=False, reason=(
    "crash atomicity is the durability issue's work: without undo logs and commit marks, "
    "a kill -9 in the middle of a multi-key commit can leave part of that (unacknowledged) "
    "transaction visible, which this checker rightly reports; the test runs and reports "
    "every time, and must pass once recovery rolls in-flight transactions back"))
def test_protocol_survives_kill9(protocol, tmp_path, checked):
    """kill -9 in the middle of the load, restart on the same --dir and
    port, clients reconnect and carry on. Transactions whose reply was lost
    are unknown; still no anomaly, and every acknowledged append is in the
    final reads (the checker's lost-append check)."""
    r = _run(runner.RunSpec("fault-kill9", protocol, duration=FAULT_SECONDS, faults=1),
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
