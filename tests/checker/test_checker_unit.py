"""The checker on small hand-made histories, without a server: a valid
history passes, and each anomaly kind is found and explained. If the
checker were made blind (or lost one of its inferences), these fail."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checker  # noqa: E402
from history import Recorder, load, parse_list  # noqa: E402


def T(tid, ops, outcome="ok", client=None, at=None, final=False, error=None):
    """A transaction record. Times in microseconds: invoked at `at`
    (default 100*tid) and completed 10 us later, so by default transactions
    are sequential in id order (which only matters with realtime=True)."""
    at = 100 * tid if at is None else at
    rec = {"id": tid, "client": client if client is not None else tid, "invoke": at * 1000,
           "complete": at * 1000 + 10000 if outcome != "info" else None,
           "outcome": outcome, "ops": ops}
    if final:
        rec["final"] = True
    if error:
        rec["error"] = error
    return rec


def A(k, v):
    return ["append", k, v]


def R(k, vals):
    return ["r", k, vals]


def final(tid, **lists):
    return T(tid, [R(k, v) for k, v in sorted(lists.items())], final=True)


def run(hist, realtime=False):
    return checker.check(hist, realtime=realtime)


def only(res, kind):
    assert res.counts.get(kind, 0) >= 1, res.report()
    return res.details[kind][0]["text"]


def test_valid_history_passes():
    h = [T(1, [A("x", "1")]),
         T(2, [R("x", ["1"]), A("x", "2"), R("x", ["1", "2"])]),
         T(3, [R("x", ["1", "2"]), R("y", [])]),
         T(4, [A("y", "4"), A("x", "4")]),
         final(5, x=["1", "2", "4"], y=["4"])]
    res = run(h, realtime=True)
    assert res.valid(), res.report()
    assert res.stats["transactions"] == 5
    assert "ww 2" in res.stats["graph"] and "wr" in res.stats["graph"]


def test_g0_write_cycle():
    h = [T(1, [A("x", "1"), A("y", "1")]),
         T(2, [A("x", "2"), A("y", "2")]),
         final(3, x=["1", "2"], y=["2", "1"])]
    res = run(h)
    text = only(res, "G0")
    assert "T1 -ww-> T2 -ww-> T1" in text or "T2 -ww-> T1 -ww-> T2" in text, text
    assert "T2 appended 2 to x right after T1 appended 1 (ww)" in text, text
    assert set(res.counts) == {"G0"}, res.report()


def test_g1a_aborted_read():
    h = [T(1, [A("x", "1")], outcome="fail", error="ERR transaction aborted"),
         T(2, [R("x", ["1"])]),
         final(3, x=["1"])]
    res = run(h)
    text = only(res, "G1a")
    assert "T2 read x containing 1, appended by T1, which failed" in text, text


def test_g1b_intermediate_read():
    h = [T(1, [A("x", "1"), A("x", "2")]),
         T(2, [R("x", ["1"])]),
         final(3, x=["1", "2"])]
    res = run(h)
    text = only(res, "G1b")
    assert "intermediate append of T1" in text, text


def test_g1c_circular_information_flow():
    h = [T(1, [A("x", "1"), R("y", ["2"])]),
         T(2, [A("y", "2"), R("x", ["1"])]),
         final(3, x=["1"], y=["2"])]
    res = run(h)
    text = only(res, "G1c")
    assert "(wr)" in text and "(rw)" not in text, text
    assert set(res.counts) == {"G1c"}, res.report()


def test_g_single_lost_update_shape():
    # Both read x empty, both appended: T2 must have missed T1's element.
    h = [T(1, [R("x", []), A("x", "1")]),
         T(2, [R("x", []), A("x", "2")]),
         final(3, x=["1", "2"])]
    res = run(h)
    text = only(res, "G-single")
    assert "T2 read x empty, and T1 appended the next element 1 (rw)" in text, text
    assert "T2 appended 2 to x right after T1 appended 1 (ww)" in text, text


def test_g2_write_skew():
    h = [T(1, [R("x", []), R("y", []), A("x", "1")]),
         T(2, [R("x", []), R("y", []), A("y", "2")]),
         final(3, x=["1"], y=["2"])]
    res = run(h)
    text = only(res, "G2")
    assert text.count("(rw)") == 2, text
    assert set(res.counts) == {"G2"}, res.report()


def test_lost_append():
    h = [T(1, [R("x", []), A("x", "1")]),
         T(2, [R("x", []), A("x", "2")]),
         final(3, x=["2"])]
    res = run(h)
    text = only(res, "lost-append")
    assert "T1 (acknowledged) appended 1 to x, but the final read of x (T3)" in text, text


def test_incompatible_orders():
    h = [T(1, [A("x", "1")]), T(2, [A("x", "2")]),
         T(3, [R("x", ["1"])]), T(4, [R("x", ["2"])]),
         final(5, x=["1", "2"])]
    res = run(h)
    text = only(res, "incompatible-order")
    assert "T4 read [2]" in text, text


def test_duplicate_garbage_and_internal():
    h = [T(1, [A("x", "1")]),
         T(2, [R("x", ["1", "1"])]),
         T(3, [R("y", ["9"])]),
         T(4, [A("z", "4"), R("z", [])]),
         final(5, x=["1"], z=["4"])]
    res = run(h)
    only(res, "duplicate-elements")
    assert "nobody appended '9' to y" in only(res, "garbage-element")
    assert "T4 appended 4 to z, then read z = [] without them" in only(res, "internal")


def test_unknown_outcomes():
    h = [T(1, [A("x", "1")], outcome="info"),            # read later: committed
         T(2, [A("x", "2")], outcome="info"),            # never seen: ignored
         T(3, [A("x", "3"), A("y", "3")], outcome="info"),  # half seen: y lost
         T(4, [R("x", ["1"])]),
         final(5, x=["1", "3"], y=[])]
    res = run(h)
    assert res.counts == {"lost-append": 1}, res.report()
    assert "T3 (outcome unknown" in only(res, "lost-append")
    assert res.stats["unknown"] == "3 (2 seen committed)"


def test_unknown_outcome_can_close_a_cycle():
    # T1's outcome is unknown but T2 read its element, so T1 committed and
    # its write cycle with T2 is a real G0.
    h = [T(1, [A("x", "1"), A("y", "1")], outcome="info"),
         T(2, [A("x", "2"), A("y", "2")]),
         final(3, x=["1", "2"], y=["2", "1"])]
    only(run(h), "G0")


def test_realtime_stale_read():
    # T1 commits x=[1]; T2 starts after T1 completed and reads x empty.
    # Serializable (T2 before T1), not strictly serializable.
    h = [T(1, [A("x", "1")], at=0),
         T(2, [R("x", [])], at=100),
         final(3, x=["1"])]
    assert run(h).valid()
    res = run(h, realtime=True)
    text = only(res, "G-single-realtime")
    assert "T1 completed at +0.000010s, before T2 was invoked at +0.000100s" in text, text


def test_concurrent_is_not_realtime_violation():
    h = [T(1, [A("x", "1")], at=0),
         T(2, [R("x", [])], at=5),   # overlaps T1 (invoked before T1 completed)
         final(3, x=["1"])]
    assert run(h, realtime=True).valid()


def test_bank_total():
    setup = T(1, [["w", "a", 50], ["w", "b", 50]])
    good = [setup, T(2, [["transfer", "a", "b", 10]]),
            T(3, [["bal", "a", 40], ["bal", "b", 60]])]
    res = run(good)
    assert res.valid() and res.stats["total reads checked"] == 1, res.report()
    bad = good + [T(4, [["bal", "a", 40], ["bal", "b", 50]])]
    assert "T4 read a total of 90, expected 100" in only(run(bad), "bank-total")


def test_parse_list():
    assert parse_list(None) == []
    assert parse_list(b",1-2-0,3-4-1") == ["1-2-0", "3-4-1"]
    assert parse_list(b"junk") == ["junk"]


def test_history_file_replay_names_the_cycle(tmp_path):
    """A history written by the recorder replays through the CLI alone;
    the report names the transactions of the cycle and explains each edge."""
    path = str(tmp_path / "h.jsonl")
    with Recorder(path) as rec:
        rec.meta(run="unit", protocol="made-up")
        for r in [T(1, [R("x", []), R("y", []), A("x", "1")]),
                  T(2, [R("x", []), R("y", []), A("y", "2")]),
                  final(3, x=["1"], y=["2"])]:
            rec.record(r["id"], r["client"], r["invoke"], r["complete"], r["outcome"], r["ops"],
                       final=r.get("final", False))
    txns, metas = load(path)
    assert len(txns) == 3 and metas[0]["protocol"] == "made-up"
    p = subprocess.run([sys.executable, os.path.join(HERE, "checker.py"), path,
                        "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "INVALID: 1 anomalies (G2 1)" in p.stdout, p.stdout
    assert "T1 -rw-> T2 -rw-> T1" in p.stdout or "T2 -rw-> T1 -rw-> T2" in p.stdout, p.stdout
    assert "T1 read y empty, and T2 appended the next element 2 (rw)" in p.stdout, p.stdout
    assert "T1 (client 1, ok" in p.stdout and "T2 (client 2, ok" in p.stdout, p.stdout
    with open(str(tmp_path / "r.json")) as f:
        assert json.load(f)["counts"] == {"G2": 1}
    # A valid history exits 0.
    ok = str(tmp_path / "ok.jsonl")
    with open(ok, "w") as f:
        for r in [T(1, [A("x", "1")]), final(2, x=["1"])]:
            f.write(json.dumps(r) + "\n")
    p = subprocess.run([sys.executable, os.path.join(HERE, "checker.py"), ok, "--realtime"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "VALID" in p.stdout, p.stdout + p.stderr


def test_torn_history_is_an_error(tmp_path):
    path = str(tmp_path / "torn.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps(T(1, [A("x", "1")])) + "\n" + '{"id": 2, "outc')
    p = subprocess.run([sys.executable, os.path.join(HERE, "checker.py"), path],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "not JSON" in p.stderr


@pytest.mark.parametrize("n", [2000])
def test_large_valid_history_is_fast(n):
    """A serial history of n transactions over 8 keys checks in seconds,
    with realtime, and stays valid (no false positive from the rt
    reduction or the order inference)."""
    import random
    rnd = random.Random(7)
    lists = {k: [] for k in "abcdefgh"}
    h = []
    for i in range(1, n + 1):
        ops = []
        for _ in range(rnd.randint(1, 4)):
            k = rnd.choice("abcdefgh")
            if rnd.random() < 0.5:
                ops.append(R(k, list(lists[k])))
            else:
                v = "%d-%d" % (i, len(ops))
                lists[k].append(v)
                ops.append(A(k, v))
        h.append(T(i, ops, client=i % 5))
    h.append(final(n + 1, **lists))
    res = run(h, realtime=True)
    assert res.valid(), res.report()


# ------------------------------------------------- the eval workload's records

def test_eval_reply_is_recorded_op_by_op():
    """EvalWorkload reads a script's reply back into the history's ops: a
    read's value, and the candidate a "c" op appended to (the index the
    script returned); a reply of another shape is an error, not a guess."""
    from workload import EvalWorkload, KeySpace
    wl = EvalWorkload(KeySpace("k", 4, 0.0, 64))
    ops = [["r", "k0:0"], ["append", "k1:0", "1-1-1"], ["c", "k1:0", ["k2:0", "k3:0"], "1-1-2"]]
    got = wl.recorded(ops, [b",0-1-0", b"", b",0-2-0,1-1-1", b"2"])
    assert got == [["r", "k0:0", ["0-1-0"]], ["append", "k1:0", "1-1-1"],
                   ["r", "k1:0", ["0-2-0", "1-1-1"]], ["append", "k3:0", "1-1-2"]]
    for bad in ([b"", b""], [b"", b"", b"", b"2", b"x"], [b"", b"", b"", b"3"], b"OK"):
        with pytest.raises(RuntimeError):
            wl.recorded(ops, bad)


def test_eval_unknown_script_is_placed_by_the_final_reads(tmp_path):
    """A script whose outcome is unknown appended, if it committed, to a
    candidate nobody knew: its record waits for the final reads and names
    the candidate holding its element; the checker then sees it committed
    (a read saw it), or not (no read did)."""
    from workload import Context, EvalWorkload, KeySpace
    path = str(tmp_path / "h.jsonl")
    wl = EvalWorkload(KeySpace("k", 4, 0.0, 64))
    with Recorder(path) as rec:
        ctx = Context([], rec, 1)
        rec.record(rec.new_id(), 0, 1000, 2000, "ok", [["append", "k0:0", "0-1-0"]])
        for seq, cands in ((2, ["k1:0", "k2:0"]), (3, ["k3:0", "k2:0"])):
            wl._record_unsure(ctx, rec.new_id(), 1, 3000, "info",
                              [["c", "k0:0", cands, "1-%d-0" % seq]], "link down")
        wl.final_lists = {"k0:0": ["0-1-0"], "k1:0": [], "k2:0": ["1-2-0"], "k3:0": []}
        rec.record(rec.new_id(), 9, 5000, 6000, "ok",
                   [["r", k, v] for k, v in sorted(wl.final_lists.items())], final=True)
        wl.record_pending(ctx)
    txns = {t["id"]: t for t in load(path)[0]}
    assert txns[2]["ops"] == [["r", "k0:0", None], ["append", "k2:0", "1-2-0"]]
    assert txns[3]["ops"] == [["r", "k0:0", None], ["append", "k3:0", "1-3-0"]]
    res = checker.check(list(txns.values()))
    assert res.valid(), res.report()
    assert res.stats["unknown"] == "2 (1 seen committed)", res.stats
