/*
 * calvin.h: Calvin's sequencer and deterministic lock manager (RCBench
 * 6.2.4, RCC 4.6; notes-rcbench.md A.4, notes-rcc.md 5.6), the node-wide
 * half of the calvin protocol (cc/protocols/calvin.c is the other).
 *
 * A transaction is sequenced before it runs:
 *  1. Submit. Its coordinator (the node its client talks to) puts it in
 *     the node's open epoch with its lock set: the key hashes it declared,
 *     each shared or exclusive, grouped by the node that owns the key.
 *  2. Close. An epoch stays open for calvin-epoch-us from its first
 *     transaction. Then that transaction's coroutine, the epoch's
 *     initiator, closes it cluster-wide in two RPC rounds: CLOSE(e) to
 *     every member (each closes its own open epoch as e and answers how
 *     many of its transactions of e lock keys on each node), then
 *     DELIVER(e) to every member with the counts it must expect from each
 *     coordinator. Closing labels each transaction (e, node, seq).
 *     Another node's CLOSE closes ours too, so a busy cluster's epochs
 *     close together; an idle one sends nothing (DESIGN.md principle 6).
 *  3. Acquire. Once labeled, the coordinator sends each participant its
 *     part of the lock set (ACQUIRE, with the keys and the transaction's
 *     owner word); its own node's part is queued directly. A participant
 *     tells the coordinator when it granted the part (GRANT, sent by a
 *     notifier coroutine of the worker that took the ACQUIRE), with the
 *     part's items (value forwarding, below), and the coordinator's
 *     coroutine waits for all.
 *  4. Schedule. A participant that holds every ACQUIRE of epoch e (the
 *     DELIVERed counts say how many) queues their locks in the order
 *     (e, node, seq), epoch after epoch: the same order on every node, so
 *     no transaction ever waits for a later one, and none aborts for a
 *     conflict. A lock is granted at the head of its key's queue (shared
 *     ones together).
 *  5. Execute and commit (the protocol): the forwarded items, a fetch of
 *     the rest, run, commit through the shared commit path, then RELEASE
 *     on every participant, which gives back the latches it forwarded
 *     that the transaction left (it timed out first, say), then grants
 *     the queued transactions behind it.
 *
 * Threads: the state is node-wide, under one mutex; RPC handlers run on
 * whichever worker the fabric picks; a grant or a label reaches the
 * coroutine on its own worker's thread through that worker's mailbox
 * (fab_worker_post_call), as does a grant to send to another node.
 */
#ifndef RCKV_CC_CALVIN_H
#define RCKV_CC_CALVIN_H

#include <stdbool.h>
#include <stdint.h>

#include "rdma/fab.h"

struct cc_node;
struct cc_worker;
struct txn;

/* RPC handler ids (fab_rpc_register). */
enum {
	CALVIN_RPC_CLOSE = 8,
	CALVIN_RPC_DELIVER,
	CALVIN_RPC_ACQUIRE,
	CALVIN_RPC_RELEASE,
	CALVIN_RPC_GRANT,
	CALVIN_RPC_WAKE, /* a worker's mailbox, never sent between nodes */
};

/* One lock of a transaction: a key's hash on its owner node, and the key
 * (the transaction's declaration holds the bytes) for value forwarding. */
struct calvin_lock {
	uint64_t h;
	const char *key;
	uint32_t klen;
	uint16_t node;
	uint8_t x; /* exclusive (the key is written) */
};

/* Epoch sizes. */
#define CALVIN_EPOCH_US_DEFAULT 5000

/*
 * A transaction on its coordinator, from submit to release: lives with the
 * transaction (cc/protocols/calvin.c), owned by its coroutine; the fields
 * below `worker` change under the calvin mutex.
 */
struct calvin_mine {
	struct calvin_lock *locks; /* sorted by (node, h), no key twice */
	int nlocks;
	uint64_t nodes;            /* participants: bit per node */
	int worker;                /* the coroutine's worker id */
	void *handle;              /* sched_self of the coroutine */
	/* under the mutex */
	uint64_t epoch;            /* its label, once closed */
	uint32_t seq;
	bool labeled;
	bool parked;               /* waiting to be woken (label, grants) */
	bool failed;               /* a participant failed: it waits no more */
	uint64_t failed_nodes;     /* ... which ones (purge) */
	bool in_mbox;              /* on its worker's mailbox, to be unparked */
	struct calvin_mine *wnext; /* the mailbox's list */
	uint64_t granted;          /* participants that granted their part */
	uint64_t sent;             /* nodes it sent ACQUIRE to */
	/* Value forwarding: what each participant's GRANT carried (a run of
	 * struct calvin_fwd, each followed by its image), set with its
	 * `granted` bit and never after; freed by calvin_release. */
	char *fwd[FAB_MAX_NODES];
	uint32_t fwdlen[FAB_MAX_NODES];
	uint64_t adopted;          /* nodes whose every latched item it took */
	struct calvin_mine *next;  /* the open epoch's list */
	struct calvin_mine *hnext; /* labeled: the node's table by (epoch, seq) */
};

/*
 * Value forwarding (RCC 4.6): a participant that granted a part reads the
 * part's items on its own node, latches each exclusive one for the
 * coordinator's transaction (its owner word, so its commit installs and
 * releases it as if it had latched it itself), and sends their images
 * with its GRANT: the coordinator's transaction starts with them read and
 * fetches only what was not forwarded. One forwarded item:
 */
struct calvin_fwd {
	uint32_t idx;     /* the lock's place in its ACQUIRE (node order) */
	uint32_t len;     /* image bytes that follow: header, key, value;
			     then padding to CALVIN_FWD_PAD(len) */
	uint64_t off;     /* the block (st_ref on the sender) */
	uint32_t gen;
	uint8_t cls;
	uint8_t latched;  /* its lock word holds the coordinator's owner word */
	uint16_t pad;
};

#define CALVIN_FWD_PAD(len) (((len) + 7u) & ~7u)

/* Counters for INFO (cc section). */
struct calvin_stats {
	uint64_t epochs_closed;    /* epochs this node closed as initiator */
	uint64_t epochs_processed; /* epochs whose locks this node queued */
	uint64_t txns_sequenced;   /* transactions this node labeled */
	uint64_t txns_scheduled;   /* participant parts queued here */
	uint64_t lock_waits;       /* parts not granted at once */
	uint64_t cancelled;        /* parts released before they were granted */
	uint64_t purges;           /* failed or restarted nodes dropped (calvin_peer_failed) */
	uint64_t values_forwarded; /* items this node sent with its GRANTs */
	uint64_t values_adopted;   /* forwarded items this node's transactions used */
	uint64_t reinitiated;      /* epochs closed again by a waiting transaction */
	uint64_t epoch;            /* the last epoch closed here */
};

/* Node-wide state: allocated and freed with the node; handlers
 * registered on the node's fabric once it is open. */
int calvin_create(struct cc_node *n);
void calvin_destroy(struct cc_node *n);
int calvin_attach(struct cc_node *n, char *err, size_t errlen);
/* Node `peer` failed or restarted: what it coordinated is dropped here,
 * and what waits for it fails (calvin.c, purge). Any thread. */
void calvin_peer_failed(struct cc_node *n, uint16_t peer);
/* This node is out of the configuration (it missed epochs while it was
 * out, and others dropped what it coordinated): every part and grant it
 * holds is dropped, and it takes up the cluster's epochs afresh at its
 * rejoin, as a restarted node does (calvin.c, catch_up). Quiesced. */
void calvin_reset(struct cc_node *n);
/* Testing (DEBUG CALVIN-STALL-DELIVER, which needs 'testing yes'): the
 * next epoch this node closes as its initiator is delivered to the first
 * other member only; the round then waits CALVIN_STALL_MS before it
 * delivers to the rest, as an initiator that hung between its DELIVERs
 * (a test kills the node meanwhile). Any thread. */
#define CALVIN_STALL_MS 30000u
void calvin_stall_deliver(struct cc_node *n);
/* The counters, and a digest of the order in which this node queued
 * transactions (equal on two nodes that queued the same ones). */
void calvin_stats_get(struct cc_node *n, struct calvin_stats *out, uint64_t *digest);

/*
 * calvin_sequence - steps 1 to 3 for m, on t's coroutine: returns CC_OK
 * once every participant granted m's locks; CC_EFAB (t->fatal set) if a
 * participant failed; the caller then calls calvin_release all the same.
 */
int calvin_sequence(struct txn *t, struct calvin_mine *m);
/* Step 5: RELEASE m on every participant (errors are ignored: a failed
 * participant's queues died with it). A participant whose outcome is
 * known (not in t->unknown) and whose latched items the transaction did
 * not all take (m->adopted) gives back the latches it forwarded before
 * its locks. Frees m's forwarded images. */
void calvin_release(struct txn *t, struct calvin_mine *m);
/* The transaction used n forwarded items (INFO). */
void calvin_note_adopted(struct txn *t, unsigned n);

#endif
