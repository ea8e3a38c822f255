"""Transaction histories: the recorder the workloads write and the loader
the checker reads.

A history is a JSON-lines file. Each line is one transaction:

  {"id": 17, "client": 3, "invoke": 123456789, "complete": 123460000,
   "outcome": "ok", "ops": [["r", "k1", ["0-1-0", "2-5-1"]],
                            ["append", "k1", "3-17-1"]]}

  id        unique in the history (the report calls it T17)
  client    the client thread that ran it; a client runs one transaction
            at a time, in order
  invoke    time.monotonic_ns() just before the first byte was sent
  complete  time.monotonic_ns() just after the reply arrived; null when the
            outcome is unknown (the client never learned when, or whether,
            it took effect)
  outcome   "ok"   EXEC replied with its results: committed
            "fail" EXEC replied with an error (or WATCH failed): nothing of
                   it took effect
            "info" unknown: the connection broke or timed out after the
                   request may have reached the server
  ops       list-append workload: ["append", key, value] and
            ["r", key, [values...]] (the list a GET returned, [] for a
            missing key; null when the result is not known)
            bank workload: ["w", key, int] (opening balances),
            ["bal", key, int-or-null] (a balance read), ["transfer", from,
            to, amount]
  final     true on the reads the runner makes after the load stopped
  error     the error text of a failed or unknown transaction (optional)

Lines with "type": "meta" are not transactions: they record the run's
parameters and events (a protocol switch, a kill -9) for the human reading
a report, and the loader returns them separately.
"""

import json
import threading
import time

OK, FAIL, INFO = "ok", "fail", "info"
OUTCOMES = (OK, FAIL, INFO)


class Recorder:
    """Thread-safe history writer. Each completed transaction is written
    (and flushed) at once, so the file of a run that crashes half way is
    still a valid history up to the crash, and nothing is kept in memory
    but counters."""

    def __init__(self, path):
        self.path = path
        self._f = open(path, "w", encoding="utf-8")
        self._lock = threading.Lock()
        self._next_id = 1
        self.counts = {OK: 0, FAIL: 0, INFO: 0}

    def new_id(self):
        with self._lock:
            i = self._next_id
            self._next_id += 1
            return i

    def record(self, tid, client, invoke, complete, outcome, ops, final=False, error=None):
        assert outcome in OUTCOMES, outcome
        rec = {"id": tid, "client": client, "invoke": invoke,
               "complete": complete if outcome != INFO else None,
               "outcome": outcome, "ops": ops}
        if final:
            rec["final"] = True
        if error:
            rec["error"] = str(error)[:300]
        line = json.dumps(rec, separators=(",", ":"))
        with self._lock:
            self._f.write(line + "\n")
            self.counts[outcome] += 1

    @property
    def total(self):
        """Transactions recorded so far (a progress counter)."""
        with self._lock:
            return sum(self.counts.values())

    def meta(self, **fields):
        """A non-transaction line: run parameters or an event."""
        rec = {"type": "meta", "time": time.monotonic_ns()}
        rec.update(fields)
        with self._lock:
            self._f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            self._f.flush()

    def flush(self):
        with self._lock:
            self._f.flush()

    def close(self):
        with self._lock:
            if not self._f.closed:
                self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class HistoryError(Exception):
    """The file is not a well-formed history."""


def load(path):
    """Read a history file. Returns (transactions, metas): transactions as
    dicts in file order, with every value string interned so that a long
    history with many reads of long lists shares one object per element."""
    txns, metas = [], []
    intern = {}

    def iv(v):
        return intern.setdefault(v, v)

    with open(path, "r", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                # A run killed while writing leaves a torn last line.
                raise HistoryError("%s:%d: not JSON (%s)" % (path, lineno, e)) from None
            if rec.get("type") == "meta":
                metas.append(rec)
                continue
            for field in ("id", "outcome", "ops"):
                if field not in rec:
                    raise HistoryError("%s:%d: transaction without '%s'" % (path, lineno, field))
            if rec["outcome"] not in OUTCOMES:
                raise HistoryError("%s:%d: unknown outcome %r" % (path, lineno, rec["outcome"]))
            ops = []
            for op in rec["ops"]:
                if not isinstance(op, list) or not op:
                    raise HistoryError("%s:%d: bad op %r" % (path, lineno, op))
                if op[0] == "r" and isinstance(op[2], list):
                    op = ["r", iv(op[1]), [iv(v) for v in op[2]]]
                elif op[0] == "append":
                    op = ["append", iv(op[1]), iv(op[2])]
                ops.append(op)
            rec["ops"] = ops
            txns.append(rec)
    return txns, metas


def parse_list(raw):
    """The elements of a list-append value as GET returns it: the value is
    ",a,b,c" (every APPEND adds ",<id>"), a missing key is None."""
    if raw is None:
        return []
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if raw == "":
        return []
    parts = raw.split(",")
    # A well-formed value starts with a comma; keep anything else visible
    # to the checker (it reports elements nobody appended).
    return parts[1:] if parts[0] == "" else parts
