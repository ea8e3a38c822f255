#!/usr/bin/python3
"""Serializability checker for rckv histories (see history.py for the file
format), in the list-append style of Elle (Kingsbury and Alvaro, "Elle:
inferring isolation anomalies from experimental observations", VLDB 2020).

List-append: every transaction mixes `APPEND k ",<unique id>"` and `GET k`.
Because a GET returns every element ever appended, in order, the longest
read of a key is its version order, and every read names exactly which
writes it saw. From that the checker infers, between transactions:

  ww  T1 -> T2   T2 appended the element right after T1's element
  wr  T1 -> T2   T2 read a list whose last element T1 appended
  rw  T1 -> T2   T1 read a list ending at e; T2 appended the element after e
  rt  T1 -> T2   (with realtime) T1 completed before T2 was invoked

and reports:

  G0, G1c, G-single, G2    dependency cycles (Adya's phenomena): the history
                           is not serializable; a short cycle is printed per
                           strongly connected component, each edge explained
  <type>-realtime          a cycle that needs rt edges: serializable maybe,
                           but not strictly serializable
  G1a                      a read saw an element appended by a failed txn
  G1b                      a read saw a txn's append to a key but not its
                           later append to the same key
  lost-append              a committed append missing from the final read
                           of its key (the runner reads every key at the end)
  incompatible-order       two reads of a key that are not prefixes of one
                           another: no single version order explains them
  duplicate-elements, garbage-element, internal
                           an element read twice, an element nobody
                           appended, a txn not seeing its own appends

Outcomes: a failed txn took no effect. An unknown ("info") txn may or may
not have committed: if any of its appends was read by anyone it did commit
(and all of its appends must then be in the final reads), otherwise it is
left out.

Bank histories (transfers between accounts, read-only MULTI/GET-all reads)
are checked for the invariant total instead.

CLI:  /usr/bin/python3 tests/checker/checker.py HISTORY.jsonl [--realtime]
      exit status 0: no anomaly, 1: anomalies (report on stdout), 2: error.
"""

import argparse
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from history import FAIL, INFO, OK, HistoryError, load  # noqa: E402

# Cycle kinds from most to least severe (Adya): only ww; ww+wr; exactly
# one rw; more rw.
CYCLE_KINDS = ("G0", "G1c", "G-single", "G2")
# How many explanations of one kind a report keeps (all are counted).
KEEP_PER_KIND = 50
# Time budget for searching short cycles in one component, seconds. Only a
# broken store has components at all; the search stops early rather than
# spend minutes on a huge one.
CYCLE_SEARCH_BUDGET = 3.0


class Txn:
    __slots__ = ("id", "client", "invoke", "complete", "outcome", "ops", "final", "error",
                 "appends", "committed", "idx")

    def __init__(self, rec):
        self.id = rec["id"]
        self.client = rec.get("client")
        self.invoke = rec.get("invoke")
        self.complete = rec.get("complete")
        self.outcome = rec["outcome"]
        self.ops = rec["ops"]
        self.final = bool(rec.get("final"))
        self.error = rec.get("error")
        self.appends = {}  # key -> [values in op order]
        for op in self.ops:
            if op[0] == "append":
                self.appends.setdefault(op[1], []).append(op[2])
        self.committed = False
        self.idx = -1


class Result:
    """What a check found: stats and anomalies (kind -> explanations)."""

    def __init__(self, workload):
        self.workload = workload
        self.stats = collections.OrderedDict()
        self.counts = collections.Counter()
        self.details = collections.defaultdict(list)
        self.notes = []
        self.t0 = None

    def add(self, kind, text, txns=()):
        self.counts[kind] += 1
        if len(self.details[kind]) < KEEP_PER_KIND:
            self.details[kind].append({"text": text, "txns": sorted(set(txns))})

    @property
    def anomalies(self):
        return sum(self.counts.values())

    def valid(self):
        return self.anomalies == 0

    def merge(self, other):
        for k, v in other.stats.items():
            self.stats["%s.%s" % (other.workload, k)] = v
        self.counts.update(other.counts)
        for k, v in other.details.items():
            self.details[k].extend(v[:KEEP_PER_KIND - len(self.details[k])])
        self.notes.extend(other.notes)

    def summary(self):
        if self.valid():
            return "VALID: no anomaly"
        kinds = ", ".join("%s %d" % (k, n) for k, n in sorted(self.counts.items()))
        return "INVALID: %d anomalies (%s)" % (self.anomalies, kinds)

    def report(self, per_kind=3):
        out = ["%s history:" % self.workload]
        for k, v in self.stats.items():
            out.append("  %-24s %s" % (k, v))
        for n in self.notes:
            out.append("  note: %s" % n)
        out.append(self.summary())
        order = list(CYCLE_KINDS) + sorted(k for k in self.counts if k not in CYCLE_KINDS)
        for kind in order:
            if not self.counts.get(kind):
                continue
            shown = self.details[kind][:per_kind]
            out.append("")
            out.append("== %s: %d found, %d shown" % (kind, self.counts[kind], len(shown)))
            for i, d in enumerate(shown, 1):
                out.append("-- %s #%d" % (kind, i))
                out.append(d["text"])
        return "\n".join(out)

    def to_json(self):
        return {"workload": self.workload, "valid": self.valid(), "stats": dict(self.stats),
                "counts": dict(self.counts), "details": dict(self.details),
                "notes": self.notes}


# ---------------------------------------------------------------- helpers

def _secs(t, t0):
    return "?" if t is None else "+%.6fs" % ((t - t0) / 1e9)


def _fmt_list(vals, keep=4):
    if vals is None:
        return "?"
    if len(vals) <= keep:
        return "[" + ", ".join(vals) + "]"
    return "[(%d more), %s]" % (len(vals) - keep, ", ".join(vals[-keep:]))


def _fmt_txn(t, t0, max_ops=8):
    ops = []
    for op in t.ops[:max_ops]:
        if op[0] == "append":
            ops.append("append %s %s" % (op[1], op[2]))
        elif op[0] == "r":
            ops.append("r %s %s" % (op[1], _fmt_list(op[2])))
        else:
            ops.append(" ".join(str(x) for x in op))
    if len(t.ops) > max_ops:
        ops.append("(%d more ops)" % (len(t.ops) - max_ops))
    status = {OK: "ok", FAIL: "failed", INFO: "unknown outcome"}[t.outcome]
    return "    T%s (client %s, %s%s, %s..%s): %s" % (
        t.id, t.client, status, ", final read" if t.final else "",
        _secs(t.invoke, t0), _secs(t.complete, t0), "; ".join(ops))


def tarjan(nodes, succ):
    """Strongly connected components with more than one node, iteratively
    (histories are far deeper than Python's recursion limit). succ(v)
    yields v's successors; nodes outside `nodes` must not be yielded."""
    index, low, on = {}, {}, set()
    stack, comps, counter = [], [], 0
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        work = [(root, iter(succ(root)))]
        while work:
            v, it = work[-1]
            pushed = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ(w))))
                    pushed = True
                    break
                if w in on and index[w] < low[v]:
                    low[v] = index[w]
            if pushed:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(comp)
    return comps


EDGE_BITS = {"ww": 1, "wr": 2, "rw": 4, "rt": 8}


def _mask(types):
    m = 0
    for t in types:
        m |= EDGE_BITS[t]
    return m


class Graph:
    """Dependency graph over committed transactions (by index). An edge is a
    bit mask of its types; why an edge exists is worked out again from the
    history only for the edges a report explains (_explain_edge), which
    keeps a history of 10^5 transactions and 10^6 edges in memory."""

    def __init__(self, n):
        self.succ = [dict() for _ in range(n)]
        self.count = collections.Counter()

    def add(self, a, b, typ):
        if a == b:
            return
        bit = EDGE_BITS[typ]
        d = self.succ[a]
        m = d.get(b, 0)
        if not m & bit:
            d[b] = m | bit
            self.count[typ] += 1

    def succ_of(self, v, types, inside=None):
        m = _mask(types)
        for w, e in self.succ[v].items():
            if e & m and (inside is None or w in inside):
                yield w

    def bfs_path(self, src, dst, types, inside, deadline):
        """Shortest path src -> dst using edges of `types` within `inside`,
        as a node list, or None (also when the deadline passes)."""
        if src == dst:
            return [src]
        m = _mask(types)
        prev = {src: None}
        frontier = [src]
        steps = 0
        while frontier:
            nxt = []
            for v in frontier:
                for w, e in self.succ[v].items():
                    if not e & m or w in prev or w not in inside:
                        continue
                    prev[w] = v
                    if w == dst:
                        path = [w]
                        while prev[path[-1]] is not None:
                            path.append(prev[path[-1]])
                        return path[::-1]
                    nxt.append(w)
                steps += 1
                if steps % 4096 == 0 and time.monotonic() > deadline:
                    return None
            frontier = nxt
        return None


def _ext_reads(t, writer):
    """(key, full list, external part) for each list read of t. The
    external part is what t saw of other transactions: the list without
    t's own earlier appends to the key at its end."""
    own = collections.defaultdict(list)
    for op in t.ops:
        if op[0] == "append":
            own[op[1]].append(op[2])
        elif op[0] == "r" and isinstance(op[2], list):
            k, L = op[1], op[2]
            mine = own.get(k)
            if not mine:
                yield k, L, L
            elif L[-len(mine):] == mine:
                yield k, L, L[:-len(mine)]
            else:
                yield k, L, [v for v in L if writer.get((k, v)) is not t]


# ------------------------------------------------------- list-append check

def check_list_append(records, realtime=False):
    """Check a list-append history (records as history.load returns).
    Returns a Result."""
    res = Result("list-append")
    txns = [Txn(r) for r in records]
    t0 = min((t.invoke for t in txns if t.invoke is not None), default=0)
    res.t0 = t0
    by_id = {}
    for t in txns:
        if t.id in by_id:
            res.add("history-error", "transaction id %s appears twice" % t.id, [t.id])
        by_id[t.id] = t

    # Who appended each element. Ids are unique per append, so one element
    # names one transaction.
    writer = {}
    for t in txns:
        for k, vs in t.appends.items():
            for v in vs:
                if (k, v) in writer:
                    res.add("history-error", "element %s appended to %s twice (T%s, T%s): "
                            "the workload must append unique ids" % (v, k, writer[(k, v)].id, t.id),
                            [t.id, writer[(k, v)].id])
                writer[(k, v)] = t

    # Reads of committed (ok) transactions. A read by T of key k is its full
    # list L; its external part `ext` is L without T's own earlier appends
    # to k, which must be L's tail (a transaction reads its own writes).
    reads = collections.defaultdict(list)  # k -> [[t, L, ext, usable]]
    observed = {}  # (k, v) -> first txn that read it
    nreads = 0
    for t in txns:
        if t.outcome != OK:
            continue
        own = collections.defaultdict(list)
        for op in t.ops:
            if op[0] == "append":
                own[op[1]].append(op[2])
                continue
            if op[0] != "r" or not isinstance(op[2], list):
                continue
            nreads += 1
            k, L = op[1], op[2]
            usable = True
            if len(set(L)) != len(L):
                seen, dups = set(), []
                for v in L:
                    if v in seen:
                        dups.append(v)
                    seen.add(v)
                res.add("duplicate-elements", "T%s read %s = %s, in which %s appear more than "
                        "once\n%s" % (t.id, k, _fmt_list(L, 8), ", ".join(dups[:5]),
                                      _fmt_txn(t, t0)), [t.id])
                usable = False
            for v in L:
                if (k, v) not in observed:
                    observed[(k, v)] = t
                if (k, v) not in writer:
                    res.add("garbage-element", "T%s read %s = %s: nobody appended %r to %s\n%s"
                            % (t.id, k, _fmt_list(L, 8), v, k, _fmt_txn(t, t0)), [t.id])
                    usable = False
            mine = own.get(k, [])
            if not mine:
                ext = L
            elif L[-len(mine):] == mine:
                ext = L[:-len(mine)]
            else:
                res.add("internal", "T%s appended %s to %s, then read %s = %s without them at "
                        "the end\n%s" % (t.id, ", ".join(mine), k, k, _fmt_list(L, 8),
                                         _fmt_txn(t, t0)), [t.id])
                usable = False
                ext = [v for v in L if writer.get((k, v)) is not t]
            if any(writer.get((k, v)) is t for v in ext):
                res.add("internal", "T%s read %s = %s, which holds its own append made later in "
                        "the transaction\n%s" % (t.id, k, _fmt_list(L, 8), _fmt_txn(t, t0)),
                        [t.id])
                ext = [v for v in ext if writer.get((k, v)) is not t]
                usable = False
            reads[k].append([t, L, ext, usable])

    # Which transactions committed.
    for t in txns:
        if t.outcome == OK:
            t.committed = True
        elif t.outcome == INFO:
            t.committed = any((k, v) in observed for k, vs in t.appends.items() for v in vs)

    # G1a: an element of a failed transaction was read.
    for t in txns:
        if t.outcome != FAIL:
            continue
        for k, vs in t.appends.items():
            for v in vs:
                r = observed.get((k, v))
                if r is not None:
                    res.add("G1a", "T%s read %s containing %s, appended by T%s, which failed "
                            "(%s)\n%s\n%s" % (r.id, k, v, t.id, t.error or "error reply",
                                              _fmt_txn(r, t0), _fmt_txn(t, t0)), [r.id, t.id])

    # Version order per key: the longest read; every read must be a prefix.
    order = {}
    more_bad = 0
    for k, rs in reads.items():
        longest = max(rs, key=lambda r: len(r[1]))
        O = longest[1]
        bad = 0
        for r in rs:
            L = r[1]
            if O[:len(L)] != L:
                r[3] = False
                bad += 1
                if bad == 1:
                    i = next(j for j in range(len(L)) if L[j] != O[j])
                    res.add("incompatible-order",
                            "%s: T%s read %s but T%s read %s: they differ at position %d "
                            "(%s vs %s), so no single order of appends explains both\n%s\n%s"
                            % (k, r[0].id, _fmt_list(L[:i + 1], 6), longest[0].id,
                               _fmt_list(O[:i + 1], 6), i, L[i], O[i],
                               _fmt_txn(r[0], t0), _fmt_txn(longest[0], t0)),
                            [r[0].id, longest[0].id])
        more_bad += max(0, bad - 1)
        order[k] = O
    if more_bad:
        res.notes.append("%d more reads incompatible with their key's longest read (one "
                         "reported per key)" % more_bad)

    # G1b: a read ends in the middle of another transaction's appends.
    for k, rs in reads.items():
        for t, L, ext, usable in rs:
            if not ext:
                continue
            w = writer.get((k, ext[-1]))
            if w is None or w is t or not w.committed:
                continue
            vs = w.appends[k]
            if vs[-1] != ext[-1]:
                later = vs[vs.index(ext[-1]) + 1:]
                res.add("G1b", "T%s read %s ending with %s, an intermediate append of T%s, which "
                        "appended %s to %s after it\n%s\n%s"
                        % (t.id, k, ext[-1], w.id, ", ".join(later), k, _fmt_txn(t, t0),
                           _fmt_txn(w, t0)), [t.id, w.id])

    # Lost appends: committed appends missing from the final read of the key.
    final = {}
    for t in txns:
        if t.final and t.outcome == OK:
            for op in t.ops:
                if op[0] == "r" and isinstance(op[2], list):
                    final[op[1]] = (t, set(op[2]))
    unchecked_keys = set()
    nappends = 0
    for t in txns:
        if not t.committed:
            continue
        for k, vs in t.appends.items():
            nappends += len(vs)
            f = final.get(k)
            if f is None:
                unchecked_keys.add(k)
                continue
            missing = [v for v in vs if v not in f[1]]
            if missing:
                res.add("lost-append", "T%s (%s) appended %s to %s, but the final read of %s "
                        "(T%s) does not contain %s\n%s"
                        % (t.id, "acknowledged" if t.outcome == OK else
                           "outcome unknown, other appends of it were read",
                           ", ".join(missing), k, k, f[0].id,
                           "it" if len(missing) == 1 else "them", _fmt_txn(t, t0)), [t.id])
    if unchecked_keys:
        res.notes.append("%d keys have no final read: lost appends not checked on them"
                         % len(unchecked_keys))

    # The dependency graph over committed transactions.
    nodes = [t for t in txns if t.committed]
    for i, t in enumerate(nodes):
        t.idx = i
    g = Graph(len(nodes))
    for k, O in order.items():
        prev = writer.get((k, O[0])) if O else None
        for j in range(1, len(O)):
            cur = writer.get((k, O[j]))
            if prev is not None and cur is not None and prev is not cur and \
                    prev.committed and cur.committed:
                g.add(prev.idx, cur.idx, "ww")
            prev = cur
    for k, rs in reads.items():
        O = order[k]
        for t, L, ext, usable in rs:
            if ext:
                w = writer.get((k, ext[-1]))
                if w is not None and w is not t and w.committed:
                    g.add(w.idx, t.idx, "wr")
            if usable and len(ext) < len(O):
                w = writer.get((k, O[len(ext)]))
                if w is not None and w is not t and w.committed:
                    g.add(t.idx, w.idx, "rw")
    if realtime:
        _add_realtime(nodes, g)

    ninfo = sum(1 for t in txns if t.outcome == INFO)
    res.stats["transactions"] = len(txns)
    res.stats["ok"] = sum(1 for t in txns if t.outcome == OK)
    res.stats["failed"] = sum(1 for t in txns if t.outcome == FAIL)
    res.stats["unknown"] = "%d (%d seen committed)" % (
        ninfo, sum(1 for t in txns if t.outcome == INFO and t.committed))
    res.stats["keys"] = len(set(k for t in txns for k in t.appends) | set(reads))
    res.stats["appends committed"] = nappends
    res.stats["reads"] = nreads
    res.stats["final reads"] = "%d keys" % len(final)
    res.stats["graph"] = "%d transactions, %d edges (%s)" % (
        len(nodes), sum(g.count.values()),
        ", ".join("%s %d" % (k, g.count[k]) for k in ("ww", "wr", "rw", "rt") if k in g.count)
        or "none")
    res.stats["realtime"] = "yes" if realtime else "no"
    _find_cycles((nodes, g, writer, order, t0), res, realtime)
    return res


def _add_realtime(nodes, g):
    """rt edges, T1 -> T2 when T1 completed before T2 was invoked, reduced so
    that reachability is kept with about (concurrency) edges per txn: a
    txn's rt predecessors are the `frontier` when it is invoked, and when it
    completes it replaces them there (anything that follows them in real
    time now follows it too). Unknown-outcome txns never complete."""
    events = []
    for t in nodes:
        if t.invoke is not None:
            events.append((t.invoke, 1, t.idx))  # invokes first on a tie: strict order
        if t.complete is not None and t.outcome == OK:
            events.append((t.complete, 2, t.idx))
    events.sort()
    frontier = set()
    preds = {}
    for when, kind, i in events:
        if kind == 1:
            preds[i] = list(frontier)
            for p in frontier:
                g.add(p, i, "rt")
        else:
            frontier.difference_update(preds.pop(i, ()))
            frontier.add(i)


def _explain_edge(ctx, a, b, allowed):
    """Why a -> b: the first of its types in `allowed` (ww, wr, rw, rt in
    that order), found again from the history: (type, sentence)."""
    nodes, g, writer, order, t0 = ctx
    e = g.succ[a][b]
    ta, tb = nodes[a], nodes[b]
    for typ in ("ww", "wr", "rw", "rt"):
        if typ not in allowed or not e & EDGE_BITS[typ]:
            continue
        if typ == "ww":
            for k in ta.appends:
                O = order.get(k, ())
                for j in range(len(O) - 1):
                    if writer.get((k, O[j])) is ta and writer.get((k, O[j + 1])) is tb:
                        return typ, "T%s appended %s to %s right after T%s appended %s (ww)" % (
                            tb.id, O[j + 1], k, ta.id, O[j])
        elif typ == "wr":
            for k, L, ext in _ext_reads(tb, writer):
                if ext and writer.get((k, ext[-1])) is ta:
                    return typ, "T%s read %s ending with %s, which T%s appended (wr)" % (
                        tb.id, k, ext[-1], ta.id)
        elif typ == "rw":
            for k, L, ext in _ext_reads(ta, writer):
                O = order.get(k, ())
                if len(ext) < len(O) and O[:len(L)] == L and \
                        writer.get((k, O[len(ext)])) is tb:
                    seen = "ending with %s" % ext[-1] if ext else "empty"
                    return typ, "T%s read %s %s, and T%s appended the next element %s (rw)" % (
                        ta.id, k, seen, tb.id, O[len(ext)])
        else:
            return typ, "T%s completed at %s, before T%s was invoked at %s (realtime)" % (
                ta.id, _secs(ta.complete, t0), tb.id, _secs(tb.invoke, t0))
    raise AssertionError("edge T%s -> T%s has no explainable type in %s" % (ta.id, tb.id, allowed))


def _classify(types):
    nrw = sum(1 for t in types if t == "rw")
    if nrw == 0:
        kind = "G1c" if "wr" in types else "G0"
    else:
        kind = "G-single" if nrw == 1 else "G2"
    return kind + ("-realtime" if "rt" in types else "")


def _describe_cycle(ctx, cyc, allowed, comp_size):
    """cyc: node list [a, b, ..., a]."""
    nodes, t0 = ctx[0], ctx[4]
    steps = []
    types = []
    for a, b in zip(cyc, cyc[1:]):
        typ, text = _explain_edge(ctx, a, b, allowed)
        types.append(typ)
        steps.append((typ, text))
    kind = _classify(types)
    chain = "T%s" % nodes[cyc[0]].id + "".join(
        " -%s-> T%s" % (typ, nodes[b].id) for (typ, _), b in zip(steps, cyc[1:]))
    lines = ["cycle of %d transactions (in a strongly connected component of %d): %s"
             % (len(cyc) - 1, comp_size, chain)]
    lines += ["  %s" % text for _, text in steps]
    lines.append("  transactions:")
    lines += [_fmt_txn(nodes[v], t0) for v in cyc[:-1]]
    return kind, "\n".join(lines), [nodes[v].id for v in cyc[:-1]]


def _shortest_cycle_in(g, comp, types, deadline, tries=8):
    """A short cycle inside comp using `types`, trying a few start nodes."""
    inside = set(comp)
    best = None
    for v in comp[:tries]:
        for w in g.succ_of(v, types, inside):
            p = g.bfs_path(w, v, types, inside, deadline)
            if p is not None and (best is None or len(p) + 1 < len(best)):
                best = [v] + p
            if time.monotonic() > deadline:
                return best
            if best is not None and len(best) == 3:
                return best
        if best is not None and len(best) <= 4:
            break
    return best


def _cycle_through(g, comp, edge_type, back_types, deadline, tries=64):
    """A short cycle made of one `edge_type` edge a -> b and a path b -> a of
    `back_types`, inside comp."""
    inside = set(comp)
    best = None
    n = 0
    for a in comp:
        for b in g.succ_of(a, (edge_type,), inside):
            n += 1
            p = g.bfs_path(b, a, back_types, inside, deadline)
            if p is not None and (best is None or len(p) + 1 < len(best)):
                best = [a] + p
            if n >= tries or time.monotonic() > deadline or (best and len(best) == 3):
                return best
    return best


def _find_cycles(ctx, res, realtime):
    nodes, g = ctx[0], ctx[1]
    dep = ("ww", "wr", "rw")
    comps = tarjan(range(len(nodes)), lambda v: g.succ_of(v, dep))
    in_dep_comp = set()
    for comp in comps:
        in_dep_comp.update(comp)
        deadline = time.monotonic() + CYCLE_SEARCH_BUDGET
        cyc, allowed = None, None
        # G0, then G1c: cycles in the ww (ww+wr) subgraph of the component.
        for types in (("ww",), ("ww", "wr")):
            inside = set(comp)
            for sub in tarjan(comp, lambda v: g.succ_of(v, types, inside)):
                cyc = _shortest_cycle_in(g, sub, types, deadline)
                if cyc:
                    allowed = types
                    break
            if cyc:
                break
        # G-single: one rw edge closed by ww/wr; else G2: any cycle through rw.
        if cyc is None:
            cyc = _cycle_through(g, comp, "rw", ("ww", "wr"), deadline)
            allowed = ("ww", "wr", "rw")
        if cyc is None:
            cyc = _cycle_through(g, comp, "rw", dep, deadline + CYCLE_SEARCH_BUDGET)
            allowed = dep
        if cyc is None:
            res.add("G2", "a strongly connected component of %d transactions (no short cycle "
                    "found within the search budget): %s" % (
                        len(comp), ", ".join("T%s" % nodes[v].id for v in comp[:20])),
                    [nodes[v].id for v in comp[:20]])
            continue
        kind, text, ids = _describe_cycle(ctx, cyc, allowed, len(comp))
        res.add(kind, text, ids)
    if not realtime:
        return
    every = dep + ("rt",)
    for comp in tarjan(range(len(nodes)), lambda v: g.succ_of(v, every)):
        if any(v in in_dep_comp for v in comp):
            continue  # already not serializable: reported above
        deadline = time.monotonic() + CYCLE_SEARCH_BUDGET
        cyc = _cycle_through(g, comp, "rt", every, deadline)
        if cyc is None:
            res.add("realtime", "a real-time/dependency component of %d transactions: %s"
                    % (len(comp), ", ".join("T%s" % nodes[v].id for v in comp[:20])),
                    [nodes[v].id for v in comp[:20]])
            continue
        kind, text, ids = _describe_cycle(ctx, cyc, every, len(comp))
        res.add(kind, text, ids)


# -------------------------------------------------------------- bank check

def check_bank(records):
    """Bank history: the setup txn writes every account's opening balance
    (["w", acct, n]); transfers move money; every committed read of all
    accounts (read-only MULTI/GET-all) must see exactly the opening total,
    and so must the final read."""
    res = Result("bank")
    txns = [Txn(r) for r in records]
    t0 = min((t.invoke for t in txns if t.invoke is not None), default=0)
    opening = {}
    for t in txns:
        if t.outcome == OK:
            for op in t.ops:
                if op[0] == "w":
                    opening[op[1]] = int(op[2])
    if not opening:
        res.add("history-error", "no setup transaction (no [\"w\", account, balance] op)")
        return res
    total = sum(opening.values())
    accounts = set(opening)
    nreads = ntransfers = 0
    for t in txns:
        if any(op[0] == "transfer" for op in t.ops):
            ntransfers += t.outcome == OK
            continue
        if t.outcome != OK or any(op[0] == "w" for op in t.ops):
            continue
        got = {op[1]: op[2] for op in t.ops if op[0] == "bal"}
        if set(got) != accounts:
            continue
        nreads += 1
        bad = [k for k, v in got.items() if not isinstance(v, int)]
        s = sum(v for v in got.values() if isinstance(v, int))
        if bad or s != total:
            res.add("bank-total", "T%s%s read a total of %d, expected %d%s\n    balances: %s\n%s"
                    % (t.id, " (final read)" if t.final else "", s, total,
                       "; accounts without a number: %s" % ", ".join(bad) if bad else "",
                       ", ".join("%s=%s" % (k, got[k]) for k in sorted(got)),
                       "    T%s (client %s) %s..%s" % (t.id, t.client, _secs(t.invoke, t0),
                                                       _secs(t.complete, t0))),
                    [t.id])
    res.stats["transactions"] = len(txns)
    res.stats["ok"] = sum(1 for t in txns if t.outcome == OK)
    res.stats["failed"] = sum(1 for t in txns if t.outcome == FAIL)
    res.stats["unknown"] = sum(1 for t in txns if t.outcome == INFO)
    res.stats["transfers committed"] = ntransfers
    res.stats["total reads checked"] = nreads
    res.stats["accounts"] = len(accounts)
    res.stats["expected total"] = total
    if nreads == 0:
        res.notes.append("no read of all accounts: nothing was checked")
    return res


# ------------------------------------------------------------------ entry

def workload_of(records):
    """'list-append', 'bank' or both, from the ops present."""
    kinds = set()
    for r in records:
        for op in r["ops"]:
            if op[0] in ("append", "r"):
                kinds.add("list-append")
            elif op[0] in ("transfer", "w", "bal"):
                kinds.add("bank")
    return kinds


def check(records, realtime=False):
    """Check a history of either workload (or both, on separate keys).
    Returns one Result."""
    kinds = workload_of(records)
    if kinds == {"bank"}:
        return check_bank(records)
    la = check_list_append([r for r in records if workload_of([r]) != {"bank"}],
                           realtime=realtime)
    if "bank" in kinds:
        la.merge(check_bank([r for r in records if workload_of([r]) == {"bank"}]))
    return la


def check_file(path, realtime=False):
    txns, metas = load(path)
    res = check(txns, realtime=realtime)
    for m in metas:
        ev = {k: v for k, v in m.items() if k not in ("type", "time")}
        if res.t0 and "time" in m and "event" in m:
            ev["at"] = _secs(m["time"], res.t0)
        res.notes.append("run: " + json.dumps(ev, sort_keys=True))
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Check an rckv transaction history (JSON lines, see history.py) for "
                    "serializability anomalies and lost writes.")
    ap.add_argument("history", help="history file (.jsonl) written by run.py or a test")
    ap.add_argument("--realtime", action="store_true",
                    help="add real-time order: also report strict-serializability violations")
    ap.add_argument("--show", type=int, default=3, metavar="N",
                    help="explanations printed per anomaly kind (default 3)")
    ap.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    args = ap.parse_args(argv)
    try:
        res = check_file(args.history, realtime=args.realtime)
    except (OSError, HistoryError) as e:
        print("checker: %s" % e, file=sys.stderr)
        return 2
    print(res.report(per_kind=args.show))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res.to_json(), f, indent=1)
    return 0 if res.valid() else 1


if __name__ == "__main__":
    sys.exit(main())
