"""Scenario tests of the sundial protocol (logical leases, RCC 4.5,
cc/protocols/sundial.c).

A reader R is held open with DEBUG SLEEP inside its MULTI (the sleep runs
inside the transaction, on its coroutine, after its fetch read every key)
while other clients write and read its keys. Under sundial every version
of an item carries a lease [wts, rts]; R commits at a timestamp
commit_tts inside the lease of every version it read, renewing (raising
rts) where the lease is too short, and aborts only when a renewal fails
(cause renew). A lease that other readers extended past R's commit_tts
lets R commit although a writer has replaced the version since: R is
ordered before that writer. An OCC protocol (silo here) validates the
version itself and aborts R instead.
"""

import time

import pytest

import rckvtest

pytestmark = pytest.mark.rckv_only

# R's pause: long enough for the other clients' commands to run whole in
# it, with margins for a loaded machine.
HOLD_S = 0.8


def counters(c, proto):
    """INFO: the cc_proto_<proto> line and the lease counters."""
    info = c.info()
    line = info.get("cc_proto_" + proto)
    assert isinstance(line, dict), "INFO has no cc_proto_%s line" % proto
    return {"renew": int(line["aborts_renew"]), "commits": int(line["commits"]),
            "validate": int(line["aborts_validate"]),
            "renewals": int(info["cc_lease_renewals"]), "hits": int(info["cc_lease_hits"])}


@pytest.mark.parametrize("cc", ["sundial", "silo"])
def test_reader_commits_inside_an_extended_lease(make_server, key, cc):
    """R reads x and y (fetched together when its EXEC starts) and sleeps.
    W1 overwrites x; then a plain GET y (R2, begun after R) reads y, and
    under sundial renews y's lease up to its commit_tts (a stamp taken
    after R's). R wakes: x's lease ended before R's commit_tts and x was
    overwritten, so the renewal fails: R aborts (cause renew) and runs
    again, keeping its first attempt's lower bound. It now reads x = W1
    and y = y0, and commits at W1's commit_tts, which lies inside both
    leases: x's [W1, W1] and y's, which R2 extended. During that second
    sleep W2 overwrites y. Sundial still commits R with y0, ordered before
    W2 (its commit_tts is inside y0's lease), and validates both reads by
    their leases alone (INFO cc_lease_hits). Silo validates y's version,
    finds it changed, and aborts R a second time: R ends with y = W2."""
    s = rckvtest_start(make_server, cc)
    x, y = key + "x", key + "y"
    with s.client() as c:
        c.mset({x: "x0", y: "y0"})
        before = counters(c, cc)
        r = rckvtest.begin_multi(s, c, [("GET", x), ("GET", y), ("DEBUG", "SLEEP", HOLD_S)])
        t0 = time.monotonic()
        time.sleep(0.1)
        assert c.set(x, "W1")
        time.sleep(0.1)
        assert c.get(y) == b"y0"  # R2: extends y0's lease under sundial
        # W2 lands in the middle of R's second attempt's sleep.
        time.sleep(max(0.0, t0 + 1.5 * HOLD_S - time.monotonic()))
        assert r.is_alive(), "R finished before its second attempt's sleep"
        assert c.set(y, "W2")
        reply = r.finish()
        after = counters(c, cc)
        assert c.mget([x, y]) == [b"W1", b"W2"]

    if cc == "silo":
        assert reply == [b"W1", b"W2", b"OK"], reply
        assert after["validate"] - before["validate"] >= 2
        return
    assert reply == [b"W1", b"y0", b"OK"], (
        "R did not commit inside y0's extended lease (it saw W2's y, so it aborted "
        "again as OCC would): %r" % (reply,))
    assert after["renew"] - before["renew"] == 1, \
        "R's first attempt did not abort with cause renew (x was overwritten)"
    assert after["hits"] - before["hits"] >= 2, \
        "R's second attempt did not validate its reads by their leases (INFO cc_lease_hits)"
    assert after["renewals"] - before["renewals"] >= 1, \
        "the GET of y renewed no lease (INFO cc_lease_renewals)"


def rckvtest_start(make_server, cc):
    s = make_server(opts={"cc": cc})
    with s.client() as c:
        assert c.config_get("cc") == {"cc": cc}
    return s
