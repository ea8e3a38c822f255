"""Client workloads that record histories (history.py): list-append, the
same as Lua scripts (eval), and bank transfers, run by redis-py
connections in threads.

Each client thread owns one connection and runs one transaction at a time.
A transaction is MULTI, its commands, EXEC sent in one write; its outcome
is decided by what came back:
  EXEC's array        ok (an element that is an error reply took no effect
                      and is left out of the recorded ops)
  an error reply      fail (EXEC's "transaction aborted", EXECABORT, or a
                      null array after a failed WATCH)
  no reply            info: the connection broke or timed out after the
                      request was sent; the transaction may have committed
A client whose connection broke reconnects (the fault mode restarts the
server under it) and carries on until the run's stop event is set.
"""

import bisect
import hashlib
import random
import threading
import time

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from history import FAIL, INFO, OK, parse_list

# Errors after which the outcome is unknown and the connection is dropped.
LINK_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)
# A reply slower than this counts as lost (the transaction is "unknown").
# Well above the server's txn-timeout (5 s), so only a dead server hits it.
SOCKET_TIMEOUT = 15.0


class Zipf:
    """Ranks 0..n-1 with P(rank i) proportional to 1/(i+1)^s; s = 0 is
    uniform. Sampling is a bisection in the precomputed CDF."""

    def __init__(self, n, s):
        w = [1.0 / (i + 1) ** s for i in range(n)]
        total = sum(w)
        acc, self.cdf = 0.0, []
        for x in w:
            acc += x / total
            self.cdf.append(acc)
        self.cdf[-1] = 1.0

    def sample(self, rnd):
        return bisect.bisect_left(self.cdf, rnd.random())


class KeySpace:
    """`nkeys` hot slots chosen by Zipf(s). A slot names key
    "<prefix><slot>:<generation>" and moves to a fresh generation after
    max_writes appends, so lists stay short (a read returns the whole list,
    and the checker stores every read) while contention stays on nkeys
    keys. Thread-safe.

    On a cluster, `tags` gives each slot a hash tag ("{tag}:<generation>")
    chosen so that the slot's keys, whatever their generation, live on a
    known node (run.py picks the tags with RCKV KEYNODE, slot i on the
    i-th node modulo the node count); node_of maps the tag to that node."""

    def __init__(self, prefix, nkeys, s, max_writes, tags=None):
        self.prefix = prefix
        self.zipf = Zipf(nkeys, s)
        self.max_writes = max_writes
        self.gen = [0] * nkeys
        self.writes = [0] * nkeys
        self.tags = tags  # [(tag, node id)] per slot, or None
        self._node = dict(tags or ())
        self._lock = threading.Lock()
        self._all = set()

    def _name(self, slot):
        if self.tags:
            return "{%s}:%d" % (self.tags[slot][0], self.gen[slot])
        return "%s%d:%d" % (self.prefix, slot, self.gen[slot])

    def node_of(self, key):
        """The node a key of this space lives on (None without tags)."""
        if not self.tags or not key.startswith("{"):
            return None
        return self._node.get(key[1:key.index("}")])

    def pick(self, rnd):
        return self.zipf.sample(rnd)

    def read_key(self, slot):
        with self._lock:
            k = self._name(slot)
            self._all.add(k)
            return k

    def append_key(self, slot):
        with self._lock:
            k = self._name(slot)
            self._all.add(k)
            self.writes[slot] += 1
            if self.writes[slot] >= self.max_writes:
                self.gen[slot] += 1
                self.writes[slot] = 0
            return k

    def all_keys(self):
        with self._lock:
            return sorted(self._all)


class Context:
    """What the client threads of one run share."""

    def __init__(self, endpoints, recorder, seed):
        self.endpoints = endpoints  # [(host, port)]: client i uses i % len
        self.rec = recorder
        self.seed = seed
        self.stop = threading.Event()
        self.errors = []  # unexpected exceptions of client threads
        self.reconnects = 0
        self._lock = threading.Lock()

    def note_reconnect(self):
        with self._lock:
            self.reconnects += 1


def connect(endpoint, stop=None, deadline=None):
    """A connected redis-py Connection, retrying while the server is down
    (fault mode) until stop is set or the deadline passes; None then."""
    host, port = endpoint
    while True:
        c = redis.Connection(host=host, port=port, socket_timeout=SOCKET_TIMEOUT,
                             socket_connect_timeout=5)
        try:
            c.connect()
            return c
        except LINK_ERRORS:
            c.disconnect()
        if (stop is not None and stop.is_set()) or \
                (deadline is not None and time.monotonic() > deadline):
            return None
        time.sleep(0.05)


def multi_exec(conn, cmds):
    """Send MULTI, cmds, EXEC in one write and read every reply. Returns
    EXEC's reply (a list, or None for a null array). Raises ResponseError
    when EXEC itself replied with an error, and a LINK_ERRORS exception
    when the link failed (after the request may have been sent)."""
    conn.send_packed_command(conn.pack_commands([("MULTI",)] + cmds + [("EXEC",)]),
                             check_health=False)
    for _ in range(len(cmds) + 1):  # +OK and +QUEUED (or a queue-time error)
        try:
            conn.read_response()
        except ResponseError:
            pass  # EXEC then answers EXECABORT
    return conn.read_response()


def run_txn(conn, cmds, rnd):
    """One transaction of cmds: MULTI/EXEC (multi_exec), except that a
    single command goes alone half the time, as an autocommit command (a
    GET of an absent key then takes the server's no-transaction path).
    Returns the list of replies, or None for a null EXEC; raises as
    multi_exec does."""
    if len(cmds) == 1 and rnd.random() < 0.5:
        conn.send_packed_command(conn.pack_command(*cmds[0]), check_health=False)
        return [conn.read_response()]
    return multi_exec(conn, cmds)


def error_outcome(e):
    """The history outcome of an EXEC that replied with an error: FAIL
    (nothing was written), except for rckv's "outcome unknown" (a node
    failed while the transaction committed), which is INFO."""
    return INFO if "outcome unknown" in str(e) else FAIL


def _drop_link(conn):
    try:
        conn.disconnect()
    except Exception:
        pass


# ------------------------------------------------------------ list-append

class AppendWorkload:
    """Transactions of 1..max_ops operations over a KeySpace. Half of them
    read some keys and then append to the same keys (the read-modify-write
    shape that makes lost updates and write skew visible), the rest mix
    reads and appends at random. Every appended element is
    "<client>-<seq>-<op>", unique in the run."""

    name = "append"

    def __init__(self, keys, max_ops=4):
        self.keys = keys
        self.max_ops = max_ops
        self.final_lists = {}  # key -> its final read's elements (final_reads)

    # How an op is sent and a read's reply read: a string that APPEND grows
    # by ",<elem>" and GET reads (ListWorkload: a Redis list).
    @staticmethod
    def append_cmd(key, elem):
        return ("APPEND", key, "," + elem)

    @staticmethod
    def read_cmd(key):
        return ("GET", key)

    @staticmethod
    def read_elems(reply):
        return parse_list(reply)

    def plan(self, rnd):
        ops = []
        if rnd.random() < 0.5:
            slots = [self.keys.pick(rnd) for _ in range(rnd.randint(1, max(1, self.max_ops // 2)))]
            for s in slots:
                if rnd.random() < 0.8:
                    ops.append(["r", self.keys.read_key(s)])
            for s in slots:
                if rnd.random() < 0.8 or not ops:
                    ops.append(["append", self.keys.append_key(s)])
        else:
            for _ in range(rnd.randint(1, self.max_ops)):
                s = self.keys.pick(rnd)
                if rnd.random() < 0.5:
                    ops.append(["r", self.keys.read_key(s)])
                else:
                    ops.append(["append", self.keys.append_key(s)])
        return ops

    def client(self, cid, ctx):
        rnd = random.Random(ctx.seed * 7919 + cid)
        endpoint = ctx.endpoints[cid % len(ctx.endpoints)]
        conn = None
        seq = 0
        while not ctx.stop.is_set():
            if conn is None:
                conn = connect(endpoint, stop=ctx.stop)
                if conn is None:
                    break
            seq += 1
            ops = self.plan(rnd)
            cmds = []
            for j, op in enumerate(ops):
                if op[0] == "append":
                    op.append("%d-%d-%d" % (cid, seq, j))
                    cmds.append(self.append_cmd(op[1], op[2]))
                else:
                    cmds.append(self.read_cmd(op[1]))
            tid = ctx.rec.new_id()
            t0 = time.monotonic_ns()
            try:
                reply = run_txn(conn, cmds, rnd)
            except ResponseError as e:
                outcome = error_outcome(e)
                ctx.rec.record(tid, cid, t0, time.monotonic_ns() if outcome == FAIL else None,
                               outcome, _unknown_reads(ops), error=e)
                continue
            except LINK_ERRORS as e:
                ctx.rec.record(tid, cid, t0, None, INFO, _unknown_reads(ops), error=repr(e))
                _drop_link(conn)
                conn = None
                ctx.note_reconnect()
                continue
            t1 = time.monotonic_ns()
            if reply is None:
                ctx.rec.record(tid, cid, t0, t1, FAIL, _unknown_reads(ops), error="null EXEC")
                continue
            done, errs = [], []
            for op, r in zip(ops, reply):
                if isinstance(r, ResponseError):
                    errs.append("%s %s: %s" % (op[0], op[1], r))
                elif op[0] == "append":
                    done.append(op)
                else:
                    done.append(["r", op[1], self.read_elems(r)])
            ctx.rec.record(tid, cid, t0, t1, OK, done, error="; ".join(errs) if errs else None)
        if conn is not None:
            _drop_link(conn)

    def final_reads(self, ctx, endpoint, deadline, batch=64):
        """After the load: read every key ever used, in read-only MULTIs,
        recorded with final=True. Retries while the server comes back."""
        keys = self.keys.all_keys()
        conn = None
        cid = 10 ** 6
        for i in range(0, len(keys), batch):
            part = keys[i:i + batch]
            while True:
                if conn is None:
                    conn = connect(endpoint, deadline=deadline)
                    if conn is None:
                        raise RuntimeError("final reads: server unreachable")
                tid = ctx.rec.new_id()
                t0 = time.monotonic_ns()
                try:
                    reply = multi_exec(conn, [self.read_cmd(k) for k in part])
                except LINK_ERRORS:
                    _drop_link(conn)
                    conn = None
                    if time.monotonic() > deadline:
                        raise RuntimeError("final reads: no reply from the server")
                    continue
                except ResponseError as e:
                    if time.monotonic() > deadline:
                        raise RuntimeError("final reads keep failing: %s (%s)"
                                           % (e, _failing_alone(conn, part))) from None
                    time.sleep(0.1)
                    continue
                t1 = time.monotonic_ns()
                lists = [self.read_elems(v) for v in reply]
                self.final_lists.update(zip(part, lists))
                ctx.rec.record(tid, cid, t0, t1, OK,
                               [["r", k, L] for k, L in zip(part, lists)], final=True)
                break
        if conn is not None:
            _drop_link(conn)
        return len(keys)


class ListWorkload(AppendWorkload):
    """The list-append transactions on Redis lists: RPUSH appends the
    element, LRANGE 0 -1 reads the whole list (issue 21's checker workload
    for the list type)."""

    name = "list"

    @staticmethod
    def append_cmd(key, elem):
        return ("RPUSH", key, elem)

    @staticmethod
    def read_cmd(key):
        return ("LRANGE", key, 0, -1)

    @staticmethod
    def read_elems(reply):
        return [e.decode("utf-8", "replace") if isinstance(e, bytes) else str(e)
                for e in (reply or [])]


# ------------------------------------------------------------------ eval

# The eval workload's script (Lua 5.1, Redis's EVAL semantics). ARGV is a
# program of ops read left to right, each replying one or two strings:
#   r <ref>                   GET the key: its value ('' if absent)
#   a <ref> <elem>            APPEND ','..elem to the key: ''
#   c <ref> <elem> <m> <ref1> .. <refm>
#                             GET the key, count its elements n, APPEND
#                             ','..elem to ref(n mod m + 1): the value read
#                             and that index
# A ref is K<i> (KEYS[i], a declared key) or U<base>#<gen>, an undeclared
# key whose name <base>:<gen> the script builds; c's target is chosen by
# what the script read, so no client could declare it.
EVAL_SCRIPT = """
local function key(ref)
  if string.sub(ref, 1, 1) == 'K' then
    return KEYS[tonumber(string.sub(ref, 2))]
  end
  local base, gen = string.match(ref, '^U(.*)#(%d+)$')
  return base .. ':' .. gen
end
local out, i = {}, 1
while i <= #ARGV do
  local op = ARGV[i]
  if op == 'r' then
    out[#out + 1] = redis.call('GET', key(ARGV[i + 1])) or ''
    i = i + 2
  elseif op == 'a' then
    redis.call('APPEND', key(ARGV[i + 1]), ',' .. ARGV[i + 2])
    out[#out + 1] = ''
    i = i + 3
  elseif op == 'c' then
    local v = redis.call('GET', key(ARGV[i + 1])) or ''
    local _, n = string.gsub(v, ',', ',')
    local m = tonumber(ARGV[i + 3])
    local pick = n % m + 1
    redis.call('APPEND', key(ARGV[i + 3 + pick]), ',' .. ARGV[i + 2])
    out[#out + 1] = v
    out[#out + 1] = tostring(pick)
    i = i + 4 + m
  else
    return redis.error_reply('bad op ' .. tostring(op))
  end
end
return out
"""
EVAL_SHA = hashlib.sha1(EVAL_SCRIPT.encode()).hexdigest()


class EvalWorkload(AppendWorkload):
    """List-append transactions as Lua scripts: each transaction is one
    EVAL (or EVALSHA of the same script, falling back to EVAL on NOSCRIPT)
    of EVAL_SCRIPT with the transaction's ops in ARGV, and its reply is
    every read's value, so the history holds every read and write exactly
    as AppendWorkload's does and the same checker judges it.

    Half of the keys a transaction touches are passed in KEYS, the others
    are undeclared (names the script builds); and a third of the
    transactions also make a "c" op: read a key, then append to one of 2
    or 3 candidate keys chosen by the length of what was read (a key set
    that depends on data: calvin's OLLP must restart when it changed).

    A "c" op of a transaction whose outcome is unknown appended to a key
    nobody knows yet: its record waits for the final reads, which show
    which candidate (if any) holds the element (final_reads)."""

    name = "eval"

    def __init__(self, keys, max_ops=4, cond_ratio=0.3, declare_ratio=0.5, torn=False):
        # torn: broken on purpose, for the checker's own test. Each op is
        # a script of its own (one EVAL per op) while the history records
        # them as one transaction: atomicity is gone, and at high
        # contention the checker must say so.
        super().__init__(keys, max_ops=max_ops)
        self.cond_ratio = cond_ratio
        self.declare_ratio = declare_ratio
        self.torn = torn
        self._pending = []  # unknown outcomes with "c" ops: recorded at the end
        self._lock = threading.Lock()

    def plan(self, rnd):
        ops = super().plan(rnd)
        if rnd.random() < self.cond_ratio:
            nkeys = len(self.keys.gen)
            slots = rnd.sample(range(nkeys), min(nkeys, rnd.randint(2, 3)))
            op = ["c", self.keys.read_key(self.keys.pick(rnd)),
                  [self.keys.read_key(s) for s in slots]]
            ops.insert(rnd.randint(0, len(ops)), op)
        return ops

    def command(self, ops, rnd):
        """(KEYS, ARGV) of a transaction's ops (values already labelled)."""
        declared, argv = [], []

        def ref(k, may_declare=True):
            if may_declare and (k in declared or rnd.random() < self.declare_ratio):
                if k not in declared:
                    declared.append(k)
                return "K%d" % (declared.index(k) + 1)
            base, _, gen = k.rpartition(":")
            return "U%s#%s" % (base, gen)

        for op in ops:
            if op[0] == "r":
                argv += ["r", ref(op[1])]
            elif op[0] == "append":
                argv += ["a", ref(op[1]), op[2]]
            else:
                argv += ["c", ref(op[1]), op[3], str(len(op[2]))] + \
                    [ref(k, may_declare=False) for k in op[2]]
        return declared, argv

    @staticmethod
    def _eval(conn, keys, argv, rnd):
        """EVALSHA half the time (EVAL when the server answers NOSCRIPT,
        which ran nothing), else EVAL. Returns the reply; raises as
        run_txn does."""
        if rnd.random() < 0.5:
            conn.send_command("EVALSHA", EVAL_SHA, len(keys), *(keys + argv))
            try:
                return conn.read_response()
            except NoScriptError:
                pass  # (redis-py strips the NOSCRIPT code from the message)
        conn.send_command("EVAL", EVAL_SCRIPT, len(keys), *(keys + argv))
        return conn.read_response()

    def recorded(self, ops, reply):
        """The history ops of a committed script: its reply read op by op.
        Raises RuntimeError when the reply does not have the script's
        shape (a server that returned something else)."""
        if not isinstance(reply, list) or any(isinstance(v, ResponseError) for v in reply):
            raise RuntimeError("EVAL replied %r, want an array of strings" % (reply,))
        vals = iter(reply)
        done = []
        try:
            for op in ops:
                if op[0] == "r":
                    done.append(["r", op[1], parse_list(next(vals))])
                elif op[0] == "append":
                    next(vals)
                    done.append(op)
                else:
                    done.append(["r", op[1], parse_list(next(vals))])
                    pick = int(next(vals))
                    done.append(["append", op[2][pick - 1], op[3]])
        except (StopIteration, ValueError, IndexError):
            raise RuntimeError("EVAL replied %r to ops %r" % (reply, ops)) from None
        if next(vals, None) is not None:
            raise RuntimeError("EVAL replied %r to ops %r: too many values" % (reply, ops))
        return done

    @staticmethod
    def unknown(ops):
        """History ops of a script whose outcome is not ok: reads unknown;
        a "c" op's append on its first candidate (a failed script wrote
        nothing, so where does not matter; unknown ones are resolved by
        final_reads)."""
        out = []
        for op in ops:
            if op[0] == "c":
                out += [["r", op[1], None], ["append", op[2][0], op[3]]]
            else:
                out.append(op if op[0] == "append" else ["r", op[1], None])
        return out

    def client(self, cid, ctx):
        rnd = random.Random(ctx.seed * 6151 + cid)
        endpoint = ctx.endpoints[cid % len(ctx.endpoints)]
        conn = None
        seq = 0
        while not ctx.stop.is_set():
            if conn is None:
                conn = connect(endpoint, stop=ctx.stop)
                if conn is None:
                    break
            seq += 1
            ops = self.plan(rnd)
            for j, op in enumerate(ops):
                if op[0] in ("append", "c"):
                    op.append("%d-%d-%d" % (cid, seq, j))
            tid = ctx.rec.new_id()
            t0 = time.monotonic_ns()
            try:
                if self.torn:
                    reply = []
                    for op in ops:
                        reply += self._eval(conn, *self.command([op], rnd), rnd)
                else:
                    reply = self._eval(conn, *self.command(ops, rnd), rnd)
            except ResponseError as e:
                outcome = error_outcome(e)
                self._record_unsure(ctx, tid, cid, t0, outcome, ops, e)
                continue
            except LINK_ERRORS as e:
                self._record_unsure(ctx, tid, cid, t0, INFO, ops, repr(e))
                _drop_link(conn)
                conn = None
                ctx.note_reconnect()
                continue
            t1 = time.monotonic_ns()
            ctx.rec.record(tid, cid, t0, t1, OK, self.recorded(ops, reply))
        if conn is not None:
            _drop_link(conn)

    def _record_unsure(self, ctx, tid, cid, t0, outcome, ops, error):
        if outcome == INFO and any(op[0] == "c" for op in ops):
            with self._lock:
                self._pending.append((tid, cid, t0, ops, error))
            return
        ctx.rec.record(tid, cid, t0, time.monotonic_ns() if outcome == FAIL else None,
                       outcome, self.unknown(ops), error=error)

    def final_reads(self, ctx, endpoint, deadline, batch=64):
        """AppendWorkload's, then the unknown scripts with "c" ops, each
        append placed on the candidate whose final list holds its element
        (on the first candidate when none does: it never took effect)."""
        n = super().final_reads(ctx, endpoint, deadline, batch)
        self.record_pending(ctx)
        return n

    def record_pending(self, ctx):
        """Record the unknown scripts with "c" ops, by self.final_lists."""
        for tid, cid, t0, ops, error in self._pending:
            out = []
            for op in ops:
                if op[0] != "c":
                    out.append(op if op[0] == "append" else ["r", op[1], None])
                    continue
                where = [k for k in op[2] if op[3] in self.final_lists.get(k, ())]
                out += [["r", op[1], None], ["append", (where or op[2])[0], op[3]]]
            ctx.rec.record(tid, cid, t0, None, INFO, out, error=error)
        self._pending = []


def _failing_alone(conn, keys, budget=20.0):
    """Which of keys fail a GET of their own (the diagnosis of final reads
    that keep failing): 'key: error' for the first three, within budget
    seconds (each failing GET takes a txn-timeout), or what kept us from
    asking."""
    bad = []
    end = time.monotonic() + budget
    for k in keys:
        if len(bad) >= 3 or time.monotonic() > end:
            break
        try:
            multi_exec(conn, [("GET", k)])
        except ResponseError as e:
            bad.append("%s: %s" % (k, e))
        except LINK_ERRORS as e:
            return "no link to ask key by key: %r" % (e,)
    return "failing alone: " + ("; ".join(bad[:5]) if bad else "none")


def _unknown_reads(ops):
    return [op if op[0] == "append" else ["r", op[1], None] for op in ops]


# ------------------------------------------------------------------ bank

class BankWorkload:
    """`accounts` accounts opened with `balance` each. Clients transfer
    random amounts, half the time as WATCH a b / GET a / GET b / MULTI
    DECRBY a x / INCRBY b x / EXEC (only when a can pay; a null EXEC is a
    failed transaction), half as a plain MULTI DECRBY / INCRBY / EXEC; and
    one operation in five is a read-only MULTI GET of every account, whose
    sum the checker compares with the opening total."""

    name = "bank"

    def __init__(self, prefix, accounts=8, balance=100, read_ratio=0.2, names=None):
        # names: the account keys, when the caller placed them (on a
        # cluster, spread over the nodes); else "<prefix><i>".
        self.accounts = list(names) if names else ["%s%d" % (prefix, i)
                                                   for i in range(accounts)]
        self.balance = balance
        self.read_ratio = read_ratio

    def setup(self, ctx, endpoint):
        conn = connect(endpoint, deadline=time.monotonic() + 10)
        if conn is None:
            raise RuntimeError("bank setup: server unreachable")
        try:
            tid = ctx.rec.new_id()
            t0 = time.monotonic_ns()
            reply = multi_exec(conn, [("SET", a, str(self.balance)) for a in self.accounts])
            if not isinstance(reply, list) or any(isinstance(r, ResponseError) for r in reply):
                raise RuntimeError("bank setup failed: %r" % (reply,))
            ctx.rec.record(tid, -1, t0, time.monotonic_ns(), OK,
                           [["w", a, self.balance] for a in self.accounts])
        finally:
            _drop_link(conn)

    def _read_all(self, conn, ctx, cid, final=False):
        tid = ctx.rec.new_id()
        t0 = time.monotonic_ns()
        try:
            reply = multi_exec(conn, [("GET", a) for a in self.accounts])
        except ResponseError as e:
            ctx.rec.record(tid, cid, t0, time.monotonic_ns(), FAIL,
                           [["bal", a, None] for a in self.accounts], error=e)
            return
        t1 = time.monotonic_ns()
        ops = []
        for a, v in zip(self.accounts, reply):
            try:
                ops.append(["bal", a, int(v)])
            except (TypeError, ValueError):
                ops.append(["bal", a, None if v is None else str(v)])
        ctx.rec.record(tid, cid, t0, t1, OK, ops, final=final)

    def client(self, cid, ctx):
        rnd = random.Random(ctx.seed * 104729 + cid)
        endpoint = ctx.endpoints[cid % len(ctx.endpoints)]
        conn = None
        while not ctx.stop.is_set():
            if conn is None:
                conn = connect(endpoint, stop=ctx.stop)
                if conn is None:
                    break
            try:
                if rnd.random() < self.read_ratio:
                    self._read_all(conn, ctx, cid)
                    continue
                a, b = rnd.sample(self.accounts, 2)
                x = rnd.randint(1, 20)
                ops = [["transfer", a, b, x]]
                cmds = [("DECRBY", a, x), ("INCRBY", b, x)]
                if rnd.random() < 0.5:
                    try:
                        conn.send_command("WATCH", a, b)
                        conn.read_response()
                        conn.send_command("GET", a)
                        va = conn.read_response()
                    except ResponseError:
                        va = None  # e.g. WATCH kept aborting: try another transfer
                    if va is None or int(va) < x:
                        conn.send_command("UNWATCH")
                        conn.read_response()
                        continue
                    ops = [["bal", a, int(va)]] + ops
                tid = ctx.rec.new_id()
                t0 = time.monotonic_ns()
                try:
                    reply = multi_exec(conn, cmds)
                except ResponseError as e:
                    outcome = error_outcome(e)
                    ctx.rec.record(tid, cid, t0,
                                   time.monotonic_ns() if outcome == FAIL else None,
                                   outcome, ops, error=e)
                    continue
                except LINK_ERRORS as e:
                    ctx.rec.record(tid, cid, t0, None, INFO, ops, error=repr(e))
                    raise
                outcome = OK if reply is not None else FAIL
                ctx.rec.record(tid, cid, t0, time.monotonic_ns(), outcome, ops,
                               error=None if reply is not None else "WATCH: null EXEC")
            except LINK_ERRORS:
                _drop_link(conn)
                conn = None
                ctx.note_reconnect()
        if conn is not None:
            _drop_link(conn)

    def final_reads(self, ctx, endpoint, deadline):
        while True:
            conn = connect(endpoint, deadline=deadline)
            if conn is None:
                raise RuntimeError("final read: server unreachable")
            try:
                self._read_all(conn, ctx, 10 ** 6, final=True)
                return len(self.accounts)
            except LINK_ERRORS:
                if time.monotonic() > deadline:
                    raise
            finally:
                _drop_link(conn)
