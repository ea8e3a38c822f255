/*
 * fab: the one-sided fabric API (DESIGN.md section 8).
 *
 * Memory in the cluster is addressed as (node, offset) into that node's
 * MemStore region. A coroutine queues one-sided operations on a fab_batch
 * (doorbell batching), then calls fab_exec(), which posts every queued
 * operation, waits for the completion of the last one per endpoint (passive
 * ack) and returns. While it waits, the calling coroutine yields, so other
 * coroutines of the worker run; several batches of different coroutines may
 * be outstanding on one endpoint (outstanding requests).
 *
 * Guarantees of every backend:
 *  - CAS and FAA are atomic on 8-aligned 8-byte words, and atomic with each
 *    other; they are NOT atomic with CPU accesses other than the fabric's.
 *  - READ and WRITE are atomic only per aligned 8-byte word; a READ racing a
 *    WRITE may return a mix of old and new words ("torn"), and protocols must
 *    detect that (validation, versions, Double-Read).
 *  - Operations posted on one endpoint complete in the order posted.
 *  - Operations on a node this CPU reaches directly (fab_node_direct: the
 *    own region except on verbs, shm peers) are applied inside fab_exec,
 *    in posting order, before any operation of the batch is handed to the
 *    backend for another node; a batch that fails fab_exec's checks
 *    (bounds, a detached node) applies none of them.
 *  - A one-sided operation never runs the target node's transaction code.
 *
 * Threads: a struct fab is shared by the workers of one node; a struct
 * fab_worker belongs to one worker thread (the _st rule: owner thread only).
 */
#ifndef RCKV_FAB_H
#define RCKV_FAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAB_MAX_NODES 64
#define FAB_BATCH_MAX 64 /* operations queued on one batch before fab_exec */

/* The one-sided verbs, then two-sided RPC (fab_rpc). */
enum fab_kind { FAB_READ, FAB_WRITE, FAB_CAS, FAB_FAA, FAB_RPC, FAB_KINDS };
#define FAB_ONESIDED_KINDS FAB_RPC /* kinds below it are one-sided verbs */

/* Tags a batch's owner gives its ops (fab_batch.tag: cc's stages). */
#define FAB_TAGS 8

/* Verb, RPC and round-trip counters; one per transaction, summed into INFO. */
struct fab_stats {
	uint64_t verbs[FAB_KINDS]; /* by enum fab_kind; [FAB_RPC]: RPCs (messages) */
	uint64_t round_trips;      /* fab_exec calls (or their RPC phases) that reached a peer */
	uint64_t bytes[2];         /* bytes moved by one-sided READs [FAB_READ] and
				      WRITEs [FAB_WRITE] (their len; not RPCs) */
	/* By the ops' tag: one-sided verbs posted, and the messages that
	 * carried ops of the tag two-sided (FAB_OP_TWOSIDED; a message that
	 * carries ops of several tags counts once for each). */
	uint64_t tag_verbs[FAB_TAGS], tag_rpcs[FAB_TAGS];
	/* Wall time in fab_exec, by the tag of the batch's first op. */
	uint64_t tag_ns[FAB_TAGS];
};

/* Where an RPC's reply lands (fab_rpc). status: the handler's return
 * (>= 0, or its -errno), or the transport's -errno if the call never got
 * a reply (then fab_exec fails too); len: the reply's bytes in buf. */
struct fab_rpc_reply {
	void *buf;
	uint32_t cap;
	uint32_t len;
	int32_t status;
};

struct fab_op {
	uint8_t kind;    /* enum fab_kind */
	uint8_t flags;   /* FAB_OP_* */
	uint8_t tag;     /* the batch's tag when queued (< FAB_TAGS) */
	uint16_t node;   /* target node id */
	uint32_t len;    /* READ/WRITE length in bytes */
	uint64_t off;    /* byte offset in the target region; 8-aligned for CAS/FAA */
	void *buf;       /* READ: destination; WRITE: source (kept valid until exec returns) */
	uint64_t cmp;    /* CAS: expected value */
	uint64_t swp;    /* CAS: new value; FAA: addend */
	union {
		uint64_t *old;              /* CAS/FAA: receives the previous value (may be NULL) */
		struct fab_rpc_reply *rep;  /* RPC: its reply (off: the handler, buf/len: the request) */
	};
};

/* fab_op.flags: applied, but not noted in the node's journal (struct
 * fab_journal says when that is safe). Set by the owner on queued ops. */
#define FAB_OP_UNJOURNALED 0x1
/* fab_op.flags: a remote flush (fab_flush): a READ of the target's first
 * word that completes only once the target's journal holds every write it
 * applied before it durably (struct fab_journal, sync). */
#define FAB_OP_FLUSH 0x2
/* fab_op.flags: a word that recovery resets whatever the log says (an
 * item's lock word: storage/scan.c releases every lock): applied, but
 * noted in no journal and not tracked for persistence (fab_track_writes),
 * wherever it is applied. */
#define FAB_OP_VOLATILE 0x4
/*
 * fab_op.flags: carried two-sided (RCC's RPC implementation of a step; the
 * fab_batch's `twosided` tags set it at queueing). The op travels in a
 * message to the target, where one of its workers applies it to its own
 * region exactly as the NIC would apply the one-sided op (same words,
 * same atomicity, its journal noting it), and replies with what a READ,
 * CAS or FAA returns, which fab_exec puts where the op said. So a one-sided
 * and a two-sided op on the same word mix freely (RCC 5.2). The flagged
 * ops of a batch to one node with no unflagged op to that node between
 * them go in one message (one RPC, counted in verbs[FAB_RPC]), which is
 * ordered against the node's other ops as fab_rpc says: what follows it
 * waits for its reply. Not for remote flushes (fab_flush), nor for an op
 * whose data would not fit a message (FAB_RPC_MAX): those go one-sided.
 * A target's failure to apply (its journal down) fails its part.
 */
#define FAB_OP_TWOSIDED 0x8

struct fab;        /* a node's fabric: backend, own and peers' regions */
struct fab_worker; /* a worker's endpoints to every node */
struct fab_rpc_call; /* an RPC on its target (fab_rpc) */

/*
 * How a waiting coroutine suspends: the worker supplies this. wait() must
 * return only after at least `ns` nanoseconds (0: just yield once). For
 * completions that arrive later (tcp, verbs), fab_exec takes self(), then
 * park()s until the completion calls unpark(handle) from the worker's loop
 * (fab_worker_poll). With park == NULL (tests, control threads) the
 * caller's thread polls, blocking in poll(2) on the backend's fds.
 * wait and ctx come first so that {wait, ctx} initializers stay valid.
 */
struct fab_waiter {
	void (*wait)(void *ctx, uint64_t ns);
	void *ctx;
	void *(*self)(void *ctx);
	void (*park)(void *ctx);
	void (*unpark)(void *ctx, void *handle);
	/* Optional: told how long each exec waited for its parts, in ns
	 * (the latency monitor's fabric-wait event); NULL costs nothing. */
	void (*waited)(void *ctx, uint64_t ns);
};

/*
 * Changed ranges, for persistence (persistence power: cc/durable.c, FORD's
 * selective flush, notes-ford.md 3.4). When the fabric tracks writes
 * (fab_track_writes), each worker's endpoints keep one of these: fab_exec
 * appends the target range of every WRITE, CAS and FAA it executes (a
 * failed CAS too: over-reporting is harmless), merging a range with the
 * last one when they touch. A range that does not fit sets its node's bit
 * in `overflow`, which means "that node's whole region". The worker's
 * owner thread writes it (fab_exec) and drains it (cc/durable.c: it copies
 * the ranges out and sets n and overflow to 0); no one else touches it.
 */
#define FAB_DIRTY_MAX 2048
struct fab_range {
	uint16_t node;
	uint32_t len;
	uint64_t off;
};
struct fab_dirty {
	int n;
	uint64_t overflow;            /* bit per node: persist its whole region */
	struct fab_range r[FAB_DIRTY_MAX];
};

struct fab_batch {
	struct fab_worker *fw;
	struct fab_waiter waiter;
	struct fab_stats *stats; /* may be NULL */
	int n;
	uint32_t execs;          /* fab_exec calls so far, implicit ones included */
	/* completion state of the exec in progress (fab.c and backends) */
	int pending;             /* parts posted and not yet completed */
	int err;                 /* first error of a part, or 0 */
	uint64_t failed;         /* bit per node whose part of the last exec failed */
	uint64_t unsent;         /* of those, the nodes whose part never left this
				    host (refused at post): none of its ops took
				    effect. In failed but not here: unknown, some
				    may have */
	void *handle;            /* waiter's handle of the parked coroutine */
	uint64_t flush_sink;     /* where fab_flush's READs land */
	/* Set by the owner between queueings: the tag of the ops queued next,
	 * and the tags whose ops go two-sided (bit per tag, FAB_OP_TWOSIDED).
	 * fab_batch_init sets both to 0. */
	uint8_t tag;
	uint8_t twosided;
	struct fab_op ops[FAB_BATCH_MAX];
};

/* What a node tells its peers about its region at connect (the control
 * plane's HELLO), and what a backend needs to reach it. */
struct fab_peer_info {
	uint16_t node;
	uint64_t region_size;
	char region_path[256];  /* shm: the file to map */
	char addr[128];         /* host:port of the node's fabric listener */
};

/*
 * The part of a batch bound for one node: its ops in posting order. A
 * backend that completes later keeps the part queued on its endpoint and
 * calls fab_part_done when it completed (passive ack: one completion for
 * the whole part).
 */
struct fab_part {
	struct fab_batch *b;
	uint16_t node;
	int n;
	struct fab_op *ops[FAB_BATCH_MAX];
	struct fab_part *next;  /* endpoint FIFO (backend) */
	uint32_t resp_len;      /* tcp: bytes of the expected response; verbs:
				   completions still awaited (its invariant (8)) */
};

/* Called by a backend when a posted part completed (err 0 or -errno). */
void fab_part_done(struct fab_part *p, int err);

/*
 * Apply ops to memory at `base` (a region of `size` bytes) exactly as a
 * one-sided NIC would: word-atomic copies, sequentially consistent CAS and
 * FAA, in order. Used by shm on a peer's mapping, by the tcp NIC thread,
 * and for a node's access to its own region. Returns 0 or -EFAULT.
 */
int fab_apply_local(char *base, uint64_t size, struct fab_op *const *ops, int n);

/*
 * The control plane's request/response call to a peer, given to backends
 * that exchange setup data (verbs). Blocking; not on a worker's hot path.
 * *resp_len is the capacity of resp on entry and the reply's length on
 * return (the same for the ctl hook). Returns 0 or -errno.
 */
typedef int (*fab_ctl_call_fn)(void *ctx, uint16_t node, const void *req, size_t len,
			       void *resp, size_t *resp_len);

/*
 * Backend table (SQLite-VFS style). One .c file per backend, one row in
 * fab.c's registry. Hooks marked optional may be NULL.
 *  open         backend-wide setup (verbs: open and query the device). Optional.
 *  close        undo open. Optional.
 *  attach_self  the own region is mapped at peers[self] (verbs: register it
 *               as a memory region). Optional.
 *  attach_peer  make a peer reachable from its HELLO info (shm: map its
 *               region file; tcp: remember its address).
 *  worker_init  per-worker endpoints to every attached peer (tcp: one
 *               connection each; verbs: one RC QP each). Optional.
 *  worker_fini  undo worker_init. Optional.
 *  post         queue part->ops (all to part->node, never the own node) as one
 *               doorbell batch; complete it with fab_part_done, now or later.
 *  poll         make progress on completions; returns parts completed. Optional.
 *  worker_fds   fds the worker's epoll must watch for poll. Optional.
 *  adopt        serve an incoming data connection that the control plane
 *               accepted on the fabric listener (tcp). Optional.
 *  ctl          answer a backend message relayed by the control plane
 *               (verbs: queue-pair exchange). Optional.
 *  post_rpc     queue a part of RPCs only to a direct peer (shm: its request
 *               ring); complete it with fab_part_done. Optional (then RPCs
 *               to direct peers fail with -EOPNOTSUPP). A backend's post
 *               takes parts that end in RPCs (tcp, verbs: rpc_in_post), or
 *               refuses them.
 */
struct fab_backend {
	const char *name;
	int (*open)(struct fab *f, char *err, size_t errlen);
	void (*close)(struct fab *f);
	int (*attach_self)(struct fab *f, char *err, size_t errlen);
	int (*attach_peer)(struct fab *f, const struct fab_peer_info *pi, char *err, size_t errlen);
	int (*worker_init)(struct fab_worker *fw, char *err, size_t errlen);
	void (*worker_fini)(struct fab_worker *fw);
	int (*post)(struct fab_worker *fw, struct fab_part *part);
	/* Optional: send what post only queued (fab_worker_flush). */
	void (*flush)(struct fab_worker *fw);
	int (*poll)(struct fab_worker *fw);
	int (*worker_fds)(struct fab_worker *fw, int *fds, int max);
	int (*adopt)(struct fab *f, int fd, uint16_t from, uint16_t worker);
	int (*ctl)(struct fab *f, const void *req, size_t len, void *resp, size_t *resp_len);
	/* Optional: fail what is in flight to a node just fenced (fab_fence). */
	void (*fence)(struct fab *f, uint16_t node);
	int (*post_rpc)(struct fab_worker *fw, struct fab_part *part);
	bool rpc_in_post; /* post takes parts that end in RPCs */
	/* Optional: the node said HELLO again (fab_peer_back). Any thread. */
	void (*peer_back)(struct fab *f, uint16_t node);
};

/*
 * A request a backend received for this node: fab_rpc_deliver hands it to
 * the worker that `worker_hint` picks (the initiator's worker id, modulo
 * the workers there are), which runs it at its next poll. c->done is
 * called once, on that worker's thread, with the handler's status and
 * reply. With no worker to run it, done is called at once with -EAGAIN.
 * Any thread.
 */
void fab_rpc_deliver(struct fab *f, int worker_hint, struct fab_rpc_call *c);

/* Fabric configuration for one node. */
struct fab_config {
	const char *backend;      /* "shm", "tcp" or "verbs" */
	uint16_t self;            /* this node's id */
	uint32_t delay_us;        /* fabric-delay-us: added per round trip (shm, tcp) */
	const char *device;       /* verbs: device name, NULL or "" = the first */
	const char *region_path;  /* shm: the own region's file, which names its
				     RPC rings (NULL: this node takes no RPCs) */
	uint16_t nodes;           /* verbs: the cluster's nodes, this one included:
				     a worker keeps room for an endpoint to each,
				     joined later or not (0: those attached when it
				     starts) */
	fab_ctl_call_fn ctl_call; /* control-plane call to a peer (may be NULL) */
	void *ctl_ctx;
};

/*
 * fab_open - create the fabric of a node.
 * @cfg:  configuration; copied.
 * @out:  receives the fabric.
 * Returns 0, or -EINVAL for an unknown backend, or the backend's open
 * error (verbs without a device), with a message in err.
 */
int fab_open(const struct fab_config *cfg, struct fab **out, char *err, size_t errlen);
void fab_close(struct fab *f);

/*
 * fab_attach - make the own node's region reachable: `base` is the local
 * mapping. Main thread; before workers start. Returns 0 or the backend's
 * error (fab_attach_err gives its message).
 */
int fab_attach(struct fab *f, uint16_t node, void *base, uint64_t size);
int fab_attach_err(struct fab *f, uint16_t node, void *base, uint64_t size, char *err,
		   size_t errlen);
/* fab_attach_peer - make a peer reachable (control plane, after HELLO). */
int fab_attach_peer(struct fab *f, const struct fab_peer_info *pi, char *err, size_t errlen);
/* fab_peer_back - the peer (re)joined (control plane, at its HELLO): a
 * worker whose endpoint to it broke reconnects at its next post rather
 * than after its retry interval. Any thread. */
void fab_peer_back(struct fab *f, uint16_t node);
/*
 * fab_fence - the configuration took `node` out (server/membership.c):
 * from now every operation on it fails at once with -EHOSTDOWN, without
 * touching its region (on shm too: a dead process's region stays mapped,
 * and no node may touch it after the configuration change), and the
 * operations in flight to it fail (tcp: its connections are shut, so a
 * worker waiting on a hung node wakes). fab_unfence: it rejoined. Any
 * thread.
 */
void fab_fence(struct fab *f, uint16_t node);
/*
 * fab_set_lease - from now on, while *until_ns (CLOCK_MONOTONIC ns) is
 * non-zero and past, every operation on another node fails at once
 * (-EHOSTDOWN): a node whose lease ran out (hung, then woken) may be out
 * of the configuration already, and must not touch what others now own.
 * The own region stays reachable. NULL: no lease (the default).
 */
void fab_set_lease(struct fab *f, const uint64_t *until_ns);
void fab_unfence(struct fab *f, uint16_t node);
bool fab_fenced(const struct fab *f, uint16_t node);
/* fab_lose_replies - a fault for tests (DEBUG FABRIC-LOSE-REPLY): after
 * `after` more parts, the next `count` parts any worker posts to `node`
 * are sent, and then fail as if the connection broke before their replies
 * came, so their ops ran but the initiator cannot tell. -ENOTSUP except on
 * tcp. */
int fab_lose_replies(struct fab *f, uint16_t node, uint32_t count, uint32_t after);
/* Hand an accepted data connection from worker `worker` of node `from` to
 * the backend (control plane; the worker picks the one here that runs its
 * RPCs). Refused (-EACCES) while `from` is fenced; a fenced
 * node's connections are closed at its next request (fab_fence). */
int fab_adopt(struct fab *f, int fd, uint16_t from, uint16_t worker);
/* Relay a backend message from a peer (control plane); -ENOTSUP if none. */
int fab_ctl(struct fab *f, const void *req, size_t len, void *resp, size_t *resp_len);
const char *fab_backend_name(const struct fab *f);

uint16_t fab_self(const struct fab *f);
/* Base address of a node's region when this process maps it (shm), else NULL.
 * Only the storage module's local paths (init, recovery, scans) may use it. */
void *fab_local_base(const struct fab *f, uint16_t node);
uint64_t fab_region_size(const struct fab *f, uint16_t node);
/* Are ops on node applied by this CPU with no round-trip delay (a shm node
 * or the own node, no fabric-delay-us)? Then a read costs what a load does,
 * and caching what it would return saves nothing. */
bool fab_node_near(const struct fab *f, uint16_t node);
/* The nodes attached so far (the own one included), a bit per node id. */
uint64_t fab_attached_nodes(const struct fab *f);
/* Are ops on node applied by this CPU (a shm node, the own node except on
 * verbs), whatever the fabric delay? See the ordering rule at the top. */
bool fab_node_direct(const struct fab *f, uint16_t node);

/* fab_worker_create - endpoints for one worker thread to every attached
 * node. Returns NULL on failure (with a message in err, if given). */
struct fab_worker *fab_worker_create(struct fab *f, int worker_id);
struct fab_worker *fab_worker_create_err(struct fab *f, int worker_id, char *err, size_t errlen);
void fab_worker_destroy(struct fab_worker *fw);
/* fds to watch for completions, and the poll to run when they are ready
 * (it unparks waiting coroutines; it flushes first). Owner thread. */
int fab_worker_fds(struct fab_worker *fw, int *fds, int max);
int fab_worker_poll(struct fab_worker *fw);
/*
 * fab_worker_flush - send the requests that parked batches posted.
 * A backend may hold a posted part until the worker flushes (tcp does: the
 * parts that several coroutines post to one node between two flushes leave
 * in one write, a doorbell shared by the worker's coroutines). A worker
 * whose coroutines park (struct fab_waiter.park) must flush after running
 * them and before it sleeps; fab_worker_poll flushes too, so a batch
 * without park (wait_polling) needs nothing. Owner thread.
 */
void fab_worker_flush(struct fab_worker *fw);
/* Requests this worker has handed to the network: one per write of
 * queued frames to an endpoint (tcp), one per posted chain (verbs), one
 * per part of RPCs to a shm peer (its wake-up); none where this CPU applies
 * the ops itself (shm's one-sided ops). Owner thread. */
uint64_t fab_worker_doorbells(const struct fab_worker *fw);
/* Connections of this worker's endpoints that broke so far (tcp): a part
 * posted after a break may reach another incarnation of its node than the
 * parts before it, so a caller that needs them on one connection (a
 * remote flush after the writes it covers) compares this count. Owner
 * thread. */
uint64_t fab_worker_breaks(const struct fab_worker *fw);

/* Batch building; owner coroutine only. Queueing past FAB_BATCH_MAX executes
 * the queued operations first (an implicit fab_exec). */
void fab_batch_init(struct fab_batch *b, struct fab_worker *fw, struct fab_waiter waiter,
		    struct fab_stats *stats);
void fab_read(struct fab_batch *b, uint16_t node, uint64_t off, void *buf, uint32_t len);
void fab_write(struct fab_batch *b, uint16_t node, uint64_t off, const void *buf, uint32_t len);
void fab_cas(struct fab_batch *b, uint16_t node, uint64_t off, uint64_t cmp, uint64_t swp,
	     uint64_t *old);
void fab_faa(struct fab_batch *b, uint16_t node, uint64_t off, uint64_t add, uint64_t *old);
/*
 * fab_flush - FORD's selective remote flush (notes-ford.md 3.4): a READ
 * that completes only when node's journal (its write-ahead log) holds
 * durably every write node applied before it, those of this endpoint's
 * earlier ops included. On tcp, the target's NIC-emulation thread holds
 * the reply until its journal's sync covers them. On verbs it is a plain
 * READ, FORD's flush itself: it completes once the WRITEs before it on the
 * queue pair are placed, which on persistent memory (with the NIC's DDIO
 * off) is durable; server/node.c allows power on verbs only there. On shm
 * it is a plain READ too: a shm cluster's logs are waited for through
 * their journal rings (storage/jring.c).
 */
void fab_flush(struct fab_batch *b, uint16_t node);

/*
 * Two-sided RPC (DESIGN.md section 8; RCC 3.3): fab_rpc queues a request
 * for handler `handler` on `node`, with the one-sided ops, in the same
 * batch. On the target the handler registered under that id runs on one of
 * its workers (the one the initiator's worker id picks), against its own
 * region, and its reply lands in *rep. Ordering: an RPC runs after every op
 * posted before it on the endpoint took effect, and the ops of its batch
 * posted after it to that node take effect after it replied (fab_exec posts
 * them in a later phase, one more round trip; none if the call failed:
 * they must not overtake it); consecutive RPCs to one node travel in one
 * message and may run in any order. A handler that fails answers its
 * -errno in rep->status and fails nothing else; a target that dies or is
 * fenced mid-call fails the exec (-EHOSTDOWN), as for one-sided ops (on
 * verbs, where nothing else travels while a call runs, a target that dies
 * is noticed when the configuration fences it).
 * Requests and replies are at most FAB_RPC_MAX bytes; on shm the RPCs of
 * one part must fit one ring together (about 128 KiB), else -ENOBUFS.
 * Other batches' ops on the endpoint are not held back by a call that
 * runs (as RDMA's SEND does not hold later WRITEs): a deferred handler
 * (FAB_RPC_DEFER) may wait for what they do.
 */
#define FAB_RPC_HANDLERS 32
#define FAB_RPC_MAX (64u * 1024)
/* The handler id fab keeps for itself: it applies FAB_OP_TWOSIDED ops. */
#define FAB_RPC_OPS (FAB_RPC_HANDLERS - 1)
void fab_rpc(struct fab_batch *b, uint16_t node, uint16_t handler, const void *req, uint32_t len,
	     struct fab_rpc_reply *rep);

/* One request on the target, handed to fab_rpc_fn: req/len, and a reply
 * buffer of cap bytes (the initiator's capacity). */
struct fab_rpc_call {
	struct fab_worker *fw; /* the worker running it: its batches reach the own region */
	uint16_t from;         /* the initiator's node */
	uint16_t to;           /* this node (the one whose region the handler serves) */
	uint16_t handler;
	uint32_t len, cap;
	const void *req;
	void *resp;
	/* The backend's: how the reply goes back. */
	void (*done)(struct fab_rpc_call *c, int32_t status, uint32_t len);
	void *bctx;
	uint32_t tag;
	struct fab_rpc_call *next;
};
/* A handler: write at most c->cap bytes to c->resp, set *len, and return
 * >= 0, or a -errno for the initiator (then nothing is replied). A handler
 * that cannot answer yet (a lock to wait for: RCC 4.3's waiting list)
 * returns FAB_RPC_DEFER, keeps c, and answers later with fab_rpc_reply, on
 * the same worker's thread; it never blocks the worker meanwhile. */
typedef int (*fab_rpc_fn)(void *arg, struct fab_rpc_call *c, uint32_t *len);
#define FAB_RPC_DEFER 0x7fffffff
void fab_rpc_reply(struct fab_rpc_call *c, int status, uint32_t len);
/* Register handler `id` (< FAB_RPC_OPS) under `name` (for logs); before
 * the workers start. -EINVAL for a bad or taken id. */
int fab_rpc_register(struct fab *f, uint16_t id, const char *name, fab_rpc_fn fn, void *arg);
const char *fab_rpc_name(const struct fab *f, uint16_t id);
/*
 * How a worker runs the requests it receives: by default inline, in
 * fab_worker_poll, on its thread; with a runner, run(ctx, c) is called
 * there instead and must end in fab_rpc_run(c), on a coroutine of the
 * worker's (where the handler may wait). Owner thread.
 */
void fab_worker_set_rpc_runner(struct fab_worker *fw,
			       void (*run)(void *ctx, struct fab_rpc_call *c), void *ctx);
/* Run c's handler and send its reply; c is gone afterwards. */
void fab_rpc_run(struct fab_rpc_call *c);
/*
 * fab_worker_post_call - a hand-off between the node's own workers: c's
 * handler (c->handler, registered here) runs on fw's thread at its next
 * poll, as a request would; any thread may post. The handler answers
 * FAB_RPC_DEFER, since no initiator waits for a reply. c stays the
 * caller's, and must not be posted again before its handler ran.
 */
void fab_worker_post_call(struct fab_worker *fw, struct fab_rpc_call *c);
/* The worker id fw was created with. */
int fab_worker_id(const struct fab_worker *fw);

/*
 * fab_exec - post every queued operation and wait until all completed.
 * One round trip is counted per call that posts anything; operations to
 * different nodes proceed in parallel. Returns 0, or -errno (-EHOSTDOWN if a
 * peer is gone). The batch is empty afterwards.
 */
int fab_exec(struct fab_batch *b);

/* Convenience single-operation forms: queue one op and exec. */
int fab_read1(struct fab_batch *b, uint16_t node, uint64_t off, void *buf, uint32_t len);
int fab_write1(struct fab_batch *b, uint16_t node, uint64_t off, const void *buf, uint32_t len);
int fab_cas1(struct fab_batch *b, uint16_t node, uint64_t off, uint64_t cmp, uint64_t swp,
	     uint64_t *old);
int fab_faa1(struct fab_batch *b, uint16_t node, uint64_t off, uint64_t add, uint64_t *old);

void fab_stats_add(struct fab_stats *dst, const struct fab_stats *src);

/* ---- persistence of written ranges (persistence power) ---- */

/*
 * fab_track_writes - from now on, every fab_worker created on f keeps a
 * struct fab_dirty of what its batches changed. Main thread, before the
 * workers' fab_worker_create.
 */
void fab_track_writes(struct fab *f);
/* The worker's changed ranges, or NULL when the fabric does not track
 * writes. Owner thread only. */
struct fab_dirty *fab_worker_dirty(struct fab_worker *fw);

/*
 * struct fab_journal - a write-ahead log of a region this CPU applies ops
 * to (persistence power's log, storage/wal.c). For each WRITE, CAS and
 * FAA that fab_exec applies directly to that node (not those of an
 * FAB_OP_VOLATILE ones: lock words), it calls
 * lock, applies the op, calls note with the bytes the op left there (a
 * CAS that did not swap left none: no note), then unlock. So two writes to the same bytes are noted
 * in the order they were made. READs take no lock. A batch whose ops are
 * all applied by this CPU, and whose journaled ops all go to one node,
 * takes the lock once around all of them: its notes are contiguous, with
 * no other write in between and no flush of the log splitting them (the
 * standalone log's flush takes the same lock). Only there are ops flagged
 * FAB_OP_UNJOURNALED left out: the owner knows the batch's other writes
 * make them needless after any prefix of the log (cc/prim.c: the undo
 * records of a commit whose retire is in the same batch). A batch that
 * reaches several journaled nodes (a shm cluster's journal rings), or the
 * network, takes each op's lock alone, never two at once, and notes every
 * op. A journal's lock may be shared with other processes (a ring that
 * shm peers write too: storage/jring.c).
 */
struct fab_journal {
	/* 0, or nonzero: the node is down and takes no writes (its log's
	 * owner is gone): the op is not applied and the batch fails with
	 * -EHOSTDOWN for that node, as if the node did not answer. */
	int (*lock)(void *arg);
	/* Optional: 0 when the node takes ops. Asked before READs and
	 * FAB_OP_VOLATILE ops, which take no lock: a node that is down
	 * serves none of them either. */
	int (*up)(void *arg);
	void (*note)(void *arg, uint64_t off, const void *src, uint32_t len);
	void (*unlock)(void *arg);
	/* Optional: make every note so far survive what the log promises
	 * (power: synced; power-everysec: written), 0 or -errno. Blocking,
	 * any thread. Serves the peers' remote flushes (fab_flush, tcp). */
	int (*sync)(void *arg);
	void *arg;
};
/* fab_set_journal - journal node's directly applied writes through j
 * (copied; NULL: stop). Main thread, before any exec on node. */
void fab_set_journal(struct fab *f, uint16_t node, const struct fab_journal *j);

/*
 * fab_persist - make [off, off+len) of node's region durable (msync of the
 * pages that hold it), for a region this process maps and reaches
 * directly: the own region (except on verbs) and shm peers, whose page
 * cache is the owner's, so the owner's file gets the data. Blocking; any
 * thread. Returns 0, -ENOTSUP for a node reached over a network (tcp,
 * verbs: there a remote flush would be a message to the node, not
 * implemented), -EHOSTDOWN if the node is not attached, -EFAULT for a
 * range outside the region, or msync's -errno.
 */
int fab_persist(struct fab *f, uint16_t node, uint64_t off, uint64_t len);

/*
 * An extra completion source that the workers' loops watch with the
 * backend's: completions that another thread of this process delivers
 * (the group-commit flusher of cc/durable.c), in the way tcp completions
 * arrive: the other thread makes fd(arg, worker_id) readable, the worker's
 * epoll wakes, and fab_worker_poll calls poll(arg, worker_id) on the
 * worker's own thread, which unparks the coroutines concerned. fd returns
 * -1 for a worker id it has none for. Main thread, before the workers'
 * fab_worker_create.
 */
struct fab_aux {
	int (*fd)(void *arg, int worker_id);
	int (*poll)(void *arg, int worker_id); /* returns coroutines woken */
	void *arg;
};
void fab_set_aux(struct fab *f, const struct fab_aux *aux);

#endif
