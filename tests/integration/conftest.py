"""pytest fixtures for the black-box tests (see rckvtest.py).

Run from the repository root with Debian's python (it has redis-py):
  RCKV_SERVER=build/rckv-server /usr/bin/python3 -m pytest -q tests/integration
  RCKV_TEST_TARGET=redis /usr/bin/python3 -m pytest -q tests/integration
The second runs the same tests against /usr/bin/redis-server to validate
the expected replies (rckv-only tests are skipped); both must pass.

Fixtures:
  server         one server per test module, default options
  make_server    factory: make_server(opts=..., conf=..., start=True) for
                 tests that need their own server; all are cleaned up
  r              redis-py client to `server`, fresh per test
  raw            RawConn to `server`, fresh per test
  conns          conns() makes more RawConns to `server`, closed after
  key            a key prefix unique to the test, so tests sharing a
                 module server never see each other's keys

Markers:
  rckv_only      skipped when RCKV_TEST_TARGET=redis
  redis_only     skipped against rckv (tests that only validate the suite)
  time_limit(s)  this test's time bound (default 45 s); SIGALRM fails it
  long           a variant only `make check-long` (RCKV_LONG=1) runs
"""

import os
import signal

import pytest

import rckvtest
from rckvtest import REDIS_MODE, Server

DEFAULT_TIME_LIMIT = 45


def _exit_on_sigterm(signum, frame):
    # SystemExit unwinds through the fixtures' finally blocks and atexit,
    # so a terminated run still stops its servers.
    raise SystemExit(128 + signum)


def pytest_configure(config):
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    config.addinivalue_line("markers", "rckv_only: rckv-specific behaviour, skipped against redis")
    config.addinivalue_line("markers", "redis_only: runs only against redis-server")
    config.addinivalue_line("markers", "time_limit(seconds): bound this test's run time")
    config.addinivalue_line("markers", "long: a variant `make check-long` runs (RCKV_LONG=1), "
                            "not `make test`")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if REDIS_MODE and item.get_closest_marker("rckv_only"):
            item.add_marker(pytest.mark.skip(reason="rckv-specific (RCKV_TEST_TARGET=redis)"))
        if not REDIS_MODE and item.get_closest_marker("redis_only"):
            item.add_marker(pytest.mark.skip(reason="runs only with RCKV_TEST_TARGET=redis"))
        if item.get_closest_marker("long") and not os.environ.get("RCKV_LONG"):
            item.add_marker(pytest.mark.skip(reason="a long variant: make check-long"))


def pytest_report_header(config):
    return "target: %s (%s)" % (rckvtest.TARGET, rckvtest.server_binary())


class _TimeLimit(Exception):
    pass


@pytest.fixture(autouse=True)
def _time_limit(request):
    """Fail a test that runs past its bound instead of hanging ctest.
    SIGALRM interrupts the main thread wherever it blocks; worker threads
    are daemons and die with their sockets when the servers are killed."""
    m = request.node.get_closest_marker("time_limit")
    limit = m.args[0] if m else DEFAULT_TIME_LIMIT

    def on_alarm(signum, frame):
        raise _TimeLimit("test exceeded its time limit of %s s" % limit)

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# Attach server logs to failing tests' reports.
_servers_by_test = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for s in _servers_by_test.get(item.nodeid, ()):
            rep.sections.append(("server log %s:%d" % (s.name, s.port), s.log_tail(80)))


def _start_or_fail(s):
    try:
        s.start()
        return s
    except rckvtest.ServerError as e:
        msg = str(e)
    s.cleanup()
    pytest.fail(msg, pytrace=False)  # outside except: no chained traceback


def _fail_on_reports(s, reports):
    if reports:
        pytest.fail("sanitizer reports in the %s server's log:\n%s"
                    % (s.name, "\n".join(reports[:20])), pytrace=False)


@pytest.fixture(scope="module")
def server():
    s = Server(name="module")
    reports = []
    try:
        _start_or_fail(s)
        yield s
    finally:
        reports = s.cleanup()
    _fail_on_reports(s, reports)


@pytest.fixture(autouse=True)
def _track_module_server(request):
    # Lets the report hook show the module server's log on failure, and
    # makes a crash visible where it happened: the test during which the
    # module server died errors, and the server is restarted (same dir and
    # port) so the rest of the module still runs.
    if "server" not in request.fixturenames:
        yield
        return
    s = request.getfixturevalue("server")
    _servers_by_test.setdefault(request.node.nodeid, []).append(s)
    log_start = s.log_size()
    yield
    # Reports written while this test ran are this test's.
    _fail_on_reports(s, s.sanitizer_reports(log_start))
    if not s.alive():
        status = s.proc.returncode if s.proc else None
        tail = s.log_tail(80)
        try:
            s.start()
        except rckvtest.ServerError as e:
            tail += "\n(restart failed: %s)" % e
        pytest.fail("module server exited during this test (status %s)\n%s" % (status, tail),
                    pytrace=False)


@pytest.fixture
def make_server(request):
    made = []

    def factory(opts=None, conf=None, start=True, name="own", port=None):
        s = Server(opts=opts, conf=conf, name=name, port=port)
        made.append(s)
        _servers_by_test.setdefault(request.node.nodeid, []).append(s)
        if start:
            _start_or_fail(s)
        return s

    reports = []
    try:
        yield factory
    finally:
        for s in made:
            reports += [(s, r) for r in s.cleanup()]
    if reports:
        _fail_on_reports(reports[0][0], [r for _, r in reports])


@pytest.fixture
def r(server):
    c = server.client()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def raw(server):
    c = server.raw()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def conns(server):
    """conns() gives another RawConn to `server`; all are closed after."""
    made = []

    def make():
        c = server.raw()
        made.append(c)
        return c

    try:
        yield make
    finally:
        for c in made:
            c.close()


@pytest.fixture
def key(request):
    name = request.node.name
    for ch in "[]/:- ":
        name = name.replace(ch, "_")
    return "t:" + name + ":"


def pytest_runtest_logfinish(nodeid, location):
    _servers_by_test.pop(nodeid, None)
