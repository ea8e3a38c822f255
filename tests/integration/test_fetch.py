"""The fetch stage of declared transactions (cc/fetch.c): a MULTI/EXEC
block's keys, known at EXEC from the command table, are resolved and read
in batches that reach every node at once, before any command runs.

What a user would notice, counted rather than timed (INFO's per-protocol
line counts the fabric's round trips):
  - a read-only MULTI of 10 keys on 3 nodes fetches in one round trip once
    the node knows their addresses (two under timestamp and mvcc, whose
    reads take two steps), where reading key by key took one or more per
    key;
  - the replies are what they always were: absent keys, a key named twice,
    keys written earlier in the block, WATCHed keys another client changed.

rckv only: Redis has no such cluster (skipped with RCKV_TEST_TARGET=redis).
"""

import pytest

from cluster import make_cluster  # noqa: F401 (fixture)

pytestmark = pytest.mark.rckv_only


def proto_line(conn, proto):
    """The cc_proto_<proto> fields of INFO cc, as a dict of floats."""
    info = conn.call("INFO", "cc").decode()
    line = [ln for ln in info.split("\r\n") if ln.startswith("cc_proto_%s:" % proto)][0]
    return {k: float(v) for k, v in (kv.split("=") for kv in line.split(":", 1)[1].split(","))}


def ten_keys(cl):
    """10 keys spread over the 3 nodes (4 + 3 + 3)."""
    return (cl.keys_on(1, "f1:", 4) + cl.keys_on(2, "f2:", 3) + cl.keys_on(3, "f3:", 3))


def run_multi(conn, cmds):
    conn.call("MULTI")
    for c in cmds:
        conn.call(*c)
    return conn.call("EXEC")


@pytest.mark.parametrize("proto", ["silo", "nowait"])
def test_read_only_multi_of_ten_keys_on_three_nodes_fetches_in_one_round_trip(
        make_cluster, proto):
    """Over tcp, where a node caches the addresses of other nodes' keys: a
    MULTI of 10 GETs on keys of all 3 nodes takes 1 round trip to fetch
    (every node's READs in one batch, all in flight together), and under
    silo and nowait at most 2 in all (silo validates its reads; nowait
    releases its read locks). Before the fetch stage the same block took
    about 3 round trips per key."""
    cl = make_cluster("tcp", opts={"cc": proto})
    keys = ten_keys(cl)
    with cl.raw(2) as w:
        for i, k in enumerate(keys):
            assert w.call("SET", k, "v%d" % i) == "OK"
    with cl.raw(1) as c:
        expect = [b"v%d" % i for i in range(10)]
        # The first block learns the addresses (a probe per node's bucket,
        # then the blocks); later blocks find them in the address cache.
        assert run_multi(c, [("GET", k) for k in keys]) == expect
        assert c.call("CONFIG", "RESETSTAT") == "OK"
        rounds = 20
        for _ in range(rounds):
            assert run_multi(c, [("GET", k) for k in keys]) == expect
        p = proto_line(c, proto)
    assert p["commits"] == rounds, p
    assert p["fetches"] == rounds, p
    assert p["fetch_round_trips_per_txn"] == 1.0, p
    assert p["round_trips_per_txn"] <= 2.0, p


def ycsb_block(cl, proto, rounds=20):
    """A ycsb-t-like block over tcp (8 GETs and 2 SETs; the SETs on two
    nodes, neither the one the client talks to) sent to node 1 `rounds`
    times once its addresses are cached: the cc_proto_<proto> line of
    INFO over those rounds. Every round commits (asserted)."""
    keys = ten_keys(cl)
    with cl.raw(1) as c:
        assert c.call("MSET", *[x for k in keys for x in (k, "0")]) == "OK"
        block = [("GET", k) for k in keys[:4] + keys[5:7] + keys[8:]]
        block += [("SET", keys[4], "w"), ("SET", keys[7], "w")]
        assert run_multi(c, block)[-1] == "OK"  # learns the addresses
        assert c.call("CONFIG", "RESETSTAT") == "OK"
        for i in range(rounds):
            block[-2:] = [("SET", keys[4], "w%d" % i), ("SET", keys[7], "w%d" % i)]
            assert run_multi(c, block) == [b"0"] * 8 + ["OK", "OK"]
        p = proto_line(c, proto)
    assert p["commits"] == rounds and p["aborts"] == 0, p
    with cl.raw(3) as other:
        assert other.call("MGET", keys[4], keys[7]) == [b"w%d" % (rounds - 1)] * 2
    return p


@pytest.mark.parametrize("proto,trips", [("silo", 4.0), ("nowait", 3.0)])
def test_multi_writing_two_nodes_commits_in_few_round_trips(make_cluster, proto, trips):
    """The ycsb-t-like block of ycsb_block, counted per transaction from
    INFO: silo takes 4 round trips (fetch; lock, with each written item's
    header; validate the reads and install; the commit point with the
    releases), nowait 3 (fetch with its locks; install; commit point and
    releases). Before, silo took 6: its reads were validated in a round
    trip of their own, and the decision record in a batch of its own."""
    p = ycsb_block(make_cluster("tcp", opts={"cc": proto}), proto)
    assert p["fetch_round_trips_per_txn"] == 1.0, p
    assert p["round_trips_per_txn"] == trips, p


@pytest.mark.parametrize("proto", ["timestamp", "mvcc"])
def test_read_only_multi_of_ten_keys_on_three_nodes_fetches_in_two_round_trips(
        make_cluster, proto):
    """Under timestamp and mvcc a read is two steps (the Double-Read, then
    the CAS that raises the item's read timestamp with a READ of lock+ver
    behind it), batched for every key: a MULTI of 10 GETs on keys of all 3
    nodes takes 2 round trips to fetch and nothing more to commit (a
    read-only transaction holds nothing to release). Read key by key the
    same block took 2 round trips per key, about 20."""
    cl = make_cluster("tcp", opts={"cc": proto})
    keys = ten_keys(cl)
    with cl.raw(2) as w:
        for i, k in enumerate(keys):
            assert w.call("SET", k, "v%d" % i) == "OK"
    with cl.raw(1) as c:
        expect = [b"v%d" % i for i in range(10)]
        assert run_multi(c, [("GET", k) for k in keys]) == expect  # learns the addresses
        assert c.call("CONFIG", "RESETSTAT") == "OK"
        rounds = 20
        for _ in range(rounds):
            assert run_multi(c, [("GET", k) for k in keys]) == expect
        p = proto_line(c, proto)
    assert p["commits"] == rounds, p
    assert p["fetches"] == rounds, p
    assert p["fetch_round_trips_per_txn"] == 2.0, p
    assert p["round_trips_per_txn"] == 2.0, p


@pytest.mark.parametrize("proto", ["timestamp", "mvcc"])
def test_declared_writes_are_locked_in_the_fetch_rounds(make_cluster, proto):
    """A MULTI of 8 GETs and 2 plain SETs (ycsb-t's shape) under timestamp
    and mvcc: the SETs' locks are taken in the fetch's first round, next to
    the GETs' Double-Reads, so the block fetches in 2 round trips, its
    body costs none, and the commit of two keys of one node 1 more (the
    install and unlock batch). Locking each SET where the body reaches it
    cost a round trip per SET."""
    cl = make_cluster("tcp", opts={"cc": proto})
    keys = ten_keys(cl)
    with cl.raw(2) as w:
        for i, k in enumerate(keys):
            assert w.call("SET", k, "v%d" % i) == "OK"
    cmds = [("SET", k, "w") for k in keys[:2]] + [("GET", k) for k in keys[2:]]
    with cl.raw(1) as c:
        expect = ["OK", "OK"] + [b"v%d" % i for i in range(2, 10)]
        assert run_multi(c, cmds) == expect  # learns the addresses
        assert c.call("CONFIG", "RESETSTAT") == "OK"
        rounds = 20
        for _ in range(rounds):
            assert run_multi(c, cmds) == expect
        p = proto_line(c, proto)
    assert p["commits"] == rounds, p
    assert p["fetch_round_trips_per_txn"] == 2.0, p
    assert p["round_trips_per_txn"] == 3.0, p


def test_shared_locks_are_taken_in_two_fetch_rounds(make_cluster):
    """nowait with cc-lock-mode shared: a read takes its shared hold in two
    steps (READ the lock word with the block, then CAS one more holder in
    with a READ behind it), batched for every key, and a SET's exclusive
    lock rides in the first round. A MULTI of 10 GETs on 3 nodes fetches
    in 2 round trips, and the releases of its holds take 1 more; a MULTI of
    8 GETs and 2 SETs also fetches in 2, and commits in 1 more. Taken key
    by key, the same blocks cost 2 round trips per GET and 1 per SET, about
    21 in all."""
    cl = make_cluster("tcp", opts={"cc": "nowait", "cc-lock-mode": "shared"})
    keys = ten_keys(cl)
    with cl.raw(2) as w:
        for i, k in enumerate(keys):
            assert w.call("SET", k, "v%d" % i) == "OK"
    gets = [("GET", k) for k in keys]
    mixed = [("SET", k, "w") for k in keys[:2]] + gets[2:]
    with cl.raw(1) as c:
        expect = [b"v%d" % i for i in range(10)]
        assert run_multi(c, gets) == expect  # learns the addresses
        assert c.call("CONFIG", "RESETSTAT") == "OK"
        rounds = 20
        for _ in range(rounds):
            assert run_multi(c, gets) == expect
        p = proto_line(c, "nowait_shared")
        assert p["commits"] == rounds and p["aborts"] == 0, p
        assert p["fetch_round_trips_per_txn"] == 2.0, p
        assert p["round_trips_per_txn"] == 3.0, p
        assert run_multi(c, mixed) == ["OK", "OK"] + expect[2:]
        assert c.call("CONFIG", "RESETSTAT") == "OK"
        for _ in range(rounds):
            assert run_multi(c, mixed) == ["OK", "OK"] + expect[2:]
        p = proto_line(c, "nowait_shared")
    assert p["commits"] == rounds and p["aborts"] == 0, p
    assert p["fetch_round_trips_per_txn"] == 2.0, p
    # Both SETs are on node 1, the client's: one batch installs, commits
    # and releases every hold (the GETs' on nodes 2 and 3 included).
    assert p["round_trips_per_txn"] == 3.0, p


@pytest.mark.parametrize("fabric", ["shm", "tcp"])
def test_fetched_blocks_reply_as_before(make_cluster, fabric):
    """Replies of blocks whose keys are fetched: absent keys (their
    placeholders made at fetch), a key named twice, a key written earlier
    in the block and read later, DEL of fetched keys, and MGET/MSET across
    nodes, under each protocol with a fetch hook and one without."""
    cl = make_cluster(fabric)
    keys = ten_keys(cl)
    with cl.raw(1) as c, cl.raw(3) as other:
        for proto in ("silo", "nowait", "woundwait"):
            assert c.call("CONFIG", "SET", "cc", proto) == "OK"
            assert c.call("DEL", *keys) >= 0
            got = run_multi(c, [("GET", keys[0]), ("GET", keys[5]), ("SET", keys[0], "a"),
                                ("GET", keys[0]), ("GET", keys[0]), ("INCR", keys[9]),
                                ("MGET", keys[0], keys[9], keys[4])])
            assert got == [None, None, "OK", b"a", b"a", 1, [b"a", b"1", None]], (proto, got)
            assert other.call("MGET", keys[0], keys[9]) == [b"a", b"1"]
            got = run_multi(c, [("MSET", *[x for k in keys for x in (k, k + "!")]),
                                ("DEL", keys[1], keys[2], "nosuchkey"),
                                ("MGET", *keys[:4])])
            assert got == ["OK", 2, [(keys[0] + "!").encode(), None, None,
                                      (keys[3] + "!").encode()]], (proto, got)
            assert other.call("EXISTS", *keys) == 8


def test_watched_keys_fetched_with_the_block_still_fail_exec(make_cluster):
    """WATCHed keys join the fetch as reads: a watched key that another
    client changed on another node fails EXEC (null reply), an unchanged
    one lets it commit."""
    cl = make_cluster("tcp")
    keys = ten_keys(cl)
    with cl.raw(1) as c, cl.raw(2) as other:
        assert c.call("MSET", keys[0], "1", keys[7], "1") == "OK"
        assert c.call("WATCH", keys[0], keys[7]) == "OK"
        assert other.call("SET", keys[7], "2") == "OK"
        assert run_multi(c, [("GET", keys[0]), ("SET", keys[4], "x")]) is None
        assert other.call("EXISTS", keys[4]) == 0
        assert c.call("WATCH", keys[0], keys[7]) == "OK"
        assert run_multi(c, [("GET", keys[7]), ("SET", keys[4], "x")]) == [b"2", "OK"]
        assert other.call("GET", keys[4]) == b"x"


def test_address_cache_bound_is_online(make_cluster):
    """`addr-cache-entries` bounds each worker's address cache, and CONFIG
    SET changes it online: with room for one address, a block of 10 keys
    on other nodes finds most of them uncached and fetches in 3 round trips
    (two probe rounds of the index, then the reads); back at the default,
    in one."""
    cl = make_cluster("tcp", opts={"cc": "silo", "threads": 1})
    keys = ten_keys(cl)
    with cl.raw(1) as c:
        assert c.call("MSET", *[x for k in keys for x in (k, "v")]) == "OK"

        def fetch_trips():
            run_multi(c, [("GET", k) for k in keys])  # fills the cache
            assert c.call("CONFIG", "RESETSTAT") == "OK"
            for _ in range(5):
                assert run_multi(c, [("GET", k) for k in keys]) == [b"v"] * 10
            return proto_line(c, "silo")["fetch_round_trips_per_txn"]

        assert c.call("CONFIG", "SET", "addr-cache-entries", "1") == "OK"
        assert c.call("CONFIG", "GET", "addr-cache-entries") == [b"addr-cache-entries", b"1"]
        assert fetch_trips() == 3.0
        assert c.call("CONFIG", "SET", "addr-cache-entries", "262144") == "OK"
        assert fetch_trips() == 1.0


def cache_counts(conn):
    """INFO cc's address-cache hits and misses."""
    info = dict(ln.split(":", 1) for ln in conn.call("INFO", "cc").decode().split("\r\n")
                if ln.startswith("cc_addr_cache_"))
    return int(info["cc_addr_cache_hits"]), int(info["cc_addr_cache_misses"])


def test_own_region_keys_are_resolved_through_the_index(make_cluster, make_server):
    """A block whose every key is in the node's own region, read as memory,
    resolves them through the index (two memory reads, as cheap as a
    lookup in the address cache) and leaves the cache alone: on a
    standalone node, and on a cluster node for a block of its own keys.
    A block that also reaches another node still uses the cache for all of
    its keys, so it fetches in one round trip."""
    s = make_server(opts={"cc": "silo"})
    with s.raw() as c:
        assert c.call("MSET", *[x for i in range(10) for x in ("k%d" % i, i)]) == "OK"
        for r in range(1, 6):
            assert run_multi(c, [("INCR", "k%d" % i) for i in range(10)]) == \
                [i + r for i in range(10)]
        assert cache_counts(c) == (0, 0)

    cl = make_cluster("tcp", opts={"cc": "silo", "threads": 1})
    own = cl.keys_on(1, "own:", 4)
    mixed = own + cl.keys_on(2, "far:", 3)
    with cl.raw(1) as c:
        assert c.call("MSET", *[x for k in mixed for x in (k, "v")]) == "OK"
        assert c.call("CONFIG", "RESETSTAT") == "OK"
        for _ in range(3):
            assert run_multi(c, [("GET", k) for k in own]) == [b"v"] * 4
        assert cache_counts(c) == (0, 0)
        run_multi(c, [("GET", k) for k in mixed])  # fills the cache
        assert c.call("CONFIG", "RESETSTAT") == "OK"
        for _ in range(3):
            assert run_multi(c, [("GET", k) for k in mixed]) == [b"v"] * 7
        hits, misses = cache_counts(c)
        assert (hits, misses) == (3 * 7, 0)
        assert proto_line(c, "silo")["fetch_round_trips_per_txn"] == 1.0


SCRIPT_DECLARED = ("local v = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3]) "
                   "redis.call('MSET', KEYS[1], v[1] + 1, KEYS[2], v[2] + 1, KEYS[3], v[3] + 1) "
                   "return v[1] + v[2] + v[3]")
SCRIPT_MGET = SCRIPT_DECLARED.replace("KEYS", "ARGV")
SCRIPT_ONE_BY_ONE = ("local t = 0 for i = 1, 3 do local v = tonumber(redis.call('GET', ARGV[i])) "
                     "redis.call('SET', ARGV[i], v + 1) t = t + v end return t")


@pytest.mark.parametrize("proto,trips", [("silo", 4.0), ("nowait", 3.0)])
def test_scripts_fetch_their_keys_in_one_round(make_cluster, proto, trips):
    """A script that reads and increments one key on each of 3 nodes, over
    tcp once the addresses are cached: with its keys declared (KEYS), and
    with them undeclared but reached through one MGET and one MSET (the
    MGET fetches all three in one round, server/script.c fetch_keys), it
    takes the round trips of the same MULTI block (silo 4, nowait 3: one
    fetch round, then the commit). Reached one GET at a time, at least one
    more round per key after the first (4 more, measured)."""
    cl = make_cluster("tcp", opts={"cc": proto})
    keys = cl.keys_on(1, "s1:", 1) + cl.keys_on(2, "s2:", 1) + cl.keys_on(3, "s3:", 1)
    runs = [("declared", SCRIPT_DECLARED, keys, []), ("mget", SCRIPT_MGET, [], keys),
            ("one by one", SCRIPT_ONE_BY_ONE, [], keys)]
    with cl.raw(1) as c:
        assert c.call("MSET", *[x for k in keys for x in (k, "0")]) == "OK"
        total = 0
        per_txn = {}
        for name, script, declared, args in runs:
            argv = ["EVAL", script, str(len(declared))] + declared + args
            assert c.call(*argv) == total  # learns the addresses
            total += 3
            assert c.call("CONFIG", "RESETSTAT") == "OK"
            for _ in range(10):
                assert c.call(*argv) == total
                total += 3
            p = proto_line(c, proto)
            assert p["commits"] == 10 and p["aborts"] == 0, (name, p)
            per_txn[name] = p["round_trips_per_txn"]
    assert per_txn["declared"] == trips, per_txn
    assert per_txn["mget"] == trips, per_txn
    assert per_txn["one by one"] >= trips + 2, per_txn
