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

enum fab_kind { FAB_READ, FAB_WRITE, FAB_CAS, FAB_FAA, FAB_KINDS };

/* Verb and round-trip counters; one per transaction, summed into INFO. */
struct fab_stats {
	uint64_t verbs[FAB_KINDS]; /* by enum fab_kind */
	uint64_t round_trips;      /* fab_exec calls that reached a peer */
};

struct fab_op {
	uint8_t kind;    /* enum fab_kind */
	uint16_t node;   /* target node id */
	uint32_t len;    /* READ/WRITE length in bytes */
	uint64_t off;    /* byte offset in the target region; 8-aligned for CAS/FAA */
	void *buf;       /* READ: destination; WRITE: source (kept valid until exec returns) */
	uint64_t cmp;    /* CAS: expected value */
	uint64_t swp;    /* CAS: new value; FAA: addend */
	uint64_t *old;   /* CAS/FAA: receives the previous value (may be NULL) */
};

struct fab;        /* a node's fabric: backend, own and peers' regions */
struct fab_worker; /* a worker's endpoints to every node */

/* How a waiting coroutine suspends: the worker supplies this. wait() must
 * return only after at least `ns` nanoseconds; with ns == 0 it just yields
 * once. A NULL hook (tests, control plane threads) sleeps the thread. */
struct fab_waiter {
	void (*wait)(void *ctx, uint64_t ns);
	void *ctx;
};

struct fab_batch {
	struct fab_worker *fw;
	struct fab_waiter waiter;
	struct fab_stats *stats; /* may be NULL */
	int n;
	struct fab_op ops[FAB_BATCH_MAX];
};

/* Backend table (SQLite-VFS style). One .c file per backend. */
struct fab_backend {
	const char *name;
	/* Execute ops[0..n) in order; called by fab_exec. Returns 0 or -errno. */
	int (*exec)(struct fab_worker *fw, struct fab_op *ops, int n);
};

/* Fabric configuration for one node. */
struct fab_config {
	const char *backend;     /* "shm" (only backend until the cluster issue) */
	uint16_t self;           /* this node's id */
	uint32_t delay_us;       /* fabric-delay-us: added per round trip */
};

/*
 * fab_open - create the fabric of a node.
 * @cfg:  configuration; copied.
 * @out:  receives the fabric.
 * Returns 0, or -EINVAL for an unknown backend (with a message in err).
 */
int fab_open(const struct fab_config *cfg, struct fab **out, char *err, size_t errlen);
void fab_close(struct fab *f);

/*
 * fab_attach - make a node's region reachable: for the own node, `base`
 * is the local mapping. Any thread; before workers start.
 */
int fab_attach(struct fab *f, uint16_t node, void *base, uint64_t size);

uint16_t fab_self(const struct fab *f);
/* Base address of a node's region when this process maps it (shm), else NULL.
 * Only the storage module's local paths (init, recovery, scans) may use it. */
void *fab_local_base(const struct fab *f, uint16_t node);
uint64_t fab_region_size(const struct fab *f, uint16_t node);

/* fab_worker_create - endpoints for one worker thread. Owner thread only. */
struct fab_worker *fab_worker_create(struct fab *f, int worker_id);
void fab_worker_destroy(struct fab_worker *fw);

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

#endif
