"""A pytest plugin that records what the integration tests send to servers,
for the fuzzers' seed corpora (tests/fuzz/README.md):

    RCKV_CAPTURE_DIR=/tmp/cap python3 -m pytest -p rckv_capture ... tests/integration/test_x.py

(with tests/fuzz/tools on PYTHONPATH). Every TCP connection to a loopback
address gets one file, the bytes the test sent on it in order (redis-py,
raw sockets and the helpers all end in socket.send/sendall). Nothing is
sent differently; the tests run as usual.
"""

import os
import socket
import threading

_dir = os.environ.get("RCKV_CAPTURE_DIR")
_lock = threading.Lock()
_files = {}
_count = [0]


def _record(sock, data):
    try:
        peer = sock.getpeername()
    except OSError:
        return
    if not isinstance(peer, tuple) or not str(peer[0]).startswith("127."):
        return
    key = id(sock)
    with _lock:
        f = _files.get(key)
        if f is None or f[0] is not sock:
            _count[0] += 1
            path = os.path.join(_dir, "conn-%d-%06d" % (os.getpid(), _count[0]))
            f = (sock, open(path, "ab"))
            _files[key] = f
        f[1].write(bytes(data))
        f[1].flush()


if _dir:
    os.makedirs(_dir, exist_ok=True)
    _send, _sendall = socket.socket.send, socket.socket.sendall

    def send(self, data, *a):
        n = _send(self, data, *a)
        if n > 0:
            _record(self, memoryview(data)[:n])
        return n

    def sendall(self, data, *a):
        r = _sendall(self, data, *a)
        _record(self, data)
        return r

    socket.socket.send = send
    socket.socket.sendall = sendall
