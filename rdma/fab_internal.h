/* Private to rdma/: the structs behind the opaque fab handles. */
#ifndef RCKV_FAB_INTERNAL_H
#define RCKV_FAB_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "rdma/fab.h"

struct fab_peer {
	bool attached;
	bool direct;   /* ops are applied by this CPU on `base` (shm; own node of tcp) */
	void *base;    /* mapping of the node's region, or NULL */
	uint64_t size; /* region bytes */
	bool mapped;   /* base is our own mmap of a peer's file (shm), unmapped at close */
	struct fab_peer_info info;
	void *bdata;   /* backend's per-peer data */
	uint32_t back; /* fab_peer_back calls (ck_pr): a broken endpoint to the
			  peer reconnects at its next post, without waiting */
	uint32_t lose; /* fab_lose_replies: parts still to lose (ck_pr) */
	uint32_t lose_after; /* fab_lose_replies: parts to let through first (ck_pr) */
	uint8_t fenced;  /* fab_fence (ck_pr): every operation on it fails */
	bool journaled;  /* direct writes go through `journal` (fab_set_journal) */
	struct fab_journal journal;
};

struct fab {
	struct fab_config cfg;
	char device[64];
	const struct fab_backend *be;
	struct fab_peer peers[FAB_MAX_NODES];
	void *bdata;   /* backend-wide data */
	bool track;    /* fab_track_writes: workers keep a struct fab_dirty */
	struct fab_aux aux; /* fab_set_aux; fd == NULL: none */
	const uint64_t *lease; /* fab_set_lease: ck_pr loads; NULL: none */
	/* RPC handlers (fab_rpc_register), and the workers that run them
	 * (fab_rpc_deliver picks one; rpc_mu guards the list). */
	struct {
		fab_rpc_fn fn;
		void *arg;
		char name[32];
	} rpc[FAB_RPC_HANDLERS];
	pthread_mutex_t rpc_mu;
	struct fab_worker *workers[FAB_MAX_NODES];
};

struct fab_worker {
	struct fab *f;
	int id;
	void *bdata;   /* backend's per-worker data */
	struct fab_dirty *dirty; /* with f->track: what this worker's batches changed */
	uint64_t doorbells; /* fab_worker_doorbells */
	uint64_t breaks;    /* fab_worker_breaks */
	/* Requests to run (fab_rpc_deliver, any thread: under inbox_mu), and
	 * the eventfd that wakes the worker for them. */
	pthread_mutex_t inbox_mu;
	struct fab_rpc_call *inbox, *inbox_tail;
	int inbox_fd;
	uint64_t inbox_pushed; /* pushes so far (ck_pr), each one write to inbox_fd */
	uint64_t inbox_seen;   /* writes read from inbox_fd (owner) */
	void (*rpc_run)(void *ctx, struct fab_rpc_call *c);
	void *rpc_ctx;
};

/*
 * fab_apply_request - apply a peer's request to the own region (the tcp
 * NIC-emulation thread): as fab_apply_local, and with a journal set for
 * the own node, each write noted under one hold of its lock, so the
 * request's notes are contiguous in the log. 0, -EFAULT (an op out of
 * bounds: nothing applied) or -EHOSTDOWN (the journal refused: nothing
 * applied).
 */
int fab_apply_request(struct fab *f, struct fab_op *const *ops, int n);

/* Two-sided ops (rdma/twosided.c, FAB_OP_TWOSIDED): fab_exec's steps. */
struct fab_ship;
/* Replace b's first n ops by what goes out (each run of flagged ops to a
 * node one RPC); returns the new count, or -ENOMEM. *out: NULL when
 * nothing was flagged after all (the flags are cleared then). */
int fab_ship_prepare(struct fab_batch *b, int n, struct fab_ship **out);
/* Count the messages into st->tag_rpcs. */
void fab_ship_count(const struct fab_ship *s, struct fab_stats *st);
/* After the exec: the replies to where the original ops said; a message
 * that failed fails its node (b->failed). Returns 0 or the first error.
 * Frees s. */
int fab_ship_finish(struct fab_batch *b, struct fab_ship *s);
/* The FAB_RPC_OPS handler (arg: the struct fab). */
int fab_ops_handler(void *arg, struct fab_rpc_call *c, uint32_t *len);

/* Queue c to run on fw at its next poll (a backend that picked the worker
 * itself; fab_rpc_deliver picks one). Any thread. */
void fab_worker_inbox_push(struct fab_worker *fw, struct fab_rpc_call *c);
/* Make fw's next poll happen soon (its inbox eventfd), with nothing
 * queued: a backend has news for it in its own state. Any thread. */
void fab_worker_wake(struct fab_worker *fw);

extern const struct fab_backend fab_shm_backend;
extern const struct fab_backend fab_tcp_backend;
extern const struct fab_backend fab_verbs_backend;

#endif
