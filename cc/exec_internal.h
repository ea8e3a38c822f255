/* Private to cc/: executor state shared by exec.c and txn.c. */
#ifndef RCKV_CC_EXEC_INTERNAL_H
#define RCKV_CC_EXEC_INTERNAL_H

#include <stdint.h>

#include "cc/cc.h"

struct cc_worker {
	struct node *node;
	struct worker *w;
	int worker_id;
	uint64_t ts_clock;          /* last clock part handed out (us) */
	uint64_t ts_seq;
	uint64_t owner_seq;
	uint64_t rng;
	struct cc_access *free_acc; /* pool, linked by hnext */
	struct st_item *scratch;    /* ST_SLAB_BYTES: lookup target */
	/* access arrays lent to each transaction in turn (txn.c) */
	struct cc_access **acc;
	int acc_cap;
	struct cc_access **tab;
	uint32_t tab_mask;
};

/* txn.c: end-of-transaction work. */
void txn_after_commit(struct txn *t); /* reap tombstones, free spare blocks */
void txn_after_abort(struct txn *t);  /* free blocks reserved for relocation */
void txn_release(struct txn *t);      /* return accesses to the pool */

#endif
