/*
 * switch: node-wide quiesce, used by the online protocol switch and by
 * FLUSHALL/FLUSHDB (DESIGN.md section 6, "Switching protocol"). On a
 * cluster the same local steps run on every node, driven by the control
 * plane (server/cluster.c) through n->cops.
 */
#ifndef RCKV_CC_SWITCH_H
#define RCKV_CC_SWITCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cc_node;
struct cc_worker;
struct cc_protocol;

/*
 * The entry handshake (cc_enter against cc_quiesce_begin) is Dekker's: each
 * side stores its flag, then loads the other's. The store-load order needs a
 * full fence on both sides, and the workers' side runs at every
 * transaction. When the kernel offers membarrier(2)'s private expedited
 * command, the quiescer alone pays: it forces a fence on every thread of
 * the process, and cc_enter needs only a compiler barrier.
 * cc_quiesce_setup registers the process for it (once; idempotent) and must
 * run before any worker thread enters; cc_enter_light says whether it did.
 */
void cc_quiesce_setup(void);
extern bool cc_enter_light;

/*
 * cc_quiesce_begin - hold new transactions on this node and wait until
 * none is in flight. With w, the calling coroutine yields while it waits;
 * with w == NULL (a control-plane thread) the thread sleeps. One quiesce at
 * a time per node: a second caller waits its turn. Must not be called from
 * inside a transaction.
 */
void cc_quiesce_begin(struct cc_node *n, struct cc_worker *w);
/* Let transactions run again (pairs with cc_quiesce_begin, same thread). */
void cc_quiesce_end(struct cc_node *n);

/* With the node quiesced: reset item metadata for `to`, publish it, bump
 * the protocol epoch. */
void cc_switch_apply(struct cc_node *n, const struct cc_protocol *to);

/*
 * cc_quiesce_run - quiesce this node, run fn(n, arg), resume. Returns what
 * fn returns.
 */
int cc_quiesce_run(struct cc_node *n, struct cc_worker *w, int (*fn)(struct cc_node *n, void *arg),
		   void *arg);

/*
 * cc_switch - switch the node, or with a cluster every node, to protocol
 * `name` online, in lock mode `shared` (cc-lock-mode; nowait has both).
 * Returns 0, or -EINVAL with err filled ("unknown protocol 'x'", or a
 * protocol that needs `testing yes`), or the cluster's error.
 */
int cc_switch(struct cc_node *n, struct cc_worker *w, const char *name, bool shared, char *err,
	      size_t errlen);

/*
 * cc_stages_set - make the stages in `mask` (bit per enum cc_stage, cc/node.h)
 * go two-sided on this node, or with a cluster on every node, online: no
 * quiesce, since one-sided and RPC stages mix freely (cc/stages.c). Every
 * fabric carries them (verbs as SEND/RECV). 0, or the cluster's error,
 * with err filled.
 */
int cc_stages_set(struct cc_node *n, struct cc_worker *w, uint32_t mask, char *err, size_t errlen);
/* This node only (a peer's cc_stages_set reaching it): from the next
 * transaction on. */
void cc_stages_apply(struct cc_node *n, uint32_t mask);

/* Look up a protocol this node accepts; NULL with err filled if none.
 * shared: the lock mode to resolve `name` under (0 or 1), or -1 when name
 * is a registry id (a peer's switch message). */
const struct cc_protocol *cc_switch_lookup(const struct cc_node *n, const char *name, int shared,
					   char *err, size_t errlen);

/* Names of the protocols CONFIG SET cc accepts on this node, NULL-terminated
 * (a per-thread buffer). */
const char *const *cc_protocol_names(const struct cc_node *n);

#endif
