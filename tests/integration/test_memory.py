"""INFO memory and maxmemory (issue 21, "Memory, as Redis reports it and as
Redis spends it"):

- used_memory counts the data: after 20,000 values of 1,000 bytes it has
  grown by about that much (the blocks at their size class, 1,088 bytes for
  these items, plus heap), and the region's free space, reported apart,
  shrinks by what the blocks took;
- the fields a Redis tool parses are there, in Redis's formats;
- CONFIG SET/GET maxmemory (with Redis's units) and maxmemory-policy
  round-trip; bad values get Redis's error with the reason;
- past maxmemory, commands that may add data (SET, INCR, APPEND, MSET,
  pipelined or in MULTI) fail with Redis's exact OOM error, while reads
  and DEL work; lowering the used memory or raising maxmemory lets writes
  through again. A full MemStore's own error is tested in
  test_durability.py and test_cluster_limits.py.
"""
import re

import pytest

from rckvtest import encode

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
OK = b"+OK\r\n"
HUMAN = re.compile(r"^\d+(\.\d\d[KMGTP])?B?$")


def info_memory(c):
    text = c.call("INFO", "memory").decode()
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def load(c, prefix, n, size):
    for base in range(0, n, 500):
        args = []
        for i in range(base, min(n, base + 500)):
            args += ["%s%08d" % (prefix, i), b"%08d" % i + b"v" * (size - 8)]
        assert c.call_raw("MSET", *args) == OK


@pytest.mark.time_limit(120)
def test_used_memory_counts_the_data(make_server):
    s = make_server(opts={"memory": "256mb", "persistence": "none"})
    with s.raw(timeout=30) as c:
        before = info_memory(c)
        for f in ("used_memory", "used_memory_human", "used_memory_rss", "used_memory_rss_human",
                  "used_memory_peak", "used_memory_peak_human", "used_memory_dataset",
                  "maxmemory", "maxmemory_human", "maxmemory_policy", "rckv_region_bytes",
                  "rckv_region_free", "rckv_index_bytes", "rckv_index_resident"):
            assert f in before, "INFO memory has no %s" % f
        assert before["maxmemory"] == "0" and before["maxmemory_human"] == "0B"
        assert before["maxmemory_policy"] == "noeviction"
        assert before["rckv_region_bytes"] == str(256 << 20)
        n, size = 20000, 1000
        load(c, "mem:", n, size)
        after = info_memory(c)
        grew = int(after["used_memory"]) - int(before["used_memory"])
        data = n * (size + len("mem:00000000"))
        # The blocks at their class (1,088 bytes for a 1,060-byte item, 2.6%
        # over), plus what the heap grew by (the workers' pools of
        # transaction images, sized by the MSETs of 500 keys: a few MB).
        blocks = int(after["used_memory_dataset"]) - int(before["used_memory_dataset"])
        assert blocks == n * 1088, "the blocks took %d bytes, not %d x 1088" % (blocks, n)
        heap = int(after["used_memory_overhead"]) - int(before["used_memory_overhead"])
        assert grew == blocks + heap
        assert data <= grew and heap < 16 << 20, \
            "used_memory grew by %d for %d bytes of data (heap %d)" % (grew, data, heap)
        freed = int(before["rckv_region_free"]) - int(after["rckv_region_free"])
        # ... and the tails of the slabs given to the class (4 MiB is not a
        # multiple of 1,088), under a block each.
        slabs = int(after["rckv_slabs_assigned"]) - int(before["rckv_slabs_assigned"])
        assert 0 <= freed - blocks < slabs * 1088, \
            "region free space shrank by %d, blocks took %d, %d slabs" % (freed, blocks, slabs)
        assert int(after["used_memory_peak"]) >= int(after["used_memory"])
        for f in ("used_memory_human", "used_memory_rss_human", "used_memory_peak_human",
                  "maxmemory_human"):
            assert HUMAN.match(after[f]), "%s:%s" % (f, after[f])
        assert after["used_memory_human"].endswith("M")
        # DEL gives the blocks back.
        for base in range(0, n, 1000):
            c.call("DEL", *["mem:%08d" % i for i in range(base, base + 1000)])
        gone = info_memory(c)
        assert int(gone["used_memory_dataset"]) == int(before["used_memory_dataset"])


def test_config_maxmemory_round_trips(server):
    with server.raw() as c:
        try:
            for value, want in (("100mb", b"104857600"), ("1gb", b"1073741824"),
                                ("12345", b"12345"), ("2GB", b"2147483648"), ("0", b"0")):
                assert c.call_raw("CONFIG", "SET", "maxmemory", value) == OK
                assert c.call("CONFIG", "GET", "maxmemory") == [b"maxmemory", want]
            assert c.call_raw("CONFIG", "SET", "maxmemory", "100mb") == OK
            m = info_memory(c)
            assert m["maxmemory"] == "104857600" and m["maxmemory_human"] == "100.00M"
            assert c.call_raw("CONFIG", "SET", "maxmemory-policy", "NOEVICTION") == OK
            assert c.call("CONFIG", "GET", "maxmemory-policy") == [b"maxmemory-policy",
                                                                   b"noeviction"]
            assert c.call("CONFIG", "GET", "maxmemory*") == [
                b"maxmemory", b"104857600", b"maxmemory-policy", b"noeviction"]
        finally:
            c.call("CONFIG", "SET", "maxmemory", "0")


@pytest.mark.parametrize("name,value,why", [
    ("maxmemory", "lots", "argument must be a memory value"),
    ("maxmemory", "-1", "argument must be a memory value"),
    ("maxmemory", "10xb", "argument must be a memory value"),
    ("maxmemory-policy", "allkeys-lru",
     "'allkeys-lru' evicts keys, which rckv does not do: the only policy supported is "
     "noeviction (writes past maxmemory fail with OOM)"),
    ("maxmemory-policy", "volatile-ttl",
     "'volatile-ttl' evicts keys, which rckv does not do: the only policy supported is "
     "noeviction (writes past maxmemory fail with OOM)"),
    ("maxmemory-policy", "lru", "argument(s) must be one of the following: noeviction"),
])
def test_config_bad_values(server, name, value, why):
    with server.raw() as c:
        before = c.call("CONFIG", "GET", name)
        want = ("-ERR CONFIG SET failed (possibly related to argument '%s') - %s\r\n"
                % (name, why)).encode()
        assert c.call_raw("CONFIG", "SET", name, value) == want
        assert c.call("CONFIG", "GET", name) == before


@pytest.mark.time_limit(60)
def test_maxmemory_noeviction(server, key):
    with server.raw() as c:
        k = key + "k"
        assert c.call_raw("SET", k, "before") == OK
        assert c.call_raw("SET", key + "n", "5") == OK
        try:
            # Below what the process already uses: every write that may add
            # data is refused, at once (CONFIG SET takes effect for the
            # next command).
            assert c.call_raw("CONFIG", "SET", "maxmemory", "1mb") == OK
            assert c.call_raw("SET", key + "new", "x") == OOM
            assert c.call_raw("SET", k, "overwrite") == OOM  # Redis refuses it too
            assert c.call_raw("INCR", key + "n") == OOM
            assert c.call_raw("APPEND", k, "more") == OOM
            assert c.call_raw("MSET", key + "a", "1", key + "b", "2") == OOM
            # Pipelined writes (run as a group when they may): each refused.
            c.send(encode("SET", key + "p1", "1") + encode("SET", key + "p2", "2")
                   + encode("GET", k))
            assert [c.read_raw() for _ in range(3)] == [OOM, OOM, b"$6\r\nbefore\r\n"]
            # Reads and DEL work.
            assert c.call_raw("GET", k) == b"$6\r\nbefore\r\n"
            assert c.call_raw("EXISTS", k, key + "new") == b":1\r\n"
            assert c.call_raw("STRLEN", k) == b":6\r\n"
            assert c.call_raw("GET", key + "n") == b"$1\r\n5\r\n"
            # MULTI: refused at queue time, and EXEC aborts as in Redis 7.
            assert c.call_raw("MULTI") == OK
            assert c.call_raw("GET", k) == b"+QUEUED\r\n"
            assert c.call_raw("SET", k, "in-multi") == OOM
            assert c.call_raw("EXEC") == (b"-EXECABORT Transaction discarded because of "
                                          b"previous errors.\r\n")
            assert c.call_raw("MULTI") == OK
            assert c.call_raw("GET", k) == b"+QUEUED\r\n"
            assert c.call_raw("EXEC") == b"*1\r\n$6\r\nbefore\r\n"
            # A queue filled under the limit and run over it: EXEC refused.
            assert c.call_raw("CONFIG", "SET", "maxmemory", "0") == OK
            assert c.call_raw("MULTI") == OK
            assert c.call_raw("SET", k, "queued") == b"+QUEUED\r\n"
            with server.raw() as admin:
                assert admin.call_raw("CONFIG", "SET", "maxmemory", "1mb") == OK
            assert c.call_raw("EXEC") == (b"-EXECABORT Transaction discarded because of: "
                                          + OOM[1:])
            assert c.call_raw("DEL", k, key + "n") == b":2\r\n"
            assert c.call_raw("EXISTS", k) == b":0\r\n"
            # Raised again: writes go through.
            assert c.call_raw("CONFIG", "SET", "maxmemory", "1gb") == OK
            assert c.call_raw("SET", k, "after") == OK
            assert c.call_raw("GET", k) == b"$5\r\nafter\r\n"
        finally:
            c.call("CONFIG", "SET", "maxmemory", "0")
