/*
 * recovery: settling the transactions of dead coordinators (recovery.c).
 * All run on a node's own region; see storage/log.c for why each is safe
 * while other nodes run transactions on it.
 */
#ifndef RCKV_SRV_RECOVERY_H
#define RCKV_SRV_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>

#include "server/node.h"

/* At start after an unclean stop: this node's own dead transactions. */
void srv_recover_local(struct node *n);

/* This node's decision records, as sent to peers at join. */
void srv_read_decisions(struct node *n, uint64_t out[ST_LOG_SLOTS]);

/* A peer joined with `incarnation`: if it is a new one, settle the peer's
 * previous transactions here (with its decisions) and remember it. */
void srv_settle_restarted_peer(struct node *n, unsigned peer, uint64_t incarnation,
			       const uint64_t decided[ST_LOG_SLOTS]);

/* What a live coordinator could not finish on a node that failed: its
 * slots there (txn per slot, or 0) and txns whose lock releases failed
 * (a list, 0 = unused). Sent to that node when it rejoins. */
struct srv_pending {
	uint64_t slots[ST_LOG_SLOTS];
	uint64_t locks[CC_LOCK_PENDING];
};

/* Settle what live `peer` reports it left here. */
void srv_settle_pending(struct node *n, unsigned peer, const uint64_t decided[ST_LOG_SLOTS],
			const struct srv_pending *p);

/* What we left on `peer` and it must settle; false if nothing. */
bool srv_pending_for(struct node *n, unsigned peer, struct srv_pending *out);
/* `peer` settled these: free the entries no other node still owes. */
void srv_pending_settled(struct node *n, unsigned peer, const struct srv_pending *p);

/*
 * A failover's takeover of `dead`, a coordinator the configuration took
 * out (server/membership.c), run on every surviving node while none of
 * them runs transactions. srv_takeover_scan: what dead's log slots here
 * say (st_log_slots). srv_takeover_settle: settle them, decided[slot]
 * naming the transactions whose mark some survivor holds (they committed:
 * marks follow the decision); the others are rolled back, which no client
 * can tell, as none was answered before its marks. Then release every
 * lock dead held here, and forget what this node's own failed
 * transactions left on dead: its region starts over when it rejoins.
 */
void srv_takeover_scan(struct node *n, unsigned dead, uint64_t txn[ST_LOG_SLOTS],
		       uint64_t mark[ST_LOG_SLOTS]);
void srv_takeover_settle(struct node *n, unsigned dead, const uint64_t decided[ST_LOG_SLOTS]);

#endif
