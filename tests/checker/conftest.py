"""pytest setup for the checker suite.

Reuses tests/integration/conftest.py as is (server fixtures, the per-test
time limit, SIGTERM cleanup, server logs on failure): it is loaded under
another module name and its fixtures and hooks are re-exported from here.

Adds:
  protocol   parametrization over the protocols the server offers (asked
             once per session from a throwaway server: see run.py)
  checked    fixture: checked(name, run_result) records how many
             transactions a test checked; the numbers are printed in the
             terminal summary, even with -q
"""

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INTEGRATION = os.path.join(HERE, "..", "integration")
sys.path.insert(0, HERE)
sys.path.insert(0, INTEGRATION)

_spec = importlib.util.spec_from_file_location("rckv_integration_conftest",
                                               os.path.join(INTEGRATION, "conftest.py"))
_integration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_integration)
globals().update({k: v for k, v in vars(_integration).items()
                  if not k.startswith("__") and k not in ("pytest_configure",)})

import pytest  # noqa: E402

import run as runner  # noqa: E402

_protocols = None
_checked = []


def pytest_configure(config):
    _integration.pytest_configure(config)


def server_protocols():
    """The server's real protocols, asked once per session."""
    global _protocols
    if _protocols is None:
        names, note = runner.server_protocols()
        if note:
            print("checker: %s" % note, file=sys.stderr)
        _protocols = names
    return _protocols


def pytest_generate_tests(metafunc):
    if "protocol" in metafunc.fixturenames:
        if _integration.REDIS_MODE:  # these tests are rckv_only: skipped
            metafunc.parametrize("protocol", ["-"])
        else:
            metafunc.parametrize("protocol", server_protocols())


@pytest.fixture
def checked(request):
    def add(what, r):
        st = r.result.stats
        _checked.append("%s [%s]: %d transactions checked (ok %s, failed %s, unknown %s), %s"
                        % (request.node.name, what, r.checked, st.get("ok"), st.get("failed"),
                           st.get("unknown"), r.result.summary()))
    return add


def pytest_terminal_summary(terminalreporter):
    if _checked:
        terminalreporter.write_sep("-", "histories checked")
        for line in _checked:
            terminalreporter.write_line(line)
