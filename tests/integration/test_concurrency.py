"""Concurrent clients on hot keys: no lost update, no partial transaction,
no error reply, under each CC protocol and while the protocol is switched
online (CONFIG SET cc) every 0.3 s during the load.

Against Redis (RCKV_TEST_TARGET=redis) the same loads run once without any
CC switching; that validates the tests themselves.
"""

import random
import threading
import time

import pytest

from rckvtest import REDIS_MODE, encode

CLIENTS = 8
WATCH_INCREMENTS = 500     # per client: final value must be CLIENTS * this
MULTI_TXNS = 500           # per client
NKEYS = 10

VARIANTS = ["redis"] if REDIS_MODE else ["nowait", "silo", "switch"]


def start(make_server, variant):
    if variant == "redis":
        return make_server()
    # The switching variant starts on nowait; the switcher then flips it.
    cc = "nowait" if variant == "switch" else variant
    s = make_server(opts={"cc": cc})
    with s.raw() as c:
        assert c.call("CONFIG", "GET", "cc") == [b"cc", cc.encode()]
    return s


class Switcher(threading.Thread):
    """CONFIG SET cc nowait/silo alternately every 0.3 s until stopped.
    Every reply must be +OK: a switch is a pause for clients, never an error."""

    def __init__(self, server, errors):
        super().__init__(daemon=True)
        self.server, self.errors = server, errors
        self.stop = threading.Event()
        self.switches = 0

    def run(self):
        try:
            with self.server.raw(timeout=30) as c:
                names = ["silo", "nowait"]
                while not self.stop.wait(0.3):
                    name = names[self.switches % 2]
                    reply = c.call_raw("CONFIG", "SET", "cc", name)
                    if reply != b"+OK\r\n":
                        self.errors.append("CONFIG SET cc %s -> %r" % (name, reply))
                        return
                    got = c.call("CONFIG", "GET", "cc")
                    if got != [b"cc", name.encode()]:
                        self.errors.append("after CONFIG SET cc %s: CONFIG GET cc -> %r"
                                           % (name, got))
                        return
                    self.switches += 1
        except Exception as e:
            self.errors.append("switcher: %r" % e)


MIN_SWITCHES = 3       # protocol switches that must overlap the load
SWITCH_LOAD_CAP = 60.0  # seconds: stop adding rounds after this


def run_clients(server, variant, work):
    """Run rounds of work(conn, i, errors) on CLIENTS threads, each with its
    own connection. Every client runs one round; with variant 'switch' the
    switcher runs and clients keep doing rounds until at least MIN_SWITCHES
    switches overlapped the load (a fast build could otherwise finish
    before the first switch). Returns the rounds each client ran."""
    errors = []
    sw = None
    if variant == "switch":
        sw = Switcher(server, errors)
        sw.start()
    conns = [server.raw(timeout=30) for _ in range(CLIENTS)]
    rounds = [0] * CLIENTS
    start = time.monotonic()

    def body(i):
        try:
            while True:
                work(conns[i], i, errors)
                rounds[i] += 1
                if errors or sw is None or sw.switches >= MIN_SWITCHES or \
                        time.monotonic() - start > SWITCH_LOAD_CAP:
                    break
        except Exception as e:
            errors.append("client %d: %r" % (i, e))

    ts = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(CLIENTS)]
    try:
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in ts), "clients did not finish"
    finally:
        if sw:
            sw.stop.set()
            sw.join(timeout=30)
        for c in conns:
            c.close()
    assert not errors, errors[:10]
    if sw:
        assert sw.switches >= MIN_SWITCHES, "only %d switches during the load" % sw.switches
        with server.raw() as c:
            assert c.call("CONFIG", "GET", "cc")[1] in (b"nowait", b"silo")
    return rounds


@pytest.mark.time_limit(150)
@pytest.mark.parametrize("variant", VARIANTS)
def test_watch_increments(make_server, variant):
    s = start(make_server, variant)
    key = "counter"
    retries = [0] * CLIENTS

    def work(c, i, errors):
        done = 0
        while done < WATCH_INCREMENTS:
            c.send(encode("WATCH", key) + encode("GET", key))
            w, v = c.read_raw(), c.read()
            if w != b"+OK\r\n" or (v is not None and not isinstance(v, bytes)):
                errors.append("client %d: WATCH/GET -> %r %r" % (i, w, v))
                return
            n = int(v) if v is not None else 0
            c.send(encode("MULTI") + encode("SET", key, n + 1) + encode("EXEC"))
            m, q, e = c.read_raw(), c.read_raw(), c.read_raw()
            if (m, q) != (b"+OK\r\n", b"+QUEUED\r\n"):
                errors.append("client %d: MULTI/SET -> %r %r" % (i, m, q))
                return
            if e == b"*1\r\n+OK\r\n":
                done += 1
            elif e == b"*-1\r\n":
                retries[i] += 1  # WatchError: someone else won; retry
            else:
                errors.append("client %d: EXEC -> %r" % (i, e))
                return

    rounds = run_clients(s, variant, work)
    with s.raw() as c:
        # 8 x 500 = 4000 (more if the switching variant needed more rounds).
        assert c.call("GET", key) == str(sum(rounds) * WATCH_INCREMENTS).encode()


@pytest.mark.time_limit(150)
@pytest.mark.parametrize("variant", VARIANTS)
def test_multi_incr_many_keys(make_server, variant):
    """Each transaction INCRs either all of A0..A9 or a random subset of
    B0..B9. All-keys transactions must see the ten counters equal (nothing
    partial is ever visible), every INCR result of a key must be distinct
    (no lost or doubled update), and the totals must be exact."""
    s = start(make_server, variant)
    akeys = ["A%d" % j for j in range(NKEYS)]
    bkeys = ["B%d" % j for j in range(NKEYS)]
    seen_a = [[] for _ in range(CLIENTS)]          # INCR results of A-transactions
    seen_b = [{} for _ in range(CLIENTS)]          # key -> INCR results

    rnds = [random.Random(1000 + i) for i in range(CLIENTS)]

    def work(c, i, errors):
        rnd = rnds[i]
        for _ in range(MULTI_TXNS):
            if rnd.random() < 0.5:
                keys = akeys
            else:
                keys = rnd.sample(bkeys, rnd.randint(1, NKEYS))
            c.send(encode("MULTI") + b"".join(encode("INCR", k) for k in keys) + encode("EXEC"))
            head = [c.read_raw() for _ in range(len(keys) + 1)]
            if head != [b"+OK\r\n"] + [b"+QUEUED\r\n"] * len(keys):
                errors.append("client %d: queueing -> %r" % (i, head))
                return
            res = c.read()
            if not isinstance(res, list) or len(res) != len(keys) or \
                    not all(isinstance(x, int) for x in res):
                errors.append("client %d: EXEC -> %r" % (i, res))
                return
            if keys is akeys:
                if len(set(res)) != 1:
                    errors.append("client %d: partial transaction visible: %r" % (i, res))
                    return
                seen_a[i].append(res[0])
            else:
                for k, v in zip(keys, res):
                    seen_b[i].setdefault(k, []).append(v)

    run_clients(s, variant, work)

    # Serial equivalence: the A-transactions' results are exactly 1..N.
    all_a = sorted(v for lst in seen_a for v in lst)
    assert all_a == list(range(1, len(all_a) + 1))
    counts = {k: 0 for k in bkeys}
    with s.raw() as c:
        for k in akeys:
            assert c.call("GET", k) == str(len(all_a)).encode(), k
        for k in bkeys:
            vals = sorted(v for d in seen_b for v in d.get(k, []))
            counts[k] = len(vals)
            assert vals == list(range(1, len(vals) + 1)), k
            got = c.call("GET", k)
            assert (int(got) if got is not None else 0) == counts[k], k
    assert all_a and sum(counts.values()) > 0  # both kinds actually ran
