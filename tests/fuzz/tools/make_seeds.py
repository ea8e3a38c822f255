#!/usr/bin/env python3
"""Seeds for the fabric decoders' fuzzers (fuzz_tcp_wire, fuzz_verbs_wire),
written from the byte layouts of rdma/tcp_wire.h and rdma/verbs_wire.h:
one well-formed message of every kind a node sends, so that mutation
starts from frames that decode. (The client-traffic corpora are captured
from the integration tests instead: tests/fuzz/README.md.)

    tests/fuzz/tools/make_seeds.py tests/fuzz/corpus
"""
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus"
READ, WRITE, CAS, FAA, RPC = range(5)
FLUSH = 0x2


def hello(kind=1, frm=2, worker=0):
    return b"RCKVFAB1" + struct.pack("<HHHH", kind, frm, worker, 0)


def frame(ops):
    """ops: (kind, flags, len, off, cmp, swp, payload)"""
    body = b"".join(struct.pack("<B3sIQQQ", k, bytes([f, 0, 0]), ln, off, cmp, swp)
                    for k, f, ln, off, cmp, swp, _ in ops)
    body += b"".join(p for *_, p in ops)
    return struct.pack("<II", 4 + len(body), len(ops)) + body


def write(name, data, sub):
    d = os.path.join(out, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# tcp: a request, then a response to it (READ bytes, old values, RPC replies).
write("read", hello() + frame([(READ, 0, 16, 4096, 0, 0, b"")]) + b"r" * 16, "fuzz_tcp_wire")
write("flush", hello() + frame([(READ, FLUSH, 8, 0, 0, 0, b"")]) + b"\0" * 8, "fuzz_tcp_wire")
write("write", hello() + frame([(WRITE, 0, 5, 8192, 0, 0, b"hello")]), "fuzz_tcp_wire")
write("cas-faa", hello() + frame([(CAS, 0, 8, 64, 1, 2, b""), (FAA, 0, 8, 72, 0, 5, b"")])
      + struct.pack("<QQ", 1, 7), "fuzz_tcp_wire")
write("mixed-rpc", hello() + frame([(READ, 0, 24, 128, 0, 0, b""),
                                    (WRITE, 0, 3, 256, 0, 0, b"abc"),
                                    (CAS, 0, 8, 64, 0, 9, b""),
                                    (RPC, 0, 4, 3, 64, 0, b"ping")])
      + b"x" * 24 + struct.pack("<Q", 0) + struct.pack("<iI", 0, 4) + b"pong", "fuzz_tcp_wire")
write("rpc-error", hello(2) + frame([(RPC, 0, 0, 1, 0, 0, b"")]) + struct.pack("<iI", -5, 0),
      "fuzz_tcp_wire")

# verbs: the first byte picks the decoder (fuzz_verbs_wire.c).
REQ, REP, CALL, ANSWER = 0x5152564B, 0x5052564B, 0x4C43564B, 0x4E41564B
gid = bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 2])
write("req", b"\0" + struct.pack("<IHHHH16sIIBBH", REQ, 1, 2, 0, 0, gid, 0x11, 0x1234, 3, 16, 0),
      "fuzz_verbs_wire")
write("rep-ok", b"\1" + struct.pack("<IHHHH16sIIBBHIIQQ", REP, 1, 0, 0, 0, gid, 0x12, 0x99, 3,
                                    16, 0, 0xabc, 0, 0x7f0000000000, 64 << 20), "fuzz_verbs_wire")
write("rep-qp", b"\1" + struct.pack("<IHHHH16sIIBBHIIQQ", REP, 1, 4, 0, 0, bytes(16), 0, 0, 0,
                                    0, 0, 0, 12, 0, 0), "fuzz_verbs_wire")
write("call", b"\2" + struct.pack("<IIHHI", CALL, 7, 3, 0, 512) + b"request", "fuzz_verbs_wire")
write("answer", b"\3" + struct.pack("<IIiI", ANSWER, 7, 0, 5) + b"reply", "fuzz_verbs_wire")
write("index", b"\4" + b"17", "fuzz_verbs_wire")

# Control messages (server/ctl_wire.h): u32 type, then the body. Sizes of
# this build's layout (struct ctl_hello 3648 bytes: its strings at 144,
# 400, 416, 448; struct ctl_settle 3080, ctl_take 520); a seed of another
# size still seeds, it only starts further from a message that passes.
HELLO, SWITCH, KEYS, SCAN, SETTLE, TAKE_SCAN, STAGES = 1, 4, 8, 9, 11, 12, 14
hel = bytearray(3648)
hel[0:8] = b"RCKVCTL3"
struct.pack_into("<QI", hel, 8, 0x1234, 2)
for off, s in ((144, b"/tmp/rckv/node-2.region"), (400, b"shm"), (416, b"silo"),
               (448, b"127.0.0.1:7102")):
    hel[off:off + len(s)] = s
write("hello", struct.pack("<I", HELLO) + bytes(hel), "fuzz_ctl")
write("settle", struct.pack("<IQ", SETTLE, 1) + bytes(3072), "fuzz_ctl")
write("take", struct.pack("<IQ", TAKE_SCAN, 3) + bytes(512), "fuzz_ctl")
write("stages", struct.pack("<II", STAGES, 5), "fuzz_ctl")
write("switch", struct.pack("<I", SWITCH) + b"nowait", "fuzz_ctl")
write("scan", struct.pack("<IQQ", SCAN, 0, 10) + b"user:*", "fuzz_ctl")
keys = b"".join(struct.pack("<I", len(k)) + k for k in (b"a", b"user:1", b"", b"x" * 40))
write("keys-answer", struct.pack("<I", KEYS) + keys, "fuzz_ctl")
write("scan-answer", struct.pack("<IQ", SCAN, 77) + keys, "fuzz_ctl")
