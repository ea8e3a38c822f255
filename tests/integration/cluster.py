"""A local rckv cluster for the black-box tests, and its pytest fixtures.

A Cluster writes a temporary cluster file with one `cluster-node` line per
node (127.0.0.1, a free client port and a free fabric port each), starts
one rckv-server per node with that file and `--node <id>`, waits until
every node has logged "Ready to accept connections" and answers PING, and
always stops all of them: cleanup() at the end of the fixture, and
rckvtest's atexit hook if the interpreter exits first (every node is a
rckvtest.Server, registered like any other).

Each node has its own temporary directory (its region file and its log);
the cluster file lives in the cluster's own directory.

Fixtures (import them into a test module: `from cluster import ...`):
  fabric         "shm" or "tcp": every test that uses it runs on both
  cluster        a started 3-node cluster on `fabric`, shared by the tests
                 of a module (one per fabric); a test during which a node
                 dies fails, and the cluster is restarted for the next test.
                 A module that needs other options defines its own
                 `cluster` with running_cluster(fabric, opts=...)
  make_cluster   factory: make_cluster(fabric, opts=..., n=3, start=True)
                 for tests that need their own cluster; all are cleaned up
  track_cluster  autouse: attaches the nodes' logs to a failing test's
                 report and fails a test during which a node died; import
                 it too

In redis mode (RCKV_TEST_TARGET=redis) every cluster test is skipped:
Redis has no such cluster.
"""

import atexit
import contextlib
import os
import signal
import shutil
import sys
import tempfile
import time

import pytest

import rckvtest
from rckvtest import REDIS_MODE, START_DEADLINE, Server, ServerError, free_port

FABRICS = ["shm", "tcp"]
READY = "Ready to accept connections"

# What every node gets unless a test overrides it (command-line options
# override the file). Small regions keep startup quick; 2 threads per node
# keep a worker's coroutines interleaving as in production.
CLUSTER_FILE_OPTIONS = {
    "memory": "64mb",
    "persistence": "process",
    "threads": 2,
    "coroutines": 32,
    "cc": "silo",
}


_live = set()


def _cleanup_at_exit():
    # rckvtest's own atexit hook stops the nodes; this removes the cluster
    # files too. Registered after rckvtest's, so it runs first.
    for cl in list(_live):
        try:
            cl.cleanup()
        except Exception:
            pass


atexit.register(_cleanup_at_exit)


def _servers_by_test():
    """conftest's map of test id -> servers whose logs a failing test's
    report shows (None if conftest is not loaded, e.g. in a script)."""
    return getattr(sys.modules.get("conftest"), "_servers_by_test", None)


class ClusterNode(Server):
    """One node of a Cluster: a Server whose command line is the cluster
    file, its id and the cluster's options."""

    def __init__(self, cluster, node_id, client_port, fabric_port, raft_port):
        super().__init__(port=client_port, name="node%d" % node_id)
        self.cluster = cluster
        self.id = node_id
        self.fabric_port = fabric_port
        self.raft_port = raft_port
        self.start_offset = 0

    def argv(self):
        args = [os.path.abspath(rckvtest.server_binary()), self.cluster.conf, "--node", str(self.id),
                "--dir", self.dir]
        for k, v in self.cluster.opts.items():
            if v is not None:
                args += ["--" + k] + rckvtest._vals(v)
        return args

    def start(self, wait=True):
        self.start_offset = self.log_size()
        return super().start(wait=wait)

    def log_text(self, since_start=True):
        """The log written since the last start (or all of it)."""
        try:
            with open(self.logpath, "rb") as f:
                if since_start:
                    f.seek(self.start_offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def logged_ready(self):
        return READY in self.log_text()

    def wait_ready(self, deadline=START_DEADLINE):
        """Wait for the Ready line of this start, then for PONG."""
        end = time.monotonic() + deadline
        while not self.logged_ready():
            rc = self.proc.poll()
            if rc is not None:
                raise ServerError("%s exited with status %s during start\n%s"
                                  % (self.name, rc, self.log_tail()))
            if time.monotonic() > end:
                raise ServerError("%s did not log %r within %.0f s\n%s"
                                  % (self.name, READY, deadline, self.log_tail()))
            time.sleep(0.05)
        super().wait_ready(max(1.0, end - time.monotonic()))


class Cluster:
    """n nodes on 127.0.0.1 with the given fabric. opts are command-line
    options for every node (they override the file); file_opts go into the
    cluster file."""

    def __init__(self, n=3, fabric="shm", opts=None, file_opts=None):
        self.fabric = fabric
        self.opts = dict(opts or {})
        self.tmp = tempfile.mkdtemp(prefix="rckv-cluster-")
        self.conf = os.path.join(self.tmp, "cluster.conf")
        self.nodes = []
        self._cleaned = False
        _live.add(self)
        ports = set()
        while len(ports) < 3 * n:
            ports.add(free_port())
        ports = sorted(ports)
        try:
            for i in range(n):
                self.nodes.append(ClusterNode(self, i + 1, *ports[3 * i:3 * i + 3]))
            fo = dict(CLUSTER_FILE_OPTIONS)
            fo.update(file_opts or {})
            with open(self.conf, "w") as f:
                f.write("# written by tests/integration/cluster.py\n")
                for nd in self.nodes:
                    # The raft address (replicas 2 or more) is a free
                    # port too: fabric + 10000 might be another test's.
                    f.write("cluster-node %d 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d\n"
                            % (nd.id, nd.port, nd.fabric_port, nd.raft_port))
                f.write("fabric %s\n" % fabric)
                for k, v in fo.items():
                    f.write("%s %s\n" % (k, v))
        except BaseException:
            self.cleanup()
            raise

    def __repr__(self):
        return "Cluster(%s, %s)" % (self.fabric, ", ".join(
            "%d:%d" % (nd.id, nd.port) for nd in self.nodes))

    def node(self, node_id):
        return self.nodes[node_id - 1]

    def _pick(self, ids):
        return self.nodes if ids is None else [self.node(i) for i in ids]

    # --- life cycle ---------------------------------------------------

    def start(self, ids=None, wait=True, deadline=START_DEADLINE):
        """Start the given nodes (default all), all before waiting for any:
        each waits for the others before it is ready."""
        nodes = self._pick(ids)
        for nd in nodes:
            nd.start(wait=False)
        if wait:
            self.wait_ready([nd.id for nd in nodes], deadline)
        return self

    def wait_ready(self, ids=None, deadline=START_DEADLINE):
        end = time.monotonic() + deadline
        for nd in self._pick(ids):
            nd.wait_ready(max(1.0, end - time.monotonic()))

    def alive(self):
        return all(nd.alive() for nd in self.nodes)

    def stop(self, ids=None):
        """SIGTERM the nodes together, then wait for each (SIGKILL after
        rckvtest's deadline): one slow node does not serialise the rest."""
        nodes = [nd for nd in self._pick(ids) if nd.alive()]
        for nd in nodes:
            rckvtest._killpg(nd.proc.pid, signal.SIGTERM)
        return [nd.stop() for nd in nodes]

    def restart(self):
        self.stop()
        return self.start()

    def power_cut(self):
        """What a power cut of the host leaves, as near as a test can: every
        node SIGKILLed together, and each one's region copy in /dev/shm
        (persistence power's write-ahead log, storage/region.c) removed, so
        that the restart has only the checkpoint and the log on disk. Data
        written to the log but not yet synced survives here, unlike on a
        real cut: the order of the logs' records is what this checks (the
        standalone power-sim tests check the syncs). Then start all again."""
        alive = [nd for nd in self.nodes if nd.alive()]
        for nd in alive:
            rckvtest._killpg(nd.proc.pid, signal.SIGKILL)
        for nd in alive:
            nd.proc.wait(timeout=rckvtest.STOP_DEADLINE)
        for nd in self.nodes:
            rckvtest.drop_region_copy(nd.dir)
        return self.start()

    def cleanup(self):
        """Stop every node and remove every directory. Returns the
        sanitizer reports found in the nodes' logs."""
        if self._cleaned:
            return []
        reports = []
        try:
            try:
                self.stop()
            finally:
                for nd in self.nodes:
                    reports += ["%s: %s" % (nd.name, r) for r in nd.cleanup()]
        finally:
            self._cleaned = True
            shutil.rmtree(self.tmp, ignore_errors=True)
            _live.discard(self)
        return reports

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()

    # --- clients and layout --------------------------------------------

    def client(self, node_id, **kw):
        return self.node(node_id).client(**kw)

    def raw(self, node_id, timeout=10.0):
        return self.node(node_id).raw(timeout=timeout)

    def keynode(self, key, via=1):
        """The id of the node that owns key, as node `via` publishes it."""
        with self.raw(via) as c:
            return c.call("RCKV", "KEYNODE", key)

    def keys_on(self, node_id, prefix, count=1, via=1):
        """count distinct keys prefix<i> owned by node_id (asked with RCKV
        KEYNODE in one pipeline)."""
        found = []
        i = 0
        with self.raw(via) as c:
            while len(found) < count:
                batch = ["%s%d" % (prefix, j) for j in range(i, i + 64)]
                c.send(b"".join(rckvtest.encode("RCKV", "KEYNODE", k) for k in batch))
                for k in batch:
                    if c.read() == node_id and len(found) < count:
                        found.append(k)
                i += 64
                assert i < 100000, "no key with prefix %r on node %d" % (prefix, node_id)
        return found

    def key_on(self, node_id, prefix, via=1):
        return self.keys_on(node_id, prefix, 1, via)[0]

    def log_size(self):
        return [nd.log_size() for nd in self.nodes]

    def sanitizer_reports(self, offsets):
        out = []
        for nd, off in zip(self.nodes, offsets):
            out += ["%s: %s" % (nd.name, r) for r in nd.sanitizer_reports(off)]
        return out


# --- fixtures -----------------------------------------------------------

def _register(request, cl):
    m = _servers_by_test()
    if m is not None:
        m.setdefault(request.node.nodeid, []).extend(cl.nodes)


def _start_or_fail(cl):
    try:
        cl.start()
        return cl
    except ServerError as e:
        msg = "%r did not start: %s" % (cl, e)
    reports = cl.cleanup()
    pytest.fail(msg + ("\n" + "\n".join(reports) if reports else ""), pytrace=False)


def _fail_on_reports(reports):
    if reports:
        pytest.fail("sanitizer reports in the cluster's logs:\n%s" % "\n".join(reports[:20]),
                    pytrace=False)


@pytest.fixture(scope="module", params=FABRICS)
def fabric(request):
    if REDIS_MODE:
        pytest.skip("rckv cluster (RCKV_TEST_TARGET=redis)")
    return request.param


@contextlib.contextmanager
def running_cluster(fabric, **kw):
    """A started Cluster(fabric=fabric, **kw) for a with block: the test
    fails (no traceback) if it does not start, or if a sanitizer reported
    in its logs; it is always stopped and removed. For module fixtures
    that need other options than `cluster`'s:

        @pytest.fixture(scope="module")
        def cluster(fabric):
            with running_cluster(fabric, opts={"memory": "16mb"}) as cl:
                yield cl
    """
    cl = Cluster(fabric=fabric, **kw)
    reports = []
    try:
        _start_or_fail(cl)
        yield cl
    finally:
        reports = cl.cleanup()
    _fail_on_reports(reports)


@pytest.fixture(scope="module")
def cluster(fabric):
    with running_cluster(fabric) as cl:
        yield cl


@pytest.fixture(autouse=True)
def track_cluster(request):
    """For a test using the module's `cluster`: show its logs if the test
    fails, fail the test during which a node died or a sanitizer reported,
    and restart the cluster so that the module's other tests still run."""
    if "cluster" not in request.fixturenames:
        yield
        return
    cl = request.getfixturevalue("cluster")
    _register(request, cl)
    offsets = cl.log_size()
    yield
    _fail_on_reports(cl.sanitizer_reports(offsets))
    dead = [nd for nd in cl.nodes if not nd.alive()]
    if dead:
        tails = "\n".join("%s exited with status %s\n%s" % (nd.name, nd.proc.returncode,
                                                         nd.log_tail(60)) for nd in dead)
        try:
            cl.restart()
        except ServerError as e:
            tails += "\n(restart failed: %s)" % e
        pytest.fail("cluster node(s) died during this test\n" + tails, pytrace=False)


@pytest.fixture
def make_cluster(request):
    if REDIS_MODE:
        pytest.skip("rckv cluster (RCKV_TEST_TARGET=redis)")
    made = []

    def factory(fabric, opts=None, n=3, start=True, file_opts=None):
        cl = Cluster(n=n, fabric=fabric, opts=opts, file_opts=file_opts)
        made.append(cl)
        _register(request, cl)
        if start:
            _start_or_fail(cl)
        return cl

    reports = []
    try:
        yield factory
    finally:
        for cl in made:
            reports += cl.cleanup()
    _fail_on_reports(reports)
